package sandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/upstash/box-go/local/internal/proc"
)

// The system calls that sandbox.go makes, which only Linux has. Their
// stand-ins for other systems are in sandbox_other.go.

// openPath opens path itself, not what it names (O_PATH), without
// following a link: a handle that keeps reaching the socket boxd made
// whatever becomes of the path since.
func openPath(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// launcherAttr is how the sandbox's first process (bubblewrap, or the agent
// without isolation) is started: in a process group of its own, and killed
// when the thread that started it ends.
//
// With ownPIDNS it is also the first process of a PID namespace of its
// own, which every process of the sandbox is in too: when it ends, however
// it ends, the kernel kills all of them. bubblewrap's launcher dies with
// boxd, but the child it clones into the sandbox's namespaces waits for
// the launcher's word before it arranges to die with it; a launcher killed
// in between (boxd killed while a box starts) would leave that child
// waiting for good, outside anything boxd knows of.
func launcherAttr(ownPIDNS bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ownPIDNS {
		a.Cloneflags = syscall.CLONE_NEWPID
	}
	return a
}

// hostPID returns the pid here of the child of launcher whose pid in
// launcher's PID namespace is nsPID (bubblewrap reports its child's pid as
// its own namespace numbers it). Pids are given out in order, so the
// child is looked for just after its launcher first, and among all of the
// launcher's children after that.
func hostPID(launcher, nsPID int) (int, error) {
	is := func(pid int) bool {
		nspids, ppid, err := proc.NSPIDs(pid)
		return err == nil && ppid == launcher && len(nspids) >= 2 && nspids[1] == nsPID
	}
	for pid := launcher + 1; pid <= launcher+64; pid++ {
		if is(pid) {
			return pid, nil
		}
	}
	for _, pid := range proc.Children(launcher) {
		if is(pid) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("sandbox: no child %d of bubblewrap (%d)", nsPID, launcher)
}

// pidfdOpen returns a pidfd of process pid.
func pidfdOpen(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "pidfd"), nil
}

// pidfdKill sends SIGKILL to the process of pidfd f.
func pidfdKill(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
}

// ownedBy reports whether p itself (not what a link names) belongs to
// uid and gid owner.
func ownedBy(p string, owner int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false, err
	}
	return int(st.Uid) == owner && int(st.Gid) == owner, nil
}

// setNoFile sets this process's limit of open files (RLIMIT_NOFILE).
func setNoFile(soft, hard uint64) error {
	return unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: soft, Max: hard})
}

// noFileHard returns this process's hard limit of open files.
func noFileHard() (uint64, error) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
		return 0, err
	}
	return cur.Max, nil
}

// signalFreezer stops the sandbox's process tree with signals. It is the
// fallback when no cgroup freezer can be used (boxd not running as root).
type signalFreezer struct{ pid int }

func (s *signalFreezer) stop() { s.signal(syscall.SIGSTOP) }
func (s *signalFreezer) cont() { s.signal(syscall.SIGCONT) }
func (s *signalFreezer) kill() { s.signal(syscall.SIGKILL) }

func (s *signalFreezer) signal(sig syscall.Signal) {
	for _, p := range append([]int{s.pid}, proc.Descendants(s.pid)...) {
		_ = syscall.Kill(p, sig)
	}
}

// pidfdReaped reports whether the process of pidfd f has been reaped (a
// zombie has not). One that is boxd's own child is reaped here: boxd
// adopts orphans when it is PID 1 or a subreaper.
func pidfdReaped(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	reaped := false
	_ = rc.Control(func(fd uintptr) {
		var info unix.Siginfo
		if unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG, nil) == nil && info.Signo == int32(unix.SIGCHLD) {
			reaped = true
			return
		}
		reaped = errors.Is(unix.PidfdSendSignal(int(fd), 0, nil, 0), unix.ESRCH)
	})
	return reaped
}
