package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Server-side defaults.
const (
	// DefaultGrace is the time between SIGTERM and SIGKILL for a
	// terminate frame without graceMs.
	DefaultGrace = 5 * time.Second
	// DefaultRows and DefaultCols are the size of a terminal whose start
	// frame gives none.
	DefaultRows = 24
	DefaultCols = 80

	// startTimeout is how long the server waits for the start frame.
	startTimeout = 30 * time.Second
	// outputChunk is the most output one stdout or stderr frame carries.
	outputChunk = 64 << 10
	// stdinQueue is how many stdin frames wait for a process that is not
	// reading; past it the server stops reading the connection.
	stdinQueue = 16
)

// Process is a process started for a session, as the server loop drives
// it. The loop calls the methods from several goroutines.
type Process interface {
	// PID is the process id reported to the client; it must be > 0.
	PID() int
	// Stdout is read until it returns an error (io.EOF when done) and
	// relayed as stdout frames. It must reach EOF once the process has
	// exited, even if a background job it started still holds the
	// output open (a short drain is fine).
	Stdout() io.Reader
	// Stderr is like Stdout, for stderr frames; nil when the process has
	// one output (a TTY).
	Stderr() io.Reader
	// Stdin is the process's standard input. Close on it is stdin_close.
	Stdin() io.WriteCloser
	// Resize sets the terminal size; it is called only for TTY sessions.
	Resize(rows, cols int) error
	// Signal sends a signal, by its wire name (TERM, KILL, INT, HUP,
	// TSTP, QUIT, USR1 or USR2, see [NormalizeSignal]), to the process
	// group.
	Signal(sig string) error
	// Wait waits for the process to exit and returns its exit code
	// (128+n when killed by signal n).
	Wait() int
	// Kill ends the process and what it started in its group or
	// session, when the client has gone away.
	Kill() error
	// Close releases what the process holds (descriptors). The loop
	// calls it last, once Wait has returned.
	Close() error
}

// Handler serves the server side of exec sessions (GET
// /v2/box/{id}/exec-session): it accepts the WebSocket, reads the start
// frame, starts the process with Start, and relays frames until the
// process exits or the client goes away. Authentication is the caller's:
// put the handler behind it.
//
// An invalid frame (a start without cmd or argv, an unknown signal, a
// malformed message) is answered with an error frame, after which the
// session ends and the process is killed: clients treat an error frame as
// the end of a session. Frames of unknown types are ignored. When the
// connection drops, the process is killed.
//
// Standard input is written by a goroutine of its own through a short
// queue, so that a process that does not read its input does not hold up
// signals and resizes (which may therefore overtake input sent before
// them); once the queue is full, the connection is not read until the
// process reads.
type Handler struct {
	// Start starts the process a valid start frame asks for (Cwd is
	// absolute; TTY sessions have a size). Its error text is sent to
	// the client in an error frame.
	Start func(ctx context.Context, req *Start) (Process, error)
	// Logger receives failures worth a line; nil discards them.
	Logger *slog.Logger
}

// ServeHTTP accepts the WebSocket and runs one session on it. It returns
// when the session is over and the process has been reaped.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !isUpgrade(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUpgradeRequired)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "exec-session needs a WebSocket upgrade"})
		return
	}
	// The API key travels in a header, which a browser cannot set on a
	// WebSocket, so a cross-origin page cannot open a session: the
	// origin check would only refuse legitimate non-browser clients
	// whose Host was rewritten by a proxy.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered
	}
	defer c.CloseNow()
	c.SetReadLimit(maxFrame)
	ss := &serverSession{h: h, c: c, done: make(chan struct{})}
	ss.run(r.Context())
}

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// errEnded marks the end of the reading side after an error frame.
var errEnded = errors.New("session ended by an error frame")

// serverSession is one session on the server.
type serverSession struct {
	h    *Handler
	c    *websocket.Conn
	proc Process
	tty  bool

	done chan struct{} // closed when the process is gone: stops helpers

	mu        sync.Mutex // guards ended and killTimer
	ended     bool       // no more signals: the process has been reaped
	termOnce  sync.Once
	killTimer *time.Timer
}

func (ss *serverSession) logf(msg string, args ...any) {
	if ss.h.Logger != nil {
		ss.h.Logger.Warn(msg, args...)
	}
}

