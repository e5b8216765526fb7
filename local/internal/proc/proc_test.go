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
