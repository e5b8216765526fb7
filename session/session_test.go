package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/session"
)

// fakeProc is a session.Process driven by the test: it echoes stdin to
// stdout unless told otherwise, records resizes and signals, and exits
// when told to (or when killed, or on TERM/KILL when asked to obey).
type fakeProc struct {
	start *session.Start

	outR, errR *io.PipeReader
	outW, errW *io.PipeWriter
	inR        *io.PipeReader
	inW        *io.PipeWriter

	exitOnce sync.Once
	exit     chan int

	mu      sync.Mutex
	events  []string // "resize 10x20", "signal INT", "kill", "stdin-eof"
	changed chan struct{}
	obey    bool // TERM and KILL end the process (143, 137)
	closed  bool
}

func newFakeProc(start *session.Start) *fakeProc {
	p := &fakeProc{start: start, exit: make(chan int, 1), changed: make(chan struct{}, 1)}
	p.outR, p.outW = io.Pipe()
	p.errR, p.errW = io.Pipe()
	p.inR, p.inW = io.Pipe()
	go func() {
		// Echo stdin to stdout; at EOF note it.
		if _, err := io.Copy(p.outW, p.inR); err == nil {
			p.event("stdin-eof")
		}
	}()
	return p
}

func (p *fakeProc) event(e string) {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// waitEvent waits until e has been recorded.
func (p *fakeProc) waitEvent(t *testing.T, e string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		p.mu.Lock()
		ok := slices.Contains(p.events, e)
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-p.changed:
		case <-deadline:
			t.Fatalf("no %q among %v", e, p.eventList())
		}
	}
}

func (p *fakeProc) eventList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// finish makes the process exit with code after its outputs end.
func (p *fakeProc) finish(code int) {
	p.exitOnce.Do(func() {
		p.inR.Close()
		p.outW.Close()
		p.errW.Close()
		p.exit <- code
	})
}

func (p *fakeProc) PID() int              { return 42 }
func (p *fakeProc) Stdout() io.Reader     { return p.outR }
func (p *fakeProc) Stdin() io.WriteCloser { return p.inW }
func (p *fakeProc) Stderr() io.Reader {
	if p.start.TTY {
		return nil
	}
	return p.errR
}

func (p *fakeProc) Resize(rows, cols int) error {
	p.event("resize " + strconv.Itoa(rows) + "x" + strconv.Itoa(cols))
	return nil
}

func (p *fakeProc) Signal(sig string) error {
	p.event("signal " + sig)
	p.mu.Lock()
	obey := p.obey
	p.mu.Unlock()
	switch {
	case obey && sig == "TERM":
		p.finish(143)
	case sig == "KILL":
		p.finish(137)
	}
	return nil
}

func (p *fakeProc) Wait() int { return <-p.exit }

func (p *fakeProc) Kill() error {
	p.event("kill")
	p.finish(137)
	return nil
}

func (p *fakeProc) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.outR.Close()
	p.errR.Close()
	p.inW.Close()
	return nil
}

// fakeServer serves sessions with fake processes on a loopback listener.
type fakeServer struct {
	*httptest.Server
	mu     sync.Mutex
	procs  []*fakeProc
	starts chan *fakeProc
	header http.Header // of the last handshake
	fail   string      // when set, Start fails with it
	obey   bool
}

func newFakeServer(t *testing.T) *fakeServer {
	fs := &fakeServer{starts: make(chan *fakeProc, 100)}
	h := &session.Handler{Start: func(ctx context.Context, req *session.Start) (session.Process, error) {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if fs.fail != "" {
			return nil, errors.New(fs.fail)
		}
		p := newFakeProc(req)
		p.obey = fs.obey
		fs.procs = append(fs.procs, p)
		fs.starts <- p
		return p, nil
	}}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		fs.header = r.Header.Clone()
		fs.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(fs.Close)
	return fs
}

func (fs *fakeServer) wsURL() string { return "ws" + strings.TrimPrefix(fs.URL, "http") }

// next returns the process of the session just started.
func (fs *fakeServer) next(t *testing.T) *fakeProc {
	t.Helper()
	select {
	case p := <-fs.starts:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no process started")
		return nil
	}
}

