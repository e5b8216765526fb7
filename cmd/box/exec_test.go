package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/upstash/box-go/boxtest"
)

// TestExecFlags: box exec takes -w and -e, exits as a shell would when the
// program cannot start (127 when it is not there, 126 when it cannot run)
// and with 128+n after a signal, and prints {exit_code, stdout, stderr}
// with --json. It used to have none of these flags and exited 1 for a
// missing program.
func TestExecFlags(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)
	mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", "mkdir -p sub && echo data > plain && chmod 644 plain")
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"-w", "/tmp", id, "--", "pwd"}, 0, "/tmp\n", ""},
		{[]string{"-w", "sub", id, "--", "pwd"}, 0, "/workspace/home/sub\n", ""},
		{[]string{"-e", "A=1", "-e", "B=x=y", id, "--", "sh", "-c", `echo "$A $B"`}, 0, "1 x=y\n", ""},
		{[]string{id, "--", "no-such-program"}, 127, "", "no-such-program"},
		{[]string{id, "--", "./plain"}, 126, "", "permission denied"},
		{[]string{id, "--", "sh", "-c", "kill -TERM $$"}, 128 + 15, "", ""},
		{[]string{"-e", "NOEQUALS", id, "--", "true"}, 2, "", "KEY=VALUE"},
		{[]string{"-t", id, "--", "true"}, 2, "", "-t needs a terminal"},
	} {
		r := cli(t, srv, "", append([]string{"exec"}, tc.args...)...)
		if r.code != tc.code || r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("box exec %q = %+v; want exit %d, stdout %q, stderr with %q", tc.args, r, tc.code, tc.stdout, tc.stderr)
		}
	}
	r := cli(t, srv, "", "exec", "--json", id, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	var all map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 3 || all["exit_code"] != 3.0 || all["stdout"] != "out\n" || all["stderr"] != "err\n" {
		t.Errorf("exec --json = %+v (%v)", r, err)
	}
	r = cli(t, srv, "", "exec", "--json", id, "--", "no-such-program")
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 127 || all["exit_code"] != 127.0 || !strings.Contains(all["stderr"].(string), "no-such-program") {
		t.Errorf("exec --json of a missing program = %+v (%v)", r, err)
	}
}

// TestExecTerminal: in a real terminal, box exec -i passes what is typed
// to the command (it used to drop it), -t gives the command a terminal
// of the window's size, and box shell <id> -- cmd runs cmd in one (it
// used to be refused).
func TestExecTerminal(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)

	tm := inTerminal(t, srv, "exec", "-i", id, "--", "tr", "a-z", "A-Z")
	tm.typeText("typed in\r\x04")
	tm.expect(0, "TYPED IN")
	if code := tm.wait(); code != 0 {
		t.Errorf("exec -i exited %d", code)
	}

	tm = inTerminal(t, srv, "exec", "-t", "-w", "/tmp", id, "--", "sh", "-c", `tty; stty size; pwd; read x; echo "got-$x"; exit 5`)
	m := tm.expect(0, "/dev/pts/")
	m = tm.expect(m, "30 100\n/tmp\n")
	tm.typeText("abc\r")
	tm.expect(m, "got-abc")
	if code := tm.wait(); code != 5 {
		t.Errorf("exec -t exited %d, want the command's 5", code)
	}

	tm = inTerminal(t, srv, "shell", id, "--", "sh", "-c", "echo $((6*7)); tty; exit 4")
	tm.expect(tm.expect(0, "42"), "/dev/pts/")
	if code := tm.wait(); code != 4 {
		t.Errorf("shell -- cmd exited %d, want 4", code)
	}
	if r := cli(t, srv, "", "shell", id, "--", "echo", "not", "in", "a", "terminal"); r.code != 0 || r.stdout != "not in a terminal\n" {
		t.Errorf("shell -- cmd without a terminal = %+v", r)
	}
}
