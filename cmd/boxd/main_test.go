//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/upstash/box-go/internal/ocitest"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/internal/browsertest"
	"github.com/upstash/box-go/local"
)

// boxdBin is the boxd binary built by TestMain. The tests run it as a
// separate program, as users do, so that it can be killed.
var boxdBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "boxd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// A sandboxed box's agent is this binary re-executed: the box user
	// must be able to reach it.
	_ = os.Chmod(dir, 0o755)
	boxdBin = filepath.Join(dir, "boxd")
	gobin, err := goTool()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Static, as a release is: boxd's agent then runs in a runtime image
	// as it is (the tests of package local run the dynamic test binary,
	// through the host's loader).
	build := exec.Command(gobin, "build", "-o", boxdBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building boxd: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// goTool finds the go command: the one on PATH, else the one of the
// toolchain that built this test.
func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no go command on PATH or in %s", runtime.GOROOT())
	}
	return p, nil
}

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// daemon is one boxd process.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *lockedBuffer
	lines  chan string   // stdout, line by line; closed at EOF
	exited chan struct{} // closed once the process has been waited for
	state  *os.ProcessState

	mu     sync.Mutex
	stdout []string

	url string // from the listen line, once it is printed
}

var listenRE = regexp.MustCompile(`^boxd listening on (http://127\.0\.0\.1:[0-9]+) \(data (.+), isolation (bwrap|none)\)$`)

// launch starts boxd with args and env (nil env: this process's
// environment without UPSTASH_BOX_API_KEY) in its own process group, and
// makes sure t.Cleanup kills the group.
func launch(t *testing.T, env []string, args ...string) *daemon {
	t.Helper()
	if env == nil {
		env = environWithout("UPSTASH_BOX_API_KEY")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "-root") {
		// Boxes run on the host's /usr unless the test is of images:
		// there is no registry to pull the default images from.
		args = append([]string{"-root", "host"}, args...)
	}
	cmd := exec.Command(boxdBin, args...)
	cmd.Env = env
	cmd.Stdout = pw
	d := &daemon{t: t, cmd: cmd, stderr: &lockedBuffer{}, lines: make(chan string, 100), exited: make(chan struct{})}
	cmd.Stderr = d.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		t.Fatalf("start boxd: %v", err)
	}
	pw.Close()
	go func() {
		defer close(d.lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.mu.Lock()
			d.stdout = append(d.stdout, sc.Text())
			d.mu.Unlock()
			d.lines <- sc.Text()
		}
		// Keep draining so that boxd never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		_ = cmd.Wait()
		d.state = cmd.ProcessState
		close(d.exited)
	}()
	t.Cleanup(func() {
		d.kill()
		if t.Failed() {
			t.Logf("boxd %v stdout:\n%s\nstderr:\n%s", args, strings.Join(d.stdoutLines(), "\n"), d.stderr.String())
		}
	})
	return d
}

// start launches boxd and waits for its listen line.
func start(t *testing.T, env []string, args ...string) *daemon {
	t.Helper()
	d := launch(t, env, args...)
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				<-d.exited
				t.Fatalf("boxd exited before listening (%v): %s", d.state, d.stderr.String())
			}
			if m := listenRE.FindStringSubmatch(line); m != nil {
				d.url = m[1]
				return d
			}
		case <-timeout:
			t.Fatalf("boxd printed no listen line within 60s; stdout %q, stderr %s", d.stdoutLines(), d.stderr.String())
		}
	}
}

func (d *daemon) stdoutLines() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.stdout)
}

// waitExit waits up to timeout for boxd to exit and returns how it ended.
func (d *daemon) waitExit(timeout time.Duration) *os.ProcessState {
	d.t.Helper()
	select {
	case <-d.exited:
		return d.state
	case <-time.After(timeout):
		d.t.Fatalf("boxd still running after %v; stderr: %s", timeout, d.stderr.String())
		return nil
	}
}

// kill SIGKILLs boxd's whole process group and waits for boxd.
func (d *daemon) kill() {
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.t.Errorf("boxd (pid %d) did not exit 10s after SIGKILL", d.cmd.Process.Pid)
	}
}

func (d *daemon) client(t *testing.T, key string) *box.Client {
	t.Helper()
	c, err := box.NewClient(box.WithAPIKey(key), box.WithBaseURL(d.url), box.WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func environWithout(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func newKey() string { return "box_test_" + hex.EncodeToString(randBytes(16)) }

// marker returns a sleep duration that no other process uses, so that
// /proc can tell whether that sleep is alive.
func marker() string {
	b := randBytes(3)
	return fmt.Sprintf("3000.%07d", (int(b[0])<<16|int(b[1])<<8|int(b[2]))%10000000)
}

// procsWith returns the pids of the processes, other than this one, whose
// command line contains s.
func procsWith(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(raw), "\x00", " "), s) {
			out = append(out, pid)
		}
	}
	return out
}

