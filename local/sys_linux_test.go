package local_test

import (
	"os"
	"syscall"
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
