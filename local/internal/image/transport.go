package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// DefaultStallTimeout is Options.StallTimeout when it is zero.
const DefaultStallTimeout = time.Minute

// ErrStalled is the cause of a pull that failed because its registry
// stopped sending (Options.StallTimeout).
var ErrStalled = errors.New("the registry stopped sending")

// transport returns the HTTP transport of one pull: its connections fail
// a read that gets nothing for the stall timeout. It speaks HTTP/1.1 alone:
// there a response body is read only when the pull asks for more, so a
// read that waits is a registry that does not send, never a pull busy
// unpacking (HTTP/2 reads every stream of a connection ahead, in a
// goroutine of its own).
func (s *Store) transport() *http.Transport {
	stall := s.opts.StallTimeout
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stallConn{Conn: c, stall: stall}, nil
		},
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          8,
		IdleConnTimeout:       30 * time.Second,
		Protocols:             new(http.Protocols),
	}
	tr.Protocols.SetHTTP1(true)
	return tr
}

// stallConn is a connection whose reads fail with ErrStalled when nothing
// comes for stall: each read, and each write (a request, after which an
// answer is due), gives the peer that long again.
type stallConn struct {
	net.Conn
	stall time.Duration
}

func (c *stallConn) Read(p []byte) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%w: nothing came from %s for %v", ErrStalled, c.RemoteAddr(), c.stall)
	}
	return n, err
}

func (c *stallConn) Write(p []byte) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
