package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// maxFrame bounds one incoming message, on both sides. This package never
// sends data frames larger than about 90 KiB; the bound is generous so that
// other clients may send a large stdin write as one frame.
const maxFrame = 16 << 20

// maxChunk is the most stdin data this package puts in one frame.
const maxChunk = 32 << 10

// ErrClosed is returned by operations on a session that has ended: the
// process exited, [Session.Close] was called, or the connection was lost.
var ErrClosed = errors.New("session: closed")

// ServerError is an error frame from the server. Before the process
// starts it fails [Dial]; after, it ends the session and [Session.Wait]
// returns -1 with it.
type ServerError struct {
	Message string
}

func (e *ServerError) Error() string { return "session: server error: " + e.Message }

// HandshakeError is returned by [Dial] when the server answers the
// WebSocket handshake with an HTTP status other than 101 Switching
// Protocols, for example 401 for a wrong API key or 404 for an unknown box.
type HandshakeError struct {
	StatusCode int
	// Message is the "error" field of the API's error body, or
	// "Request failed with status <code>" when there is none.
	Message string
	// Response is the server's response; its Body holds at most the
	// first KiB of the body and need not be closed.
	Response *http.Response
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("session: handshake: %d %s", e.StatusCode, e.Message)
}

// Start is what a session runs: the content of the start frame.
type Start struct {
	// Argv is the program and its arguments, run without a shell. It
	// wins over Cmd.
	Argv []string
	// Cmd is a shell command line, run with `bash -lc`.
	Cmd string
	// Cwd is the absolute working directory in the box. Required.
	Cwd string
	// Env holds KEY=VALUE entries laid over the box's environment.
	Env []string
	// TTY runs the process on a pseudo-terminal of Rows×Cols (the
	// server's default size, 24×80, when zero). Its standard error then
	// goes to the terminal too, so all output arrives as stdout.
	TTY  bool
	Rows int
	Cols int
}

// frame validates s and returns its start frame.
func (s *Start) frame() (*Frame, error) {
	if s == nil {
		return nil, errors.New("session: Cmd or Argv is required")
	}
	f := &Frame{Type: TypeStart, Cwd: s.Cwd, TTY: s.TTY, Env: s.Env}
	switch {
	case len(s.Argv) > 0:
		if s.Argv[0] == "" {
			return nil, errors.New("session: Argv[0] must not be empty")
		}
		f.Argv = s.Argv
	case s.Cmd != "":
		f.Cmd = s.Cmd
	default:
		return nil, errors.New("session: Cmd or Argv is required")
	}
	if !strings.HasPrefix(s.Cwd, "/") {
		return nil, fmt.Errorf("session: Cwd must be an absolute path, not %q", s.Cwd)
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("session: Env entry %q is not KEY=VALUE", kv)
		}
	}
	if err := checkSize(s.Rows, s.Cols, true); err != nil {
		return nil, err
	}
	if s.TTY {
		f.Rows, f.Cols = s.Rows, s.Cols
	}
	return f, nil
}

// checkSize validates a terminal size; zero is allowed where it means
// "the default".
func checkSize(rows, cols int, zeroOK bool) error {
	low := 1
	if zeroOK {
		low = 0
	}
	if rows < low || cols < low || rows > 65535 || cols > 65535 {
		return fmt.Errorf("session: terminal size %dx%d out of range", rows, cols)
	}
	return nil
}

// Options configures [Dial].
type Options struct {
	// HTTPClient sends the handshake request; nil means
	// http.DefaultClient. Its Timeout, if any, bounds only the handshake.
	HTTPClient *http.Client
	// Header is added to the handshake request: the API key and
	// telemetry headers.
	Header http.Header
	// HandshakeTimeout bounds the handshake and the wait for the process
	// to start; zero means only ctx bounds them.
	HandshakeTimeout time.Duration
	// OnStdout, when set, receives the process's standard output instead
	// of [Session.Stdout], and OnStderr its standard error instead of
	// [Session.Stderr]. They are called on the session's reader
	// goroutine, one call per frame, in order; the slice is theirs to
	// keep. Keep them short: while one runs, nothing else is received.
	// Never call Wait or Close from them.
	OnStdout func([]byte)
	OnStderr func([]byte)
}

