package main

// The box command, run for real: the binary built by TestMain, against
// boxd (boxtest) in this process, and in a real terminal (a pty) for the
// REPL and the shell.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// boxBin is the box binary built by TestMain; harnessBin the test agent
// harness (internal/testharness); testDir the directory that holds them,
// removed when the tests end.
var boxBin, harnessBin, testDir string

func TestMain(m *testing.M) { os.Exit(buildAndRun(m)) }

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "box-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testDir = dir
	boxBin, harnessBin = filepath.Join(dir, exeName("box")), filepath.Join(dir, "testharness")
	for _, b := range []struct {
		bin, pkg string
		env      []string
	}{
		{boxBin, ".", nil},
		// The harness runs in boxes, which are Linux wherever the test
		// runs (off Linux, on the boxd that BOXTEST_BASE_URL names).
		{harnessBin, "../../internal/testharness", []string{"GOOS=linux"}},
	} {
		build := exec.Command("go", "build", "-o", b.bin, b.pkg)
		build.Env = append(append(os.Environ(), "CGO_ENABLED=0"), b.env...)
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// exeName is the file name of the program name on this system: with .exe
// on Windows, which runs nothing without it.
func exeName(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// env is the environment of a box command against srv.
func env(t *testing.T, srv *boxtest.Server, extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UPSTASH_BOX_") && !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			out = append(out, kv)
		}
	}
	out = append(out, "HOME="+t.TempDir(), "UPSTASH_DISABLE_TELEMETRY=1")
	if srv != nil {
		out = append(out, "UPSTASH_BOX_BASE_URL="+srv.URL(), "UPSTASH_BOX_API_KEY="+srv.APIKey())
	}
	return append(out, extra...)
}

type result struct {
	stdout, stderr string
	code           int
}

// cli runs box with args and stdin against srv, and waits for it.
func cli(t *testing.T, srv *boxtest.Server, stdin string, args ...string) result {
	t.Helper()
	return runBox(t, env(t, srv), stdin, args...)
}

// runBox runs box with args and stdin in the environment environ, and
// waits for it.
func runBox(t *testing.T, environ []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), boxBin, args...)
	cmd.Env = environ
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("box %q: %v", args, err)
	}
	return r
}

func mustCLI(t *testing.T, srv *boxtest.Server, stdin string, args ...string) string {
	t.Helper()
	r := cli(t, srv, stdin, args...)
	if r.code != 0 {
		t.Fatalf("box %q: exit %d, stderr %q", args, r.code, r.stderr)
	}
	return r.stdout
}

