//go:build linux

// These tests and ExampleExec_Session run against an embedded boxd, which
// runs boxes only on Linux; an Example cannot skip, so elsewhere this file
// is left out.

package box_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
	"github.com/upstash/box-go/session"
)

// openSession opens a session that is closed when the test ends.
func openSession(t *testing.T, b *box.Box, p *box.SessionParams) *session.Session {
	t.Helper()
	s, err := b.Exec.Session(t.Context(), p)
	if err != nil {
		t.Fatalf("Exec.Session: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitCtx is a context for Wait calls that should return soon.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustWait(t *testing.T, s *session.Session, want int) {
	t.Helper()
	code, err := s.Wait(waitCtx(t))
	if err != nil || code != want {
		t.Fatalf("Wait = %d, %v; want %d, nil", code, err, want)
	}
}

// collector reads a session output in the background, for tests that
// wait for something to appear.
type collector struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	err     error
	changed chan struct{}
}

func collect(r io.Reader) *collector {
	c := &collector{changed: make(chan struct{}, 1)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			c.mu.Lock()
			c.buf.Write(b[:n])
			if err != nil {
				c.err = err
			}
			c.mu.Unlock()
			select {
			case c.changed <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

func (c *collector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// waitFor waits until the output contains s.
func (c *collector) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		c.mu.Lock()
		ok, err := strings.Contains(c.buf.String(), s), c.err
		c.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("output ended (%v) without %q; output:\n%s", err, s, c.String())
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("no %q in output after 15s; output:\n%s", s, c.String())
		}
	}
}

// pgrepGone waits until no process in the box matches pattern (a pgrep -f
// regular expression written so that it does not match itself, e.g.
// "[s]leep 4321").
func pgrepGone(t *testing.T, b *box.Box, pattern string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := mustRun(t, b, "pgrep -af '"+pattern+"'")
		if r.ExitCode == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after 10s: %s", r.Stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSessionStdinEOF(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	s := openSession(t, b, &box.SessionParams{Cmd: "sort"})
	if s.PID() <= 0 || !strings.HasPrefix(s.ExecID(), "exec-") {
		t.Errorf("PID() = %d, ExecID() = %q", s.PID(), s.ExecID())
	}
	if _, err := io.WriteString(s.Stdin, "banana\napple\ncherry\n"); err != nil {
		t.Fatal(err)
	}
	if err := s.Stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stdin.Close(); err != nil {
		t.Errorf("second Stdin.Close: %v", err)
	}
	if _, err := s.Stdin.Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Write after Stdin.Close = %v, want io.ErrClosedPipe", err)
	}
	out, err := io.ReadAll(s.Stdout)
	if err != nil || string(out) != "apple\nbanana\ncherry\n" {
		t.Errorf("stdout = %q, %v", out, err)
	}
	mustWait(t, s, 0)
	// Finished: control calls say so, Wait repeats itself.
	if err := s.Signal(t.Context(), "TERM"); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Signal after exit = %v, want ErrClosed", err)
	}
	mustWait(t, s, 0)
}

