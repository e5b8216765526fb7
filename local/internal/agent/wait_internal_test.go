//go:build linux

package agent

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
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

// TestFollowJobs: with followJobs, what a background job writes after the
// command exited is read, until the job closes the output; without, the
// output is read only for a moment after the exit. An ended context stops
// the reading even while a job holds the output.
func TestFollowJobs(t *testing.T) {
	const script = "(sleep 0.5; echo late) & echo early"
	for _, follow := range []bool{false, true} {
		cmd := exec.Command("sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var out strings.Builder
		res, err := (&Agent{}).runOutput(context.Background(), cmd, &out, nil, time.Minute, follow)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("follow=%v: %+v, %v", follow, res, err)
		}
		want := "early\n"
		if follow {
			want = "early\nlate\n"
		}
		if out.String() != want {
			t.Errorf("follow=%v: output %q, want %q", follow, out.String(), want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		_, err := (&Agent{}).runOutput(ctx, cmd, &syncWriter{w: &out}, nil, time.Minute, true)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned while a job held the output: %v", err)
	default:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still reading 10s after the context ended")
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(out.String())); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestCancelEndsEveryDescendant: a cancelled or timed-out command ends
// with everything it started, also what runs in a session of its own,
// out of the command's process group, as an agent CLI's tools do.
func TestCancelEndsEveryDescendant(t *testing.T) {
	for _, how := range []string{"cancel", "timeout"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The command starts a job in a new session (setsid), whose
			// own child forks on: the pids are written as they start.
			pids := t.TempDir() + "/pids"
			script := `setsid sh -c 'echo $$ >>` + pids + `; sleep 300 & echo $! >>` + pids + `; wait' & sleep 300`
			cmd := exec.Command("sh", "-c", script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			timeout := time.Minute
			if how == "timeout" {
				timeout = time.Second
			}
			done := make(chan result, 1)
			go func() {
				res, _ := New(Config{}, nil).run(ctx, cmd, timeout)
				done <- res
			}()
			var started []int
			for len(started) < 2 {
				raw, _ := os.ReadFile(pids)
				started = started[:0]
				for _, f := range strings.Fields(string(raw)) {
					if pid, err := strconv.Atoi(f); err == nil {
						started = append(started, pid)
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Cleanup(func() {
				for _, pid := range started {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			if how == "cancel" {
				cancel()
			}
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the command did not end")
			}
			for _, pid := range started {
				// Killed, and reaped by whoever is their parent now.
				for deadline := time.Now().Add(10 * time.Second); running(pid); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("process %d of the job in its own session still runs after the %s", pid, how)
					}
				}
			}
		})
	}
}
