//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// envUserns, in a process's environment, makes boxd's binary one of the
// two helper processes with which boxd makes a box's user namespace (see
// newUserns) instead of running its own entry point.
const envUserns = "BOXD_USERNS"

const (
	// usernsMake: started as the box's host uid, start a usernsHold
	// process in a new user namespace, say its pid on standard output and
	// wait for it.
	usernsMake = "make"
	// usernsHold: wait for the end of standard input and exit; a process
	// that exists only to be in the namespace until boxd has opened it.
	usernsHold = "hold"
)

func init() {
	switch os.Getenv(envUserns) {
	case usernsHold:
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case usernsMake:
		if err := makeUserns(); err != nil {
			fmt.Fprintln(os.Stderr, "boxd: user namespace:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// makeUserns runs in the first helper process, as the box's host uid: it
// starts the second one in a new user namespace, which the kernel gives
// to the uid of the process that makes it. Both share the standard input
// that boxd holds, and end when boxd closes it.
func makeUserns() error {
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{envUserns + "=" + usernsHold}
	cmd.Dir = "/"
	cmd.Stdin = os.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Println(cmd.Process.Pid)
	return cmd.Wait()
}

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
// The kernel makes a process's new user namespace its euid's. A Go
// process cannot unshare one for itself once it has threads, and os/exec
// clones one as the parent's euid, so two helper processes (boxd's binary,
// through /proc/self/exe, which needs no search right on the directories
// of boxd's binary) make it: the first runs as id and starts the second
// in a new namespace. boxd, as root, writes the second one's maps, opens
// its namespace, and lets both go.
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
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{envUserns + "=" + usernsMake}
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
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(id), Gid: uint32(id), Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		outW.Close()
		return nil, err
	}
	outW.Close()
	defer func() {
		in.Close()
		_ = cmd.Wait()
	}()
	_ = outR.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%v (%s)", err, strings.TrimSpace(errb.String()))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("the helper said %q", line)
	}
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
	// The pid named a process of the helper's: check that what was
	// opened is a namespace of id's own.
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
