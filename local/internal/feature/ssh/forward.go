package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	gssh "github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// Local forwards (ssh -L, ssh -W): a direct-tcpip channel to a port on
// the box's own loopback is relayed through the agent's bridge into the
// box's network namespace, as a public URL's requests are. A destination
// other than the box's loopback (the host, boxd, another machine) is
// refused, and so is every forward when boxes share the host's network
// (isolation none), where the box's loopback is the host's.

// maxForwards bounds the forwarded connections one SSH connection has
// open at once.
const maxForwards = 64

// forwardDialTimeout bounds the connection to the box's port, the box's
// start included.
const forwardDialTimeout = 30 * time.Second

// ctxForwards is where a connection's count of open forwards is kept.
type ctxForwards struct{}

// directTCPIP is the payload of a direct-tcpip channel request (RFC 4254,
// 7.2).
type directTCPIP struct {
	DestAddr   string
	DestPort   uint32
	OriginAddr string
	OriginPort uint32
}

// boxLoopback reports whether host names the box's own loopback.
func boxLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sshDirectTCPIP serves a local forward into the connection's box.
func (s *SSH) sshDirectTCPIP(_ *gssh.Server, _ *gossh.ServerConn, nc gossh.NewChannel, ctx gssh.Context) {
	var d directTCPIP
	if err := gossh.Unmarshal(nc.ExtraData(), &d); err != nil {
		_ = nc.Reject(gossh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	switch {
	case !boxLoopback(d.DestAddr):
		_ = nc.Reject(gossh.Prohibited, fmt.Sprintf("boxd forwards only to the box's own loopback (127.0.0.1, ::1 or localhost), not to %s", safeName(d.DestAddr)))
		return
	case d.DestPort < 1 || d.DestPort > 65535:
		_ = nc.Reject(gossh.ConnectionFailed, fmt.Sprintf("port %d is out of range", d.DestPort))
		return
	case s.cfg.Isolation == sandbox.ModeNone:
		_ = nc.Reject(gossh.Prohibited, "boxd forwards no ports with isolation none: a box's loopback is this machine's")
		return
	}
	id, _ := ctx.Value(ctxBoxID{}).(string)
	b, err := s.host.Box(id)
	if id == "" || err != nil {
		_ = nc.Reject(gossh.Prohibited, noSuchBox(ctx.User()))
		return
	}
	n, _ := ctx.Value(ctxForwards{}).(*atomic.Int32)
	if n == nil {
		_ = nc.Reject(gossh.ConnectionFailed, "no forwards on this connection")
		return
	}
	if n.Add(1) > maxForwards {
		n.Add(-1)
		_ = nc.Reject(gossh.ResourceShortage, fmt.Sprintf("at most %d forwarded connections at once", maxForwards))
		return
	}
	defer n.Add(-1)

	dctx, cancel := context.WithTimeout(ctx, forwardDialTimeout)
	up, err := s.dialBox(dctx, b, int(d.DestPort))
	cancel()
	if err != nil {
		reason := gossh.ConnectionFailed
		if errors.Is(err, errdefs.ErrPermission) {
			reason = gossh.Prohibited
		}
		_ = nc.Reject(reason, err.Error())
		return
	}
	defer s.host.Busy(b.ID)()
	ch, reqs, err := nc.Accept()
	if err != nil {
		up.Close()
		return
	}
	go gossh.DiscardRequests(reqs)
	relayChannel(ctx, ch, up)
}

// dialBox connects to port on the loopback of box b, starting the box
// when it is paused or stopped.
func (s *SSH) dialBox(ctx context.Context, b *store.Box, port int) (net.Conn, error) {
	ac, err := s.host.EnsureRunning(ctx, b)
	if err != nil {
		return nil, err
	}
	return ac.DialPort(ctx, port)
}

// relayChannel copies between ch and c both ways until both sides have
// ended, or ctx (the SSH connection's) ends, and closes both.
func relayChannel(ctx context.Context, ch gossh.Channel, c net.Conn) {
	stop := context.AfterFunc(ctx, func() {
		_ = ch.Close()
		_ = c.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(c, ch)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = c.Close()
		}
	}()
	_, _ = io.Copy(ch, c)
	_ = ch.CloseWrite()
	wg.Wait()
	_ = ch.Close()
	_ = c.Close()
}