func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// killLeftovers makes sure no process matching one of the strings
// outlives the test, whatever the test concluded.
func killLeftovers(t *testing.T, patterns ...string) {
	t.Cleanup(func() {
		for _, p := range patterns {
			for _, pid := range procsWith(p) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// TestKill9KeepsBoxesAndWrites SIGKILLs boxd with a box running and
// checks that a new boxd on the same data directory has the box and every
// write boxd acknowledged, and that the killed boxd's sandbox died with it.
func TestKill9KeepsBoxesAndWrites(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	data := t.TempDir()
	key := newKey()
	bg := marker()
	killLeftovers(t, "sleep "+bg)
	ctx := t.Context()

	d1 := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key)
	c1 := d1.client(t, key)
	b, err := c1.Create(ctx, &box.CreateParams{Name: "survivor", Labels: []string{"kill9"}, Env: map[string]string{"GREETING": "still here"}})
	if err != nil {
		t.Fatal(err)
	}
	id := b.ID()
	killLeftovers(t, "BOX_ID "+id)

	// Every acknowledged write, by box path.
	want := map[string][]byte{}
	write := func(p string, data []byte) {
		t.Helper()
		if err := b.Files.Write(ctx, p, data); err != nil {
			t.Fatalf("Write %s: %v", p, err)
		}
		want[p] = data
	}
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	write("/workspace/home/notes.txt", []byte("first version\n"))
	write("/workspace/home/notes.txt", []byte("second version, acknowledged last\n"))
	write("/workspace/home/deep/dir/tree/leaf.txt", []byte("héllo wörld ✓\n"))
	write("/workspace/home/bin/all-bytes.bin", allBytes)
	write("/workspace/home/bin/random.bin", randBytes(300<<10))
	write("/workspace/home/empty.txt", nil)
	write("/home/boxuser/.config/app.json", []byte(`{"k": 1}`))
	write("/tmp/scratch.bin", randBytes(1000))
	if err := b.Files.WriteText(ctx, "text.txt", "plain text write"); err != nil {
		t.Fatal(err)
	}
	want["/workspace/home/text.txt"] = []byte("plain text write")
	upload := randBytes(2 << 20)
	uploadFile := filepath.Join(t.TempDir(), "upload.bin")
	if err := os.WriteFile(uploadFile, upload, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Files.Upload(ctx, []box.UploadFile{{LocalPath: uploadFile, Destination: "uploads/upload.bin"}}); err != nil {
		t.Fatal(err)
	}
	want["/workspace/home/uploads/upload.bin"] = upload
	r, err := b.Exec.Command(ctx, "echo from-exec > made-by-exec.txt && sleep "+bg+" >/dev/null 2>&1 &")
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec = %+v, %v", r, err)
	}
	want["/workspace/home/made-by-exec.txt"] = []byte("from-exec\n")
	if !waitFor(5*time.Second, func() bool { return len(procsWith("sleep "+bg)) > 0 }) {
		t.Fatal("background sleep in the box did not start")
	}
	if len(procsWith("BOX_ID "+id)) == 0 {
		t.Fatal("no sandbox process found for the box before the kill: the checks below would prove nothing")
	}

	// kill -9 boxd and its process group. The sandboxes are in groups of
	// their own: they must die because their parent did.
	if err := syscall.Kill(-d1.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := d1.waitExit(10 * time.Second)
	if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("boxd ended with %v, want killed by SIGKILL", st)
	}
	if !waitFor(5*time.Second, func() bool { return len(procsWith("BOX_ID "+id))+len(procsWith("sleep "+bg)) == 0 }) {
		t.Fatalf("processes of the killed boxd's box survive: sandbox %v, background sleep %v", procsWith("BOX_ID "+id), procsWith("sleep "+bg))
	}

	d2 := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key)
	c2 := d2.client(t, key)
	got, err := c2.Get(ctx, id, nil)
	if err != nil {
		t.Fatalf("Get by id after restart: %v", err)
	}
	if info := got.Info(); info.Name != "survivor" || !slices.Equal(info.Labels, []string{"kill9"}) {
		t.Errorf("box after restart = %+v", info)
	}
	byName, err := c2.GetByName(ctx, "survivor", nil)
	if err != nil || byName.ID() != id {
		t.Fatalf("GetByName after restart = %v, %v", byName, err)
	}
	list, err := c2.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != id || list[0].Name != "survivor" {
		t.Errorf("List after restart = %+v", list)
	}
	for p, data := range want {
		back, err := got.Files.Read(ctx, p)
		if err != nil {
			t.Errorf("Read %s after restart: %v", p, err)
			continue
		}
		if !bytes.Equal(back, data) {
			t.Errorf("%s after restart: %d bytes, want %d (equal %v)", p, len(back), len(data), bytes.Equal(back, data))
		}
	}

	// The box runs again: its sandbox is started on demand.
	r, err = got.Exec.Command(ctx, `cat notes.txt; echo "$GREETING"; hostname; id -u; ls /workspace/home`)
	if err != nil {
		t.Fatalf("exec after restart: %v", err)
	}
	wantOut := "second version, acknowledged last\nstill here\nsurvivor\n1000\nbin\ndeep\nempty.txt\nmade-by-exec.txt\nnotes.txt\ntext.txt\nuploads\n"
	if r.ExitCode != 0 || r.Stdout != wantOut {
		t.Errorf("exec after restart = %+v, want stdout %q", r, wantOut)
	}
	if runs, err := got.Runs(ctx); err != nil || len(runs) != 2 {
		t.Errorf("runs after restart = %d, %v; want the one before the kill and the one after", len(runs), err)
	}
	// The database is writable again: a new box, and the old one deleted.
	nb, err := c2.Create(ctx, &box.CreateParams{Name: "after-restart"})
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.GetByName(ctx, "survivor", nil); !box.IsNotFound(err) {
		t.Errorf("GetByName of the deleted box: %v", err)
	}
	if r, err := nb.Exec.Command(ctx, "echo ok"); err != nil || r.Stdout != "ok\n" {
		t.Errorf("exec in a new box = %+v, %v", r, err)
	}

	// A graceful stop ends every sandbox too.
	if err := d2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := d2.waitExit(15 * time.Second); !st.Success() {
		t.Errorf("boxd after SIGTERM: %v", st)
	}
	if !waitFor(5*time.Second, func() bool { return len(procsWith("BOX_ID "+nb.ID())) == 0 }) {
		t.Errorf("sandboxes left after SIGTERM: %v", procsWith("BOX_ID "+nb.ID()))
	}
}

// TestKill9KeepsAcknowledgedRuns SIGKILLs boxd while execs run in one of
// its boxes, many at once (their run records are committed together),
// and checks that a new boxd on the same data directory has the run of
// every exec boxd answered, with its command and outcome, once each.
func TestKill9KeepsAcknowledgedRuns(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	data := t.TempDir()
	key := newKey()
	ctx := t.Context()

	d1 := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key)
	c1, err := box.NewClient(box.WithAPIKey(key), box.WithBaseURL(d1.url), box.WithTelemetry(false), box.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c1.Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := b.ID()
	killLeftovers(t, "BOX_ID "+id)

	// Each writer runs execs until boxd is gone; every answered exec is
	// noted with the status its run must have. Every seventh exits 3.
	const writers, killAfter = 8, 60
	var mu sync.Mutex
	acked := map[string]box.RunStatus{}
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				cmd, want := fmt.Sprintf("echo acked-%d-%d", w, i), box.RunCompleted
				if i%7 == 6 {
					cmd, want = fmt.Sprintf("echo acked-%d-%d; exit 3", w, i), box.RunFailed
				}
				r, err := b.Exec.Command(ctx, cmd)
				if err != nil {
					select {
					case <-killed:
						return // boxd is gone
					default:
						t.Errorf("exec %q before the kill: %v", cmd, err)
						return
					}
				}
				if r.Status != want {
					t.Errorf("exec %q = %+v, want %s", cmd, r, want)
				}
				mu.Lock()
				acked["sh -c "+cmd] = want
				n := len(acked)
				mu.Unlock()
				if n >= killAfter {
					once.Do(func() {
						close(killed)
						_ = syscall.Kill(-d1.cmd.Process.Pid, syscall.SIGKILL)
					})
				}
			}
		})
	}
	wg.Wait()
	st := d1.waitExit(10 * time.Second)
	if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("boxd ended with %v, want killed by SIGKILL", st)
	}

	d2 := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key)
	got, err := d2.client(t, key).Get(ctx, id, nil)
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	runs, err := got.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, r := range runs {
		stored[r.Prompt]++
		if want, ok := acked[r.Prompt]; ok && r.Status != want {
			t.Errorf("run %q after restart: status %s, want %s", r.Prompt, r.Status, want)
		}
	}
	if len(acked) < killAfter {
		t.Fatalf("%d execs answered before the kill, want at least %d", len(acked), killAfter)
	}
	for p := range acked {
		if stored[p] != 1 {
			t.Errorf("run of answered exec %q stored %d times after restart, want once", p, stored[p])
		}
	}
	t.Logf("%d execs answered, %d runs stored", len(acked), len(runs))
}

