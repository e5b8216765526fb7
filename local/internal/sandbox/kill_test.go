//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/upstash/box-go/local/internal/proc"
)

// fakeAgent is a box's agent that says it serves and then only waits,
// with a background job beside it in the box.
const fakeAgent = `#!/bin/sh
sleep 1000 5>&- &
printf x >&5
exec sleep 1000
`

// TestKillReapsEveryProcess: a killed sandbox is Done only once every
// process of it is gone, reaped, and its uid has no process left. Kill
// used to kill bubblewrap's launcher right after the box's processes;
// when the launcher had not yet reaped the sandbox's init (a busy
// machine had not let it run), the init went to the host's init, and
// the box started its next sandbox while the last one's init was still
// there. The launcher is stopped here to play the busy machine, and the
// test process is a subreaper, so that an init left behind comes to it
// and stays, instead of being reaped by the host's init at some moment.
func TestKillReapsEveryProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a sandbox of a box uid's own needs root")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("needs bubblewrap")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	agent := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(agent, []byte(fakeAgent), 0o755); err != nil {
		t.Fatal(err)
	}

	// The launcher gets to run once the init is dead: it reaps it, and
	// is not killed for being late.
	t.Run("launcher late", func(t *testing.T) {
		t.Parallel()
		sb, uid := startFake(t, agent, 1)
		launcher, init := sb.cmd.Process.Pid, sb.init
		stopLauncher(t, sb)
		killed := killAsync(sb)
		deadline := time.Now().Add(time.Minute)
		for st := stateOf(init); st != 'Z' && st != 0; st = stateOf(init) {
			if time.Now().After(deadline) {
				t.Fatalf("the killed sandbox's init %d is still in state %c", init, st)
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = syscall.Kill(launcher, syscall.SIGCONT)
		waitKilled(t, killed)
		checkGone(t, sb, uid)
		var ee *exec.ExitError
		if !errors.As(sb.err, &ee) || !ee.Exited() {
			t.Errorf("bubblewrap's launcher ended with %v, want an exit of its own after reaping the init", sb.err)
		}
	})
	// The launcher never runs: it is killed in the end, and the init it
	// leaves behind is reaped all the same before the sandbox is Done.
	t.Run("launcher stuck", func(t *testing.T) {
		t.Parallel()
		sb, uid := startFake(t, agent, 2)
		stopLauncher(t, sb)
		waitKilled(t, killAsync(sb))
		checkGone(t, sb, uid)
	})
}

// startFake starts a sandbox of box uid n's own, with agent as its agent.
func startFake(t *testing.T, agent string, n int) (*Sandbox, int) {
	uid := 0x6f100000 + os.Getpid()%0x10000*4 + n
	l := Layout{Root: filepath.Join(t.TempDir(), "box")}
	if err := l.Prepare(uid); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("box-killtest-%d-%d", os.Getpid(), n)
	sb, err := Start(t.Context(), Spec{
		ID: id, Layout: l, Hostname: "killtest", Mode: ModeBwrap,
		Agent: agent, AgentConfig: []byte("{}"), UID: uid,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-sb.Done():
		default:
			_ = syscall.Kill(sb.cmd.Process.Pid, syscall.SIGCONT)
			sb.Kill()
		}
	})
	if len(procsOf(uid)) < 3 {
		t.Fatalf("the sandbox's processes (init, agent, job): %v", procsOf(uid))
	}
	// The liveness check watches the agent, init's child, which has
	// started its job below it.
	if kids := proc.Children(sb.init); len(kids) != 1 || sb.agentPID != kids[0] || len(proc.Children(sb.agentPID)) != 1 {
		t.Errorf("agent pid %d; init %d has children %v", sb.agentPID, sb.init, kids)
	}
	return sb, uid
}

// stopLauncher stops bubblewrap's launcher, as a busy machine may keep it
// from running.
func stopLauncher(t *testing.T, sb *Sandbox) {
	if err := syscall.Kill(sb.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

func killAsync(sb *Sandbox) <-chan struct{} {
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		sb.Kill()
	}()
	return killed
}

func waitKilled(t *testing.T, killed <-chan struct{}) {
	select {
	case <-killed:
	case <-time.After(time.Minute):
		t.Fatal("Kill has not returned after a minute")
	}
}

// checkGone checks that Kill has left nothing of sb: Done is closed, and
// no process of box uid uid is left, not even a zombie.
func checkGone(t *testing.T, sb *Sandbox, uid int) {
	t.Helper()
	select {
	case <-sb.Done():
	default:
		t.Error("Kill returned before the sandbox was Done")
	}
	for _, pid := range []int{sb.cmd.Process.Pid, sb.init} {
		if st := stateOf(pid); st != 0 {
			t.Errorf("process %d of the killed sandbox is still there, in state %c", pid, st)
		}
	}
	if left := procsOf(uid); len(left) > 0 {
		t.Errorf("processes of the killed box's uid %d are left: %v", uid, left)
	}
	if proc.UIDs()[uint32(uid)] {
		t.Errorf("uid %d still has a process", uid)
	}
}

// stateOf is the state letter of process pid (Z for a zombie), or 0 when
// it has been reaped.
func stateOf(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// procsOf lists the processes of host uid uid, each as pid:state.
func procsOf(uid int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 && f[0] == strconv.Itoa(uid) {
					out = append(out, fmt.Sprintf("%d:%c", pid, stateOf(pid)))
				}
				break
			}
		}
	}
	return out
}
