package egress

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
)

// Relay copies between a and b in both directions until both are done,
// then closes both. The end of one direction is passed on as a half-close
// where the connection supports it, so request/response protocols that
// rely on it keep working.
func Relay(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		half(b, a)
	}()
	half(a, b)
	<-done
	a.Close()
	b.Close()
}

var relayBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// half copies src to dst. At src's end it half-closes dst; on an error,
// or when dst cannot be half-closed, it closes both so that the other
// direction ends too.
func half(dst, src net.Conn) {
	bp := relayBufs.Get().(*[]byte)
	// Plain TCP and unix connections copy with splice(2) where the
	// kernel can; the buffer serves the others.
	_, err := io.CopyBuffer(dst, src, *bp)
	relayBufs.Put(bp)
	if err != nil || CloseWrite(dst) != nil {
		dst.Close()
		src.Close()
	}
}

type closeWriter interface{ CloseWrite() error }

// CloseWrite shuts down the writing side of c, if c supports it.
func CloseWrite(c net.Conn) error {
	if cw, ok := c.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// WithBuffered returns c reading first whatever r has already buffered
// from it (after an HTTP hijack or a handshake read through a
// bufio.Reader), or c itself when r holds nothing.
func WithBuffered(c net.Conn, r *bufio.Reader) net.Conn {
	if r == nil || r.Buffered() == 0 {
		return c
	}
	return &bufferedConn{Conn: c, r: r}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *bufferedConn) CloseWrite() error          { return CloseWrite(c.Conn) }
