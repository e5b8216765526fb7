package box_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// homeFile is the host path of a file in a box's /workspace/home: tests
// read it there, so that reading it does not wake a paused box.
func homeFile(srv *boxtest.Server, b *box.Box, name string) string {
	return filepath.Join(srv.DataDir(), "boxes", b.ID(), "fs", "workspace", "home", name)
}

// lines returns the lines of a file on the host ("" when it is absent).
func lines(path string) []string {
	raw, _ := os.ReadFile(path)
	return strings.Fields(string(raw))
}

// logText returns the box's log as "source: message" lines.
func logText(t *testing.T, b *box.Box) string {
	t.Helper()
	logs, err := b.Logs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, l := range logs {
		sb.WriteString(l.Source + ": " + l.Message + "\n")
	}
	return sb.String()
}

// initCommandOf returns the init_command of a GET startup answer.
func initCommandOf(body string) string {
	var v struct {
		InitCommand *string `json:"init_command"`
	}
	if json.Unmarshal([]byte(body), &v) != nil || v.InitCommand == nil {
		return "<no init_command>"
	}
	return *v.InitCommand
}

func wantStatus(t *testing.T, b *box.Box, want box.Status) {
	t.Helper()
	if got, err := b.Status(t.Context()); err != nil || got != want {
		t.Fatalf("Status = %q, %v; want %q", got, err, want)
	}
}

// TestInitCommandOncePerStart: a box that is not keep-alive runs its init
// command once at create, in the background. A pause and a resume do not
// run it again: the job it left running is the same process after them.
// Output that job writes after the command's shell exited still reaches
// the log. A command that exits is not started again.
func TestInitCommandOncePerStart(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	// The shell appends a line and exits at once; it leaves a sleeping job
	// (its pid in job.pid) and a job that writes to the output later.
	b := newBox(t, srv, &box.CreateParams{InitCommand: "echo run >> init.log; sleep 3600 >/dev/null 2>&1 & echo $! > job.pid; (sleep 1; echo late-from-job) & echo first-line"})
	if b.Info().KeepAlive {
		t.Fatal("the box is keep-alive")
	}
	waitFor(t, "the init command's job", func() bool { return len(lines(homeFile(srv, b, "job.pid"))) == 1 })
	pid := lines(homeFile(srv, b, "job.pid"))[0]
	alive := func() string {
		return mustRun(t, b, "tr '\\0' ' ' < /proc/"+pid+"/cmdline 2>/dev/null || echo gone").Stdout
	}
	if got := alive(); got != "sleep 3600 " {
		t.Fatalf("the init command's job %s: %q", pid, got)
	}
	if got, err := b.InitCommand(ctx); err != nil || !strings.HasPrefix(got, "echo run") {
		t.Errorf("InitCommand = %q, %v", got, err)
	}

	for range 2 {
		if err := b.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, b, box.StatusPaused)
		if err := b.Resume(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// An exec (which would start a box that needs it) after the resumes.
	if got := alive(); got != "sleep 3600 " {
		t.Errorf("after pause and resume, the init command's job %s: %q", pid, got)
	}
	waitFor(t, "the late output and the end of the command", func() bool {
		return strings.Contains(logText(t, b), "init command exited with status 0")
	})
	text := logText(t, b)
	first, late, exit := strings.Index(text, "user: first-line\n"), strings.Index(text, "user: late-from-job\n"), strings.Index(text, "system: init command exited with status 0\n")
	if first < 0 || late < first || exit < late {
		t.Errorf("log lacks the output in order (first-line, late-from-job, exit):\n%s", text)
	}
	if n := strings.Count(text, "init command started"); n != 1 {
		t.Errorf("init command started %d times:\n%s", n, text)
	}
	if got := lines(homeFile(srv, b, "init.log")); len(got) != 1 {
		t.Errorf("init.log = %q, want one line", got)
	}

	// A command that fails is reported, not started again.
	failing := newBox(t, srv, &box.CreateParams{InitCommand: "echo run >> init.log; exit 3"})
	waitFor(t, "the failing command's end", func() bool {
		return strings.Contains(logText(t, failing), "init command exited with status 3")
	})
	time.Sleep(1500 * time.Millisecond) // longer than the old restart backoff
	if got := lines(homeFile(srv, failing, "init.log")); len(got) != 1 {
		t.Errorf("a failing init command ran %d times", len(got))
	}
}

// TestInitCommandChanges: on a running box a new command starts at once
// and replaces the old one, and a deleted one is stopped. On a paused box
// a change neither wakes it nor runs until the box resumes, and then once.
func TestInitCommandChanges(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, nil)
	mustRun(t, b, "true") // the sandbox runs
	running := func(pattern string) bool {
		return mustRun(t, b, "pgrep -f '"+pattern+"' >/dev/null && echo up || true").Stdout == "up\n"
	}

	if err := b.SetInitCommand(ctx, "echo one >> init.log; exec sleep 31415"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first command", func() bool { return running("sleep 3141[5]") })
	if err := b.SetInitCommand(ctx, "echo two >> init.log; exec sleep 27182"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second command in place of the first", func() bool {
		return running("sleep 2718[2]") && !running("sleep 3141[5]")
	})
	if err := b.DeleteInitCommand(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted command to stop", func() bool { return !running("sleep 2718[2]") })
	if got, err := b.InitCommand(ctx); err != nil || got != "" {
		t.Errorf("after delete = %q, %v", got, err)
	}
	if err := b.SetInitCommand(ctx, ""); err == nil {
		t.Error("empty init command accepted")
	}

	// Paused: the change is stored, the box stays paused and frozen.
	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.SetInitCommand(ctx, "echo three >> init.log"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.InitCommand(ctx); err != nil || got != "echo three >> init.log" {
		t.Errorf("InitCommand of the paused box = %q, %v", got, err)
	}
	time.Sleep(500 * time.Millisecond)
	wantStatus(t, b, box.StatusPaused)
	if got := lines(homeFile(srv, b, "init.log")); strings.Join(got, " ") != "one two" {
		t.Fatalf("while paused init.log = %q", got)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command set while paused", func() bool {
		return strings.Join(lines(homeFile(srv, b, "init.log")), " ") == "one two three"
	})
	// Once: another pause and resume does not run it again.
	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "true")
	time.Sleep(500 * time.Millisecond)
	if got := lines(homeFile(srv, b, "init.log")); strings.Join(got, " ") != "one two three" {
		t.Errorf("after another resume init.log = %q", got)
	}
}