func TestBoxCommands(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	var made map[string]any
	out := mustCLI(t, srv, "", "create", "--json", "--name", "cli-one", "--label", "env:test", "--env", "GREETING=hi", "--size", "medium")
	if err := json.Unmarshal([]byte(out), &made); err != nil {
		t.Fatalf("create --json = %q: %v", out, err)
	}
	id := made["id"].(string)
	if made["name"] != "cli-one" || made["size"] != "medium" || made["status"] != "idle" {
		t.Errorf("created %v", made)
	}
	if got := mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", "echo $GREETING"); got != "hi\n" {
		t.Errorf("env in the box = %q", got)
	}

	// ls: an aligned table, and the same boxes as JSON.
	table := mustCLI(t, srv, "", "ls")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[1], id) || strings.Index(lines[0], "NAME") != strings.Index(lines[1], "cli-one") {
		t.Errorf("ls =\n%s", table)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, srv, "", "ls", "--json", "--label", "env:test")), &list); err != nil || len(list) != 1 || list[0]["id"] != id {
		t.Errorf("ls --json = %v, %v", list, err)
	}
	if got := mustCLI(t, srv, "", "get", id); !strings.Contains(got, `"id": "`+id+`"`) {
		t.Errorf("get = %q", got)
	}
	if got := mustCLI(t, srv, "", "pause", id); got != "paused "+id+"\n" {
		t.Errorf("pause = %q", got)
	}
	if got := mustCLI(t, srv, "", "status", id); got != "paused\n" {
		t.Errorf("status = %q", got)
	}
	mustCLI(t, srv, "", "resume", id)

	// A snapshot, and a box made from it.
	mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", "echo kept > kept.txt")
	var snap map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, srv, "", "snapshot", id, "--name", "s1", "--json")), &snap); err != nil || snap["name"] != "s1" || snap["box_id"] != id {
		t.Fatalf("snapshot = %v, %v", snap, err)
	}
	out = mustCLI(t, srv, "", "from-snapshot", snap["id"].(string), "--no-repl")
	id2 := strings.TrimSpace(strings.TrimPrefix(out, "created box "))
	if got := mustCLI(t, srv, "", "exec", id2, "--", "cat", "kept.txt"); got != "kept\n" {
		t.Errorf("the restored box has %q", got)
	}
	if got := mustCLI(t, srv, "", "url", id, "3000"); !strings.Contains(got, id+"-3000.localhost:") {
		t.Errorf("url = %q", got)
	}
	if got := mustCLI(t, srv, "", "logs", id); !strings.Contains(got, "box created") || !strings.Contains(got, "snapshot") {
		t.Errorf("logs = %q", got)
	}
	var u map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, srv, "", "url", id, "3000", "--json")), &u); err != nil || u["port"] != 3000.0 || !strings.HasPrefix(u["url"].(string), "http") {
		t.Errorf("url --json = %v, %v", u, err)
	}
	// With auth flags a URL is made (again), and its credentials told once.
	var withAuth map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, srv, "", "url", id, "3001", "--bearer", "--basic", "--json")), &withAuth); err != nil ||
		withAuth["token"] == nil || withAuth["username"] == nil || withAuth["password"] == nil || withAuth["bearer_token"] != true || withAuth["basic_auth"] != true {
		t.Errorf("url --bearer --basic --json = %v, %v", withAuth, err)
	}
	if got := strings.Split(strings.TrimSpace(mustCLI(t, srv, "", "url", id, "3001", "--bearer")), "\n"); len(got) != 2 || !strings.HasPrefix(got[1], "token: ") || got[1] == "token: "+fmt.Sprint(withAuth["token"]) {
		t.Errorf("url --bearer = %q, want the URL and a new token", got)
	}
	if got := mustCLI(t, srv, "", "url", id, "3001"); strings.Count(got, "\n") != 1 || !strings.Contains(got, id+"-3001.localhost:") {
		t.Errorf("url of a port that has one = %q, want the URL alone", got)
	}
	var urls []map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, srv, "", "urls", id, "--json")), &urls); err != nil || len(urls) != 2 ||
		urls[0]["id"] != id+"-3000" || urls[0]["bearer_token"] != false || urls[1]["port"] != 3001.0 || urls[1]["bearer_token"] != true || urls[1]["basic_auth"] != false || urls[1]["token"] != nil {
		t.Errorf("urls --json = %v, %v", urls, err)
	}
	if got := mustCLI(t, srv, "", "urls", id); !strings.Contains(got, "PORT") || !strings.Contains(got, "3001") || !strings.Contains(got, "bearer") {
		t.Errorf("urls = %q", got)
	}
	logLines := strings.Split(strings.TrimSpace(mustCLI(t, srv, "", "logs", id, "--json")), "\n")
	for _, l := range logLines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil || e["message"] == "" || e["level"] == "" {
			t.Errorf("logs --json line %q: %v", l, err)
		}
	}
	mustCLI(t, srv, "", "env", "set", "ACCOUNT_WIDE=account-value-not-shown")
	if got := mustCLI(t, srv, "", "env"); !strings.Contains(got, "ACCOUNT_WIDE") || strings.Contains(got, "account-value-not-shown") {
		t.Errorf("env = %q", got)
	}
	mustCLI(t, srv, "", "env", "unset", "ACCOUNT_WIDE")

	mustCLI(t, srv, "", "rm", id, id2)
	r := cli(t, srv, "", "get", id)
	if r.code != 1 || !strings.Contains(r.stderr, "box not found") || r.stdout != "" {
		t.Errorf("get of a deleted box = %+v", r)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	for _, tc := range []struct {
		args []string
		code int
		in   string
	}{
		{[]string{"get", "box-nosuchbox"}, 1, "box not found"},
		{[]string{"bogus"}, 2, "unknown command"},
		{[]string{"ls", "--bogus"}, 2, "unknown flag"},
		{[]string{"exec", "box-x", "ls"}, 2, "--"},
		{[]string{"create", "--env", "nokey"}, 2, "KEY=VALUE"},
		{[]string{"cp", "a", "b"}, 2, "one side"},
		{[]string{"init-demo", "--json", "--run", "never-written"}, 2, "--json only writes"},
		{[]string{"create", "--agent-api-key", "sk-ant-secret-value"}, 2, "--agent-model"},
		{[]string{"create", "--runtime", "cobol", "--git-token", "ghp_secret_value"}, 2, "runtime"}, // the server's 400
	} {
		r := cli(t, srv, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.in) || strings.Contains(r.stdout+r.stderr, "secret_value") || strings.Contains(r.stdout+r.stderr, "secret-value") {
			t.Errorf("box %q = exit %d, stderr %q; want %d mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.in)
		}
	}
	// The API's message comes first.
	if r := cli(t, srv, "", "status", "box-nosuchbox"); r.stderr != "box: box not found (HTTP 404, GET /v2/box/box-nosuchbox)\n" {
		t.Errorf("status of an unknown box printed %q", r.stderr)
	}
	// No key: a clear error. A wrong one: refused, and never printed.
	cmd := exec.Command(boxBin, "ls")
	cmd.Env = env(t, nil, "UPSTASH_BOX_BASE_URL="+srv.URL())
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "--token") {
		t.Errorf("without a key: %q", out)
	}
	const secret = "box_secret_do_not_print_7f3a"
	r := cli(t, srv, "", "--token", secret, "ls")
	if r.code != 1 || !strings.Contains(r.stderr, "401") || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("a wrong key: %+v", r)
	}
}

