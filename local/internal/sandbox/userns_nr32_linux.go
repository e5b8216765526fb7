//go:build linux && (386 || arm)

package sandbox

import "golang.org/x/sys/unix"

// The system calls that set a thread's ids, with 32-bit ids (the plain
// ones of these architectures take 16-bit ids).
const (
	sysSetresuid = unix.SYS_SETRESUID32
	sysSetresgid = unix.SYS_SETRESGID32
	sysSetgroups = unix.SYS_SETGROUPS32
)