// TestInitCommandAfterRestart: a box whose processes are gone (boxd
// restarted) runs its init command when it starts again, once: on its
// next use, or at a resume when it was paused. A paused box that ran its
// command at create runs it a second time at that resume, because the
// start is fresh, not because a change waits. A command set while the
// box was paused runs once there too.
func TestInitCommandAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	var used, paused, changed string
	t.Run("first", func(t *testing.T) {
		srv := boxtest.NewServer(t, boxtest.WithDataDir(dir))
		b := newBox(t, srv, &box.CreateParams{InitCommand: "echo run >> init.log"})
		p := newBox(t, srv, &box.CreateParams{InitCommand: "echo run >> init.log"})
		for _, b := range []*box.Box{b, p} {
			waitFor(t, "the init command at create", func() bool { return len(lines(homeFile(srv, b, "init.log"))) == 1 })
		}
		used = b.ID()
		if err := p.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		paused = p.ID()
		c := newBox(t, srv, nil)
		mustRun(t, c, "true")
		if err := c.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.SetInitCommand(ctx, "echo run >> init.log"); err != nil {
			t.Fatal(err)
		}
		changed = c.ID()
	})
	srv := boxtest.NewServer(t, boxtest.WithDataDir(dir))
	b, p, c := mustGet(t, srv, used), mustGet(t, srv, paused), mustGet(t, srv, changed)
	count := func(b *box.Box) int { return len(lines(homeFile(srv, b, "init.log"))) }
	if got := [3]int{count(b), count(p), count(c)}; got != [3]int{1, 1, 0} {
		t.Fatalf("before the boxes start again, init.log lines = %v, want [1 1 0]", got)
	}
	if got := mustRun(t, b, "true").ExitCode; got != 0 {
		t.Fatal(got)
	}
	waitFor(t, "the init command in the new sandbox", func() bool { return count(b) == 2 })

	// Nothing but the resume starts the paused boxes.
	for _, p := range []*box.Box{p, c} {
		wantStatus(t, p, box.StatusPaused)
		if err := p.Resume(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the init command at the resume of the box that ran it at create", func() bool { return count(p) == 2 })
	waitFor(t, "the command set while paused, at the resume", func() bool { return count(c) == 1 })

	time.Sleep(500 * time.Millisecond)
	mustRun(t, p, "true")
	mustRun(t, c, "true")
	if got := [3]int{count(b), count(p), count(c)}; got != [3]int{2, 2, 1} {
		t.Errorf("init.log lines = %v, want [2 2 1]", got)
	}
}

// TestInitCommandNotInherited: a box restored from a snapshot runs the
// command given with the restore, or none; never its snapshot's box's.
func TestInitCommandNotInherited(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{InitCommand: "echo original >> init.log"})
	waitFor(t, "the init command", func() bool { return len(lines(homeFile(srv, b, "init.log"))) == 1 })
	snap, err := b.Snapshot(ctx, "with-init")
	if err != nil {
		t.Fatal(err)
	}

	plain, err := srv.Client().FromSnapshot(ctx, snap.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	with, err := srv.Client().FromSnapshot(ctx, snap.ID, &box.CreateParams{InitCommand: "echo restored >> init.log"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := plain.InitCommand(ctx); err != nil || got != "" {
		t.Errorf("restored box's init command = %q, %v; want none", got, err)
	}
	waitFor(t, "the restore's init command", func() bool {
		return strings.Join(lines(homeFile(srv, with, "init.log")), " ") == "original restored"
	})
	mustRun(t, plain, "true")
	time.Sleep(500 * time.Millisecond)
	if got := lines(homeFile(srv, plain, "init.log")); strings.Join(got, " ") != "original" {
		t.Errorf("box restored without a command: init.log = %q", got)
	}
	if got := strings.Join(lines(homeFile(srv, with, "init.log")), " "); got != "original restored" {
		t.Errorf("box restored with a command: init.log = %q", got)
	}
}

// TestInitCommandOutputCap: the first 64 KiB of an init command's output
// go to the log, the line cut there as far as it reaches; the rest is
// read (the command is not blocked: it ends) and dropped, and the log
// says so.
func TestInitCommandOutputCap(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	// 200 lines of 1000 'x' (1001 bytes with the newline), then a marker.
	b := newBox(t, srv, &box.CreateParams{InitCommand: `awk 'BEGIN { s = sprintf("%1000s", ""); gsub(/ /, "x", s); for (i = 0; i < 200; i++) print s }'; echo after-the-cap`})
	waitFor(t, "the command's end", func() bool {
		return strings.Contains(logText(t, b), "init command exited with status 0")
	})
	logs, err := b.Logs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var user []string
	var note bool
	for _, l := range logs {
		switch {
		case l.Source == "user":
			user = append(user, l.Message)
		case strings.Contains(l.Message, "reached 64 KiB"):
			note = true
		}
	}
	full := strings.Repeat("x", 1000)
	// 65536 = 65 lines of 1001 bytes and 471 bytes of the 66th.
	if len(user) != 66 || user[64] != full || user[65] != full[:471] {
		t.Errorf("logged %d lines of output, want 65 of 1000 bytes and one of 471", len(user))
	}
	if strings.Contains(logText(t, b), "after-the-cap") {
		t.Error("output past 64 KiB was logged")
	}
	if !note {
		t.Error("the log does not say that output was dropped")
	}
}

// TestInitCommandWire sends the init-command wire as the newest official
// SDK does: init_command without keep_alive, the startup routes on a box
// that is not keep-alive, paused included, and the bounds.
func TestInitCommandWire(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	resp := rawRequest(t, srv, http.MethodPost, "/v2/box", `{"init_command":"echo wire | tee -a /workspace/home/init.log"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create with init_command and no keep_alive: %d %s", resp.StatusCode, resp.body)
	}
	var created struct {
		ID        string `json:"id"`
		KeepAlive bool   `json:"keep_alive"`
	}
	if err := json.Unmarshal([]byte(resp.body), &created); err != nil || created.ID == "" || created.KeepAlive {
		t.Fatalf("create answered %s (%v)", resp.body, err)
	}
	b := mustGet(t, srv, created.ID)
	path := "/v2/box/" + created.ID + "/startup"
	waitFor(t, "the init command", func() bool { return len(lines(homeFile(srv, b, "init.log"))) == 1 })
	if resp := rawRequest(t, srv, http.MethodGet, path, ""); resp.StatusCode != http.StatusOK || initCommandOf(resp.body) != "echo wire | tee -a /workspace/home/init.log" {
		t.Errorf("GET startup: %d %q", resp.StatusCode, resp.body)
	}

	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+created.ID+"/pause", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("pause: %d %s", resp.StatusCode, resp.body)
	}
	for _, c := range []struct {
		method, body string
		status       int
		want         string
	}{
		{http.MethodPut, `{"init_command":"echo second | tee -a /workspace/home/init.log"}`, http.StatusOK, ""},
		{http.MethodGet, "", http.StatusOK, `"init_command":"echo second | tee -a /workspace/home/init.log"`},
		{http.MethodPut, `{"init_command":""}`, http.StatusBadRequest, "initCommand is required"},
		{http.MethodPut, `{"init_command":"` + strings.Repeat("x", 64<<10+1) + `"}`, http.StatusBadRequest, "at most 65536"},
		{http.MethodPut, `{"init_command":"` + strings.Repeat("x", 64<<10) + `"}`, http.StatusOK, ""},
		{http.MethodDelete, "", http.StatusOK, ""},
		{http.MethodGet, "", http.StatusOK, `{"init_command":""}`},
		{http.MethodPut, `{"init_command":"echo second | tee -a /workspace/home/init.log"}`, http.StatusOK, ""},
	} {
		resp := rawRequest(t, srv, c.method, path, c.body)
		if resp.StatusCode != c.status || !strings.Contains(resp.body, c.want) {
			t.Errorf("%s startup %.40s: %d %s, want %d with %q", c.method, c.body, resp.StatusCode, resp.body, c.status, c.want)
		}
	}
	if resp := rawRequest(t, srv, http.MethodGet, "/v2/box/"+created.ID+"/status", ""); resp.body != `{"status":"paused"}`+"\n" {
		t.Errorf("status after the startup calls: %s", resp.body)
	}
	if got := lines(homeFile(srv, b, "init.log")); len(got) != 1 {
		t.Errorf("the paused box ran a command: init.log = %q", got)
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+created.ID+"/resume", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d %s", resp.StatusCode, resp.body)
	}
	waitFor(t, "the command set while paused", func() bool {
		return strings.Join(lines(homeFile(srv, b, "init.log")), " ") == "wire second"
	})

	long := strings.Repeat("x", 64<<10+1)
	for _, body := range []string{
		`{"init_command":"` + long + `"}`,
		`{"keep_alive":true,"init_command":"` + long + `"}`,
	} {
		if resp := rawRequest(t, srv, http.MethodPost, "/v2/box", body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.body, "init_command is "+strconv.Itoa(len(long))+" bytes long") {
			t.Errorf("create with a long command: %d %.200s", resp.StatusCode, resp.body)
		}
	}
	snap, err := b.Snapshot(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	resp = rawRequest(t, srv, http.MethodPost, "/v2/box/from-snapshot", `{"snapshot_id":"`+snap.ID+`","init_command":"echo restored | tee -a /workspace/home/init.log"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("from-snapshot with init_command and no keep_alive: %d %s", resp.StatusCode, resp.body)
	}
}
