package main

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/gittest"
	"github.com/upstash/box-go/local"
)

// created runs box create with args and returns the new box's id.
func created(t *testing.T, srv *boxtest.Server, args ...string) string {
	t.Helper()
	out := mustCLI(t, srv, "", append([]string{"create", "--no-repl"}, args...)...)
	return strings.TrimSpace(strings.TrimPrefix(out, "created box "))
}

// drained waits until everything the command printed has been read.
func (tm *ptyTerm) drained() {
	tm.t.Helper()
	select {
	case <-tm.done:
	case <-time.After(20 * time.Second):
		tm.t.Fatal("the terminal was never drained")
	}
}

// TestNewestBox: connect and shell without an id reach the box created
// last, also among boxes created in the same second (creation times are
// whole seconds).
func TestNewestBox(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	var ids []string
	for i := range 4 {
		ids = append(ids, created(t, srv, "--name", fmt.Sprintf("n%d", i)))
	}
	for i, id := range ids {
		mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", fmt.Sprintf("echo box-%d > which", i))
	}
	if got, want := mustCLI(t, srv, "", "connect", "--no-repl"), "connected to "+ids[3]+"\n"; got != want {
		t.Errorf("connect without an id = %q, want %q", got, want)
	}
	tm := inTerminal(t, srv, "shell")
	m := tm.expect(0, "$ ")
	tm.typeText("cat which\r")
	if got, _ := tm.expectRe(m, regexp.MustCompile(`\n(box-\d)\n`)); got != "box-3" {
		t.Errorf("shell without an id opened %s, not box-3", got)
	}
	tm.typeText("exit\r")
	if code := tm.wait(); code != 0 {
		t.Errorf("shell exited %d", code)
	}
}

// TestColour: tables are coloured on a terminal unless NO_COLOR is set to
// something, and stay aligned as the eye sees them when they are.
func TestColour(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	created(t, srv, "--name", "coloured")
	for _, tc := range []struct {
		name   string
		env    []string
		colour bool
	}{
		{"unset", nil, true},
		{"empty", []string{"NO_COLOR="}, true},
		{"set", []string{"NO_COLOR=1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := inTerminalEnv(t, env(t, srv, append([]string{"TERM=xterm"}, tc.env...)...), "ls")
			if code := tm.wait(); code != 0 {
				t.Fatalf("ls exited %d:\n%s", code, tm.screen())
			}
			tm.drained()
			if got := strings.Contains(tm.raw(), "\x1b[1mID"); got != tc.colour {
				t.Errorf("coloured = %v, want %v: %q", got, tc.colour, tm.raw())
			}
			lines := strings.Split(strings.TrimSpace(tm.screen()), "\n")
			if len(lines) != 2 {
				t.Fatalf("ls printed:\n%s", tm.screen())
			}
			for col, cell := range map[string]string{"NAME": "coloured", "STATUS": "idle", "SIZE": "small"} {
				if h, c := strings.Index(lines[0], col), strings.Index(lines[1], cell); h != c {
					t.Errorf("%s is at column %d and %q at %d:\n%s", col, h, cell, c, tm.screen())
				}
			}
		})
	}
}

