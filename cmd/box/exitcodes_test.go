package main

import (
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
