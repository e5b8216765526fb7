package agent

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitSparesBackgroundJobs: a command that has ended on its own is
// not killed afterwards when the request's context ends (as it does once
// the answer is written), even when the watcher of the command runs only
// then, as it can on a busy machine: the background jobs the command
// left in its process group live on.
func TestWaitSparesBackgroundJobs(t *testing.T) {
	defer func() { testHookWatch = nil }()
	for i := range 30 {
		release := make(chan struct{})
		testHookWatch = func() { <-release }
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		res, err := New(Config{}, nil).run(ctx, cmd, time.Minute)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %+v, %v", res, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
		if err != nil {
			t.Fatalf("pid %q: %v", res.Stdout, err)
		}
		cancel()       // the request ends
		close(release) // and only now does the watcher run
		time.Sleep(20 * time.Millisecond)
		alive := running(pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !alive {
			t.Fatalf("run %d: the background job of a command that had ended was killed", i)
		}
	}
}

// running reports whether pid is a process that has not ended (a zombie
// has).
func running(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(raw), ") ")
	return ok && !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