// TestKill9WhilePaused SIGKILLs boxd while one of its boxes is paused.
// A frozen process cannot act on the SIGKILL its parent's death sends it,
// so the box's processes outlive boxd while frozen; the next boxd on the
// same data directory must end them at start, and the box must run again.
func TestKill9WhilePaused(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	data := t.TempDir()
	key := newKey()
	bg := marker()
	killLeftovers(t, "sleep "+bg)
	ctx := t.Context()

	d1 := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key)
	b, err := d1.client(t, key).Create(ctx, &box.CreateParams{Name: "sleeper"})
	if err != nil {
		t.Fatal(err)
	}
	// Whatever happens, leave no frozen process behind: thaw this box's
	// freezer group (and only this one) so that the kills above work.
	t.Cleanup(func() { thawFreezer(b.ID()) })
	killLeftovers(t, "BOX_ID "+b.ID())
	if err := b.Files.WriteText(ctx, "kept.txt", "kept"); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Exec.Command(ctx, "sleep "+bg+" >/dev/null 2>&1 &"); err != nil || r.ExitCode != 0 {
		t.Fatalf("exec = %+v, %v", r, err)
	}
	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-d1.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d1.waitExit(10 * time.Second)

	d2 := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key)
	if !waitFor(5*time.Second, func() bool { return len(procsWith("sleep "+bg)) == 0 }) {
		t.Errorf("after boxd restarted, the killed boxd's paused processes survive: sandbox %v, background sleep %v", procsWith("BOX_ID "+b.ID()), procsWith("sleep "+bg))
	}
	b2, err := d2.client(t, key).Get(ctx, b.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := b2.Exec.Command(cctx, "cat kept.txt")
	if err != nil || r.Stdout != "kept" {
		st, _ := b2.Status(ctx)
		t.Fatalf("exec in the formerly paused box after restart = %+v, %v (box status %q)", r, err, st)
	}
}

// thawFreezer thaws box id's cgroup v1 freezer group, if there is one,
// and kills what is in it.
func thawFreezer(id string) {
	dir := filepath.Join("/sys/fs/cgroup/freezer/boxd", id)
	if _, err := os.Stat(dir); err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0o644)
	waitFor(5*time.Second, func() bool {
		raw, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		pids := strings.Fields(string(raw))
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return len(pids) == 0
	})
	_ = os.Remove(dir)
}

