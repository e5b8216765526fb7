//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/upstash/box-go/local/internal/proc"
)

// TestBusyIsNotHung gives the liveness check's verdict on real processes
// that did not answer: one that spins (an agent starved by its box's own
// processes) is busy; one that sleeps without processor time, one that is
// stopped, and one that is gone are not, and their sandboxes would be
// replaced.
func TestBusyIsNotHung(t *testing.T) {
	start := func(script string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	activity := func(pid int) proc.Activity {
		a, err := proc.ActivityOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	spinner := start("while :; do :; done")
	sleeper := start("exec sleep 60")
	stopped := start("while :; do :; done")
	// The sleeper is asked once it sleeps, its start (the shell, the
	// exec, the loader) over.
	sleep := activity(sleeper.Process.Pid)
	for sleep.Running || !strings.Contains(comm(sleeper.Process.Pid), "sleep") {
		time.Sleep(10 * time.Millisecond)
		sleep = activity(sleeper.Process.Pid)
	}
	spin, stop := activity(spinner.Process.Pid), activity(stopped.Process.Pid)
	if err := stopped.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the time a question waits for its answer
	if !busy(spin, spinner.Process.Pid) {
		t.Error("a spinning process is not busy")
	}
	if busy(sleep, sleeper.Process.Pid) {
		t.Error("a sleeping process is busy")
	}
	if busy(stop, stopped.Process.Pid) {
		t.Error("a stopped process is busy")
	}
	_ = spinner.Process.Kill()
	_ = spinner.Wait()
	if busy(spin, spinner.Process.Pid) {
		t.Error("a process that is gone is busy")
	}
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return string(b)
}