func dial(t *testing.T, url string, start *session.Start, opts *session.Options) *session.Session {
	t.Helper()
	s, err := session.Dial(t.Context(), url, start, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func waitCode(t *testing.T, s *session.Session) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return s.Wait(ctx)
}

func TestNormalizeSignal(t *testing.T) {
	for in, want := range map[string]string{"TERM": "TERM", "sigint": "INT", "SIGKILL": "KILL", " hup ": "HUP", "Usr1": "USR1", "sigtstp": "TSTP"} {
		if got, err := session.NormalizeSignal(in); got != want || err != nil {
			t.Errorf("NormalizeSignal(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "SIG", "STOP", "9", "SIGSEGV", "CHLD"} {
		if got, err := session.NormalizeSignal(in); err == nil {
			t.Errorf("NormalizeSignal(%q) = %q, want an error", in, got)
		}
	}
}

func TestSessionRoundTrip(t *testing.T) {
	fs := newFakeServer(t)
	s := dial(t, fs.wsURL(), &session.Start{Cmd: "echo", Cwd: "/w", Env: []string{"A=1"}}, &session.Options{
		Header: http.Header{"X-Box-Api-Key": {"k"}},
	})
	p := fs.next(t)
	if s.PID() != 42 || !strings.HasPrefix(s.ExecID(), "exec-") {
		t.Errorf("PID %d, ExecID %q", s.PID(), s.ExecID())
	}
	if diff := cmp.Diff(&session.Start{Cmd: "echo", Cwd: "/w", Env: []string{"A=1"}}, p.start); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
	fs.mu.Lock()
	if fs.header.Get("X-Box-Api-Key") != "k" {
		t.Errorf("handshake headers = %v", fs.header)
	}
	fs.mu.Unlock()

	// stdin comes back on stdout (the fake echoes); a write larger than
	// one frame arrives whole and in order.
	big := bytes.Repeat([]byte("0123456789abcdef"), 10_000)
	go func() {
		s.Stdin.Write(big)
		s.Stdin.Close()
	}()
	got := make([]byte, len(big))
	if _, err := io.ReadFull(s.Stdout, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("echo of %d bytes: %v, equal %v", len(big), err, bytes.Equal(got, big))
	}
	p.waitEvent(t, "stdin-eof")
	go func() {
		p.errW.Write([]byte("warn\n"))
		p.finish(3)
	}()
	errOut, _ := io.ReadAll(s.Stderr)
	if string(errOut) != "warn\n" {
		t.Errorf("stderr = %q", errOut)
	}
	if code, err := waitCode(t, s); code != 3 || err != nil {
		t.Errorf("Wait = %d, %v", code, err)
	}
	if n, err := s.Stdout.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Stdout after exit: %d, %v", n, err)
	}
}

func TestSessionControl(t *testing.T) {
	fs := newFakeServer(t)
	s := dial(t, fs.wsURL(), &session.Start{Argv: []string{"vi"}, Cwd: "/", TTY: true}, nil)
	p := fs.next(t)
	if p.start.Rows != session.DefaultRows || p.start.Cols != session.DefaultCols {
		t.Errorf("default size = %dx%d", p.start.Rows, p.start.Cols)
	}
	ctx := t.Context()
	if err := s.Resize(ctx, 10, 20); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, "resize 10x20")
	for _, bad := range [][2]int{{0, 1}, {1, 0}, {70000, 1}, {-1, 5}} {
		if err := s.Resize(ctx, bad[0], bad[1]); err == nil {
			t.Errorf("Resize(%d, %d) accepted", bad[0], bad[1])
		}
	}
	if err := s.Signal(ctx, "sigusr1"); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, "signal USR1")
	if err := s.Signal(ctx, "STOP"); err == nil {
		t.Error("Signal(STOP) accepted")
	}
	// A cancelled context sends nothing and leaves the session alone.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Signal(cctx, "HUP"); !errors.Is(err, context.Canceled) {
		t.Errorf("Signal with a cancelled ctx = %v", err)
	}
	// Terminate: TERM now, KILL after the grace; the second call does
	// not count.
	start := time.Now()
	if err := s.Terminate(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := s.Terminate(ctx, 0); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(t, "signal TERM")
	if code, err := waitCode(t, s); code != 137 || err != nil {
		t.Errorf("Wait = %d, %v", code, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("KILL after %v, before the grace", d)
	}
	if diff := cmp.Diff([]string{"resize 10x20", "signal USR1", "signal TERM", "signal KILL"}, p.eventList()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestSessionTerminateObeyed(t *testing.T) {
	fs := newFakeServer(t)
	fs.obey = true
	s := dial(t, fs.wsURL(), &session.Start{Cmd: "x", Cwd: "/"}, nil)
	p := fs.next(t)
	if err := s.Terminate(t.Context(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if code, err := waitCode(t, s); code != 143 || err != nil {
		t.Errorf("Wait = %d, %v", code, err)
	}
	// The KILL timer was disarmed when the process went.
	if diff := cmp.Diff([]string{"signal TERM"}, p.eventList()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestSessionCloseKills(t *testing.T) {
	fs := newFakeServer(t)
	s := dial(t, fs.wsURL(), &session.Start{Cmd: "x", Cwd: "/"}, nil)
	p := fs.next(t)
	// Output nobody reads does not keep Close from finishing.
	go p.outW.Write(bytes.Repeat([]byte("x"), 3<<20))
	s.Close()
	s.Close()
	p.waitEvent(t, "kill")
	if code, err := s.Wait(t.Context()); code != -1 || !errors.Is(err, session.ErrClosed) {
		t.Errorf("Wait after Close = %d, %v", code, err)
	}
	if err := s.Signal(t.Context(), "INT"); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Signal after Close = %v", err)
	}
	if _, err := io.ReadAll(s.Stdout); err != nil {
		t.Errorf("Stdout after Close: %v", err)
	}
}

func TestSessionWaitContext(t *testing.T) {
	fs := newFakeServer(t)
	s := dial(t, fs.wsURL(), &session.Start{Cmd: "x", Cwd: "/"}, nil)
	p := fs.next(t)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if code, err := s.Wait(ctx); code != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait = %d, %v", code, err)
	}
	p.finish(0)
	if code, err := waitCode(t, s); code != 0 || err != nil {
		t.Errorf("Wait after exit = %d, %v", code, err)
	}
}

func TestSessionCallbacks(t *testing.T) {
	fs := newFakeServer(t)
	var mu sync.Mutex
	var out, errOut []string
	s := dial(t, fs.wsURL(), &session.Start{Cmd: "x", Cwd: "/"}, &session.Options{
		OnStdout: func(b []byte) { mu.Lock(); out = append(out, string(b)); mu.Unlock() },
		OnStderr: func(b []byte) { mu.Lock(); errOut = append(errOut, string(b)); mu.Unlock() },
	})
	p := fs.next(t)
	io.WriteString(s.Stdin, "a")
	p.errW.Write([]byte("b"))
	io.WriteString(s.Stdin, "c")
	s.Stdin.Close()
	p.waitEvent(t, "stdin-eof")
	p.finish(0)
	if code, err := waitCode(t, s); code != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(out, "") != "ac" || strings.Join(errOut, "") != "b" {
		t.Errorf("callbacks got %q and %q", out, errOut)
	}
	if n, err := s.Stdout.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Stdout with a callback: %d, %v", n, err)
	}
}

func TestDialErrors(t *testing.T) {
	fs := newFakeServer(t)
	ctx := t.Context()
	for _, st := range []*session.Start{
		nil,
		{Cwd: "/"},
		{Argv: []string{""}, Cwd: "/"},
		{Cmd: "x"},
		{Cmd: "x", Cwd: "rel"},
		{Cmd: "x", Cwd: "/", Env: []string{"=v"}},
		{Cmd: "x", Cwd: "/", TTY: true, Rows: -1},
	} {
		if _, err := session.Dial(ctx, fs.wsURL(), st, nil); err == nil {
			t.Errorf("Dial(%+v) accepted", st)
		}
	}
	select {
	case <-fs.starts:
		t.Error("invalid start reached the server")
	default:
	}

	fs.mu.Lock()
	fs.fail = "folder /x does not exist"
	fs.mu.Unlock()
	_, err := session.Dial(ctx, fs.wsURL(), &session.Start{Cmd: "x", Cwd: "/x"}, nil)
	var se *session.ServerError
	if !errors.As(err, &se) || se.Message != "folder /x does not exist" {
		t.Errorf("Dial with a failing start = %v", err)
	}

	// A refused handshake.
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"unauthorized"}`)
	}))
	defer refuse.Close()
	_, err = session.Dial(ctx, refuse.URL, &session.Start{Cmd: "x", Cwd: "/"}, nil)
	var he *session.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != 401 || he.Message != "unauthorized" || he.Response == nil {
		t.Errorf("Dial refused = %v", err)
	}

	// Nothing listening.
	l := httptest.NewServer(http.NotFoundHandler())
	url := l.URL
	l.Close()
	if _, err := session.Dial(ctx, url, &session.Start{Cmd: "x", Cwd: "/"}, nil); err == nil || !strings.Contains(err.Error(), "connection failed") {
		t.Errorf("Dial to a closed port = %v", err)
	}
}

// stubServer answers each session with the frames script returns for
// the start frame, raw, then waits for the client to go.
func stubServer(t *testing.T, script func(conn *websocket.Conn)) string {
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		if _, _, err := conn.Read(r.Context()); err != nil { // start
			return
		}
		script(conn)
	}))
	t.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
	return srv.URL
}

func send(conn *websocket.Conn, frames ...string) {
	for _, f := range frames {
		if err := conn.Write(context.Background(), websocket.MessageText, []byte(f)); err != nil {
			return
		}
	}
}

// drain reads until the client closes.
func drain(conn *websocket.Conn) {
	for {
		if _, _, err := conn.Read(context.Background()); err != nil {
			return
		}
	}
}

func TestDialHandshake(t *testing.T) {
	ctx := t.Context()
	start := &session.Start{Cmd: "x", Cwd: "/"}
	for _, tc := range []struct {
		name   string
		script func(*websocket.Conn)
		want   string
	}{
		{"error frame", func(c *websocket.Conn) { send(c, `{"type":"error","message":"no shell"}`) }, "session: server error: no shell"},
		{"no pid", func(c *websocket.Conn) { send(c, `{"type":"started","execId":"e"}`); drain(c) }, "without a usable pid"},
		{"closed", func(c *websocket.Conn) { c.Close(websocket.StatusGoingAway, "bye") }, "closed before start"},
		{"output first", func(c *websocket.Conn) { send(c, `{"type":"stdout","data":"aGk="}`); drain(c) }, "stdout frame before started"},
		{"not json", func(c *websocket.Conn) { send(c, `hello`); drain(c) }, "bad frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := session.Dial(ctx, stubServer(t, tc.script), start, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dial = %v, want %q", err, tc.want)
			}
		})
	}

	// A server that never starts the process: the handshake timeout.
	hang := make(chan struct{})
	url := stubServer(t, func(c *websocket.Conn) { <-hang })
	_, err := session.Dial(ctx, url, start, &session.Options{HandshakeTimeout: 100 * time.Millisecond})
	close(hang)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "handshake timed out") {
		t.Errorf("Dial to a silent server = %v", err)
	}
	// The caller's own deadline is reported as such.
	hang2 := make(chan struct{})
	url = stubServer(t, func(c *websocket.Conn) { <-hang2 })
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = session.Dial(cctx, url, start, &session.Options{HandshakeTimeout: time.Hour})
	close(hang2)
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "handshake timed out") {
		t.Errorf("Dial past the caller's deadline = %v", err)
	}
}

func TestSessionServerFrames(t *testing.T) {
	// Unknown types, binary messages and other spellings of known frames
	// are handled; an error frame after started ends the session with -1.
	url := stubServer(t, func(c *websocket.Conn) {
		send(c,
			`{"type":"welcome","motd":{"x":[1,2]}}`,
			`{"type":"started","pid":7,"execId":"exec-1"}`,
			`{"type":"future","data":12}`,
			`{ "data": "aGVs", "type": "stdout" }`,
		)
		c.Write(context.Background(), websocket.MessageBinary, []byte{1, 2, 3})
		send(c,
			`{"type":"stdout","data":"bG8="}`,
			`{"type":"stderr","data":"ZQ=="}`,
			`{"type":"error","message":"agent crashed"}`,
		)
		drain(c)
	})
	s := dial(t, url, &session.Start{Cmd: "x", Cwd: "/"}, nil)
	if s.PID() != 7 || s.ExecID() != "exec-1" {
		t.Errorf("PID %d ExecID %q", s.PID(), s.ExecID())
	}
	out, err := io.ReadAll(s.Stdout)
	if string(out) != "hello" || err != nil {
		t.Errorf("stdout = %q, %v", out, err)
	}
	code, err := waitCode(t, s)
	var se *session.ServerError
	if code != -1 || !errors.As(err, &se) || se.Message != "agent crashed" {
		t.Errorf("Wait = %d, %v", code, err)
	}
	if errOut, _ := io.ReadAll(s.Stderr); string(errOut) != "e" {
		t.Errorf("stderr = %q", errOut)
	}

	// The connection dropping mid-run: -1, and the readers report it.
	url = stubServer(t, func(c *websocket.Conn) {
		send(c, `{"type":"started","pid":7,"execId":"e"}`, `{"type":"stdout","data":"aGk="}`)
		c.CloseNow()
	})
	s = dial(t, url, &session.Start{Cmd: "x", Cwd: "/"}, nil)
	out, err = io.ReadAll(s.Stdout)
	if string(out) != "hi" || err == nil {
		t.Errorf("stdout of a dropped session = %q, %v; want an error after the data", out, err)
	}
	if code, err := waitCode(t, s); code != -1 || err == nil || errors.Is(err, session.ErrClosed) {
		t.Errorf("Wait of a dropped session = %d, %v", code, err)
	}
}

// rawServerSession dials the real Handler with raw frames.
func rawServerSession(t *testing.T, fs *fakeServer) *websocket.Conn {
	t.Helper()
	conn, _, err := websocket.Dial(t.Context(), fs.wsURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return conn
}

func readJSON(t *testing.T, conn *websocket.Conn) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("frame %q: %v", msg, err)
	}
	return m
}

func TestHandlerRejects(t *testing.T) {
	fs := newFakeServer(t)
	for _, tc := range []struct{ frame, want string }{
		{`{"type":"start","cwd":"/"}`, "start requires cmd or argv"},
		{`{"type":"start","argv":[""],"cwd":"/"}`, "argv[0] must not be empty"},
		{`{"type":"start","cmd":"x","cwd":"rel"}`, `cwd must be an absolute path, not "rel"`},
		{`{"type":"start","cmd":"x","cwd":"/","env":["NOPE"]}`, `env entry "NOPE" is not KEY=VALUE`},
		{`{"type":"start","cmd":"x","cwd":"/","tty":true,"rows":70000}`, "terminal size 70000x0 out of range"},
		{`{"type":"stdin","data":"aGk="}`, "the first frame must be start, not stdin"},
		{`{"type":"start","cmd":5}`, "session: bad frame (start)"},
		{`[1,2]`, "session: bad frame"},
	} {
		conn := rawServerSession(t, fs)
		send(conn, tc.frame)
		if f := readJSON(t, conn); f["type"] != "error" || !strings.HasPrefix(f["message"].(string), strings.TrimPrefix(tc.want, "session: ")) {
			t.Errorf("answer to %s = %v, want an error %q", tc.frame, f, tc.want)
		}
		if _, _, err := conn.Read(t.Context()); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
			t.Errorf("after the error: %v, want a normal close", err)
		}
	}
	select {
	case p := <-fs.starts:
		t.Errorf("a process was started for %+v", p.start)
	default:
	}

	// Not a WebSocket at all.
	resp, err := http.Get(fs.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired || !strings.Contains(string(body), `"error"`) {
		t.Errorf("plain GET = %d %s", resp.StatusCode, body)
	}
}

func TestHandlerAfterStart(t *testing.T) {
	fs := newFakeServer(t)
	conn := rawServerSession(t, fs)
	send(conn, `{"type":"start","cmd":"x","cwd":"/"}`)
	if f := readJSON(t, conn); f["type"] != "started" || f["pid"] != 42.0 {
		t.Fatalf("answer to start = %v", f)
	}
	p := fs.next(t)
	// Resize without a TTY is ignored, unknown frames too; a second
	// start and an unknown signal are errors that end the session.
	send(conn, `{"type":"resize","rows":5,"cols":5}`, `{"type":"later","x":1}`, `{"type":"signal","signal":"sigint"}`)
	p.waitEvent(t, "signal INT")
	send(conn, `{"type":"signal","signal":"SEGV"}`)
	if f := readJSON(t, conn); f["type"] != "error" || f["message"] != "unsupported signal: SEGV" {
		t.Errorf("answer to SEGV = %v", f)
	}
	p.waitEvent(t, "kill")
	if diff := cmp.Diff([]string{"signal INT", "kill"}, p.eventList()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// The client going away kills the process too.
	conn = rawServerSession(t, fs)
	send(conn, `{"type":"start","argv":["x"],"cwd":"/"}`)
	readJSON(t, conn)
	p = fs.next(t)
	conn.CloseNow()
	p.waitEvent(t, "kill")
}
