//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestStageSparesOtherChildren: a process that boxd started with a
// parent-death signal (an unisolated box's agent, for one) dies with the
// OS thread that started it. The stage's goroutine locks whatever thread
// it lands on, and that thread may have started such a process before:
// the stage must not let that thread end while boxd runs.
func TestStageSparesOtherChildren(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the stage needs root")
	}
	var mu sync.Mutex
	var kids []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range kids {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	for range 40 {
		// Children started from many threads, each with a parent-death
		// signal, as ModeNone starts agents.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				c := exec.Command("sleep", "600")
				c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
				if err := c.Start(); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				kids = append(kids, c)
				mu.Unlock()
			})
		}
		wg.Wait()
		st, err := theStage()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	dead := 0
	for _, c := range kids {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			dead++
			continue
		}
		var ws syscall.WaitStatus
		if pid, _ := syscall.Wait4(c.Process.Pid, &ws, syscall.WNOHANG, nil); pid == c.Process.Pid {
			dead++
		}
	}
	if dead > 0 {
		t.Errorf("%d of %d processes started from other threads died when a stage ended", dead, len(kids))
	}
}

// TestStageThreadsShareANamespace: every thread of the stage is in one
// mount namespace, not the process's, where a tree mounted from one
// thread shows on the others; calls at once are served by several
// threads.
func TestStageThreadsShareANamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the stage needs root")
	}
	st, err := theStage()
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.Readlink("/proc/thread-self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mark"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, unmount, err := st.mountTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unmount()
	var mu sync.Mutex
	nss, tids := map[string]bool{}, map[int]bool{}
	var wg sync.WaitGroup
	for range 4 * stageThreads {
		wg.Go(func() {
			err := st.do(func() error {
				ns, err := os.Readlink("/proc/thread-self/ns/mnt")
				if err != nil {
					return err
				}
				if _, err := os.Stat(filepath.Join(p, "mark")); err != nil {
					return err
				}
				mu.Lock()
				nss[ns] = true
				tids[syscall.Gettid()] = true
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // so that the others take the next calls
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(nss) != 1 || nss[own] {
		t.Errorf("the stage's threads are in namespaces %v; boxd's is %s", nss, own)
	}
	if len(tids) != stageThreads {
		t.Errorf("%d threads served the stage, want %d", len(tids), stageThreads)
	}
}
