package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/upstash/box-go/boxtest"
)

// TestExitCodes: box exits 2 for every kind of bad input, the server's
// 400s included, and 1 for other failures; a piped REPL exits with the
// status of its first failure. The server's refusals used to exit 1, a
// piped REPL 0 whatever failed, and completion of an unknown shell 0.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)
	for _, tc := range []struct {
		args []string
		code int
		in   string
	}{
		{[]string{"create", "--size", "huge", "--no-repl"}, 2, "size"},                        // the server's 400
		{[]string{"schedule", "create", id, "--cron", "not a cron", "--", "true"}, 2, "cron"}, // the server's 400
		{[]string{"url", id, "99999"}, 2, "99999"},                                            // refused before sending
		{[]string{"url", id, "port"}, 2, "port"},
		{[]string{"completion", "bogus"}, 2, "a shell"},
		{[]string{"snapshot"}, 2, "box id"},
		{[]string{"exec", id}, 2, "--"},
		{[]string{"get", "box-nosuchbox"}, 1, "box not found"}, // a failure, not bad input
		{[]string{"cp", id + ":no/such/file", t.TempDir()}, 1, "no such file"},
	} {
		r := cli(t, srv, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.in) {
			t.Errorf("box %q = exit %d, stderr %q; want %d mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.in)
		}
	}
	if r := cli(t, srv, "", "completion", "zsh"); r.code != 0 || !strings.Contains(r.stdout, "compdef") {
		t.Errorf("completion zsh = exit %d", r.code)
	}

	for _, tc := range []struct {
		script string
		code   int
	}{
		{"exec echo fine\nexec true\n", 0},
		{"exec echo fine\nexec exit 3\nexec exit 5\n", 3},
		{"files read no-such-file\nexec exit 4\n", 1},
		{"exec\nexec exit 4\n", 2},
		{"exec echo fine\nexec exit 6\nexit\n", 6},
	} {
		r := cli(t, srv, tc.script, "connect", id)
		if r.code != tc.code {
			t.Errorf("the REPL piped %q exited %d, want %d; stderr %q", tc.script, r.code, tc.code, r.stderr)
		}
	}
}

// TestInitDemoWritesKey: init-demo writes the key and server box was
// given into .env, readable by its owner alone (it used to write an empty
// key), and a template without one.
func TestInitDemoWritesKey(t *testing.T) {
	t.Parallel()
	const key = "box_demo_key_1234"
	dir := filepath.Join(t.TempDir(), "demo")
	r := runBox(t, env(t, nil, "UPSTASH_BOX_BASE_URL=http://127.0.0.1:8990"), "", "--token", key, "init-demo", dir, "--no-run")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, key) {
		t.Fatalf("init-demo = %+v", r)
	}
	data, err := os.ReadFile(filepath.Join(dir, ".env"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\nUPSTASH_BOX_API_KEY="+key+"\n") || !strings.Contains(string(data), "\nUPSTASH_BOX_BASE_URL=http://127.0.0.1:8990\n") {
		t.Errorf(".env = %q", data)
	}
	if fi, err := os.Stat(filepath.Join(dir, ".env")); err != nil || runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf(".env: %v, %v", fi.Mode(), err)
	}
	empty := filepath.Join(t.TempDir(), "demo")
	mustCLI(t, nil, "", "init-demo", empty, "--no-run")
	if data, _ := os.ReadFile(filepath.Join(empty, ".env")); !strings.Contains(string(data), "\nUPSTASH_BOX_API_KEY=\n# Uncomment") {
		t.Errorf(".env without a key = %q", data)
	}
}

// TestCompleteCp: box cp completes box ids (as "id:"), then paths in the
// box, directories ending in /.
func TestCompleteCp(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)
	mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", "mkdir -p src/inner && touch src/main.go src/inner/x.go readme")
	out := mustCLI(t, srv, "", "__complete", "cp", "")
	if !strings.Contains(out, id+":\t") || !strings.Contains(out, ":6\n") && !strings.Contains(out, ":2\n") {
		t.Errorf("completing cp's first argument = %q", out)
	}
	out = mustCLI(t, srv, "", "__complete", "cp", id+":")
	if !strings.Contains(out, id+":src/\n") || !strings.Contains(out, id+":readme\n") {
		t.Errorf("completing %s: = %q", id, out)
	}
	out = mustCLI(t, srv, "", "__complete", "cp", "./local", id+":src/")
	if !strings.Contains(out, id+":src/inner/\n") || !strings.Contains(out, id+":src/main.go\n") || strings.Contains(out, "readme") {
		t.Errorf("completing %s:src/ = %q", id, out)
	}
	if out := mustCLI(t, srv, "", "__complete", "cp", "./lo"); strings.Contains(out, id) {
		t.Errorf("a local path completed to box ids: %q", out)
	}
}