// TestCreateFlags: every create flag reaches the box.
func TestCreateFlags(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	const agentKey = "sk-ant-cli-flag-secret-41"
	r := cli(t, srv, "", "create", "--json", "--runtime", "python", "--agent-model", "anthropic/claude-sonnet-4-5",
		"--agent-api-key", agentKey, "--env", "A=1", "--env", "B=two=2", "--keep-alive", "--size", "large")
	if r.code != 0 {
		t.Fatalf("create = %+v", r)
	}
	var v boxView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("create --json = %q: %v", r.stdout, err)
	}
	if v.Runtime != "python" || v.Agent != string(box.HarnessClaudeCode) || v.Model != "anthropic/claude-sonnet-4-5" || !v.KeepAlive || v.Size != "large" {
		t.Errorf("created %+v", v)
	}
	if got := mustCLI(t, srv, "", "exec", v.ID, "--", "sh", "-c", `echo "$A $B"; python3 -c 'print(6*7)'`); got != "1 two=2\n42\n" {
		t.Errorf("in the box: %q", got)
	}
	got := mustCLI(t, srv, "", "get", v.ID)
	if strings.Contains(r.stdout+r.stderr+got, agentKey) {
		t.Errorf("the agent key was printed")
	}
	// "stored" is the account's stored key, and no key is the managed
	// one; both are the box's.
	for _, key := range []string{"stored", ""} {
		args := []string{"create", "--json", "--agent-model", "openai/gpt-5"}
		if key != "" {
			args = append(args, "--agent-api-key", key)
		}
		var v boxView
		if err := json.Unmarshal([]byte(mustCLI(t, srv, "", args...)), &v); err != nil || v.Agent != string(box.HarnessCodex) || v.Model != "openai/gpt-5" {
			t.Errorf("create with agent key %q = %+v, %v", key, v, err)
		}
	}
}

// TestLogsFollow: logs -f prints what happens after it started.
func TestLogsFollow(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)
	cmd := exec.CommandContext(t.Context(), boxBin, "logs", id, "-f")
	cmd.Env = env(t, srv)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		buf := make([]byte, 4096)
		var got strings.Builder
		for {
			n, err := out.Read(buf)
			got.Write(buf[:n])
			lines <- got.String()
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(re *regexp.Regexp) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case s, ok := <-lines:
				if re.MatchString(s) {
					return
				}
				if !ok {
					t.Fatalf("logs -f ended, having printed:\n%s", s)
				}
			case <-timeout:
				t.Fatalf("logs -f never printed %s", re)
			}
		}
	}
	waitFor(regexp.MustCompile(`box created`))
	mustCLI(t, srv, "", "snapshot", id, "--name", "followed")
	waitFor(regexp.MustCompile(`snapshot \S+ taken`))
}

