//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// envUserns, in a process's environment, makes boxd's binary the process
// that holds a new user namespace for newUserns (usernsHold) instead of
// running its own entry point. It serves only on a host without cat.
const envUserns = "BOXD_USERNS"

// usernsHold: copy standard input to standard output until its end, and
// exit, as cat does; a process that exists only to be in the namespace
// until boxd has opened it.
const usernsHold = "hold"

func init() {
	if os.Getenv(envUserns) == usernsHold {
		_, _ = io.Copy(os.Stdout, os.Stdin)
		os.Exit(0)
	}
}

// holderCmd is how the process that holds a new user namespace starts.
type holderCmd struct {
	argv []string
	env  []string
	// clone is the clone flag that makes the namespace when the holder
	// does not make it itself.
	clone uintptr
}

// holder returns how the process that holds a new user namespace until
// boxd has opened it starts: cat, which echoes its standard input, started
// by unshare -U, which makes the namespace and executes cat in it. Where
// unshare is missing, os/exec makes the namespace as it clones cat (as it
// cannot then use vfork, it copies the page tables of boxd, which grow
// with boxd's memory: tens of milliseconds at a gigabyte); where cat is
// missing, boxd's binary in its usernsHold role stands in for it (a Go
// program's start-up, some tens of milliseconds of processor time, where
// cat takes one). Each is reached by a path that the box's uid may
// search: /proc/self/exe needs no search right on the directories of
// boxd's binary.
var holder = sync.OnceValue(func() holderCmd {
	h := holderCmd{argv: []string{"/proc/self/exe"}, env: []string{envUserns + "=" + usernsHold}, clone: syscall.CLONE_NEWUSER}
	if p, err := exec.LookPath("cat"); err == nil && filepath.IsAbs(p) {
		h.argv, h.env = []string{p}, []string{}
	}
	if p, err := exec.LookPath("unshare"); err == nil && filepath.IsAbs(p) {
		h.argv = append([]string{p, "-U"}, h.argv...)
		h.clone = 0
	}
	return h
})

// newUserns makes a user namespace in which the box user (UID, GID) is
// host uid and gid id, and nothing else is mapped, and returns it open.
// bubblewrap joins it (--userns) to set the sandbox up as root, which in
// it has every capability over the sandbox's namespaces and none over
// the host, and runs the box's processes as the box user.
//
// The namespace belongs to id, not to root: the kernel charges what the
// processes of a user namespace hold of its per-user counts (inotify
// instances and watches, namespaces, ...) to the namespace's owner too,
// so a box owned by root would spend root's, and every other box's. Owned
// by id, a box spends its own, which no one else has.
//
// The kernel makes a new user namespace its creator's euid's. A Go
// process cannot unshare one once it has threads (the kernel refuses a
// thread of a process with others), and os/exec clones one with the
// parent's credentials, before the child changes its own. So one thread of
// boxd's, locked to its goroutine, takes id as its own real and effective
// uid and gid, without supplementary groups, keeping root as its saved
// uid; from there it starts the holder process (see holder), which runs
// as id and makes a new user namespace, thereby id's; and the thread goes
// back to root's credentials before it runs anything else. boxd, as root,
// writes the namespace's maps once the holder is in it, opens it, and lets
// the holder go.
func newUserns(id int) (*os.File, error) {
	ns, err := newUserns1(id)
	if err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	return ns, nil
}

func newUserns1(id int) (*os.File, error) {
	if id <= 0 {
		return nil, errors.New("no uid of its own for the box")
	}
	h := holder()
	cmd := exec.Command(h.argv[0], h.argv[1:]...)
	cmd.Env = h.env
	cmd.Dir = "/"
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	defer in.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer outR.Close()
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = outW, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: h.clone}
	err = startAs(id, cmd)
	outW.Close()
	if err != nil {
		return nil, err
	}
	defer func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	// The holder echoes a byte once it runs in the new namespace.
	_ = outR.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := in.Write([]byte{'\n'}); err != nil {
		return nil, fmt.Errorf("the holder process: %v", err)
	}
	if _, err := io.ReadFull(outR, b[:]); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the holder process: %v (%s)", err, strings.TrimSpace(errb.String()))
	}
	pid := cmd.Process.Pid
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	// Root writes the maps, so that the box user may be a uid that no
	// process in the namespace could map by itself; setgroups stays
	// refused in the namespace, as in one that an unprivileged user maps.
	for _, w := range []struct{ file, data string }{
		{"uid_map", fmt.Sprintf("%d %d 1\n", UID, id)},
		{"setgroups", "deny"},
		{"gid_map", fmt.Sprintf("%d %d 1\n", GID, id)},
	} {
		if err := os.WriteFile(dir+w.file, []byte(w.data), 0); err != nil {
			return nil, err
		}
	}
	ns, err := os.Open(dir + "ns/user")
	if err != nil {
		return nil, err
	}
	// The pid named the holder until it is waited for: the check is for
	// a namespace that was not made as id.
	if owner, err := nsOwner(ns); err == nil && owner != id {
		ns.Close()
		return nil, fmt.Errorf("the namespace belongs to uid %d, not %d", owner, id)
	}
	return ns, nil
}

