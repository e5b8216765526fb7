//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBound starts a program the way a sandbox's launcher starts, and
// checks that it runs with the agent's open files, soft and hard, and
// the box's oom_score_adj, with the arguments it was given.
func TestBound(t *testing.T) {
	for _, shell := range []bool{true, false} {
		t.Run(fmt.Sprintf("shell=%v", shell), func(t *testing.T) {
			if shell && !haveShell() {
				t.Skip("no /bin/sh")
			}
			cmd := exec.Command("/bin/sh", "-c", `ulimit -S -n; ulimit -H -n; cat /proc/self/oom_score_adj; echo "$0|$1|$2"`, "zero", "a b", "")
			if !shell {
				cmd.Env = []string{"PATH=/usr/bin:/bin"}
				n := agentNoFile()
				cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d %d %d", envBound, n, n, OOMScoreAdj))
				cmd.Args = append([]string{"boxd-bound", cmd.Path}, cmd.Args...)
				cmd.Path = "/proc/self/exe"
			} else {
				bound(cmd)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			n := agentNoFile()
			want := fmt.Sprintf("%d\n%d\n%d\nzero|a b|\n", n, n, OOMScoreAdj)
			if string(out) != want {
				t.Errorf("got %q, want %q", out, want)
			}
			if self, _ := os.ReadFile("/proc/self/oom_score_adj"); strings.TrimSpace(string(self)) != "0" {
				t.Errorf("the test's own oom_score_adj became %q", self)
			}
		})
	}
}