// TestREPLFromCreate: the REPL after create and after from-snapshot, with
// the commands the other REPL test does not type, a spinner and a
// progress bar.
func TestREPLFromCreate(t *testing.T) {
	t.Parallel()
	const token = "ghp_repl_token_never_shown_77"
	g, gh := gittest.NewGit(t, token), gittest.NewGitHub(t, token)
	g.Repo(t, "acme/app", map[string]string{"README.md": "# app\n"})
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.GitHubURL = g.BoxURL
		c.GitHubAPIURL = gh.URL
	}))
	ctx := t.Context()
	big := make([]byte, 24<<20)
	_, _ = rand.Read(big)
	local := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(local, big, 0o644); err != nil {
		t.Fatal(err)
	}

	tm := inTerminal(t, srv, "create", "--git-token", token, "--env", "A=1", "--env", "B=2")
	m := tm.expect(0, "creating box")
	id, m := tm.expectRe(m, regexp.MustCompile(`created box (box-\w+)\n`))
	prompt := id + ":/workspace/home> "
	m = tm.expect(m, prompt)
	tm.typeText("help\r")
	m = tm.expect(m, "git create-pr <title>")
	m = tm.expect(m, prompt)
	tm.typeText("exec echo \"[$A-$B]\"\r")
	m = tm.expect(m, "[1-2]\n")
	m = tm.expect(m, prompt)

	// A file each way, with a progress bar.
	// Tab completes what to upload on this machine.
	tm.typeText("/files upload " + filepath.Join(filepath.Dir(local), "bi") + "\t")
	m = tm.expect(m, local+" ")
	tm.typeText("in/big.bin\r")
	m = tm.expect(m, "uploading")
	m = tm.expect(m, prompt)
	b, err := srv.Client().Get(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Files.Read(ctx, "in/big.bin"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the uploaded file: %d bytes, %v", len(got), err)
	}
	back := t.TempDir()
	tm.typeText("files download in/big.bin " + back + "\r")
	m = tm.expect(m, "downloading")
	m = tm.expect(m, prompt)
	if got, err := os.ReadFile(filepath.Join(back, "big.bin")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the downloaded file: %d bytes, %v", len(got), err)
	}

	// git, with the token of --git-token.
	tm.typeText("git clone acme/app\r")
	m = tm.expect(m, "cloned acme/app\n")
	tm.typeText("cd app\r")
	prompt = id + ":/workspace/home/app> "
	m = tm.expect(m, prompt)
	tm.typeText("exec git checkout -q -b feature && echo a change >> README.md\r")
	m = tm.expect(m, prompt)
	tm.typeText("git diff\r")
	m = tm.expect(m, "+a change\n")
	m = tm.expect(m, prompt)
	app := b.At("app")
	if _, err := app.Git.Commit(ctx, &box.CommitParams{Message: "a change"}); err != nil {
		t.Fatal(err)
	}
	if err := app.Git.Push(ctx, nil); err != nil {
		t.Fatal(err)
	}
	tm.typeText("git create-pr Add a change\r")
	_, m = tm.expectRe(m, regexp.MustCompile(`(https?://\S+/acme/app/pull/\d+)\n`))
	m = tm.expect(m, prompt)
	var pr *gittest.Request
	for _, r := range gh.Requests() {
		if r.Method == http.MethodPost && r.Path == "/repos/acme/app/pulls" {
			pr = &r
		}
	}
	if pr == nil || !strings.Contains(string(pr.Body), `"Add a change"`) {
		t.Errorf("the pull request sent: %+v", pr)
	}

	tm.typeText("snapshot kept\r")
	m = tm.expect(m, "taking snapshot")
	snap, m := tm.expectRe(m, regexp.MustCompile(`snapshot (\S+) \(\d+ bytes\)\n`))
	m = tm.expect(m, prompt)
	tm.typeText("pause\r")
	m = tm.expect(m, "paused "+id+"\n")
	if code := tm.wait(); code != 0 {
		t.Errorf("pause left the REPL with %d", code)
	}
	if got, err := srv.Client().Get(ctx, id, nil); err != nil || got.Info().Status != box.StatusPaused {
		t.Errorf("after pause in the REPL: %v, %v", got.Info().Status, err)
	}
	if strings.Contains(tm.raw(), token) {
		t.Error("the git token was printed")
	}

	// The REPL after from-snapshot, and delete.
	tm = inTerminal(t, srv, "from-snapshot", snap)
	m = tm.expect(0, "restoring snapshot")
	id2, m := tm.expectRe(m, regexp.MustCompile(`created box (box-\w+)\n`))
	prompt = id2 + ":/workspace/home> "
	m = tm.expect(m, prompt)
	tm.typeText("files read app/README.md\r")
	m = tm.expect(m, "a change\n")
	m = tm.expect(m, prompt)
	tm.typeText("/delete\r")
	tm.expect(m, "deleted "+id2+"\n")
	if code := tm.wait(); code != 0 {
		t.Errorf("delete left the REPL with %d", code)
	}
	if _, err := srv.Client().Get(ctx, id2, nil); !isNotFound(err) {
		t.Errorf("the box after delete in the REPL: %v", err)
	}
}

func isNotFound(err error) bool {
	var ae *box.Error
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

// TestSecretsNeverPrinted: a server that repeats what it was sent in its
// errors (an API key, a provider key, a git token) gets none of them
// printed.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "refused key " + r.Header.Get("X-Box-Api-Key") + " for " + string(body)})
	}))
	t.Cleanup(echo.Close)
	const apiKey, agentKey, gitToken = "box_key_never_printed_31", "sk-ant-never-printed-32", "ghp_never_printed_33"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"token flag", nil, []string{"--token", apiKey, "ls"}},
		{"key from the environment", []string{"UPSTASH_BOX_API_KEY=" + apiKey}, []string{"ls"}},
		{"create", nil, []string{"--token", apiKey, "create", "--no-repl", "--agent-model", "anthropic/claude-sonnet-4-5", "--agent-api-key", agentKey, "--git-token", gitToken}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(boxBin, tc.args...)
			cmd.Env = env(t, nil, append([]string{"UPSTASH_BOX_BASE_URL=" + echo.URL}, tc.env...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			printed := stdout.String() + stderr.String()
			if err == nil || !strings.Contains(printed, "refused key [redacted]") {
				t.Fatalf("box %q = %v, printed %q", tc.args, err, printed)
			}
			for _, s := range []string{apiKey, agentKey, gitToken} {
				if strings.Contains(printed, s) {
					t.Errorf("box %q printed a secret: %q", tc.args, printed)
				}
			}
		})
	}
}

