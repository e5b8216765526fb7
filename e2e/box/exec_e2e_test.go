package box_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

func TestExecCommand(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	r := mustRun(t, b, "echo hello && echo oops >&2")
	if r.Status != box.RunCompleted || r.ExitCode != 0 || r.Stdout != "hello\n" || r.Stderr != "oops\n" || r.Result != "hello\n" || r.Type != box.RunTypeCommand || r.ID == "" {
		t.Fatalf("run = %+v", r)
	}

	// A non-zero exit is a result, not an error.
	r = mustRun(t, b, "echo partial; echo broken >&2; exit 3")
	if r.Status != box.RunFailed || r.ExitCode != 3 || r.Result != "broken\n" || r.Stdout != "partial\n" {
		t.Fatalf("failing run = %+v", r)
	}
	r = mustRun(t, b, "echo only-stdout; exit 1")
	if r.Result != "only-stdout\n" {
		t.Errorf("Result without stderr = %q", r.Result)
	}
	r = mustRun(t, b, "kill -9 $$")
	if r.ExitCode != 137 || r.Status != box.RunFailed {
		t.Errorf("killed run = %+v", r)
	}

	runs, err := b.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("Runs = %d records, want 4", len(runs))
	}
	newest := runs[0]
	if newest.Type != "shell" || newest.Status != box.RunFailed || newest.Prompt != "sh -c kill -9 $$" || newest.BoxID != b.ID() || newest.CreatedAt.IsZero() || newest.CompletedAt.IsZero() {
		t.Errorf("newest run record = %+v", newest)
	}
	if runs[3].Prompt != "sh -c echo hello && echo oops >&2" || runs[3].Status != box.RunCompleted {
		t.Errorf("oldest run record = %+v", runs[3])
	}

	if _, err := b.Exec.Command(t.Context(), ""); err == nil {
		t.Error("empty command accepted")
	}
}

func TestExecCode(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	for _, c := range []struct {
		lang box.Lang
		code string
		want string
	}{
		{box.LangPython, "print(1 + 1)", "2\n"},
		{box.LangJS, "console.log(6 * 7)", "42\n"},
		{box.LangTS, "const double = (x: number): number => x * 2;\nconsole.log(double(21))", "42\n"},
		{box.LangPython, "import os; print(os.getcwd())", "/workspace/home\n"},
	} {
		r, err := b.Exec.Code(ctx, &box.CodeParams{Code: c.code, Lang: c.lang})
		if err != nil {
			t.Fatalf("%s: %v", c.lang, err)
		}
		if r.Stdout != c.want || r.Status != box.RunCompleted || r.Type != box.RunTypeCode {
			t.Errorf("%s %q: run = %+v, want stdout %q", c.lang, c.code, r, c.want)
		}
	}

	r, err := b.Exec.Code(ctx, &box.CodeParams{Code: "raise SystemExit('bad input')", Lang: box.LangPython})
	if err != nil || r.Status != box.RunFailed || r.ExitCode != 1 || !strings.Contains(r.Stderr, "bad input") {
		t.Errorf("python exit: %+v, %v", r, err)
	}
	r, err = b.Exec.Code(ctx, &box.CodeParams{Code: "const x: number = ;", Lang: box.LangTS})
	if err != nil || r.Status != box.RunFailed || !strings.Contains(r.Stderr, "TypeScript") {
		t.Errorf("ts syntax error: %+v, %v", r, err)
	}
	start := time.Now()
	r, err = b.Exec.Code(ctx, &box.CodeParams{Code: "import time\ntime.sleep(30)", Lang: box.LangPython, Timeout: 300 * time.Millisecond})
	if err != nil || r.Status != box.RunFailed || !strings.Contains(r.Stderr, "timed out") {
		t.Errorf("timeout: %+v, %v", r, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("timed-out snippet took %v", d)
	}

	for _, p := range []*box.CodeParams{nil, {Lang: box.LangJS}, {Code: "x", Lang: "ruby"}, {Code: "x", Lang: box.LangJS, Timeout: -time.Second}} {
		if _, err := b.Exec.Code(ctx, p); err == nil || box.StatusCode(err) != 0 {
			t.Errorf("Code(%+v) = %v, want a client-side error", p, err)
		}
	}
}

func TestCd(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()

	err := b.Cd(ctx, "sub")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "sub") {
		t.Fatalf("Cd to a missing directory = %v", err)
	}
	if b.Cwd() != box.WorkspaceHome {
		t.Fatalf("Cwd after failed Cd = %q", b.Cwd())
	}
	mustRun(t, b, "mkdir -p sub/deeper && echo in-sub > sub/deeper/f.txt")
	if err := b.Cd(ctx, "sub/./deeper/"); err != nil {
		t.Fatal(err)
	}
	if b.Cwd() != "/workspace/home/sub/deeper" {
		t.Fatalf("Cwd = %q", b.Cwd())
	}
	if got := mustRun(t, b, "pwd; cat f.txt").Stdout; got != "/workspace/home/sub/deeper\nin-sub\n" {
		t.Errorf("pwd in sub = %q", got)
	}
	r, err := b.Exec.Code(ctx, &box.CodeParams{Code: "import os; print(os.getcwd())", Lang: box.LangPython})
	if err != nil || r.Stdout != "/workspace/home/sub/deeper\n" {
		t.Errorf("code cwd = %+v, %v", r, err)
	}
	if got, err := b.Files.ReadText(ctx, "f.txt"); err != nil || got != "in-sub\n" {
		t.Errorf("relative read after cd = %q, %v", got, err)
	}
	if err := b.Cd(ctx, "../.."); err != nil || b.Cwd() != box.WorkspaceHome {
		t.Fatalf("Cd ../.. = %v, cwd %q", err, b.Cwd())
	}
	if err := b.Cd(ctx, "/tmp"); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, b, "pwd").Stdout; got != "/tmp\n" {
		t.Errorf("pwd in /tmp = %q", got)
	}
	if err := b.Cd(ctx, "/home/boxuser"); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, b, "pwd; echo $HOME").Stdout; got != "/home/boxuser\n/home/boxuser\n" {
		t.Errorf("home = %q", got)
	}
	if err := b.Cd(ctx, "../../../.."); err != nil || b.Cwd() != "/" {
		t.Errorf("Cd above / = %v, cwd %q", err, b.Cwd())
	}
}

