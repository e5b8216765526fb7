package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

const (
	// heldIdleMax bounds the idle connections heldTransport keeps; each
	// holds a descriptor in boxd and one in the agent.
	heldIdleMax = 16
	// heldIdleTimeout is how long an idle connection is kept.
	heldIdleTimeout = 90 * time.Second
)

// heldTransport is the round tripper of boxd's calls that wait on a
// command: exec, code and their streams. It writes a request and reads
// its answer on the caller's goroutine, over a connection it keeps, where
// http.Transport hands both to goroutines of the connection's own and
// back: on a loaded machine each hand-over can wait for a processor to
// wake, and an exec is made of little more than such waits.
//
// It writes the whole request before it reads the answer, so it is only
// for requests whose body the agent reads whole before it answers, as
// exec's handlers do.
type heldTransport struct {
	dial        DialFunc
	noKeepAlive bool

	mu   sync.Mutex
	idle []*heldConn // the most recently used last
}

// heldConn is one connection to the agent and its buffers.
type heldConn struct {
	conn      net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// RoundTrip sends req and returns the agent's answer. The answer's body
// reads from the connection; the connection is kept for another request
// once the body has been read to its end, and closed if the body is
// closed before. The end of req's context ends the exchange and closes
// the connection.
func (t *heldTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	hc, err := t.get(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = hc.conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		hc.conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	err = req.Write(hc.bw)
	if err == nil {
		err = hc.bw.Flush()
	}
	if err != nil {
		return fail(err)
	}
	var resp *http.Response
	for {
		if resp, err = http.ReadResponse(hc.br, req); err != nil {
			return fail(err)
		}
		// 1xx answers (100 Continue) come before the answer.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return fail(errors.New("agent: unexpected protocol switch"))
	}
	keep := !resp.Close && !req.Close && !t.noKeepAlive
	resp.Body = &heldBody{body: resp.Body, conn: hc.conn, done: func(whole bool) {
		if stop() && whole && keep {
			t.put(hc)
			return
		}
		hc.conn.Close()
	}}
	return resp, nil
}

// get returns a kept connection, or a new one. A kept connection the
// agent has closed (its sandbox ended) is dropped, as http.Transport's
// reader drops it, so that the call dials, and the dialer finds the agent
// gone and starts the box again.
func (t *heldTransport) get(ctx context.Context) (*heldConn, error) {
	now := time.Now()
	t.mu.Lock()
	for len(t.idle) > 0 {
		hc := t.idle[len(t.idle)-1]
		t.idle = t.idle[:len(t.idle)-1]
		if now.Sub(hc.idleSince) < heldIdleTimeout && peerOpen(hc.conn) {
			t.mu.Unlock()
			return hc, nil
		}
		hc.conn.Close()
	}
	t.mu.Unlock()
	conn, err := t.dial(ctx)
	if err != nil {
		return nil, err
	}
	// Trailers carry a process's stderr tail: see NewClient.
	return &heldConn{conn: conn, br: bufio.NewReaderSize(conn, 64<<10), bw: bufio.NewWriter(conn)}, nil
}

// put keeps hc for another request.
func (t *heldTransport) put(hc *heldConn) {
	hc.idleSince = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle) >= heldIdleMax {
		hc.conn.Close()
		return
	}
	t.idle = append(t.idle, hc)
}

// CloseIdleConnections closes the kept connections.
func (t *heldTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, hc := range idle {
		hc.conn.Close()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// heldBody is an answer's body; done runs once, when it has been read to
// its end (whole) or closed before.
type heldBody struct {
	body io.ReadCloser
	conn net.Conn
	done func(whole bool)
	once sync.Once
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.once.Do(func() { b.done(true) })
	}
	return n, err
}

// Close abandons what is left of the body: the body of an answer read
// from a connection would otherwise read it to its end first, which for
// a stream is when its command ends.
func (b *heldBody) Close() error {
	b.once.Do(func() {
		_ = b.conn.SetDeadline(time.Unix(1, 0))
		b.done(false)
	})
	_ = b.body.Close()
	return nil
}