func TestSessionArgvEnvCwdStderr(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	mustRun(t, b, "mkdir -p sub/dir")
	if err := b.Cd(t.Context(), "sub"); err != nil {
		t.Fatal(err)
	}

	// Argv runs without a shell ($HOME stays literal) and wins over Cmd;
	// the default cwd is the box's tracked one.
	s := openSession(t, b, &box.SessionParams{
		Argv: []string{"sh", "-c", `printf '%s|%s|%s|$HOME\n' "$GREETING" "$(pwd)" "$0"; echo oops >&2; exit 4`, "$HOME"},
		Cmd:  "echo not me",
		Env:  []string{"GREETING=hi there"},
	})
	var stdout, stderr []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); stderr, _ = io.ReadAll(s.Stderr) }()
	stdout, _ = io.ReadAll(s.Stdout)
	wg.Wait()
	if got, want := string(stdout), "hi there|/workspace/home/sub|$HOME|$HOME\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if string(stderr) != "oops\n" {
		t.Errorf("stderr = %q", stderr)
	}
	mustWait(t, s, 4)

	// Cmd goes through bash -lc; a relative Cwd is resolved against the
	// tracked one; callbacks replace the readers.
	var mu sync.Mutex
	var out, errOut bytes.Buffer
	s = openSession(t, b, &box.SessionParams{
		Cmd:      `echo "$BASH_VERSION" | cut -c1; pwd; echo e1 >&2`,
		Cwd:      "dir",
		OnStdout: func(p []byte) { mu.Lock(); out.Write(p); mu.Unlock() },
		OnStderr: func(p []byte) { mu.Lock(); errOut.Write(p); mu.Unlock() },
	})
	mustWait(t, s, 0)
	mu.Lock()
	if out.String() != "5\n/workspace/home/sub/dir\n" || errOut.String() != "e1\n" {
		t.Errorf("callbacks got stdout %q, stderr %q", out.String(), errOut.String())
	}
	mu.Unlock()
	if n, err := s.Stdout.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Stdout with OnStdout set: Read = %d, %v", n, err)
	}

	// A folder that does not exist fails the start.
	_, err := b.Exec.Session(t.Context(), &box.SessionParams{Cmd: "true", Cwd: "/nope"})
	var se *session.ServerError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "/nope") {
		t.Errorf("Session in a missing folder: %v, want a *session.ServerError naming it", err)
	}
}

func TestSessionTTY(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	s := openSession(t, b, &box.SessionParams{Argv: []string{"bash", "--norc", "-i"}, TTY: true, Rows: 30, Cols: 90})
	out := collect(s.Stdout)
	if n, err := s.Stderr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Stderr of a TTY session: Read = %d, %v", n, err)
	}
	// Each command computes what it prints, so that the terminal's echo
	// of the command line cannot be mistaken for its output.
	io.WriteString(s.Stdin, "stty size; echo t-$((6*7))\n")
	out.waitFor(t, "30 90\r\nt-42")
	if err := s.Resize(t.Context(), 50, 160); err != nil {
		t.Fatal(err)
	}
	io.WriteString(s.Stdin, "stty size; echo t-$((6*8))\n")
	out.waitFor(t, "50 160\r\nt-48")
	// The PTY is the controlling terminal (/dev/tty opens), and stderr
	// arrives on the same stream.
	io.WriteString(s.Stdin, "echo c-$((1+1)) >/dev/tty; echo e-$((2+3)) >&2; tty | sed 's/[0-9]*$/N/'\n")
	out.waitFor(t, "c-2")
	out.waitFor(t, "e-5")
	out.waitFor(t, "/dev/pts/N")
	if err := s.Resize(t.Context(), 0, 10); err == nil {
		t.Error("Resize(0, 10) accepted")
	}
	io.WriteString(s.Stdin, "exit 3\n")
	mustWait(t, s, 3)

	// Stdin.Close on a terminal types EOF: cat sees the end even after a
	// partial line.
	s = openSession(t, b, &box.SessionParams{Cmd: "cat; echo done-$((1+2))", TTY: true})
	out = collect(s.Stdout)
	io.WriteString(s.Stdin, "partial")
	s.Stdin.Close()
	out.waitFor(t, "done-3")
	mustWait(t, s, 0)

	// Resize needs a terminal.
	s = openSession(t, b, &box.SessionParams{Cmd: "true"})
	if err := s.Resize(t.Context(), 10, 10); err == nil {
		t.Error("Resize of a session without TTY accepted")
	}
}

func TestSessionSignal(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	s := openSession(t, b, &box.SessionParams{Cmd: "sleep 100"})
	if err := s.Signal(t.Context(), "BOGUS"); err == nil || !strings.Contains(err.Error(), "unsupported signal") {
		t.Errorf("Signal(BOGUS) = %v", err)
	}
	if err := s.Signal(t.Context(), "sigint"); err != nil {
		t.Fatal(err)
	}
	// 128+SIGINT, as exec reports a process killed by a signal.
	mustWait(t, s, 130)

	// A shell that runs a child: the whole process group gets it.
	s = openSession(t, b, &box.SessionParams{Cmd: "sleep 100; echo not reached"})
	if err := s.Signal(t.Context(), "KILL"); err != nil {
		t.Fatal(err)
	}
	mustWait(t, s, 137)
}