func TestIsolation(t *testing.T) {
	t.Parallel()
	if err := local.CheckIsolation(); err != nil {
		t.Skipf("no sandbox on this machine: %v", err)
	}
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	r := mustRun(t, b, "id -u; id -un; hostname; ls /home; test -e /etc/shadow && echo has-shadow; test -e /root && echo has-root; cat /proc/1/cmdline | tr '\\0' ' '; echo; ps -e --no-headers | wc -l")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) < 6 {
		t.Fatalf("output = %q (stderr %q)", r.Stdout, r.Stderr)
	}
	if lines[0] != "1000" || lines[1] != "boxuser" || lines[2] != b.ID() || lines[3] != "boxuser" {
		t.Errorf("identity = %q", lines[:4])
	}
	if strings.Contains(r.Stdout, "has-shadow") || strings.Contains(r.Stdout, "has-root") {
		t.Errorf("host files visible: %q", r.Stdout)
	}
	if !strings.Contains(lines[4], "bwrap") {
		t.Errorf("pid 1 in the box is %q, want the sandbox's init", lines[4])
	}
	// bwrap's init, the agent, and this command's sh, ps and wc.
	if n, _ := strconv.Atoi(strings.TrimSpace(lines[5])); n == 0 || n > 8 {
		t.Errorf("%d processes visible: the box should see only its own", n)
	}
	host, _ := os.Hostname()
	if strings.Contains(r.Stdout, host+"\n") && host != b.ID() {
		t.Errorf("box sees the host name %q", host)
	}
	// The box's /etc is its own: no host users.
	if got, err := b.Files.ReadText(t.Context(), "/etc/passwd"); err != nil || strings.Contains(got, "/root:/bin/bash") || !strings.Contains(got, "boxuser:x:1000") {
		t.Errorf("/etc/passwd in box = %q, %v", got, err)
	}
}

