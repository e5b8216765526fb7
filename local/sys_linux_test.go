package local_test

import (
	"os"
	"syscall"
	"time"
)

// The system calls of this package's tests, which need Linux as boxd does
// (see sys_other_test.go).

// fileOwner returns the uid and gid of the file fi describes.
func fileOwner(fi os.FileInfo) (uid, gid uint32) {
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// killPid sends SIGKILL to process pid.
func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// hostUserAttr runs a command as host uid 1000, with no extra groups.
func hostUserAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
}

// cpuTime returns the processor time, user and system, that this process
// and its children reaped so far have used.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}