func TestExec(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := strings.TrimSpace(strings.TrimPrefix(mustCLI(t, srv, "", "create", "--no-repl"), "created box "))
	r := cli(t, srv, "", "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.code != 7 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("exec = %+v, want exit 7 with out and err apart", r)
	}
	in := strings.Repeat("a line of input\n", 5000)
	if r := cli(t, srv, in, "exec", id, "--", "wc", "-l"); r.code != 0 || strings.TrimSpace(r.stdout) != "5000" {
		t.Errorf("exec with piped stdin = %+v", r)
	}
}

func TestCp(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := strings.TrimSpace(strings.TrimPrefix(mustCLI(t, srv, "", "create", "--no-repl"), "created box "))
	src := filepath.Join(t.TempDir(), "tree")
	want := map[string][]byte{}
	for i := range 40 {
		rel := filepath.Join(fmt.Sprintf("d%d", i%4), fmt.Sprintf("sub%d", i%3), fmt.Sprintf("f%d.bin", i))
		data := bytes.Repeat([]byte{byte(i), 0, 0xff, '\n'}, 1000*i+1)
		_ = os.MkdirAll(filepath.Join(src, filepath.Dir(rel)), 0o755)
		if err := os.WriteFile(filepath.Join(src, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
		want[filepath.ToSlash(rel)] = data
	}
	// As cp -r: a new destination becomes the copy, an existing
	// directory receives it.
	mustCLI(t, srv, "", "cp", src, id+":up")
	mustCLI(t, srv, "", "cp", src, id+":up")
	if got := mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", "ls up; ls up/tree"); got != "d0\nd1\nd2\nd3\ntree\nd0\nd1\nd2\nd3\n" {
		t.Errorf("after two uploads, up holds:\n%s", got)
	}
	back := t.TempDir()
	mustCLI(t, srv, "", "cp", id+":up/tree", back)
	n := 0
	err := filepath.Walk(filepath.Join(back, "tree"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(back, "tree"), p)
		got, err := os.ReadFile(p)
		if !bytes.Equal(got, want[filepath.ToSlash(rel)]) {
			t.Errorf("%s differs after the round trip", rel)
		}
		n++
		return err
	})
	if err != nil || n != len(want) {
		t.Errorf("%d files came back, %v; want %d", n, err, len(want))
	}
	// One file each way, and standard input and output.
	mustCLI(t, srv, "", "cp", filepath.Join(src, "d1/sub1/f1.bin"), id+":one.bin")
	if got := mustCLI(t, srv, "", "cp", id+":one.bin", "-"); got != string(want["d1/sub1/f1.bin"]) {
		t.Errorf("cp to stdout: %d bytes", len(got))
	}
	mustCLI(t, srv, "piped content\n", "cp", "-", id+":piped.txt")
	if got := mustCLI(t, srv, "", "exec", id, "--", "cat", "piped.txt"); got != "piped content\n" {
		t.Errorf("cp from stdin: %q", got)
	}
}

