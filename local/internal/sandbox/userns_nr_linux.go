//go:build linux && !386 && !arm

package sandbox

import "golang.org/x/sys/unix"

// The system calls that set a thread's ids, with 32-bit ids.
const (
	sysSetresuid = unix.SYS_SETRESUID
	sysSetresgid = unix.SYS_SETRESGID
	sysSetgroups = unix.SYS_SETGROUPS
)