func TestFlags(t *testing.T) {
	t.Parallel()

	t.Run("bogus isolation", func(t *testing.T) {
		t.Parallel()
		d := launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", newKey(), "-isolation", "bogus")
		st := d.waitExit(10 * time.Second)
		if st.Success() {
			t.Fatal("boxd -isolation bogus exited 0")
		}
		msg := d.stderr.String()
		for _, part := range []string{`unknown isolation "bogus"`, `"bwrap"`, `"none"`} {
			if !strings.Contains(msg, part) {
				t.Errorf("stderr %q does not mention %s", msg, part)
			}
		}
		if out := d.stdoutLines(); len(out) != 0 {
			t.Errorf("stdout = %q, want nothing", out)
		}
	})

	t.Run("unknown flag", func(t *testing.T) {
		t.Parallel()
		d := launch(t, nil, "-data", t.TempDir(), "-no-such-flag")
		if st := d.waitExit(10 * time.Second); st.ExitCode() != 2 {
			t.Errorf("exit = %v, want 2", st)
		}
		if !strings.Contains(d.stderr.String(), "-no-such-flag") {
			t.Errorf("stderr = %q", d.stderr.String())
		}
	})

	t.Run("generated key", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		data := t.TempDir()
		d := start(t, environWithout("UPSTASH_BOX_API_KEY"), "-addr", "127.0.0.1:0", "-data", data)
		key := ""
		keyRE := regexp.MustCompile(`^API key: (box_local_[0-9a-f]{32}) \(kept in .*\)$`)
		timeout := time.After(10 * time.Second)
		for key == "" {
			select {
			case line, ok := <-d.lines:
				if !ok {
					t.Fatalf("stdout ended without the key: %q", d.stdoutLines())
				}
				if m := keyRE.FindStringSubmatch(line); m != nil {
					key = m[1]
				}
			case <-timeout:
				t.Fatalf("no API key printed: %q", d.stdoutLines())
			}
		}
		waitFor(5*time.Second, func() bool { return len(d.stdoutLines()) >= 4 })
		want := []string{
			fmt.Sprintf("boxd listening on %s (data %s, isolation bwrap)", d.url, data),
			"boxes run on the host's /usr (root host): their runtime is recorded, not installed",
			"API key: " + key + " (kept in " + filepath.Join(data, "api-key") + ")",
			"export UPSTASH_BOX_BASE_URL=" + d.url,
		}
		if got := d.stdoutLines(); !slices.Equal(got, want) {
			t.Errorf("stdout = %q, want %q", got, want)
		}
		if _, err := d.client(t, key).List(t.Context(), nil); err != nil {
			t.Errorf("List with the printed key: %v", err)
		}
		_, err := d.client(t, "box_local_wrong").List(t.Context(), nil)
		var apiErr *box.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
			t.Errorf("List with another key: %v, want 401", err)
		}
		if fi, err := os.Stat(filepath.Join(data, "api-key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the kept key's file: %v, %v; want mode 600", fi, err)
		}

		// A second boxd on the same data directory says who holds it.
		second := launch(t, nil, "-addr", "127.0.0.1:0", "-data", data)
		if st := second.waitExit(30 * time.Second); st.Success() {
			t.Error("a second boxd on the same -data exited 0")
		}
		if msg := second.stderr.String(); !strings.Contains(msg, "another boxd") || strings.Contains(msg, key) {
			t.Errorf("a second boxd on the same -data said %q; want that another boxd uses it, without the key", msg)
		}

		// After a restart, the same key works.
		d.kill()
		again := start(t, environWithout("UPSTASH_BOX_API_KEY"), "-addr", "127.0.0.1:0", "-data", data)
		if _, err := again.client(t, key).List(t.Context(), nil); err != nil {
			t.Errorf("List with the first start's key after a restart: %v", err)
		}
	})

	t.Run("key from environment", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		key := newKey()
		data := t.TempDir()
		d := start(t, append(environWithout("UPSTASH_BOX_API_KEY"), "UPSTASH_BOX_API_KEY="+key), "-addr", "127.0.0.1:0", "-data", data)
		waitFor(5*time.Second, func() bool { return len(d.stdoutLines()) >= 2 })
		for _, line := range d.stdoutLines() {
			if strings.Contains(line, key) || strings.HasPrefix(line, "API key:") {
				t.Errorf("boxd printed a key it was given: %q", line)
			}
		}
		if _, err := d.client(t, key).List(t.Context(), nil); err != nil {
			t.Errorf("List with the environment's key: %v", err)
		}
	})

	t.Run("flag key beats environment", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		flagKey, envKey := newKey(), newKey()
		d := start(t, append(environWithout("UPSTASH_BOX_API_KEY"), "UPSTASH_BOX_API_KEY="+envKey), "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", flagKey)
		if _, err := d.client(t, flagKey).List(t.Context(), nil); err != nil {
			t.Errorf("List with the flag's key: %v", err)
		}
		if _, err := d.client(t, envKey).List(t.Context(), nil); box.StatusCode(err) != 401 {
			t.Errorf("List with the environment's key: %v, want 401", err)
		}
	})

	t.Run("isolation none", func(t *testing.T) {
		t.Parallel()
		key := newKey()
		data := t.TempDir()
		d := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key, "-isolation", "none")
		if got := d.stdoutLines()[0]; got != fmt.Sprintf("boxd listening on %s (data %s, isolation none)", d.url, data) {
			t.Errorf("listen line = %q", got)
		}
		// boxd warns before it listens, but stderr is read on a pipe of
		// its own, which may come in after stdout's listen line.
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(d.stderr.String(), "WITHOUT isolation"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("no warning on stderr: %q", d.stderr.String())
				break
			}
		}
	})

	t.Run("address in use", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		key := newKey()
		first := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key)
		d := launch(t, nil, "-addr", strings.TrimPrefix(first.url, "http://"), "-data", t.TempDir(), "-api-key", key)
		if st := d.waitExit(15 * time.Second); st.Success() {
			t.Fatal("second boxd on the same address exited 0")
		}
		if !strings.Contains(d.stderr.String(), "address already in use") {
			t.Errorf("stderr = %q", d.stderr.String())
		}
	})

	t.Run("data directory in use", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		key, data := newKey(), t.TempDir()
		start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key)
		d := launch(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key)
		if st := d.waitExit(20 * time.Second); st.Success() {
			t.Fatal("second boxd on the same data directory exited 0")
		}
		if !strings.Contains(d.stderr.String(), "boxd.db") {
			t.Errorf("stderr does not name the database: %q", d.stderr.String())
		}
	})

	t.Run("model provider URLs", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			flag, want string
			code       int
		}{
			{"anthropic", "want provider=URL", 2},
			{"nosuch=http://127.0.0.1:1", `model provider "nosuch" is unknown`, 1},
			{"anthropic=ftp://user:hunter2secret@127.0.0.1/", "must be http:// or https://", 1},
		} {
			d := launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", newKey(), "-isolation", "none", "-model-provider-url", tc.flag)
			st := d.waitExit(10 * time.Second)
			if st.ExitCode() != tc.code || !strings.Contains(d.stderr.String(), tc.want) || strings.Contains(d.stderr.String(), "hunter2secret") {
				t.Errorf("-model-provider-url %s: %v, stderr %q; want exit %d mentioning %q", tc.flag, st, d.stderr.String(), tc.code, tc.want)
			}
		}
		// The browser's AI operations call the provider given.
		if !browsertest.Installed() {
			if os.Getenv("CI") != "" {
				t.Fatal("CI is set and Chromium is not installed")
			}
			t.Skip("Chromium is not installed")
		}
		requireBwrap(t)
		site, models := browsertest.NewSite(t), browsertest.NewModels(t)
		key := newKey()
		d := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-allow-host-loopback",
			"-model-provider-url", "anthropic="+models.URL, "-model-provider-url", "openai="+models.URL+"/v1")
		ctx := t.Context()
		b, err := d.client(t, key).Create(ctx, &box.CreateParams{Browser: true, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-flag"}})
		if err != nil {
			t.Fatal(err)
		}
		tab, err := b.Browser.NewTab(ctx, site+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tab.Extract(ctx, "the fruit and how many", map[string]any{
			"type": "object", "properties": map[string]any{"fruit": map[string]any{"type": "string"}, "count": map[string]any{"type": "integer"}},
		}, nil)
		if err != nil || len(models.Calls()) != 1 || models.Calls()[0].Key != "sk-ant-flag" {
			t.Errorf("extract through the flag's provider = %v, %v; the stand-in saw %+v", got, err, models.Calls())
		}
	})

	t.Run("idle pause", func(t *testing.T) {
		t.Parallel()
		d := launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", newKey(), "-idle-pause", "-1s")
		if st := d.waitExit(10 * time.Second); st.ExitCode() != 2 || !strings.Contains(d.stderr.String(), "-idle-pause") {
			t.Errorf("-idle-pause -1s: %v, stderr %q", st, d.stderr.String())
		}
		requireBwrap(t)
		key := newKey()
		cl := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-idle-pause", "1s").client(t, key)
		ctx := t.Context()
		b, err := cl.Create(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !waitFor(20*time.Second, func() bool { st, err := b.Status(ctx); return err == nil && st == box.StatusPaused }) {
			t.Fatal("a box unused for a second of -idle-pause 1s did not pause")
		}
		if r, err := b.Exec.Command(ctx, "echo woke"); err != nil || r.Stdout != "woke\n" {
			t.Errorf("exec on the paused box = %+v, %v", r, err)
		}
	})

	t.Run("min free disk", func(t *testing.T) {
		t.Parallel()
		d := launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", newKey(), "-min-free-disk", "lots")
		if st := d.waitExit(10 * time.Second); st.ExitCode() != 2 || !strings.Contains(d.stderr.String(), `"lots" is not a size`) {
			t.Errorf("-min-free-disk lots: %v, stderr %q", st, d.stderr.String())
		}
		requireBwrap(t)
		key := newKey()
		_, err := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-min-free-disk", "1000000T").client(t, key).Create(t.Context(), nil)
		if box.StatusCode(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "it keeps free") {
			t.Errorf("create with -min-free-disk past the disk = %v, want 507", err)
		}
		if _, err := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-min-free-disk", "0").client(t, key).Create(t.Context(), nil); err != nil {
			t.Errorf("create with -min-free-disk 0: %v", err)
		}
	})

	t.Run("max image size", func(t *testing.T) {
		t.Parallel()
		d := launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", newKey(), "-max-image-size", "lots")
		if st := d.waitExit(10 * time.Second); st.ExitCode() != 2 || !strings.Contains(d.stderr.String(), `"lots" is not a size`) {
			t.Errorf("-max-image-size lots: %v, stderr %q", st, d.stderr.String())
		}
		requireBwrap(t)
		reg := ocitest.NewRegistry(t)
		ref, _ := reg.Push(t, "test/busybox:1", v1.Config{Env: []string{"PATH=/bin"}}, ocitest.BusyboxLayer(t))
		key := newKey()
		_, err := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-root", "image", "-image", "node="+ref, "-max-image-size", "512K").client(t, key).Create(t.Context(), nil)
		if box.StatusCode(err) != http.StatusBadGateway || !strings.Contains(err.Error(), "too large") || !strings.Contains(err.Error(), "512 KiB") {
			t.Errorf("create of an image past -max-image-size = %v, want 502", err)
		}
		if _, err := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-root", "image", "-image", "node="+ref, "-max-image-size", "0").client(t, key).Create(t.Context(), nil); err != nil {
			t.Errorf("create with -max-image-size 0: %v", err)
		}
	})

	t.Run("root image", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		reg := ocitest.NewRegistry(t)
		ref, _ := reg.Push(t, "test/busybox:1", v1.Config{Env: []string{"PATH=/bin"}}, ocitest.BusyboxLayer(t))
		data, key := t.TempDir(), newKey()
		if st := launch(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key, "-root", "image", "-image", "cobol="+ref).waitExit(20 * time.Second); st.ExitCode() != 1 {
			t.Errorf("-image of an unknown runtime: %v", st)
		}
		noBwrap := launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-root", "image", "-isolation", "none")
		if st := noBwrap.waitExit(20 * time.Second); st.ExitCode() != 1 || !strings.Contains(noBwrap.stderr.String(), `(root "host")`) {
			t.Errorf("-root image -isolation none: %v, %q", st, noBwrap.stderr.String())
		}
		d := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key, "-root", "image", "-image", "node="+ref)
		if f, err := elf.Open(boxdBin); err != nil || slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
			t.Fatalf("the boxd under test is not static (%v)", err)
		}
		// The lines after the listen line come a moment later.
		said := func(d *daemon, f func(string) bool) bool {
			return waitFor(10*time.Second, func() bool { return slices.ContainsFunc(d.stdoutLines(), f) })
		}
		is := func(s string) func(string) bool { return func(l string) bool { return l == s } }
		if !said(d, func(l string) bool {
			return strings.HasPrefix(l, "boxes run in their runtime's image (root image): node="+ref+" python=docker.io/library/python:3 ")
		}) {
			t.Errorf("boxd does not say what a box's root is: %q", d.stdoutLines())
		}
		b, err := d.client(t, key).Create(t.Context(), &box.CreateParams{Runtime: box.RuntimeNode})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := b.Exec.Command(t.Context(), "cat /etc/os-release; test -e /usr/bin/bash || echo no host"); err != nil || r.Stdout != "ID=busybox\nNAME=\"Busybox test image\"\nno host\n" {
			t.Errorf("exec in a box of -image node=%s: %+v, %v", ref, r, err)
		}
		if _, err := d.client(t, key).Create(t.Context(), &box.CreateParams{Runtime: box.RuntimePython}); err == nil || !strings.Contains(err.Error(), "docker.io/library/python:3") {
			t.Errorf("create of a runtime whose image cannot be had = %v, want an error naming the image", err)
		}
		d.kill()
		d = start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key, "-prune-images")
		if !said(d, is("pruned 0 images, 0 MB")) || !said(d, is("boxes run on the host's /usr (root host): their runtime is recorded, not installed")) {
			t.Errorf("-prune-images with a box on the image: %q", d.stdoutLines())
		}
		if err := d.client(t, key).DeleteBoxes(t.Context(), []string{b.ID()}); err != nil {
			t.Fatal(err)
		}
		d.kill()
		d = start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key, "-prune-images")
		if !slices.ContainsFunc(d.stdoutLines(), func(l string) bool {
			return strings.HasPrefix(l, "removed image ") && strings.HasSuffix(l, "("+ref+")")
		}) ||
			!slices.ContainsFunc(d.stdoutLines(), func(l string) bool { return strings.HasPrefix(l, "pruned 1 images, ") }) {
			t.Errorf("-prune-images with the image unused: %q", d.stdoutLines())
		}
	})

	t.Run("ssh", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		if _, err := exec.LookPath("ssh"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("CI is set and ssh is not installed")
			}
			t.Skip("ssh is not installed")
		}
		key := newKey()
		// A user's key, in the file of -ssh-authorized-keys.
		dir := t.TempDir()
		userKey := filepath.Join(dir, "id_ed25519")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", userKey).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		authorized := filepath.Join(dir, "authorized_keys")
		if err := os.Rename(userKey+".pub", authorized); err != nil {
			t.Fatal(err)
		}
		data := t.TempDir()
		d := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key, "-ssh-addr", "127.0.0.1:0", "-ssh-authorized-keys", authorized)
		sshRE := regexp.MustCompile(`^ssh on 127\.0\.0\.1 port (\d+): ssh -p (\d+) <box-id>@127\.0\.0\.1$`)
		var port string
		if !waitFor(10*time.Second, func() bool {
			for _, l := range d.stdoutLines() {
				if m := sshRE.FindStringSubmatch(l); m != nil && m[1] == m[2] {
					port = m[1]
				}
			}
			return port != ""
		}) {
			t.Fatalf("no ssh line: %q", d.stdoutLines())
		}
		// The host key's fingerprint, on stderr, is the one ssh-keygen
		// reads from the key in the data directory.
		out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", filepath.Join(data, "ssh_host_ed25519_key")).Output()
		if err != nil {
			t.Fatalf("ssh-keygen -l: %v", err)
		}
		fp := strings.Fields(string(out))[1]
		// stderr is read on a pipe of its own: its line, written before
		// the ssh line, may come in after it.
		if want := "boxd: SSH host key fingerprint " + fp + " (ED25519)\n"; !waitFor(10*time.Second, func() bool { return strings.Contains(d.stderr.String(), want) }) {
			t.Errorf("boxd's stderr has no %q:\n%s", want, d.stderr.String())
		}
		b, err := d.client(t, key).Create(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		askpass := filepath.Join(dir, "askpass")
		if err := os.WriteFile(askpass, []byte("#!/bin/sh\necho "+key+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ssh", "-F", "/dev/null", "-p", port, "-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile="+filepath.Join(dir, "known"),
			"-o", "PreferredAuthentications=password", "-o", "PubkeyAuthentication=no", b.ID()+"@127.0.0.1", "echo $BOX_ID; exit 5")
		cmd.Env = append(os.Environ(), "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force")
		out, err = cmd.Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 || string(out) != b.ID()+"\n" {
			t.Errorf("ssh into a box of boxd -ssh-addr: %q, %v", out, err)
		}
		// The key of -ssh-authorized-keys logs in, and the host key is
		// the one whose fingerprint boxd printed.
		cmd = exec.Command("ssh", "-F", "/dev/null", "-p", port, "-i", userKey, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "BatchMode=yes",
			"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+filepath.Join(dir, "known"), "-o", "FingerprintHash=sha256", b.ID()+"@127.0.0.1", "echo by-key")
		if out, err := cmd.CombinedOutput(); err != nil || string(out) != "by-key\n" {
			t.Errorf("ssh with the key of -ssh-authorized-keys: %q, %v", out, err)
		}
		if out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", filepath.Join(dir, "known")).Output(); err != nil || !strings.Contains(string(out), fp) {
			t.Errorf("the host key ssh was shown: %q, %v; boxd printed %s", out, err, fp)
		}
	})

	t.Run("ssh-authorized-keys missing", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		missing := filepath.Join(t.TempDir(), "nope")
		d := launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", newKey(), "-ssh-addr", "127.0.0.1:0", "-ssh-authorized-keys", missing)
		<-d.exited
		if d.state.ExitCode() != 1 || !strings.Contains(d.stderr.String(), "SSH authorized keys file") || !strings.Contains(d.stderr.String(), missing) {
			t.Errorf("boxd with a missing -ssh-authorized-keys: %v, %s", d.state, d.stderr.String())
		}
	})

	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		key := newKey()
		d := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key)
		// boxd serves only once its signal handler is installed; see the
		// next subtest for a signal sent before that.
		if _, err := d.client(t, key).List(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if st := d.waitExit(10 * time.Second); !st.Success() {
			t.Errorf("boxd after SIGTERM: %v; stderr %s", st, d.stderr.String())
		}
	})

	t.Run("SIGTERM right after the listen line", func(t *testing.T) {
		t.Parallel()
		requireBwrap(t)
		for i := range 20 {
			d := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", newKey())
			if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if st := d.waitExit(10 * time.Second); !st.Success() {
				t.Fatalf("try %d: boxd ended with %v after a SIGTERM sent when it printed its listen line", i+1, st)
			}
		}
	})
}