// Session is a live process in a box, connected over a WebSocket. It is
// shaped like os/exec's pipes: write to Stdin, read Stdout and Stderr (or
// receive them through callbacks), then Wait for the exit code. Close
// hangs up, which kills the process; a session cannot be re-attached.
//
// One goroutine per session reads from the connection and feeds Stdout
// and Stderr. Each holds up to 1 MiB that nobody has read yet; past that
// the session stops reading from the network until the caller catches up,
// so read both (or set a callback, which may discard) until EOF, as with
// os/exec. Every method is safe for concurrent use.
type Session struct {
	// Stdin is the process's standard input. Close sends end-of-file
	// (with a TTY, the terminal's EOF character, Ctrl-D).
	Stdin io.WriteCloser
	// Stdout is the process's standard output, and with a TTY also its
	// standard error. It reads io.EOF once the process has exited and
	// all of it has been read. When OnStdout is set it is empty.
	Stdout io.Reader
	// Stderr is the process's standard error; empty with a TTY or when
	// OnStderr is set.
	Stderr io.Reader

	conn   *websocket.Conn
	pid    int
	execID string
	tty    bool

	stdout, stderr     *pipe
	onStdout, onStderr func([]byte)

	closing   atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed when the reader goroutine has finished
	code      int           // set before done is closed
	err       error         // why there is no exit code; set before done is closed
}

// Dial opens a session: it connects to url (a ws:// or wss:// address,
// or http:// or https://), sends the start frame and waits for the server
// to report that the process started. A non-101 handshake response is a
// *HandshakeError; an error frame is a *ServerError.
func Dial(ctx context.Context, url string, start *Start, opts *Options) (*Session, error) {
	if opts == nil {
		opts = &Options{}
	}
	f, err := start.frame()
	if err != nil {
		return nil, err
	}
	msg, err := encode(f)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}

	hctx, cancel := ctx, context.CancelFunc(func() {})
	if opts.HandshakeTimeout > 0 {
		hctx, cancel = context.WithTimeout(ctx, opts.HandshakeTimeout)
	}
	defer cancel()
	fail := func(err error) error {
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("session: %w", context.Cause(ctx))
		case hctx.Err() != nil:
			return fmt.Errorf("session: handshake timed out after %v: %w", opts.HandshakeTimeout, context.DeadlineExceeded)
		}
		return err
	}

	conn, resp, err := websocket.Dial(hctx, url, &websocket.DialOptions{
		HTTPClient: opts.HTTPClient,
		HTTPHeader: opts.Header,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, newHandshakeError(resp)
		}
		return nil, fail(fmt.Errorf("session: connection failed: %w", unwrapURLError(err)))
	}
	defer func() {
		if conn != nil {
			conn.CloseNow()
		}
	}()
	conn.SetReadLimit(maxFrame)
	if err := conn.Write(hctx, websocket.MessageText, msg); err != nil {
		return nil, fail(fmt.Errorf("session: sending start: %w", err))
	}
	started, err := awaitStarted(hctx, conn)
	if err != nil {
		return nil, fail(err)
	}

	s := &Session{
		conn:     conn,
		pid:      started.PID,
		execID:   started.ExecID,
		tty:      start.TTY,
		onStdout: opts.OnStdout,
		onStderr: opts.OnStderr,
		done:     make(chan struct{}),
	}
	s.Stdin = &stdinWriter{s: s}
	s.Stdout, s.stdout = output(opts.OnStdout)
	s.Stderr, s.stderr = output(opts.OnStderr)
	if start.TTY && s.stderr != nil {
		s.stderr.closeWithError(io.EOF) // a terminal has one output
	}
	conn = nil // the session owns it now
	go s.readLoop()
	return s, nil
}