// ptyTerm is a box command in a pty: what it prints is collected as a
// screen would show it.
type ptyTerm struct {
	t   *testing.T
	cmd *exec.Cmd
	pty *os.File

	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	// timeout bounds each wait for the screen (20 s when zero).
	timeout time.Duration
}

func (tm *ptyTerm) deadline() time.Time {
	return time.Now().Add(cmp.Or(tm.timeout, 20*time.Second))
}

// inTerminal starts box with args in a pty, without colour.
func inTerminal(t *testing.T, srv *boxtest.Server, args ...string) *ptyTerm {
	t.Helper()
	return inTerminalEnv(t, env(t, srv, "TERM=xterm", "NO_COLOR=1"), args...)
}

// inTerminalEnv starts box with args in a pty, in environment environ.
func inTerminalEnv(t *testing.T, environ []string, args ...string) *ptyTerm {
	t.Helper()
	cmd := exec.Command(boxBin, args...)
	cmd.Env = environ
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	tm := &ptyTerm{t: t, cmd: cmd, pty: f, done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			tm.mu.Lock()
			tm.out.Write(buf[:n])
			tm.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
		<-tm.done
	})
	return tm
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\r`)

// raw is what the command printed, escapes and all.
func (tm *ptyTerm) raw() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

// screen is what the command printed, without escapes.
func (tm *ptyTerm) screen() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return ansi.ReplaceAllString(tm.out.String(), "")
}

func (tm *ptyTerm) typeText(s string) {
	tm.t.Helper()
	if _, err := tm.pty.WriteString(s); err != nil {
		tm.t.Fatal(err)
	}
}

// expect waits until the screen, after mark, shows s, and returns the new
// mark.
func (tm *ptyTerm) expect(mark int, s string) int {
	tm.t.Helper()
	deadline := tm.deadline()
	for {
		sc := tm.screen()
		if mark > len(sc) {
			mark = len(sc)
		}
		if i := strings.Index(sc[mark:], s); i >= 0 {
			return mark + i + len(s)
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the screen never showed %q; it shows:\n%s", s, sc[mark:])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expectRe waits until the screen, after mark, matches re, and returns
// the first group and the new mark.
func (tm *ptyTerm) expectRe(mark int, re *regexp.Regexp) (string, int) {
	tm.t.Helper()
	deadline := tm.deadline()
	for {
		sc := tm.screen()[mark:]
		if sm := re.FindStringSubmatchIndex(sc); sm != nil {
			return sc[sm[2]:sm[3]], mark + sm[1]
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the screen never matched %s; it shows:\n%s", re, sc)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tm *ptyTerm) wait() int {
	tm.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- tm.cmd.Wait() }()
	select {
	case err := <-errc:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			tm.t.Fatal(err)
		}
		return 0
	case <-time.After(time.Until(tm.deadline())):
		tm.t.Fatalf("box did not exit; the screen shows:\n%s", tm.screen())
		return -1
	}
}

func TestShell(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := strings.TrimSpace(strings.TrimPrefix(mustCLI(t, srv, "", "create", "--no-repl"), "created box "))
	tm := inTerminal(t, srv, "shell", id)
	m := tm.expect(0, "$ ")
	tm.typeText("echo $((6*7)); tty\r")
	m = tm.expect(m, "42\n/dev/pts/")
	// The box's terminal follows the window.
	if err := pty.Setsize(tm.pty, &pty.Winsize{Rows: 41, Cols: 123}); err != nil {
		t.Fatal(err)
	}
	// The resize travels apart from the typed keys: ask until it arrived.
	size := regexp.MustCompile(`<(\d+ \d+)>`)
	for i := 0; ; i++ {
		tm.typeText("echo \"<$(stty size)>\"\r")
		m = tm.expect(m, ">\"\n") // the echo of the line typed
		var got string
		got, m = tm.expectRe(m, size)
		if got == "41 123" {
			break
		}
		if i == 50 {
			t.Fatalf("the box's terminal stays %s, not 41 123", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Ctrl-C reaches the program in the box, not box itself.
	tm.typeText("sleep 100\r")
	time.Sleep(500 * time.Millisecond)
	tm.typeText("\x03")
	tm.typeText("echo after-$((6*7))\r")
	m = tm.expect(m, "after-42\n")
	tm.typeText("exit 3\r")
	if code := tm.wait(); code != 3 {
		t.Errorf("box shell exited %d, want the shell's 3", code)
	}
}

func TestREPL(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	// A box whose agent is the test harness, set up through the SDK.
	b, err := srv.Client().Create(ctx, &box.CreateParams{Agent: &box.AgentOptions{
		Harness: box.HarnessCustom, Model: "custom/demo",
		CustomHarness: &box.CustomHarness{Command: "/home/boxuser/bin/testharness"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Files.Upload(ctx, []box.UploadFile{{LocalPath: harnessBin, Destination: "/home/boxuser/bin/testharness"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec.Command(ctx, "chmod +x /home/boxuser/bin/testharness && mkdir -p project/src"); err != nil {
		t.Fatal(err)
	}

	tm := inTerminal(t, srv, "connect", b.ID())
	prompt := b.ID() + ":/workspace/home> "
	m := tm.expect(0, prompt)
	// (Outputs are computed in the box, so the echo of a typed line
	// never passes for them.)
	tm.typeText("exec echo $((6*7)) from the box\r")
	m = tm.expect(m, "42 from the box\n")
	m = tm.expect(m, prompt)
	// Commands work with a leading / too.
	tm.typeText("/files write note.txt written in the repl\r")
	m = tm.expect(m, prompt)
	tm.typeText("files read note.txt\r")
	m = tm.expect(m, "written in the repl\n")
	// Tab completes commands and box paths.
	tm.typeText("fil\t")
	m = tm.expect(m, "files ")
	tm.typeText("li\t")
	m = tm.expect(m, "list ")
	tm.typeText("pro\t")
	m = tm.expect(m, "project/")
	tm.typeText("\r")
	m = tm.expect(m, "src/")
	tm.typeText("cd proj\t\r")
	prompt = b.ID() + ":/workspace/home/project> "
	m = tm.expect(m, prompt)
	tm.typeText("cd /nowhere\r")
	m = tm.expect(m, "error:")
	// A prompt that starts with a command word does not run the command.
	tm.typeText("delete the build directory\r")
	m = tm.expect(m, "delete takes no arguments")
	if _, err := srv.Client().Get(ctx, b.ID(), nil); err != nil {
		t.Fatalf("the box after a prompt starting with delete: %v", err)
	}
	// Ctrl-C stops what runs, on the box too, and the REPL goes on.
	tm.typeText("exec sleep 100\r")
	time.Sleep(500 * time.Millisecond)
	tm.typeText("\x03")
	m = tm.expect(m, "interrupted\n")
	m = tm.expect(m, prompt)
	tm.typeText("run sleep 100\r")
	m = tm.expect(m, ".")
	tm.typeText("\x03")
	m = tm.expect(m, "interrupted\n")
	m = tm.expect(m, prompt)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var last box.RunRecord
		for r, err := range b.AllRuns(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if r.Type == string(box.RunTypeAgent) && r.CreatedAt.After(last.CreatedAt) {
				last = r
			}
		}
		if last.Status == box.RunCancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the interrupted agent run is %q", last.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Plain text is a prompt for the agent, streamed.
	tm.typeText("review main.go\r")
	m = tm.expect(m, `› Read {"path":"main.go"}`)
	m = tm.expect(m, `{"verdict":"changes_requested"`)
	m = tm.expect(m, "120 input / 45 output tokens")
	m = tm.expect(m, prompt)
	// History: the last line comes back with the up arrow.
	tm.typeText("\x1b[A")
	m = tm.expect(m, "review main.go")
	tm.typeText("\x15exit\r") // Ctrl-U clears the recalled line
	if code := tm.wait(); code != 0 {
		t.Errorf("exit from the REPL: %d", code)
	}
	_ = m
}

// fetchModules puts every module of the SDK's build list (the module at
// the repository's root) in the module cache, once per test binary, the
// tests of its dependencies' packages included: a demo's go mod tidy,
// which the tests then run offline (GOPROXY=off), asks for those too, and
// a module cache filled by building this repository alone lacks some of
// them. It works on a copy of the SDK's go.mod, so that the checksums it
// adds go to the copy's go.sum, whose path it returns, and the
// repository's files stay as they are.
var fetchModules = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp(testDir, "modules-")
	if err != nil {
		return "", err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.Command("go", "mod", "download", "all")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -modfile="+filepath.Join(dir, "go.mod"), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return filepath.Join(dir, "go.sum"), nil
})

// needModules fails t when the module cache cannot be filled, and returns
// the path of a go.sum that vouches for every module of the SDK's build
// list.
func needModules(t *testing.T) string {
	t.Helper()
	sum, err := fetchModules()
	if err != nil {
		t.Fatalf("go mod download all (the module proxy is needed once to fill the module cache): %v", err)
	}
	return sum
}

func TestInitDemo(t *testing.T) {
	t.Parallel()
	sumFile := needModules(t)
	dir := filepath.Join(t.TempDir(), "demo")
	if out := mustCLI(t, nil, "", "init-demo", dir, "--no-run"); !strings.Contains(out, "main.go") {
		t.Errorf("init-demo = %q", out)
	}
	for _, f := range []string{"main.go", "go.mod", ".env", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// The program builds against this SDK.
	root, _ := filepath.Abs("../..")
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	gomod = append(gomod, []byte("\nrequire github.com/upstash/box-go v0.0.0\nreplace github.com/upstash/box-go => "+root+"\n")...)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
		t.Fatal(err)
	}
	// Offline: fetchModules's go.sum vouches for every module it needs.
	sum, err := os.ReadFile(sumFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{{"go", "mod", "tidy"}, {"go", "vet", "./..."}, {"go", "build", "-o", exeName("demo"), "."}} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s in the demo: %v\n%s", argv, err, out)
		}
	}
	// And it does what it says, on boxd, leaving no box behind.
	srv := boxtest.NewServer(t)
	demo := exec.Command(filepath.Join(dir, exeName("demo")))
	demo.Dir = dir
	demo.Env = env(t, srv)
	out, err := demo.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "python says 5050\n") || !strings.Contains(string(out), "read back: written from Go\n") {
		t.Errorf("the demo: %v\n%s", err, out)
	}
	if left, err := srv.Client().List(t.Context(), nil); err != nil || len(left) != 0 {
		t.Errorf("after the demo: %d boxes, %v", len(left), err)
	}
	if r := cli(t, nil, "", "init-demo", dir, "--no-run"); r.code == 0 {
		t.Error("init-demo into a directory that is not empty succeeded")
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(boxBin, "serve", "-root", "host", "-addr", "127.0.0.1:0", "-data", t.TempDir())
	cmd.Env = env(t, nil)
	if runtime.GOOS != "linux" {
		// boxd runs boxes only on Linux: box serve says so, and what to
		// set instead, and fails.
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "boxes run only on Linux") || !strings.Contains(string(out), "UPSTASH_BOX_BASE_URL") {
			t.Errorf("box serve on %s: %v\n%s", runtime.GOOS, err, out)
		}
		return
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var url, key string
	buf := make([]byte, 4096)
	var got strings.Builder
	for url == "" || key == "" {
		n, err := stdout.Read(buf)
		got.Write(buf[:n])
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(got.String()); m != nil {
			url = m[1]
		}
		if m := regexp.MustCompile(`API key: (\S+)`).FindStringSubmatch(got.String()); m != nil {
			key = m[1]
		}
		if err != nil {
			t.Fatalf("box serve printed %q: %v", got.String(), err)
		}
	}
	// The boxes of box serve are real, and the same binary is their agent.
	c, err := box.NewClient(box.WithAPIKey(key), box.WithBaseURL(url), box.WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := c.Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := b.Exec.Command(ctx, "echo served"); err != nil || r.Stdout != "served\n" {
		t.Fatalf("exec in a box of box serve = %+v, %v", r, err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("box serve after SIGTERM: %v", err)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	if out := mustCLI(t, nil, "", "completion", "bash"); !strings.Contains(out, "__start_box") {
		t.Errorf("completion bash = %.200q", out)
	}
	// What the shell scripts ask of box: commands, then box ids.
	srv := boxtest.NewServer(t)
	if out := mustCLI(t, srv, "", "__complete", "sn"); !strings.Contains(out, "snapshot\t") {
		t.Errorf("completing sn = %q", out)
	}
	id := strings.TrimSpace(strings.TrimPrefix(mustCLI(t, srv, "", "create", "--no-repl", "--name", "completed"), "created box "))
	if out := mustCLI(t, srv, "", "__complete", "shell", ""); !strings.Contains(out, id+"\tcompleted, idle") {
		t.Errorf("completing a box id = %q", out)
	}
	if out := mustCLI(t, srv, "", "__complete", "rm", id, ""); strings.Contains(out, id) {
		t.Errorf("rm completes a box already named: %q", out)
	}
}

// TestRmDeletesWhatExists: box rm with a missing id among others deletes
// the others, names each failure on stderr, and exits 1, as docker rm does
// (it used to delete nothing and name only the missing id).
func TestRmDeletesWhatExists(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	a := strings.TrimSpace(mustCLI(t, srv, "", "create", "--no-repl", "--json"))
	b := strings.TrimSpace(mustCLI(t, srv, "", "create", "--no-repl", "--json"))
	var ia, ib struct{ ID string }
	if json.Unmarshal([]byte(a), &ia) != nil || json.Unmarshal([]byte(b), &ib) != nil || ia.ID == "" || ib.ID == "" {
		t.Fatalf("create --json: %q %q", a, b)
	}
	r := cli(t, srv, "", "rm", ia.ID, "box-missing", ib.ID)
	if r.code != 1 {
		t.Errorf("rm with a missing id exited %d, want 1", r.code)
	}
	if want := "deleted " + ia.ID + "\ndeleted " + ib.ID + "\n"; r.stdout != want {
		t.Errorf("rm stdout %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "rm box-missing: box not found") || strings.Contains(r.stderr, ia.ID) {
		t.Errorf("rm stderr %q: want the missing id's failure alone", r.stderr)
	}
	for _, id := range []string{ia.ID, ib.ID} {
		if g := cli(t, srv, "", "get", id); g.code != 1 {
			t.Errorf("box %s after rm: get exited %d", id, g.code)
		}
	}

	c := strings.TrimSpace(mustCLI(t, srv, "", "create", "--no-repl", "--json"))
	var ic struct{ ID string }
	if json.Unmarshal([]byte(c), &ic) != nil {
		t.Fatalf("create --json: %q", c)
	}
	r = cli(t, srv, "", "--json", "rm", "box-missing", ic.ID)
	var out struct {
		Deleted []string
		Failed  []struct{ ID, Error string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 1 {
		t.Fatalf("rm --json: exit %d, %q, %v", r.code, r.stdout, err)
	}
	if len(out.Deleted) != 1 || out.Deleted[0] != ic.ID || len(out.Failed) != 1 || out.Failed[0].ID != "box-missing" || !strings.Contains(out.Failed[0].Error, "box not found") {
		t.Errorf("rm --json = %+v", out)
	}
}

// TestVersionAndBaseURL: box version says its own and its SDK's versions
// and whether the server answers (exit 1 when it does not, as docker
// version does); --base-url beats UPSTASH_BOX_BASE_URL.
func TestVersionAndBaseURL(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	dead := "http://127.0.0.1:1" // nothing listens on port 1

	r := runBox(t, env(t, srv), "", "version")
	if r.code != 0 || !strings.Contains(r.stdout, "SDK box-go "+box.Version) || !strings.Contains(r.stdout, "server: "+srv.URL()+" answered") {
		t.Errorf("version against boxd: %+v", r)
	}
	r = runBox(t, env(t, nil, "UPSTASH_BOX_API_KEY="+srv.APIKey(), "UPSTASH_BOX_BASE_URL="+dead), "", "version")
	if r.code != 1 || !strings.Contains(r.stdout, "server: "+dead+" did not answer") || strings.Contains(r.stdout+r.stderr, srv.APIKey()) {
		t.Errorf("version against a server that is not there: %+v", r)
	}
	r = runBox(t, env(t, nil), "", "version")
	if r.code != 0 || !strings.Contains(r.stdout, "server: not asked") {
		t.Errorf("version without a key: %+v", r)
	}
	r = runBox(t, env(t, srv), "", "--json", "version")
	var v struct {
		SDK    string
		Server struct {
			URL       string
			Reachable bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.SDK != box.Version || v.Server.URL != srv.URL() || !v.Server.Reachable {
		t.Errorf("version --json: %q, %v", r.stdout, err)
	}

	// --base-url names the server whatever the environment says.
	id := strings.TrimSpace(runBox(t, env(t, srv), "", "create", "--no-repl", "--json").stdout)
	r = runBox(t, env(t, nil, "UPSTASH_BOX_API_KEY="+srv.APIKey(), "UPSTASH_BOX_BASE_URL="+dead), "", "--base-url", srv.URL(), "ls")
	var created struct{ ID string }
	if json.Unmarshal([]byte(id), &created) != nil || r.code != 0 || !strings.Contains(r.stdout, created.ID) {
		t.Errorf("ls with --base-url over a dead UPSTASH_BOX_BASE_URL: %+v (created %q)", r, id)
	}
	r = runBox(t, env(t, srv), "", "--base-url", dead, "ls")
	if r.code != 1 {
		t.Errorf("ls with --base-url at nothing: %+v", r)
	}
}