func TestBackgroundProcessOutlivesExec(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	// The box runs before the timed exec: what is timed is the exec
	// alone, not a sandbox's start on a busy machine. An exec that waited
	// for its background job, which holds its output open, would take the
	// job's 31337 s.
	mustRun(t, b, "true")
	start := time.Now()
	r := mustRun(t, b, "sleep 31337 & echo started")
	if r.Stdout != "started\n" || time.Since(start) > 20*time.Second {
		t.Fatalf("exec with a background job: %+v after %v", r, time.Since(start))
	}
	if got := mustRun(t, b, "pgrep -f 'sleep 3133[7]' >/dev/null && echo alive").Stdout; got != "alive\n" {
		t.Fatalf("background job gone: %q", got)
	}
	if err := b.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted box's processes to end", func() bool { return !hostHasProcess("sleep 31337") })
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Exec.Command(ctx, "sleep 27182")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec with expired context = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancelled exec returned after %v", d)
	}
	// The abandoned command is killed in the box.
	waitFor(t, "the abandoned command to end", func() bool {
		return mustRun(t, b, "pgrep -f 'sleep 2718[2]' >/dev/null && echo alive; true").Stdout == ""
	})
}

// hostHasProcess reports whether any process on this machine has pattern
// in its command line.
func hostHasProcess(pattern string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), pattern) {
			return true
		}
	}
	return false
}

// TestCdAndAt: Cd refuses what is not a directory, and At gives handles
// with working directories of their own that goroutines move apart.
func TestCdAndAt(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	mustRun(t, b, "echo x > plainfile && mkdir -p a b && ln -s a link")
	err := b.Cd(ctx, "plainfile")
	if !errors.Is(err, syscall.ENOTDIR) || b.Cwd() != box.WorkspaceHome {
		t.Fatalf("Cd to a file = %v, cwd %s", err, b.Cwd())
	}
	if err := b.Cd(ctx, "link"); err != nil || b.Cwd() != box.WorkspaceHome+"/link" {
		t.Fatalf("Cd through a link to a directory = %v, cwd %s", err, b.Cwd())
	}
	if err := b.Cd(ctx, ".."); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, dir := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := b.At(dir)
			for range 10 {
				r, err := h.Exec.Command(ctx, "pwd")
				if err != nil || r.Stdout != box.WorkspaceHome+"/"+dir+"\n" {
					t.Errorf("pwd in the %s handle = %+v, %v", dir, r, err)
					return
				}
				if err := h.Files.WriteText(ctx, "here.txt", dir); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if b.Cwd() != box.WorkspaceHome {
		t.Errorf("At moved the original handle to %s", b.Cwd())
	}
	if got := mustRun(t, b, "cat a/here.txt b/here.txt").Stdout; got != "ab" {
		t.Errorf("files written through the handles: %q", got)
	}
	var n int
	for e, err := range b.AllLogs(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Message != "" {
			n++
		}
	}
	var runs int
	for _, err := range b.AllRuns(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		runs++
	}
	if n == 0 || runs < 20 {
		t.Errorf("AllLogs gave %d entries, AllRuns %d runs", n, runs)
	}
}

// TestGitInAFreshBox commits in a box that nobody configured: the box's
// identity is there, and the host's git and npm configuration (often with
// credentials) are not.
func TestGitInAFreshBox(t *testing.T) {
	t.Parallel()
	if err := local.CheckIsolation(); err != nil {
		t.Skipf("no sandbox on this machine: %v", err)
	}
	srv := boxtest.NewServer(t)
	commit := "git init -q r && cd r && echo x > f && git add -A && git commit -qm first && git log -1 --format='%an <%ae>'"
	b := newBox(t, srv, nil)
	if r := mustRun(t, b, commit); r.Stdout != "Upstash Box <box@upstash.com>\n" {
		t.Errorf("a commit in a fresh box: %+v", r)
	}
	r := mustRun(t, b, "test -e /etc/npmrc && echo has-npmrc; git config --system --list")
	if strings.Contains(r.Stdout, "has-npmrc") || strings.Contains(r.Stdout, "credential") || r.Stdout != "user.name=Upstash Box\nuser.email=box@upstash.com\n" {
		t.Errorf("the box's system configuration: %q", r.Stdout)
	}
	named := newBox(t, srv, &box.CreateParams{Git: &box.GitOptions{UserName: `Ada "the first" Lovelace \o/`, UserEmail: "ada@example.com"}})
	if r := mustRun(t, named, commit); r.Stdout != `Ada "the first" Lovelace \o/ <ada@example.com>`+"\n" {
		t.Errorf("a commit in a box created with an identity: %+v", r)
	}
	if _, err := srv.Client().Create(t.Context(), &box.CreateParams{Git: &box.GitOptions{UserName: "two\nlines"}}); box.StatusCode(err) != 400 && !errors.Is(err, box.ErrInvalid) {
		t.Errorf("an identity of two lines: %v", err)
	}
}
