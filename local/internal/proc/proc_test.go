//go:build linux

package proc

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestFamily(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
	var self *Process
	for _, p := range All() {
		if p.PID == os.Getpid() {
			self = &p
		}
	}
	if self == nil || self.PPID != os.Getppid() || self.PGID != syscall.Getpgrp() {
		t.Fatalf("this process in All: %+v, want ppid %d, pgid %d", self, os.Getppid(), syscall.Getpgrp())
	}
	// The shell's child appears below it and in its session.
	var kids []int
	for range 200 {
		if kids = Descendants(os.Getpid()); len(kids) >= 2 {
			break
		}
		syscall.Select(0, nil, nil, nil, &syscall.Timeval{Usec: 10000})
	}
	if len(kids) < 2 || kids[0] != cmd.Process.Pid {
		t.Fatalf("Descendants = %v, want the shell %d first, then its sleep", kids, cmd.Process.Pid)
	}
	if got := InSession(cmd.Process.Pid); !slices.Equal(got, kids) {
		t.Errorf("InSession = %v, want %v", got, kids)
	}
}

// TestChildren finds the children of a process that started them from
// several threads (the kernel lists a child under the thread that forked
// it), and those of a shell, as a walk of every process finds them.
func TestChildren(t *testing.T) {
	var mu sync.Mutex
	var want []int
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			// A thread of its own, ended with the goroutine.
			runtime.LockOSThread()
			cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30 & wait")
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			mu.Lock()
			want = append(want, cmd.Process.Pid)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(want)
	var got []int
	for _, c := range Children(os.Getpid()) {
		if slices.Contains(want, c) {
			got = append(got, c)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Children of this process = %v, want %v among them", got, want)
	}
	var kids []int
	for range 200 {
		if kids = Children(want[0]); len(kids) == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(kids) != 2 || !slices.Equal(kids, childrenOf(want[0])) {
		t.Errorf("Children of the shell = %v, want its two sleeps, %v", kids, childrenOf(want[0]))
	}
	if got := Children(1 << 30); got != nil {
		t.Errorf("Children of no process = %v", got)
	}
}

// TestUIDs finds the uid of a process that runs as a uid of its own while
// it lives, and not once it is gone.
func TestUIDs(t *testing.T) {
	if !UIDs()[uint32(os.Getuid())] {
		t.Fatalf("UIDs has not this process's uid %d", os.Getuid())
	}
	if os.Geteuid() != 0 {
		t.Skip("running a process as another uid needs root")
	}
	const uid = 0x5eed0001
	if UIDs()[uid] {
		t.Skipf("uid %d is in use on this machine", uid)
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !UIDs()[uid] {
		t.Errorf("UIDs has not uid %d of a live process", uid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if UIDs()[uid] {
		t.Errorf("UIDs has uid %d after its process was reaped", uid)
	}
}

// TestActivity tells a process that sleeps, one that spins and one that
// is stopped apart, as they run.
func TestActivity(t *testing.T) {
	start := func(script string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	sleeper := start("exec sleep 60")
	spinner := start("while :; do :; done")
	stopped := start("while :; do :; done")
	if err := stopped.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pause := func() { syscall.Select(0, nil, nil, nil, &syscall.Timeval{Usec: 300000}) }

	// The spinner runs, or has had processor time between two looks.
	first, err := ActivityOf(spinner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	pause()
	then, err := ActivityOf(spinner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if then.Start != first.Start || then.Stopped || !then.Running && then.CPU <= first.CPU {
		t.Errorf("a spinning process: %+v, then %+v", first, then)
	}

	// The stopped one is stopped once the signal has arrived.
	var a Activity
	for range 100 {
		if a, err = ActivityOf(stopped.Process.Pid); err != nil || a.Stopped {
			break
		}
		pause()
	}
	if err != nil || !a.Stopped || a.Running {
		t.Errorf("a stopped process: %+v %v", a, err)
	}
	pause()
	if b, err := ActivityOf(stopped.Process.Pid); err != nil || b.CPU != a.CPU {
		t.Errorf("a stopped process had processor time: %+v, then %+v (%v)", a, b, err)
	}

	// The sleeper neither runs nor is stopped.
	if a, err := ActivityOf(sleeper.Process.Pid); err != nil || a.Running || a.Stopped || a.Start == 0 {
		t.Errorf("a sleeping process: %+v %v", a, err)
	}

	// A process that is gone has no activity.
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	if _, err := ActivityOf(sleeper.Process.Pid); err == nil {
		t.Error("activity of a process that is gone")
	}
}

// TestNSPIDs: a process started in a PID namespace of its own has its pid
// there (1) after its pid here, and its parent's pid here.
func TestNSPIDs(t *testing.T) {
	nspids, ppid, err := NSPIDs(os.Getpid())
	if err != nil || len(nspids) == 0 || nspids[0] != os.Getpid() || ppid != os.Getppid() {
		t.Fatalf("NSPIDs(self) = %v, %d, %v; want [%d ...], %d", nspids, ppid, err, os.Getpid(), os.Getppid())
	}
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace of its own needs root")
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	nspids, ppid, err = NSPIDs(cmd.Process.Pid)
	if err != nil || len(nspids) != 2 || nspids[0] != cmd.Process.Pid || nspids[1] != 1 || ppid != os.Getpid() {
		t.Errorf("NSPIDs(child in a namespace of its own) = %v, %d, %v; want [%d 1], %d", nspids, ppid, err, cmd.Process.Pid, os.Getpid())
	}
	if _, _, err := NSPIDs(1 << 30); err == nil {
		t.Error("NSPIDs of no process: no error")
	}
}
