package local

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/egress"
	"github.com/upstash/box-go/local/internal/feature/previews"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// network is boxd's side of the boxes' networking: the egress proxy that
// carries every box's outbound traffic, and the public URLs that carry
// traffic into a box's ports.
//
// A box's network namespace has only loopback. Its agent listens on
// 127.0.0.1:3128 inside it and relays each connection to a unix socket in
// the box's run directory, where boxd serves an HTTP proxy for that box
// alone; the box's processes get HTTP_PROXY and friends pointing at the
// relay. The proxy reads the box's network policy and attach_headers from
// the store for every connection, so a policy update applies at once.
type network struct {
	s     *Server
	ca    *egress.CA
	proxy *egress.Proxy
	// previews are the public URLs, whose connections go with a box's
	// networking; New sets them once the core they need exists.
	previews *previews.Previews

	deniedMu sync.Mutex
	denied   map[string]time.Time // box id + host → last logged
}

// egressSocketName is the egress proxy's socket in a box's run directory.
const egressSocketName = "egress.sock"

// caBundleName is the box's CA bundle (host roots + boxd's CA) in the
// box's directory; the box sees it read-only.
const caBundleName = "ca-certificates.crt"

func newNetwork(s *Server) (*network, error) {
	ca, err := egress.LoadCA(s.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	n := &network{s: s, ca: ca, denied: map[string]time.Time{}}
	n.proxy = egress.New(egress.Config{
		CA:           ca,
		Lookup:       n.rules,
		Resolve:      s.cfg.EgressResolver,
		RootCAs:      s.cfg.EgressRootCAs,
		Denied:       n.logDenied,
		Log:          s.log,
		HostLoopback: s.cfg.AllowHostLoopback,
		SelfPort:     s.isOwnPort,
	})
	return n, nil
}

// rules reads a box's current policy and headers.
func (n *network) rules(boxID string) (*egress.Rules, error) {
	b, err := n.s.db.Box(boxID)
	if err != nil {
		return nil, err
	}
	pol, err := policyOf(b)
	if err != nil {
		// A stored policy that no longer compiles fails closed.
		n.s.log.Warn("box network policy is invalid; refusing its traffic", "box", boxID, "err", err)
		pol = egress.DenyAll
	}
	hdrs, err := egress.CompileHeaders(b.AttachHeaders)
	if err != nil {
		n.s.log.Warn("box attach_headers are invalid; none are attached", "box", boxID, "err", err)
		hdrs = nil
	}
	return &egress.Rules{Policy: pol, Headers: hdrs}, nil
}

// policyOf compiles a box's stored policy; none means allow-all.
func policyOf(b *store.Box) (*egress.Policy, error) {
	if len(b.NetworkPolicy) == 0 {
		return egress.AllowAll, nil
	}
	var np gen.NetworkPolicy
	if err := json.Unmarshal(b.NetworkPolicy, &np); err != nil {
		return nil, err
	}
	return compilePolicy(&np)
}

func compilePolicy(np *gen.NetworkPolicy) (*egress.Policy, error) {
	return egress.Compile(string(np.Mode), np.AllowedDomains, np.AllowedCidrs, np.DeniedCidrs)
}

// logDenied notes a refused connection in the box's log, once a minute
// per destination, with the reason when it is not the policy's mode (the
// host, or boxd itself).
func (n *network) logDenied(boxID string, e *egress.DeniedError) {
	k := boxID + "\x00" + e.Host
	now := time.Now()
	n.deniedMu.Lock()
	last, seen := n.denied[k]
	if !seen || now.Sub(last) >= time.Minute {
		if len(n.denied) > 10000 {
			clear(n.denied)
		}
		n.denied[k] = now
	}
	n.deniedMu.Unlock()
	if !seen || now.Sub(last) >= time.Minute {
		msg := fmt.Sprintf("outbound connection to %s refused by the network policy (%s)", e.Host, e.Mode)
		if e.Reason != "" {
			msg = fmt.Sprintf("outbound connection to %s refused: %s", e.Host, e.Reason)
		}
		n.s.core.Logf(boxID, "warn", "system", msg)
	}
}

// StartBox serves the box's egress proxy on its socket and writes its CA
// bundle. A proxy the box had (from a sandbox that died) is replaced.
func (n *network) StartBox(id string, l sandbox.Layout, mode sandbox.Mode) (core.BoxNet, error) {
	// The old listener goes first; the path is the same, and a listener
	// never removes it on close (the new socket would go with it).
	n.proxy.StopBox(id)
	sock := filepath.Join(l.Root, egressSocketName)
	_ = os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return core.BoxNet{}, fmt.Errorf("egress proxy: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	// Only the box's agent, which gets it open, reaches the socket: the
	// directory is boxd's alone. Connecting needs write permission on
	// the socket for the box user's uid.
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return core.BoxNet{}, fmt.Errorf("egress proxy: %w", err)
	}
	bundle := filepath.Join(l.Root, caBundleName)
	if err := n.ca.WriteBundle(bundle); err != nil {
		ln.Close()
		return core.BoxNet{}, fmt.Errorf("CA bundle: %w", err)
	}
	if err := n.proxy.Serve(id, ln); err != nil {
		return core.BoxNet{}, err
	}
	if mode == sandbox.ModeNone {
		// The box shares the host's network: a free port, and host paths.
		return core.BoxNet{HostSocket: sock, ProxyListen: "127.0.0.1:0", CABundle: bundle}, nil
	}
	return core.BoxNet{
		HostSocket:   sock,
		ProxyListen:  agent.ProxyAddr,
		CABundle:     sandbox.CABundlePath(),
		HostCABundle: bundle,
	}, nil
}

// StopBox closes the box's egress proxy and public URL connections.
func (n *network) StopBox(id string) {
	n.proxy.StopBox(id)
	if n.previews != nil {
		n.previews.CloseBox(id)
	}
}

// ForgetBox stops the box's networking and removes its public URLs; the
// box is being deleted.
func (n *network) ForgetBox(id string) {
	n.StopBox(id)
	if err := n.s.db.DeletePreviews(id); err != nil {
		n.s.log.Warn("cannot delete the box's public URLs", "box", id, "err", err)
	}
}

// policyChanged applies a box's new policy to its open connections.
func (n *network) policyChanged(id string) { n.proxy.Recheck(id) }

func (n *network) close() {
	n.proxy.Close()
}
