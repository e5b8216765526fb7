//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stagedAgent says it serves, with a job beside it (as startFake wants)
// that keeps writing in the box's workspace, as a box does long after its
// start.
const stagedAgent = `#!/bin/sh
(i=0; while [ $i -lt 100 ]; do echo $i > /workspace/late; i=$((i+1)); sleep 0.05; done; exec sleep 1000) 5>&- &
printf x >&5
exec sleep 1000
`

// TestStartLeavesNothingStaged: once a sandbox's agent serves, nothing of
// the box is left mounted on the stage (every later bubblewrap would copy
// it), and the box goes on reaching its files through the sandbox's own
// mounts.
func TestStartLeavesNothingStaged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a sandbox of a box uid's own needs root")
	}
	agent := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(agent, []byte(stagedAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, _ := startFake(t, agent, 3)
	st, err := theStage()
	if err != nil {
		t.Fatal(err)
	}
	var mounts []string
	err = st.do(func() error {
		b, err := os.ReadFile("/proc/thread-self/mountinfo")
		for line := range strings.SplitSeq(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], st.dir+"/") && !strings.HasPrefix(f[4], st.dir+"/agent-") {
				mounts = append(mounts, f[4])
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) > 0 {
		t.Errorf("on the stage once the agent serves: %v", mounts)
	}
	// The box still writes into its workspace on the host.
	late := filepath.Join(sb.spec.Layout.Files().Workspace(), "late")
	var first string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(late)
		switch s := strings.TrimSpace(string(b)); {
		case s == "":
		case first == "":
			first = s
		case s != first:
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the box's writes to /workspace stopped reaching the host (last %q)", first)
}