// TestInitDemoRuns: init-demo offers to run the program, and runs it on
// boxd when told to. The SDK comes from a module proxy in a directory,
// so that the program's go mod tidy works offline.
func TestInitDemoRuns(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	needModules(t)
	goEnv := goEnvFor(t, moduleProxy(t))
	dir := filepath.Join(t.TempDir(), "demo")
	tm := inTerminalEnv(t, append(env(t, srv, "TERM=xterm", "NO_COLOR=1"), goEnv...), "init-demo", dir)
	tm.timeout = 3 * time.Minute // go mod tidy and the first build of the program
	m := tm.expect(0, "[y/N] ")
	tm.typeText("y\r")
	m = tm.expect(m, "python says 5050\n")
	tm.expect(m, "read back: written from Go\n")
	if code := tm.wait(); code != 0 {
		t.Fatalf("init-demo exited %d:\n%s", code, tm.screen())
	}
	if left, err := srv.Client().List(t.Context(), nil); err != nil || len(left) != 0 {
		t.Errorf("after the demo: %d boxes, %v", len(left), err)
	}
	// Told no, it says how to run it later.
	tm = inTerminal(t, srv, "init-demo", filepath.Join(t.TempDir(), "later"))
	m = tm.expect(0, "[y/N] ")
	tm.typeText("n\r")
	tm.expect(m, "Run it with: cd ")
	if code := tm.wait(); code != 0 {
		t.Errorf("init-demo answered no exited %d", code)
	}
}

// goEnvFor is the environment of the go command for a program that needs
// this module from proxy, with this process's caches (box commands run
// with a HOME of their own).
func goEnvFor(t *testing.T, proxy string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return []string{"GOCACHE=" + v["GOCACHE"], "GOMODCACHE=" + v["GOMODCACHE"], "GOPATH=" + v["GOPATH"],
		"GOPROXY=file://" + proxy + ",off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod"}
}

// moduleProxy lays out the SDK's module (the repository's root, without
// the modules nested in it) as version v0.0.1 in a directory that GOPROXY
// can name with file://.
func moduleProxy(t *testing.T) string {
	t.Helper()
	const module, version = "github.com/upstash/box-go", "v0.0.1"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	v := filepath.Join(proxy, filepath.FromSlash(module), "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"list":            version + "\n",
		version + ".info": `{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`,
		version + ".mod":  string(gomod),
	} {
		if err := os.WriteFile(filepath.Join(v, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(v, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			// Not part of the module: git's own files, npm's trees, and
			// nested modules.
			if d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		w, err := zw.Create(module + "@" + version + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(w, src)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return proxy
}

// TestJSONEverywhere: every command that prints data prints JSON with
// --json.
func TestJSONEverywhere(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)
	mustCLI(t, srv, "", "env", "set", "JSON_KEY=v")
	for _, args := range [][]string{
		{"status", id}, {"pause", id}, {"resume", id}, {"env"}, {"get", id}, {"ls"},
		{"cp", "-", id + ":from-stdin.txt"}, {"snapshot", id}, {"url", id, "8080"}, {"urls", id}, {"logs", id},
		{"init-demo", filepath.Join(t.TempDir(), "demo")}, {"rm", id},
	} {
		out := mustCLI(t, srv, "some input\n", append(args, "--json")...)
		dec := json.NewDecoder(strings.NewReader(out))
		n := 0
		for {
			var v any
			err := dec.Decode(&v)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("box %q --json printed %q: %v", args, out, err)
				break
			}
			n++
		}
		if n == 0 {
			t.Errorf("box %q --json printed nothing", args)
		}
	}
}