// requireBwrap skips a test that needs boxd's default isolation where
// bubblewrap cannot run, unless BOXTEST_REQUIRE_BWRAP makes that a failure.
func requireBwrap(t *testing.T) {
	t.Helper()
	if err := local.CheckIsolation(); err != nil {
		if os.Getenv("BOXTEST_REQUIRE_BWRAP") != "" {
			t.Fatalf("bubblewrap is required: %v", err)
		}
		t.Skipf("boxd's default isolation cannot run here: %v", err)
	}
}

// TestAPIKeyOutOfProcessList gives boxd its key in a file and in the
// environment: it works, and no other user of the machine sees it in the
// process list. Given on the command line it works too, with a warning.
func TestAPIKeyOutOfProcessList(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	cmdline := func(d *daemon) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.cmd.Process.Pid))
		return string(b)
	}
	works := func(d *daemon, key string) {
		t.Helper()
		if _, err := d.client(t, key).List(t.Context(), nil); err != nil {
			t.Errorf("List with the key: %v", err)
		}
		if _, err := d.client(t, key+"x").List(t.Context(), nil); err == nil {
			t.Error("List with another key succeeded")
		}
	}

	key := newKey()
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key-file", file)
	works(d, key)
	if strings.Contains(cmdline(d), key) || strings.Contains(d.stderr.String(), key) {
		t.Error("the key from a file shows in boxd's command line or log")
	}

	key = newKey()
	d = start(t, append(environWithout("UPSTASH_BOX_API_KEY"), "UPSTASH_BOX_API_KEY="+key), "-addr", "127.0.0.1:0", "-data", t.TempDir())
	works(d, key)
	if strings.Contains(cmdline(d), key) || strings.Contains(d.stderr.String(), key) {
		t.Error("the key from the environment shows in boxd's command line or log")
	}

	key = newKey()
	d = start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key)
	works(d, key)
	if !strings.Contains(d.stderr.String(), "visible to every user") {
		t.Errorf("no warning for a key on the command line: %s", d.stderr.String())
	}

	d = launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-api-key-file", file)
	if st := d.waitExit(30 * time.Second); st.Success() || !strings.Contains(d.stderr.String(), "not both") {
		t.Errorf("both -api-key and -api-key-file: %v, %s", st, d.stderr.String())
	}
	empty := filepath.Join(t.TempDir(), "empty")
	_ = os.WriteFile(empty, nil, 0o600)
	d = launch(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key-file", empty)
	if st := d.waitExit(30 * time.Second); st.Success() || !strings.Contains(d.stderr.String(), "must hold the key") {
		t.Errorf("an empty key file: %v, %s", st, d.stderr.String())
	}
}