// TestSessionSignalDuringShellStartup signals sessions while their login
// shell (cmd runs through bash -lc) is still starting, at staggered
// moments: every one must end by the signal. A shell that forked during
// its start-up (the host's /etc/profile ran $(id -u)) swallowed a signal
// that came meanwhile, about one time in fifty, and the command then ran
// on.
func TestSessionSignalDuringShellStartup(t *testing.T) {
	t.Parallel()
	if err := local.CheckIsolation(); err != nil {
		t.Skipf("the box's own /etc/profile needs a sandbox: %v", err)
	}
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	// Nothing of the host's runs in the box's login shell: its profile.d
	// scripts fork (Ubuntu's locale fix does).
	if _, err := os.Stat("/etc/profile.d"); err == nil {
		if r := mustRun(t, b, "test -e /etc/profile.d && echo host-profile.d || true"); r.Stdout != "" {
			t.Errorf("the box's login shell reads the host's /etc/profile.d")
		}
	}
	for i := range 200 {
		s := openSession(t, b, &box.SessionParams{Cmd: "sleep 100"})
		time.Sleep(time.Duration(i%40) * 250 * time.Microsecond)
		if err := s.Signal(t.Context(), "INT"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		code, err := s.Wait(ctx)
		cancel()
		if code != 130 {
			t.Fatalf("session %d, signalled %v after its start: Wait = %d, %v; want 130", i, time.Duration(i%40)*250*time.Microsecond, code, err)
		}
		s.Close()
	}
	// The login shell keeps the box's PATH.
	s := openSession(t, b, &box.SessionParams{Cmd: `echo "$PATH"`})
	out, _ := io.ReadAll(s.Stdout)
	if !strings.HasPrefix(string(out), "/home/boxuser/.local/bin:") {
		t.Errorf("PATH in a login shell = %q, want the box's", out)
	}
	mustWait(t, s, 0)
}

func TestSessionTerminate(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	const loop = `echo ready; while :; do sleep 0.05; done`

	// A process that handles SIGTERM exits on its own within the grace.
	s := openSession(t, b, &box.SessionParams{Cmd: `trap 'echo got-term; exit 7' TERM; ` + loop})
	out := collect(s.Stdout)
	out.waitFor(t, "ready")
	start := time.Now()
	if err := s.Terminate(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	mustWait(t, s, 7)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("graceful exit took %v", d)
	}
	out.waitFor(t, "got-term")

	// One that ignores it is killed after the grace; a second Terminate
	// (asking for no grace) does not count.
	s = openSession(t, b, &box.SessionParams{Cmd: `trap 'echo ignoring' TERM; ` + loop})
	out = collect(s.Stdout)
	out.waitFor(t, "ready")
	const grace = 700 * time.Millisecond
	start = time.Now()
	if err := s.Terminate(t.Context(), grace); err != nil {
		t.Fatal(err)
	}
	if err := s.Terminate(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	mustWait(t, s, 137)
	if d := time.Since(start); d < grace-50*time.Millisecond {
		t.Errorf("killed after %v, before the %v grace", d, grace)
	}
	out.waitFor(t, "ignoring")

	if err := s.Terminate(t.Context(), -time.Second); err == nil {
		t.Error("negative grace accepted")
	}
}

func TestSessionWaitDeadline(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	s := openSession(t, b, &box.SessionParams{Cmd: "cat"})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	code, err := s.Wait(ctx)
	if code != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline = %d, %v", code, err)
	}
	// The session goes on.
	io.WriteString(s.Stdin, "still here\n")
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(s.Stdout, buf, len("still here\n"))
	if err != nil || string(buf[:n]) != "still here\n" {
		t.Fatalf("echo after Wait timed out = %q, %v", buf[:n], err)
	}
	s.Stdin.Close()
	mustWait(t, s, 0)
}

// connRecorder keeps the connections a client dials, to cut them.
type connRecorder struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (r *connRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
	}
	return c, err
}

func (r *connRecorder) cutAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