// run drives the session to its end.
func (ss *serverSession) run(ctx context.Context) {
	start, err := ss.readStart(ctx)
	if err != nil {
		if !errors.Is(err, errEnded) {
			return // the client went away
		}
		_ = ss.c.Close(websocket.StatusNormalClosure, "")
		return
	}
	proc, err := ss.h.Start(ctx, start)
	if err != nil {
		ss.sendError(err.Error())
		_ = ss.c.Close(websocket.StatusNormalClosure, "")
		return
	}
	ss.proc, ss.tty = proc, start.TTY

	exited := make(chan int, 1)
	go func() { exited <- proc.Wait() }()
	var outputs sync.WaitGroup // the output pumps
	pump := func(typ string, r io.Reader) {
		outputs.Add(1)
		go func() {
			defer outputs.Done()
			ss.pump(typ, r)
		}()
	}
	var helpers sync.WaitGroup // goroutines that end once done is closed

	if err := ss.send(&Frame{Type: TypeStarted, PID: proc.PID(), ExecID: newExecID()}); err != nil {
		// Gone already: drain the outputs so the process is not stuck
		// on a full pipe while it is killed.
		_ = proc.Kill()
		pump("", proc.Stdout())
		if e := proc.Stderr(); e != nil {
			pump("", e)
		}
		<-exited
		ss.markEnded()
		outputs.Wait()
		_ = proc.Close()
		return
	}

	pump(TypeStdout, proc.Stdout())
	if e := proc.Stderr(); e != nil {
		pump(TypeStderr, e)
	}
	stdin := make(chan []byte, stdinQueue)
	helpers.Add(1)
	go func() {
		defer helpers.Done()
		ss.writeStdin(stdin)
	}()
	readErr := make(chan error, 1)
	go func() { readErr <- ss.readLoop(stdin) }()

	select {
	case code := <-exited:
		// All output first, then the exit frame, then close: the
		// client closes on exit too, which ends the reader.
		ss.markEnded()
		outputs.Wait()
		_ = ss.send(&Frame{Type: TypeExit, Code: &code})
		close(ss.done)
		_ = ss.c.Close(websocket.StatusNormalClosure, "")
		<-readErr
	case err := <-readErr:
		// The client hung up, or sent something invalid and has had its
		// error frame: the process must not outlive the session.
		if kerr := proc.Kill(); kerr != nil {
			ss.logf("exec-session: kill", "pid", proc.PID(), "err", kerr)
		}
		if errors.Is(err, errEnded) {
			_ = ss.c.Close(websocket.StatusNormalClosure, "")
		} else {
			_ = ss.c.CloseNow()
		}
		<-exited
		ss.markEnded()
		close(ss.done)
		outputs.Wait()
	}
	// Closing the process's descriptors also releases a stdin write
	// stuck on a pipe that a leftover background job holds but does
	// not read.
	_ = proc.Close()
	helpers.Wait()
}

// markEnded records that the process has been reaped: no signal may be
// sent to its pid any more.
func (ss *serverSession) markEnded() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.ended = true
	if ss.killTimer != nil {
		ss.killTimer.Stop()
	}
}

// readStart waits for the start frame and validates it. Frames of unknown
// types before it are skipped; anything else is answered with an error
// frame (and errEnded).
func (ss *serverSession) readStart(ctx context.Context) (*Start, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var buf bytes.Buffer
	for {
		f, err := readFrame(ctx, ss.c, &buf, nil)
		if err != nil {
			if errors.Is(err, errBadFrame) {
				return nil, ss.fail(strings.TrimPrefix(err.Error(), "session: "))
			}
			return nil, err
		}
		if f.Type == TypeStart {
			return ss.startOf(f)
		}
		if known(f.Type) {
			return nil, ss.fail(fmt.Sprintf("the first frame must be start, not %s", f.Type))
		}
	}
}

// startOf validates a start frame.
func (ss *serverSession) startOf(f *Frame) (*Start, error) {
	s := &Start{Argv: f.Argv, Cmd: f.Cmd, Cwd: f.Cwd, Env: f.Env, TTY: f.TTY, Rows: f.Rows, Cols: f.Cols}
	switch {
	case len(s.Argv) > 0:
		if s.Argv[0] == "" {
			return nil, ss.fail("argv[0] must not be empty")
		}
		s.Cmd = ""
	case s.Cmd != "":
	default:
		return nil, ss.fail("start requires cmd or argv")
	}
	if s.Cwd == "" {
		s.Cwd = "/workspace/home"
	}
	if !strings.HasPrefix(s.Cwd, "/") {
		return nil, ss.fail(fmt.Sprintf("cwd must be an absolute path, not %q", s.Cwd))
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, ss.fail(fmt.Sprintf("env entry %q is not KEY=VALUE", kv))
		}
	}
	if err := checkSize(s.Rows, s.Cols, true); err != nil {
		return nil, ss.fail(fmt.Sprintf("terminal size %dx%d out of range", s.Rows, s.Cols))
	}
	if s.TTY {
		if s.Rows == 0 {
			s.Rows = DefaultRows
		}
		if s.Cols == 0 {
			s.Cols = DefaultCols
		}
	} else {
		s.Rows, s.Cols = 0, 0
	}
	return s, nil
}