// nsGetOwnerUID is the ioctl NS_GET_OWNER_UID of linux/nsfs.h.
const nsGetOwnerUID = 0xb7<<8 | 4

// nsOwner returns the uid that owns the user namespace ns, as the caller
// sees it.
func nsOwner(ns *os.File) (int, error) {
	rc, err := ns.SyscallConn()
	if err != nil {
		return 0, err
	}
	var uid uint32
	var ierr error
	if err := rc.Control(func(fd uintptr) { uid, ierr = unix.IoctlGetUint32(int(fd), nsGetOwnerUID) }); err != nil {
		return 0, err
	}
	return int(uid), ierr
}

// startAs starts cmd from a thread whose real and effective uid and gid
// are id, without supplementary groups: a user namespace that cmd, or its
// clone, makes is id's. The thread then takes boxd's credentials back; one that
// cannot is never used again.
func startAs(id int, cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
				return
			}
			// The goroutine parks with its thread: ending it would end
			// the thread, and with it what other goroutines started
			// from it with a parent-death signal (see stage).
			select {}
		}()
		saved, err := threadCreds()
		if err != nil {
			done <- err
			restored = true
			return
		}
		err = becomeUser(id)
		if err == nil {
			err = cmd.Start()
		}
		restored = saved.restore() == nil
		if !restored && cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if !restored && err == nil {
			err = errors.New("a thread could not take its credentials back")
		}
		done <- err
	}()
	return <-done
}

// creds are one thread's credentials.
type creds struct {
	uid, euid, suid int
	gid, egid, sgid int
	groups          []int
}

// threadCreds returns the calling thread's credentials.
func threadCreds() (creds, error) {
	var c creds
	c.uid, c.euid, c.suid = unix.Getresuid()
	c.gid, c.egid, c.sgid = unix.Getresgid()
	g, err := unix.Getgroups()
	c.groups = g
	return c, err
}

// becomeUser makes id the calling thread's real and effective uid and
// gid, without supplementary groups, and keeps its saved uid and gid, so
// that restore can take them back. It changes the calling thread alone:
// its system calls are made here, not by syscall.Setresuid and the like,
// which change every thread of the process.
func becomeUser(id int) error {
	if err := rawSetgroups(nil); err != nil {
		return err
	}
	if err := rawSetres(sysSetresgid, id, id, -1); err != nil {
		return err
	}
	return rawSetres(sysSetresuid, id, id, -1)
}

// restore gives the calling thread credentials c back, uids first: only
// root may then set its gids and groups.
func (c creds) restore() error {
	if err := rawSetres(sysSetresuid, c.uid, c.euid, c.suid); err != nil {
		return err
	}
	if err := rawSetres(sysSetresgid, c.gid, c.egid, c.sgid); err != nil {
		return err
	}
	return rawSetgroups(c.groups)
}

func rawSetres(nr uintptr, r, e, s int) error {
	if _, _, errno := unix.RawSyscall(nr, uintptr(r), uintptr(e), uintptr(s)); errno != 0 {
		return errno
	}
	return nil
}

func rawSetgroups(gs []int) error {
	var p unsafe.Pointer
	g32 := make([]uint32, len(gs))
	for i, g := range gs {
		g32[i] = uint32(g)
	}
	if len(g32) > 0 {
		p = unsafe.Pointer(&g32[0])
	}
	if _, _, errno := unix.RawSyscall(sysSetgroups, uintptr(len(g32)), uintptr(p), 0); errno != 0 {
		return errno
	}
	return nil
}