// output returns the reader for one output stream and the pipe behind it,
// or an empty reader and no pipe when a callback takes the stream.
func output(cb func([]byte)) (io.Reader, *pipe) {
	if cb != nil {
		return eofReader{}, nil
	}
	p := newPipe()
	return p, p
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// awaitStarted reads frames until the started frame.
func awaitStarted(ctx context.Context, conn *websocket.Conn) (*Frame, error) {
	var buf bytes.Buffer
	for {
		f, err := readFrame(ctx, conn, &buf, nil)
		if err != nil {
			if errors.Is(err, errBadFrame) {
				return nil, err
			}
			if websocket.CloseStatus(err) != -1 {
				return nil, fmt.Errorf("session: closed before start: %w", err)
			}
			return nil, fmt.Errorf("session: connection failed: %w", err)
		}
		switch f.Type {
		case TypeStarted:
			if f.PID <= 0 {
				return nil, fmt.Errorf("session: started without a usable pid (%d)", f.PID)
			}
			return f, nil
		case TypeError:
			return nil, &ServerError{Message: f.Message}
		case TypeStdout, TypeStderr, TypeExit:
			return nil, fmt.Errorf("session: %s frame before started", f.Type)
		}
		// Unknown frame types are ignored.
	}
}

// readFrame reads the next text message into buf and decodes it (see
// decodeWith for alloc); binary messages are skipped.
func readFrame(ctx context.Context, conn *websocket.Conn, buf *bytes.Buffer, alloc func(string, int) []byte) (*Frame, error) {
	for {
		typ, r, err := conn.Reader(ctx)
		if err != nil {
			return nil, err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return nil, err
		}
		if typ != websocket.MessageText {
			continue
		}
		return decodeWith(buf.Bytes(), alloc)
	}
}

func newHandshakeError(resp *http.Response) *HandshakeError {
	e := &HandshakeError{
		StatusCode: resp.StatusCode,
		Message:    fmt.Sprintf("Request failed with status %d", resp.StatusCode),
		Response:   resp,
	}
	if resp.Body != nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var eb struct {
			Error *string `json:"error"`
		}
		if json.Unmarshal(body, &eb) == nil && eb.Error != nil && *eb.Error != "" {
			e.Message = *eb.Error
		}
	}
	return e
}

// unwrapURLError drops the *url.Error layer that repeats the whole URL.
func unwrapURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) && uerr.Err != nil {
		return uerr.Err
	}
	return err
}

// readLoop is the session's one reader goroutine: it feeds the outputs
// until the exit frame, an error frame or the end of the connection.
func (s *Session) readLoop() {
	code, err := s.read()
	pipeErr := err
	if err == nil || errors.As(err, new(*ServerError)) {
		pipeErr = io.EOF // the output is complete
	}
	for _, p := range []*pipe{s.stdout, s.stderr} {
		if p != nil {
			p.closeWithError(pipeErr)
		}
	}
	if pipeErr == io.EOF {
		// The server closes after exit and error frames; answer in
		// kind.
		_ = s.conn.Close(websocket.StatusNormalClosure, "")
	} else {
		_ = s.conn.CloseNow()
	}
	s.code, s.err = code, err
	close(s.done)
}

func (s *Session) read() (int, error) {
	var buf bytes.Buffer
	for {
		f, err := readFrame(context.Background(), s.conn, &buf, s.alloc)
		if err != nil {
			if s.closing.Load() {
				return -1, ErrClosed
			}
			if websocket.CloseStatus(err) != -1 {
				return -1, fmt.Errorf("session: closed by the server before the process exited: %w", err)
			}
			if errors.Is(err, errBadFrame) {
				return -1, err
			}
			return -1, fmt.Errorf("session: connection lost: %w", err)
		}
		switch f.Type {
		case TypeStdout:
			deliver(s.stdout, s.onStdout, f.Data)
		case TypeStderr:
			deliver(s.stderr, s.onStderr, f.Data)
		case TypeExit:
			if f.Code == nil {
				return -1, errors.New("session: exit frame without a code")
			}
			return *f.Code, nil
		case TypeError:
			return -1, &ServerError{Message: f.Message}
		}
		// started again, or an unknown type: ignored.
	}
}

// alloc gives the output of a frame a buffer from the pool when it goes
// to a pipe, which returns it once read; what callbacks get is theirs.
func (s *Session) alloc(typ string, n int) []byte {
	switch {
	case typ == TypeStdout && s.stdout != nil, typ == TypeStderr && s.stderr != nil:
		return getChunk(n)
	}
	return nil
}

func deliver(p *pipe, cb func([]byte), data []byte) {
	if len(data) == 0 {
		return
	}
	if cb != nil {
		cb(data)
		return
	}
	if p != nil {
		p.write(data)
	}
}

// PID is the process id in the box, as the server reported it.
func (s *Session) PID() int { return s.pid }

// ExecID is the server's id for the session's process.
func (s *Session) ExecID() string { return s.execID }