func TestSessionDisconnectKills(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	// A client whose connections the test can cut without a goodbye.
	rec := &connRecorder{}
	tr := &http.Transport{DialContext: rec.dial}
	defer tr.CloseIdleConnections()
	c, err := srv.Client().Clone(box.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := c.Get(t.Context(), b.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := openSession(t, cb, &box.SessionParams{Cmd: "sleep 4321"})
	// In an interactive shell the foreground job has a process group of
	// its own: the whole terminal session must go.
	shell := openSession(t, cb, &box.SessionParams{Argv: []string{"bash", "--norc", "-i"}, TTY: true})
	out := collect(shell.Stdout)
	io.WriteString(shell.Stdin, "echo go-$((1+1)); sleep 4322\n")
	out.waitFor(t, "go-2")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := mustRun(t, b, "pgrep -f '[s]leep 432[12]' | wc -l")
		if strings.TrimSpace(r.Stdout) == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("before the cut, %s sleeps run, want 2", strings.TrimSpace(r.Stdout))
		}
	}

	rec.cutAll()
	for _, s := range []*session.Session{plain, shell} {
		code, err := s.Wait(waitCtx(t))
		if code != -1 || err == nil || errors.Is(err, session.ErrClosed) {
			t.Errorf("Wait after the connection dropped = %d, %v", code, err)
		}
	}
	pgrepGone(t, b, "[s]leep 432[12]")

	// Close hangs up the same way.
	s := openSession(t, b, &box.SessionParams{Cmd: "sleep 4323"})
	s.Close()
	if code, err := s.Wait(t.Context()); code != -1 || !errors.Is(err, session.ErrClosed) {
		t.Errorf("Wait after Close = %d, %v", code, err)
	}
	if _, err := s.Stdin.Write([]byte("x")); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Stdin.Write after Close = %v", err)
	}
	pgrepGone(t, b, "[s]leep 4323")
}

func TestSessionLargeOutput(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	const size = 100_000_000
	// The box hashes what it sends; the hash arrives on stderr once
	// all of stdout has been written.
	s := openSession(t, b, &box.SessionParams{Cmd: fmt.Sprintf("head -c %d /dev/urandom | tee >(sha256sum >&2); wait $!", size)})
	start := time.Now()
	var stderr []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); stderr, _ = io.ReadAll(s.Stderr) }()
	h := sha256.New()
	n, err := io.Copy(h, s.Stdout)
	wg.Wait()
	if err != nil || n != size {
		t.Fatalf("read %d bytes, %v; want %d", n, err, size)
	}
	mustWait(t, s, 0)
	d := time.Since(start)
	t.Logf("%d MB in %v (%.0f MB/s)", size/1_000_000, d.Round(time.Millisecond), size/1e6/d.Seconds())
	got := hex.EncodeToString(h.Sum(nil))
	if want, _, _ := strings.Cut(string(stderr), " "); got != want {
		t.Errorf("sha256 of stdout = %s, box says %q", got, stderr)
	}
}

