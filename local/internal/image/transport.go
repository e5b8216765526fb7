package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// DefaultStallTimeout is Options.StallTimeout when it is zero.
const DefaultStallTimeout = time.Minute

// ErrStalled is the cause of a pull that failed because its registry
// stopped sending (Options.StallTimeout).
var ErrStalled = errors.New("the registry stopped sending")

// Bounds of what a pull reads whole into memory.
const (
	// MaxManifestSize is the most a pull reads of a manifest or an index:
	// a larger one is refused (ErrTooLarge) before it is read, by its
	// Content-Length, or once that much is read without its end.
	MaxManifestSize = 4 << 20
	// MaxConfigSize is the most a pull reads of an image's configuration:
	// a manifest that names a larger one is refused (ErrTooLarge) before
	// the configuration is fetched. (Every blob is read to its size in the
	// manifest, and no further.)
	MaxConfigSize = 8 << 20
)

// pullTransport carries the requests of one pull (Store.transport).
type pullTransport struct {
	*http.Transport
}

// RoundTrip bounds the manifests it fetches to MaxManifestSize: an answer
// to a GET of a manifest, or to a redirect from one.
func (t pullTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Transport.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !isManifest(req) {
		return resp, err
	}
	if resp.ContentLength > MaxManifestSize {
		resp.Body.Close()
		return nil, manifestTooLarge(fmt.Sprintf("of %s", sizeText(resp.ContentLength)))
	}
	resp.Body = &manifestBody{ReadCloser: resp.Body, left: MaxManifestSize}
	return resp, nil
}

// isManifest reports whether req, or the request that a redirect made it
// from, is for a manifest (/v2/<name>/manifests/<reference>).
func isManifest(req *http.Request) bool {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	parts := strings.Split(strings.TrimSuffix(req.URL.Path, "/"), "/")
	return len(parts) >= 5 && parts[1] == "v2" && parts[len(parts)-2] == "manifests"
}

func manifestTooLarge(what string) error {
	return fmt.Errorf("%w: a manifest %s, more than the %s boxd reads", ErrTooLarge, what, sizeText(MaxManifestSize))
}

// manifestBody is a manifest's body, which fails past left bytes.
type manifestBody struct {
	io.ReadCloser
	left int64
}

func (b *manifestBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		// All it may have is read: more is too much.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, manifestTooLarge("that does not end there")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// transport returns the HTTP transport of one pull: its connections fail
// a read that gets nothing for the stall timeout. It speaks HTTP/1.1 alone:
// there a response body is read only when the pull asks for more, so a
// read that waits is a registry that does not send, never a pull busy
// unpacking (HTTP/2 reads every stream of a connection ahead, in a
// goroutine of its own).
func (s *Store) transport() pullTransport {
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
	return pullTransport{tr}
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