// fail sends an error frame and returns errEnded.
func (ss *serverSession) fail(msg string) error {
	ss.sendError(msg)
	return errEnded
}

// readLoop handles the client's frames after started. It returns when the
// connection ends (the client's error) or after an error frame (errEnded).
func (ss *serverSession) readLoop(stdin chan<- []byte) error {
	var buf bytes.Buffer
	for {
		f, err := readFrame(context.Background(), ss.c, &buf, nil)
		if err != nil {
			if errors.Is(err, errBadFrame) {
				return ss.fail(strings.TrimPrefix(err.Error(), "session: "))
			}
			return err
		}
		switch f.Type {
		case TypeStdin:
			if len(f.Data) == 0 {
				continue
			}
			select {
			case stdin <- f.Data:
			case <-ss.done:
			}
		case TypeStdinClose:
			select {
			case stdin <- nil:
			case <-ss.done:
			}
		case TypeResize:
			if err := checkSize(f.Rows, f.Cols, false); err != nil {
				return ss.fail(fmt.Sprintf("terminal size %dx%d out of range", f.Rows, f.Cols))
			}
			if ss.tty {
				_ = ss.proc.Resize(f.Rows, f.Cols)
			}
		case TypeSignal:
			name, err := NormalizeSignal(f.Signal)
			if err != nil {
				return ss.fail("unsupported signal: " + f.Signal)
			}
			ss.signal(name)
		case TypeTerminate:
			grace := DefaultGrace
			if f.GraceMs != nil {
				grace = time.Duration(max(*f.GraceMs, 0)) * time.Millisecond
			}
			ss.terminate(grace)
		case TypeStart:
			return ss.fail("the session has already started")
		}
		// Unknown types are ignored.
	}
}

// signal sends sig to the process group unless the process is gone.
func (ss *serverSession) signal(sig string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.ended {
		_ = ss.proc.Signal(sig)
	}
}

// terminate sends SIGTERM and arms SIGKILL after grace; only its first
// call counts.
func (ss *serverSession) terminate(grace time.Duration) {
	ss.termOnce.Do(func() {
		ss.signal("TERM")
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if ss.ended {
			return
		}
		ss.killTimer = time.AfterFunc(grace, func() { ss.signal("KILL") })
	})
}

// writeStdin feeds the process's standard input from the queue; nil in
// the queue is stdin_close. Once a write fails (the process closed its
// input) the rest is dropped.
func (ss *serverSession) writeStdin(q <-chan []byte) {
	in := ss.proc.Stdin()
	broken := false
	for {
		select {
		case <-ss.done:
			return
		case data := <-q:
			switch {
			case broken:
			case data == nil:
				_ = in.Close()
				broken = true
			default:
				if _, err := in.Write(data); err != nil {
					broken = true
				}
			}
		}
	}
}

// pump relays one output as frames of type typ until it ends. After a
// failed send (or with typ "") it keeps reading and drops the data, so
// that the process never blocks on a full pipe.
func (ss *serverSession) pump(typ string, r io.Reader) {
	buf := make([]byte, outputChunk)
	var frame []byte
	dead := typ == ""
	for {
		n, err := r.Read(buf)
		if n > 0 && !dead {
			frame = appendData(frame[:0], typ, buf[:n])
			if ss.c.Write(context.Background(), websocket.MessageText, frame) != nil {
				dead = true
			}
		}
		if err != nil {
			return
		}
	}
}

func (ss *serverSession) send(f *Frame) error {
	msg, err := encode(f)
	if err != nil {
		return err
	}
	return ss.c.Write(context.Background(), websocket.MessageText, msg)
}

func (ss *serverSession) sendError(msg string) {
	_ = ss.send(&Frame{Type: TypeError, Message: msg})
}

func newExecID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "exec-" + hex.EncodeToString(b[:])
}
