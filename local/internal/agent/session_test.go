//go:build linux

package agent

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/upstash/box-go/local/internal/proc"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/session"
)

// sessionServer serves the agent's exec sessions for a box laid out in a
// temporary directory, without isolation (processes run on this machine).
func sessionServer(t *testing.T) string {
	t.Helper()
	l := sandbox.Tree{Dir: t.TempDir()}
	for _, d := range []string{filepath.Join(l.Workspace(), "home"), l.UserHome(), l.Tmp()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := New(Config{BoxID: "box-test", HostRoot: l.Dir}, nil)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/v2/box/box-test/exec-session"
}

func dialSession(t *testing.T, url string, start *session.Start) *session.Session {
	t.Helper()
	s, err := session.Dial(t.Context(), url, start, nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func waitExit(t *testing.T, s *session.Session) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	code, err := s.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return code
}

func TestSessionTTY(t *testing.T) {
	url := sessionServer(t)
	// The shell leads its own session (field 6 of stat is the session
	// id), /dev/tty opens, the size is the one asked for, TERM is set.
	s := dialSession(t, url, &session.Start{
		Cmd: `read -r pid _ _ _ _ sid _ </proc/$$/stat; [ "$pid" = "$sid" ] && echo leader; ` +
			`echo ctty >/dev/tty; stty size; echo "$TERM" "$BOX_ID" "$X"; pwd`,
		Cwd: "/tmp", TTY: true, Rows: 33, Cols: 99, Env: []string{"X=y"},
	})
	out, _ := io.ReadAll(s.Stdout)
	if code := waitExit(t, s); code != 0 {
		t.Fatalf("exit %d; output %q", code, out)
	}
	want := "leader\r\nctty\r\n33 99\r\nxterm-256color box-test y\r\n"
	if got := string(out); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "/tmp\r\n") {
		t.Errorf("output = %q, want %q then the box's /tmp", got, want)
	}
}

func TestSessionDrainsLeftoverJob(t *testing.T) {
	url := sessionServer(t)
	// A background job keeps the output open after the shell exits: the
	// session still ends, shortly. (With a TTY, read deadlines must work
	// on the PTY for that.)
	for _, tty := range []bool{false, true} {
		s := dialSession(t, url, &session.Start{Cmd: "sleep 30 & echo bye", Cwd: "/workspace/home", TTY: tty})
		start := time.Now()
		out, _ := io.ReadAll(s.Stdout)
		code := waitExit(t, s)
		syscall.Kill(-s.PID(), syscall.SIGKILL)
		want := "bye\n"
		if tty {
			want = "bye\r\n"
		}
		if code != 0 || string(out) != want {
			t.Errorf("tty %v: exit %d, output %q", tty, code, out)
		}
		if d := time.Since(start); d > drainMax+time.Second {
			t.Errorf("tty %v: session took %v to end", tty, d)
		}
	}
}

func TestSessionHangUpKillsTerminalSession(t *testing.T) {
	url := sessionServer(t)
	// An interactive shell puts jobs in process groups of their own;
	// hanging up must end them too.
	s := dialSession(t, url, &session.Start{Argv: []string{"bash", "--norc", "-i"}, Cwd: "/workspace/home", TTY: true})
	io.WriteString(s.Stdin, "sleep 31 & sleep 32 & echo started-$((1+1))\n")
	var seen strings.Builder
	buf := make([]byte, 1024)
	for !strings.Contains(seen.String(), "started-2") {
		n, err := s.Stdout.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("output ended: %v; %q", err, seen.String())
		}
	}
	sid := s.PID()
	if n := len(proc.InSession(sid)); n < 3 {
		t.Fatalf("%d processes in the terminal's session, want the shell and 2 jobs", n)
	}
	s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(proc.InSession(sid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still running after hang-up: %v", proc.InSession(sid))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSessionStartErrors(t *testing.T) {
	url := sessionServer(t)
	for _, st := range []*session.Start{
		{Cmd: "true", Cwd: "/workspace/home/missing"},
		{Argv: []string{"/no/such/program"}, Cwd: "/workspace/home"},
	} {
		_, err := session.Dial(t.Context(), url, st, nil)
		if _, ok := err.(*session.ServerError); !ok {
			t.Errorf("Dial(%+v) = %v, want a *session.ServerError", st, err)
		}
	}
}
