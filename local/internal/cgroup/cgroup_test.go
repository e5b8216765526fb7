//go:build linux

package cgroup

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// state returns a process's state letter from /proc (S sleeping, T
// stopped, D in the kernel...).
func state(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return f[0]
}

func TestGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("control groups need root")
	}
	name := "test-" + strconv.Itoa(os.Getpid())
	g, err := New(name, Limits{CPUs: 0.5, Memory: 64 << 20, Pids: 16})
	if err != nil {
		t.Skipf("no control groups here: %v", err)
	}
	defer g.Remove()
	// The shell waits for a line before it forks, as the agent waits
	// for its configuration: its children are born in the groups.
	cmd := exec.Command("sh", "-c", "read go; sleep 30 & sleep 30 & wait")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var procs []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if procs = g.Procs(); len(procs) == 3 {
			break
		}
	}
	if len(procs) != 3 || !slices.Contains(procs, cmd.Process.Pid) {
		t.Fatalf("Procs = %v, want the shell %d and its two sleeps", procs, cmd.Process.Pid)
	}
	if len(g.Unenforced()) != 0 {
		t.Logf("not enforced here: %v", g.Unenforced())
	}
	if g.CanFreeze() {
		if err := g.Freeze(); err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if s := state(p); s != "T" && s != "D" {
				t.Errorf("process %d is %q while frozen", p, s)
			}
		}
		if err := g.Thaw(); err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if s := state(p); s == "T" {
				t.Errorf("process %d still stopped after Thaw", p)
			}
		}
	}
	g.Kill()
	if left := g.Procs(); len(left) != 0 {
		t.Errorf("Procs after Kill = %v", left)
	}
}
