//go:build linux

package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/session"
)

// serveUnix serves h on a new unix socket and returns its path.
func serveUnix(t testing.TB, h http.Handler) string {
	t.Helper()
	return serveUnixWith(t, &http.Server{Handler: h})
}

// serveUnixWith runs srv on a new unix socket until the test ends and
// returns the socket's path.
func serveUnixWith(t testing.TB, srv *http.Server) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return sock
}

// clientOf returns a client of the agent at sock for box id, whose kept
// connections close with the test.
func clientOf(t testing.TB, id, sock string) *Client {
	c := NewClient(ClientConfig{BoxID: id, Dial: UnixDialer(sock)})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// realAgent serves a real agent, for a box laid out in a temporary
// directory without isolation (its processes run on this machine), on a
// unix socket, and returns a client of it that names the box id and the
// box's tree.
func realAgent(t testing.TB, id string) (*Client, sandbox.Tree) {
	t.Helper()
	h, tree := agentHandler(t)
	return clientOf(t, id, serveUnix(t, h)), tree
}

// agentHandler returns the handler of a real agent for box-test, laid
// out in a temporary directory without isolation, and the box's tree.
func agentHandler(t testing.TB) (http.Handler, sandbox.Tree) {
	t.Helper()
	tree := sandbox.Tree{Dir: t.TempDir()}
	for _, d := range []string{filepath.Join(tree.Workspace(), "home"), tree.UserHome(), tree.Tmp()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := New(Config{BoxID: "box-test", HostRoot: tree.Dir}, nil)
	return a.withInternal(a.Handler()), tree
}

// wantAgentError checks that err is an *Error of status whose message
// holds every one of parts.
func wantAgentError(t *testing.T, what string, err error, status int, parts ...string) {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) {
		t.Errorf("%s: error %v (%T), want an *agent.Error", what, err, err)
		return
	}
	if ae.Status != status || ae.Message == "" || ae.Error() != ae.Message {
		t.Errorf("%s: %+v, want status %d and a message", what, ae, status)
	}
	for _, p := range parts {
		if !strings.Contains(ae.Message, p) {
			t.Errorf("%s: message %q does not mention %q", what, ae.Message, p)
		}
	}
}

// TestClientExec runs commands to their end. An agent that refuses the
// command answers an error, never a result: an exit code read from an
// error answer would be 0.
func TestClientExec(t *testing.T) {
	t.Parallel()
	c, _ := realAgent(t, "box-test")
	ctx := t.Context()

	res, err := c.Exec(ctx, []string{"sh", "-c", `echo out; echo err >&2; pwd; exit 3`}, "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || !strings.HasPrefix(res.Output, "out\n") || res.Stderr != "err\n" || res.CPU < 0 {
		t.Errorf("exec = %+v", res)
	}
	if res, err := c.Exec(ctx, []string{"true"}, ""); err != nil || res.ExitCode != 0 {
		t.Errorf("true = %+v, %v", res, err)
	}

	res, err = c.Exec(ctx, []string{"true"}, "/no/such/folder")
	wantAgentError(t, "exec in a missing folder", err, http.StatusBadRequest, "folder /no/such/folder does not exist")
	if err == nil {
		t.Errorf("exec in a missing folder ran: %+v", res)
	}
	_, err = c.Exec(ctx, nil, "")
	wantAgentError(t, "exec without a command", err, http.StatusBadRequest, "command is required")
}

// TestClientProcess streams a process's output and reads how it ended,
// from the trailers, in Wait.
func TestClientProcess(t *testing.T) {
	t.Parallel()
	c, _ := realAgent(t, "box-test")
	ctx := t.Context()

	p, err := c.Process(ctx, ProcessRequest{
		Argv:  []string{"sh", "-c", `cat; echo "$X"; echo oops >&2; exit 7`},
		Env:   map[string]string{"X": "from env"},
		Stdin: "from stdin\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(p.Output)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "from stdin\nfrom env\n" || st.ExitCode != 7 || st.Stderr != "oops\n" || st.CPU < 0 || st.MemoryPeak < 0 {
		t.Errorf("output %q, state %+v", out, st)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after Wait: %v", err)
	}

	// Wait reads what the caller left, and standard error merged into
	// the output has no tail of its own.
	p, err = c.Process(ctx, ProcessRequest{Argv: []string{"sh", "-c", `seq 1 100000; echo merged >&2`}, MergeStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || st.ExitCode != 0 || st.Stderr != "" {
		t.Errorf("unread process: %+v, %v", st, err)
	}

	// Refused before it starts: an error of Process.
	_, err = c.Process(ctx, ProcessRequest{Argv: []string{"true"}, Folder: "/no/such/folder"})
	wantAgentError(t, "process in a missing folder", err, http.StatusBadRequest, "folder /no/such/folder does not exist")

	// Accepted, but it cannot start: an error of Wait, after the output.
	p, err = c.Process(ctx, ProcessRequest{Argv: []string{"no-such-program-" + strconv.Itoa(os.Getpid())}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Wait()
	wantAgentError(t, "a program that is not there", err, http.StatusInternalServerError, "no-such-program")
}

// TestClientFiles writes, reads and lists files; paths are the box's.
func TestClientFiles(t *testing.T) {
	t.Parallel()
	c, tree := realAgent(t, "box-test")
	ctx := t.Context()

	// More than one buffer of the pipe that feeds the upload.
	data := bytes.Repeat([]byte("0123456789abcdef"), 256<<10)
	if err := c.WriteFile(ctx, "dir/sub/f.bin", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(tree.Workspace(), "home/dir/sub/f.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("written file: %d bytes, %v", len(got), err)
	}
	var buf bytes.Buffer
	if n, err := c.ReadFile(ctx, "/workspace/home/dir/sub/f.bin", &buf, int64(len(data))); err != nil || n != int64(len(data)) || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("ReadFile: %d, %v", n, err)
	}
	buf.Reset()
	if _, err := c.ReadFile(ctx, "dir/sub/f.bin", &buf, int64(len(data))-1); !errors.Is(err, ErrTooLarge) || buf.Len() != 0 {
		t.Errorf("ReadFile past its limit: %v, %d bytes copied", err, buf.Len())
	}

	_, err := c.ReadFile(ctx, "/workspace/home/missing", io.Discard, 10)
	wantAgentError(t, "read a missing file", err, http.StatusNotFound, "/workspace/home/missing")
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		t.Errorf("a missing file's error %v does not match fs.ErrNotExist alone", err)
	}
	_, err = c.ReadFile(ctx, "dir", io.Discard, 10)
	wantAgentError(t, "read a directory", err, http.StatusBadRequest, "is a directory")

	err = c.WriteFile(ctx, "dir", strings.NewReader("x"))
	wantAgentError(t, "write over a directory", err, http.StatusBadRequest, "is a directory")

	files, err := c.ListFiles(ctx, "dir/sub")
	if err != nil || len(files) != 1 || files[0].Name != "f.bin" || files[0].Size != int64(len(data)) {
		t.Errorf("ListFiles = %+v, %v", files, err)
	}
	_, err = c.ListFiles(ctx, "/workspace/home/missing")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("list a missing folder: %v", err)
	}
}

// TestClientEscapesBoxID: the box id in the paths of the public routes is
// escaped, so an id with characters that mean something in a URL reaches
// the same routes as any other.
func TestClientEscapesBoxID(t *testing.T) {
	t.Parallel()
	c, _ := realAgent(t, "a/b?c=d#e f%")
	ctx := t.Context()

	res, err := c.Exec(ctx, []string{"sh", "-c", "exit 3"}, "")
	if err != nil || res.ExitCode != 3 {
		t.Errorf("Exec = %+v, %v", res, err)
	}
	if err := c.WriteFile(ctx, "f.txt", strings.NewReader("hello")); err != nil {
		t.Errorf("WriteFile: %v", err)
	}
	var buf bytes.Buffer
	if _, err := c.ReadFile(ctx, "f.txt", &buf, 100); err != nil || buf.String() != "hello" {
		t.Errorf("ReadFile = %q, %v", buf.String(), err)
	}
	if files, err := c.ListFiles(ctx, ""); err != nil || len(files) != 1 {
		t.Errorf("ListFiles = %+v, %v", files, err)
	}
	s, err := c.Session(ctx, &session.Start{Argv: []string{"sh", "-c", "echo hi; exit 4"}, Cwd: "/tmp"})
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	defer s.Close()
	out, _ := io.ReadAll(s.Stdout)
	if code, err := s.Wait(ctx); err != nil || code != 4 || string(out) != "hi\n" {
		t.Errorf("session: %q, exit %d, %v", out, code, err)
	}

	if _, err := NewClient(ClientConfig{Dial: UnixDialer("/nowhere")}).Exec(ctx, []string{"true"}, ""); err == nil {
		t.Error("a client without a box id sent a request")
	}
}

// TestClientErrorAnswers: whatever an agent's error answer holds (the
// API's error body, another body, nothing), every call fails with an
// *Error of its status and a message, never an empty one.
func TestClientErrorAnswers(t *testing.T) {
	t.Parallel()
	answers := map[string]func(w http.ResponseWriter){
		"empty": func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) },
		"text": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "upstream gone\n")
		},
		"blank error": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"error": ""}`)
		},
		"json": func(w http.ResponseWriter) { writeError(w, http.StatusBadGateway, "the agent's own words") },
		"long text": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, strings.Repeat("x", 100<<10))
		},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sock := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				answer(w)
			}))
			c := clientOf(t, "box-test", sock)
			ctx := t.Context()
			want := "the box's agent answered 502 Bad Gateway"
			switch name {
			case "text":
				want += ": upstream gone"
			case "json":
				want = "the agent's own words"
			case "long text":
				want += ": " + strings.Repeat("x", maxQuoted) + "..."
			}
			calls := map[string]func() error{
				"Exec":      func() error { _, err := c.Exec(ctx, []string{"true"}, ""); return err },
				"Process":   func() error { _, err := c.Process(ctx, ProcessRequest{Argv: []string{"true"}}); return err },
				"ReadFile":  func() error { _, err := c.ReadFile(ctx, "f", io.Discard, 10); return err },
				"WriteFile": func() error { return c.WriteFile(ctx, "f", strings.NewReader("x")) },
				"ListFiles": func() error { _, err := c.ListFiles(ctx, ""); return err },
				"DialPort":  func() error { _, err := c.DialPort(ctx, 1); return err },
				"Health":    func() error { return c.Health(ctx) },
			}
			for call, f := range calls {
				err := f()
				wantAgentError(t, call, err, http.StatusBadGateway)
				if err != nil && err.Error() != want {
					t.Errorf("%s: message %q, want %q", call, err.Error(), want)
				}
			}
		})
	}
}

// TestClientTransportErrors: a call that gets no answer fails with the
// dialer's error, wrapped, not an *Error.
func TestClientTransportErrors(t *testing.T) {
	t.Parallel()
	gone := errors.New("the box has gone")
	c := NewClient(ClientConfig{BoxID: "box-test", Dial: func(context.Context) (net.Conn, error) { return nil, gone }})
	_, err := c.Exec(t.Context(), []string{"true"}, "")
	if !errors.Is(err, gone) || errors.As(err, new(*Error)) {
		t.Errorf("Exec = %v", err)
	}
	if _, err := c.DialPort(t.Context(), 80); !errors.Is(err, gone) {
		t.Errorf("DialPort = %v", err)
	}
}

// TestClientHealth asks a real agent whether it answers, several times over
// the one connection the client keeps; an agent that never answers fails
// the question once its context ends.
func TestClientHealth(t *testing.T) {
	t.Parallel()
	_, tree := realAgent(t, "box-test")
	a := New(Config{BoxID: "box-test", HostRoot: tree.Dir}, nil)
	sock := serveUnix(t, a.withInternal(a.Handler()))
	var dials atomic.Int32
	c := NewClient(ClientConfig{BoxID: "box-test", Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return UnixDialer(sock)(ctx)
	}})
	t.Cleanup(c.CloseIdleConnections)
	for range 3 {
		if err := c.Health(t.Context()); err != nil {
			t.Fatalf("Health = %v", err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("three questions dialled %d times, want once", n)
	}

	hung := filepath.Join(t.TempDir(), "hung.sock")
	l, err := net.Listen("unix", hung)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan []net.Conn, 1)
	go func() {
		var conns []net.Conn
		defer func() { accepted <- conns }()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
		}
	}()
	defer func() {
		l.Close()
		for _, conn := range <-accepted {
			conn.Close()
		}
	}()
	hc := clientOf(t, "box-test", hung)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = hc.Health(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*Error)) {
		t.Errorf("a hung agent: Health = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a hung agent: Health took %s", d)
	}
}

// TestClientDialPort reaches a port in the box through the agent.
func TestClientDialPort(t *testing.T) {
	t.Parallel()
	c, _ := realAgent(t, "box-test")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(conn, conn)
	}()
	port := l.Addr().(*net.TCPAddr).Port
	conn, err := c.DialPort(t.Context(), port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "ping" {
		t.Errorf("echo = %q, %v", got, err)
	}
	conn.Close()
	<-served

	_, err = c.DialPort(t.Context(), closedPort(t))
	wantAgentError(t, "a port nobody listens on", err, http.StatusBadGateway, "nothing is listening")
	if !errors.Is(err, ErrNotListening) {
		t.Errorf("a port nobody listens on: %v does not match ErrNotListening", err)
	}
	_, err = c.DialPort(t.Context(), 0)
	if err == nil || errors.Is(err, ErrNotListening) || !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("port 0: %v, want an invalid argument that is not ErrNotListening", err)
	}
}

// TestErrorKinds checks the kinds the agent's answers have: a refusal
// keeps its kind, a full disk is ErrNoSpace, any other failure is the
// agent's own (ErrUpstream); and each matches no other kind.
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	kinds := []error{errdefs.ErrInvalidArgument, errdefs.ErrNotFound, errdefs.ErrUnauthenticated, errdefs.ErrPermission,
		errdefs.ErrConflict, errdefs.ErrTooLarge, errdefs.ErrNotImplemented, errdefs.ErrMissingDependency,
		errdefs.ErrUpstream, errdefs.ErrUpstreamTimeout, errdefs.ErrUnavailable, errdefs.ErrNoSpace}
	for status, want := range map[int]error{
		http.StatusBadRequest:            errdefs.ErrInvalidArgument,
		http.StatusUnprocessableEntity:   errdefs.ErrInvalidArgument,
		http.StatusNotFound:              errdefs.ErrNotFound,
		http.StatusForbidden:             errdefs.ErrPermission,
		http.StatusConflict:              errdefs.ErrConflict,
		http.StatusRequestEntityTooLarge: errdefs.ErrTooLarge,
		http.StatusInsufficientStorage:   errdefs.ErrNoSpace,
		http.StatusInternalServerError:   errdefs.ErrUpstream,
		http.StatusBadGateway:            errdefs.ErrUpstream,
		http.StatusServiceUnavailable:    errdefs.ErrUpstream,
	} {
		err := fmt.Errorf("doing it: %w", &Error{Status: status, Message: "no"})
		var ae *Error
		if !errors.As(err, &ae) || ae.Kind() != want {
			t.Errorf("%d: kind %v, want %v", status, ae.Kind(), want)
		}
		for _, k := range kinds {
			if got := errors.Is(err, k); got != (k == want) {
				t.Errorf("%d: errors.Is(%v) = %v", status, k, got)
			}
		}
		if got := errors.Is(err, fs.ErrNotExist); got != (status == http.StatusNotFound) {
			t.Errorf("%d: errors.Is(fs.ErrNotExist) = %v", status, got)
		}
		if got := errors.Is(err, fs.ErrPermission); got != (status == http.StatusForbidden) {
			t.Errorf("%d: errors.Is(fs.ErrPermission) = %v", status, got)
		}
		if got := errors.Is(err, ErrNotListening); got != (status == http.StatusBadGateway) {
			t.Errorf("%d: errors.Is(ErrNotListening) = %v", status, got)
		}
	}
}

// closedPort returns a loopback port on which nothing listens, nor can
// while the test runs: it is bound, without SO_REUSEADDR and never
// listening, on 127.0.0.1 and, where there is one, on ::1.
func closedPort(t *testing.T) int {
	t.Helper()
	bind := func(family int, sa syscall.Sockaddr) (int, error) {
		fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		if err := syscall.Bind(fd, sa); err != nil {
			syscall.Close(fd)
			return -1, err
		}
		t.Cleanup(func() { syscall.Close(fd) })
		return fd, nil
	}
	for range 20 {
		fd, err := bind(syscall.AF_INET, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		port := sa.(*syscall.SockaddrInet4).Port
		_, err = bind(syscall.AF_INET6, &syscall.SockaddrInet6{Addr: [16]byte{15: 1}, Port: port})
		if err == nil || errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT) {
			return port
		}
	}
	t.Fatal("no loopback port free on both IPv4 and IPv6")
	return 0
}
