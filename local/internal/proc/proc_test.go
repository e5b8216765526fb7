//go:build linux

package proc

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
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
