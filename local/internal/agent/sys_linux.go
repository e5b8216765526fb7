package agent

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"syscall"
	"unsafe"

	"github.com/creack/pty"
	"github.com/upstash/box-go/local/internal/proc"
	"golang.org/x/sys/unix"
)

// The system calls of the in-box agent, which runs only in a Linux box.
// Their stand-ins for other systems, where boxd never starts an agent,
// are in sys_other.go.

// notDumpable makes the agent not dumpable (PR_SET_DUMPABLE 0): no
// process of its user may trace it, take its descriptors or read its
// memory.
func notDumpable() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// kill sends sig to process pid (to process group -pid when negative, to
// every process it may signal with -1).
func kill(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// dupTo makes descriptor fd a copy of f's.
func dupTo(f *os.File, fd int) error { return syscall.Dup3(int(f.Fd()), fd, 0) }

// closeOnExec marks descriptor fd close-on-exec.
func closeOnExec(fd int) { syscall.CloseOnExec(fd) }

// groupAttr starts a command as the leader of a process group of its own,
// so that the whole group can be ended.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// sessionLeader makes attr start its command as the leader of a new
// session whose controlling terminal is the command's standard input.
// A session leader cannot also be moved to a process group.
func sessionLeader(attr *syscall.SysProcAttr) {
	attr.Setpgid, attr.Pgid = false, 0
	attr.Setsid, attr.Setctty, attr.Ctty = true, true, 0 // Ctty is the child's fd 0
}

// sessionSignals are the signals an exec session may send, by name.
var sessionSignals = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM,
	"KILL": syscall.SIGKILL,
	"INT":  syscall.SIGINT,
	"HUP":  syscall.SIGHUP,
	"TSTP": syscall.SIGTSTP,
	"QUIT": syscall.SIGQUIT,
	"USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// pending returns how many bytes can be read from f without waiting
// (FIONREAD, which Linux calls TIOCINQ).
func pending(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
			n = v
		}
	})
	return n
}

// pollable returns a non-blocking duplicate of f registered with the
// runtime poller, and closes f.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// setWinsize sets the size of the terminal of descriptor fd.
func setWinsize(fd uintptr, ws *pty.Winsize) syscall.Errno {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(ws)))
	return errno
}

// setBlocking clears f's O_NONBLOCK.
func setBlocking(f *os.File) error { return syscall.SetNonblock(int(f.Fd()), false) }

// writableDir reports, as an error, whether the agent may create and
// remove entries in directory p (write and search rights).
func writableDir(p string) error { return unix.Access(p, unix.W_OK|unix.X_OK) }

// inode returns fi's inode number.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// memoryPeak returns the most memory a finished process used at once, in
// bytes, or 0 when it is not known.
func memoryPeak(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024 // kilobytes on Linux
	}
	return 0
}

// killTree ends process group pid and every process below pid or below
// a member of the group. The tools of an agent's CLI run in sessions of
// their own, outside the CLI's group, but stay its descendants. What is
// found is stopped before the next look, so that nothing forks a child
// unseen, and all of it is killed once a look finds nothing new.
func killTree(pid int) {
	_ = kill(-pid, syscall.SIGSTOP)
	seen := map[int]bool{}
	for range 100 {
		all := proc.All()
		children := map[int][]int{}
		var queue []int
		for _, p := range all {
			children[p.PPID] = append(children[p.PPID], p.PID)
			if p.PGID == pid || p.PID == pid {
				queue = append(queue, p.PID)
			}
		}
		found := false
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if !seen[p] {
				seen[p] = true
				found = true
				_ = kill(p, syscall.SIGSTOP)
			}
			queue = append(queue, children[p]...)
		}
		if !found {
			break
		}
	}
	_ = kill(-pid, syscall.SIGKILL)
	for p := range seen {
		_ = kill(p, syscall.SIGKILL)
	}
}

// peerOpen reports whether the other end of idle connection c has neither
// closed it nor sent anything: a read that would block says so.
func peerOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		open = errors.Is(err, unix.EAGAIN)
		return true
	})
	return err == nil && open
}