func TestSessionConcurrent(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				s, err := b.Exec.Session(t.Context(), &box.SessionParams{Argv: []string{"sh", "-c", `read x; sleep 0.2; echo "got-$x"`}})
				if err != nil {
					return err
				}
				defer s.Close()
				fmt.Fprintf(s.Stdin, "%d\n", i)
				out, err := io.ReadAll(s.Stdout)
				if err != nil {
					return err
				}
				if want := fmt.Sprintf("got-%d\n", i); string(out) != want {
					return fmt.Errorf("session %d: stdout %q, want %q", i, out, want)
				}
				code, err := s.Wait(t.Context())
				if code != 0 || err != nil {
					return fmt.Errorf("session %d: Wait = %d, %v", i, code, err)
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestSessionBadInput(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()

	for _, p := range []*box.SessionParams{nil, {}, {Env: []string{"A=1"}}} {
		if _, err := b.Exec.Session(ctx, p); err == nil || !strings.Contains(err.Error(), "requires Cmd or Argv") {
			t.Errorf("Session(%+v) = %v", p, err)
		}
	}
	if _, err := b.Exec.Session(ctx, &box.SessionParams{Cmd: "true", Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("Env entry without = accepted")
	}

	// Unknown box: 404 at the handshake.
	gone := newBox(t, srv, nil)
	if err := gone.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := gone.Exec.Session(ctx, &box.SessionParams{Cmd: "true"})
	var apiErr *box.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Method != http.MethodGet || !strings.HasSuffix(apiErr.Path, "/exec-session") {
		t.Errorf("Session on a deleted box = %v, want a 404 *box.Error", err)
	}

	// Wrong key: 401 at the handshake. The client's own transport sends
	// the handshake, so this one can change the key of that request only.
	wk := &wrongSessionKey{next: &http.Transport{}}
	defer wk.next.CloseIdleConnections()
	c, err := srv.Client().Clone(box.WithHTTPClient(&http.Client{Transport: wk}), box.WithMaxRetries(0), box.WithTelemetry(true))
	if err != nil {
		t.Fatal(err)
	}
	wb, err := c.Get(ctx, b.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wb.Exec.Session(ctx, &box.SessionParams{Cmd: "true"})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Message != "unauthorized" {
		t.Errorf("Session with a wrong key = %v, want a 401 *box.Error", err)
	}
	// What the SDK put on the handshake before the test changed the key.
	if h := wk.sent; h.Get("X-Box-Api-Key") != srv.APIKey() || !strings.HasPrefix(h.Get("Upstash-Telemetry-Sdk"), "box-go@") || h.Get("Upgrade") != "websocket" {
		t.Errorf("handshake headers = %v", h)
	}

	// Frames a client of this package cannot send, sent raw.
	dial := func() *websocket.Conn {
		t.Helper()
		u := "ws" + strings.TrimPrefix(srv.URL(), "http") + "/v2/box/" + b.ID() + "/exec-session"
		conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"X-Box-Api-Key": {srv.APIKey()}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.CloseNow() })
		return conn
	}
	send := func(conn *websocket.Conn, frame string) {
		t.Helper()
		if err := conn.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	next := func(conn *websocket.Conn) map[string]any {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		_, msg, err := conn.Read(rctx)
		if err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		var f map[string]any
		if err := json.Unmarshal(msg, &f); err != nil {
			t.Fatalf("frame %q: %v", msg, err)
		}
		return f
	}

	// A start without cmd or argv: an error frame before started.
	conn := dial()
	send(conn, `{"type":"start","cwd":"/workspace/home"}`)
	if f := next(conn); f["type"] != "error" || f["message"] != "start requires cmd or argv" {
		t.Errorf("answer to a start without cmd = %v", f)
	}

	// After started: unknown frame types are ignored, an unknown signal
	// is an error frame, which ends the session and its process.
	conn = dial()
	send(conn, `{"type":"hello","future":true}`)
	send(conn, `{"type":"start","cmd":"sleep 4324","cwd":"/workspace/home"}`)
	if f := next(conn); f["type"] != "started" || f["pid"].(float64) <= 0 || !strings.HasPrefix(f["execId"].(string), "exec-") {
		t.Fatalf("answer to start = %v", f)
	}
	send(conn, `{"type":"something-new"}`)
	send(conn, `{"type":"signal","signal":"FOO"}`)
	if f := next(conn); f["type"] != "error" || f["message"] != "unsupported signal: FOO" {
		t.Errorf("answer to an unknown signal = %v", f)
	}
	if _, _, err := conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after the error frame: %v, want a normal close", err)
	}
	pgrepGone(t, b, "[s]leep 4324")
}

// wrongSessionKey sends exec-session handshakes with a wrong API key and
// every other request unchanged. It keeps the handshake's headers as the
// SDK sent them.
type wrongSessionKey struct {
	next *http.Transport
	sent http.Header
}

func (w *wrongSessionKey) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/exec-session") {
		w.sent = r.Header.Clone()
		r = r.Clone(r.Context())
		r.Header.Set("X-Box-Api-Key", "wrong")
	}
	return w.next.RoundTrip(r)
}

func ExampleExec_Session() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	s, err := b.Exec.Session(ctx, &box.SessionParams{Cmd: "sort"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	io.WriteString(s.Stdin, "banana\napple\n")
	s.Stdin.Close() // end of input: sort prints and exits
	out, err := io.ReadAll(s.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	code, err := s.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(out))
	fmt.Println("exit", code)
	// Output:
	// apple
	// banana
	// exit 0
}