// Wait waits until the process exits and returns its exit code: 128+n
// when a signal n killed it (130 for SIGINT, 137 for SIGKILL), as exec
// reports it. If the session ends otherwise (Close, an error frame, the
// connection lost) it returns -1 and the reason; ErrClosed after Close.
//
// When ctx ends first, Wait returns -1 and ctx's error, and the session
// goes on: Wait can be called again.
func (s *Session) Wait(ctx context.Context) (int, error) {
	select {
	case <-s.done:
		return s.code, s.err
	default:
	}
	select {
	case <-s.done:
		return s.code, s.err
	case <-ctx.Done():
		return -1, fmt.Errorf("session: wait: %w", context.Cause(ctx))
	}
}

// Close hangs up: the server kills the process (and its process group)
// if it is still running. Close waits for the reader goroutine to finish;
// unread output is discarded, and Stdout and Stderr then read io.EOF.
// Calling Close more than once is harmless. It always returns nil.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		for _, p := range []*pipe{s.stdout, s.stderr} {
			if p != nil {
				p.closeWithError(io.EOF)
			}
		}
		select {
		case <-s.done:
		default:
			_ = s.conn.Close(websocket.StatusNormalClosure, "")
		}
	})
	<-s.done
	return nil
}

// Resize changes the size of the session's terminal; the process gets
// SIGWINCH. It fails for a session without a TTY.
func (s *Session) Resize(ctx context.Context, rows, cols int) error {
	if !s.tty {
		return errors.New("session: Resize needs a TTY session")
	}
	if err := checkSize(rows, cols, false); err != nil {
		return err
	}
	return s.send(ctx, &Frame{Type: TypeResize, Rows: rows, Cols: cols})
}

// Signal sends a signal to the process group: one of TERM KILL INT HUP
// TSTP QUIT USR1 USR2, in any case, with or without a SIG prefix. Any
// other name is an error, and nothing is sent.
func (s *Session) Signal(ctx context.Context, sig string) error {
	name, err := NormalizeSignal(sig)
	if err != nil {
		return err
	}
	return s.send(ctx, &Frame{Type: TypeSignal, Signal: name})
}

// Terminate asks the server to end the process: SIGTERM to its process
// group now, then SIGKILL if it is still running after grace (at once when
// grace is 0). Only the first Terminate of a session counts. It does not
// wait: use Wait for the outcome.
func (s *Session) Terminate(ctx context.Context, grace time.Duration) error {
	if grace < 0 {
		return errors.New("session: grace must not be negative")
	}
	ms := grace.Milliseconds()
	return s.send(ctx, &Frame{Type: TypeTerminate, GraceMs: &ms})
}

// send writes one control frame. If ctx ends while the frame is being
// written the connection is closed, since half a frame cannot be taken
// back; ending before the write starts leaves the session alone.
func (s *Session) send(ctx context.Context, f *Frame) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("session: %w", context.Cause(ctx))
	}
	if s.ended() {
		return ErrClosed
	}
	msg, err := encode(f)
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	if err := s.conn.Write(ctx, websocket.MessageText, msg); err != nil {
		return s.sendError(ctx, f.Type, err)
	}
	return nil
}

func (s *Session) sendError(ctx context.Context, typ string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("session: %w", context.Cause(ctx))
	case s.ended():
		return ErrClosed
	}
	return fmt.Errorf("session: sending %s: %w", typ, err)
}

func (s *Session) ended() bool {
	if s.closing.Load() {
		return true
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stdinWriter sends writes as stdin frames and Close as stdin_close.
type stdinWriter struct {
	s      *Session
	mu     sync.Mutex
	closed bool
	buf    []byte
}

// Write sends p to the process's standard input, in frames of at most
// 32 KiB. It blocks while the server is not reading.
func (w *stdinWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, io.ErrClosedPipe
	}
	if w.s.ended() {
		return 0, ErrClosed
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), maxChunk)
		w.buf = appendData(w.buf[:0], TypeStdin, p[:k])
		if err := w.s.conn.Write(context.Background(), websocket.MessageText, w.buf); err != nil {
			return n, w.s.sendError(context.Background(), TypeStdin, err)
		}
		n += k
		p = p[k:]
	}
	return n, nil
}

// Close sends end-of-file. Closing again, or after the session ended,
// does nothing.
func (w *stdinWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.s.ended() {
		return nil
	}
	err := w.s.send(context.Background(), &Frame{Type: TypeStdinClose})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