// TestHostLoopback runs boxd as a user does. By default a box reaches
// nothing on the host's loopback, under allow-all: not a server there, by
// the host's alias or by address, nor boxd's API. With
// -allow-host-loopback the server is reached, and boxd's API and SSH
// server still are not.
func TestHostLoopback(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	var hits atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "host server")
	}))
	t.Cleanup(hs.Close)
	_, port, _ := net.SplitHostPort(hs.Listener.Addr().String())
	// curl's output ends with the status of the answer to a request or a
	// CONNECT.
	curl := func(b *box.Box, args string) string {
		t.Helper()
		r, err := b.Exec.Command(t.Context(), "curl -sS -g --max-time 20 -w ' (status %{http_code} %{http_connect})' "+args)
		if err != nil {
			t.Fatal(err)
		}
		return r.Stdout + r.Stderr
	}
	newBox := func(d *daemon, key string) *box.Box {
		t.Helper()
		b, err := d.client(t, key).Create(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	key := newKey()
	d := start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key)
	boxdPort := d.url[strings.LastIndexByte(d.url, ':')+1:]
	b := newBox(d, key)
	for _, u := range []string{
		"http://host.boxd.internal:" + port + "/",
		"https://host.boxd.internal:" + port + "/",
		"--noproxy '' http://127.0.0.1:" + port + "/",
		"--noproxy '' http://[::ffff:127.0.0.1]:" + port + "/",
		"--noproxy '' -H 'X-Box-Api-Key: " + key + "' http://127.0.0.1:" + boxdPort + "/v2/box",
	} {
		if out := curl(b, u); !strings.Contains(out, " 403") || strings.Contains(out, "host server") {
			t.Errorf("curl %s from a box of boxd without -allow-host-loopback: %q, want a 403", u, out)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's server got %d requests from a box of boxd without -allow-host-loopback", n)
	}

	key = newKey()
	d = start(t, nil, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-api-key", key, "-allow-host-loopback", "-ssh-addr", "127.0.0.1:0")
	boxdPort = d.url[strings.LastIndexByte(d.url, ':')+1:]
	sshRE := regexp.MustCompile(`^ssh on 127\.0\.0\.1 port ([0-9]+): `)
	sshPort := ""
	waitFor(10*time.Second, func() bool {
		for _, line := range d.stdoutLines() {
			if m := sshRE.FindStringSubmatch(line); m != nil {
				sshPort = m[1]
			}
		}
		return sshPort != ""
	})
	if sshPort == "" {
		t.Fatalf("boxd -ssh-addr printed no SSH port: %q", d.stdoutLines())
	}
	b = newBox(d, key)
	if out := curl(b, "http://host.boxd.internal:"+port+"/"); out != "host server (status 200 000)" || hits.Load() != 1 {
		t.Errorf("curl to the host's server from a box of boxd -allow-host-loopback: %q (%d requests), want it reached", out, hits.Load())
	}
	for _, u := range []string{
		"-H 'X-Box-Api-Key: " + key + "' http://host.boxd.internal:" + boxdPort + "/v2/box",
		"http://host.boxd.internal:" + sshPort + "/",
		"--noproxy '' http://127.0.0.1:" + sshPort + "/",
		"--noproxy '' http://0.0.0.0:" + sshPort + "/",
	} {
		if out := curl(b, u); !strings.Contains(out, "boxd itself") || !strings.Contains(out, "status 403") {
			t.Errorf("curl %s from a box of boxd -allow-host-loopback: %q, want a 403 saying it is boxd itself", u, out)
		}
	}
}

// TestKill9TakesTheWarmPoolAlong: the sandboxes of boxd's warm pool die
// with a boxd killed by SIGKILL, and the boxd started next on the same
// data removes what they left (their directories), claims none of them,
// and fills a pool of its own.
func TestKill9TakesTheWarmPoolAlong(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	data := t.TempDir()
	key := newKey()
	dirs := func() []string {
		ents, _ := os.ReadDir(filepath.Join(data, "boxes"))
		var ids []string
		for _, e := range ents {
			ids = append(ids, e.Name())
		}
		return ids
	}
	running := func(ids []string) []int {
		var pids []int
		for _, id := range ids {
			pids = append(pids, procsWith("BOX_ID "+id)...)
		}
		return pids
	}
	d1 := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key, "-warm-pool", "3")
	var pooled []string
	if !waitFor(30*time.Second, func() bool {
		pooled = dirs()
		return len(pooled) == 3 && len(running(pooled)) >= 3
	}) {
		t.Fatalf("the warm pool of 3 did not fill: directories %v, processes %v", pooled, running(pooled))
	}
	for _, id := range pooled {
		killLeftovers(t, "BOX_ID "+id)
	}
	if err := syscall.Kill(-d1.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d1.waitExit(10 * time.Second)
	if !waitFor(5*time.Second, func() bool { return len(running(pooled)) == 0 }) {
		t.Fatalf("pooled sandboxes outlived the killed boxd: %v", running(pooled))
	}
	var groups []string
	for _, id := range pooled {
		groups = append(groups, boxCgroups(id)...)
	}
	if len(groups) == 0 {
		t.Logf("the pooled sandboxes %v have no control groups here: their removal is not checked", pooled)
	}

	d2 := start(t, nil, "-addr", "127.0.0.1:0", "-data", data, "-api-key", key, "-warm-pool", "1")
	b, err := d2.client(t, key).Create(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pooled, b.ID()) {
		t.Errorf("the new boxd gave out %s, a sandbox of the killed one's pool", b.ID())
	}
	var now []string
	if !waitFor(30*time.Second, func() bool {
		now = dirs()
		return len(now) == 2 && !slices.ContainsFunc(now, func(id string) bool { return slices.Contains(pooled, id) })
	}) {
		t.Errorf("after the restart, box directories %v; the killed boxd's pool had %v", now, pooled)
	}
	for _, g := range groups {
		if _, err := os.Stat(g); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after the restart, the killed boxd's pooled sandbox still has its control group %s (%v)", g, err)
		}
	}
}

// boxCgroups returns the control group directories of the box or pooled
// sandbox id, in every hierarchy mounted under /sys/fs/cgroup (boxd makes
// them under its own group, some levels down, as boxd/id).
func boxCgroups(id string) []string {
	var dirs []string
	pattern := "/sys/fs/cgroup"
	for range 5 {
		m, _ := filepath.Glob(filepath.Join(pattern, "boxd", id))
		dirs = append(dirs, m...)
		pattern = filepath.Join(pattern, "*")
	}
	return dirs
}
