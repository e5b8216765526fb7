//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The stage is how a box's user, which has no rights on boxd's private
// data directory, gets its own directories mounted.
//
// bubblewrap resolves every bind source by path, as the user the sandbox
// runs as: the box's own uid, which may not search boxd's data directory
// (mode 0700) or the directory of boxd's binary (the go tool builds test
// binaries in private directories). So boxd keeps a mount namespace of its
// own, on OS threads that live as long as the process, and starts every
// bubblewrap from one of them. In it, a tmpfs that anyone may search
// (but not list) is mounted on a directory of boxd's, and each starting
// box's file tree and boxd's binary are bind-mounted into it under names
// of boxd's choosing. Nothing of this is visible outside the namespace:
// the host sees an empty directory, and a box sees only what bubblewrap
// mounts for it from there.
//
// The stage is served by stageThreads OS threads, which share that one
// mount namespace: what one mounts, the others see, and boxes start on
// whichever is free. Only what needs the namespace runs there: mounting
// and unmounting a box's tree, and bubblewrap's fork and exec.
//
// The stage, and its threads, live as long as the process: a process dies
// with the thread that started it when it has a parent-death signal
// (--die-with-parent and Pdeathsig are per thread). That holds for the
// sandboxes started from the stage, and also for processes that other
// goroutines started on a thread before the stage's goroutine locked
// it, an unisolated box's agent for one: the threads may never end.
type stage struct {
	dir  string
	reqs chan func()

	mu     sync.Mutex
	seq    int
	agents map[string]string // agent binary → its path on the stage
}

// stageThreads is how many threads serve the stage.
const stageThreads = 4

var (
	stageMu  sync.Mutex
	stageCur *stage
	stageErr error
)

// theStage returns the process's stage, making it the first time. A stage
// that could not be made is not tried again: its thread stays parked.
func theStage() (*stage, error) {
	stageMu.Lock()
	defer stageMu.Unlock()
	if stageCur == nil && stageErr == nil {
		stageCur, stageErr = newStage()
	}
	return stageCur, stageErr
}

func newStage() (*stage, error) {
	dir, err := stageDir()
	if err != nil {
		return nil, err
	}
	st := &stage{dir: dir, reqs: make(chan func()), agents: map[string]string{}}
	ready := make(chan error)
	go st.loop(nil, ready)
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("sandbox: boxd's mount namespace: %w", err)
	}
	// The first thread's namespace, which the others join.
	var ns *os.File
	err = st.do(func() error {
		var err error
		ns, err = os.Open("/proc/thread-self/ns/mnt")
		return err
	})
	if err != nil {
		// The first thread serves alone.
		return st, nil
	}
	defer ns.Close()
	for range stageThreads - 1 {
		go st.loop(ns, ready)
		if err := <-ready; err != nil {
			break // those that joined serve, the first among them
		}
	}
	return st, nil
}

// stageDir returns a directory of root's, in the system's temporary
// directory, to mount the stage on. It is checked not to be a link or
// anyone else's.
func stageDir() (string, error) {
	dir := filepath.Join(os.TempDir(), ".boxd-stage-"+strconv.Itoa(os.Geteuid()))
	err := os.Mkdir(dir, 0o700)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		// Not ours: someone else made it. Make one with a name of our own.
		return os.MkdirTemp("", ".boxd-stage-")
	}
	return dir, nil
}

// loop serves the stage on a thread of its own, for as long as the
// process lives: the first thread makes the stage's namespace (ns is
// nil), the others join it (ns).
func (st *stage) loop(ns *os.File, ready chan<- error) {
	runtime.LockOSThread()
	// Never unlocked, and never ended: the thread must not go back to the
	// Go scheduler with a mount namespace of its own, and its end would
	// kill what was started from it with a parent-death signal.
	err := func() error {
		if ns != nil {
			// A thread may enter another mount namespace only with a
			// file system context (root, cwd) of its own.
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return err
			}
			return unix.Setns(int(ns.Fd()), unix.CLONE_NEWNS)
		}
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return err
		}
		// Nothing mounted here may reach the host; what the host mounts
		// later still shows here.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return err
		}
		return unix.Mount("boxd-stage", st.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711,size=1m")
	}()
	ready <- err
	if err != nil {
		// The thread's namespace is half made, or is its own: it serves
		// nothing, and stays.
		select {}
	}
	for f := range st.reqs {
		f()
	}
}

// do runs f on one of the stage's threads, in its mount namespace.
func (st *stage) do(f func() error) error {
	done := make(chan error, 1)
	st.reqs <- func() { done <- f() }
	return <-done
}

// mountTree bind-mounts dir (a box's file tree) onto the stage and returns
// where it is, with a function that unmounts it.
func (st *stage) mountTree(dir string) (string, func(), error) {
	st.mu.Lock()
	st.seq++
	p := filepath.Join(st.dir, strconv.Itoa(st.seq))
	st.mu.Unlock()
	// A copy of dir's mount taken here, in boxd's own namespace, is
	// attached on the stage: the stage's namespace was copied when it was
	// made, and file systems mounted since (a data directory of a later
	// Server) are not in it. Where the kernel cannot (before 5.2), dir is
	// bound by path.
	tree, terr := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if terr == nil {
		defer unix.Close(tree)
	}
	err := st.do(func() error {
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
		var err error
		if terr == nil {
			err = unix.MoveMount(tree, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH)
			if err == nil {
				err = unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV, "")
			}
		} else {
			err = unix.Mount(dir, p, "", unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV, "")
		}
		if err != nil {
			_ = unix.Unmount(p, unix.MNT_DETACH)
			_ = os.Remove(p)
			return err
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: stage %s: %w", dir, err)
	}
	return p, func() {
		_ = st.do(func() error {
			_ = unix.Unmount(p, unix.MNT_DETACH)
			return os.Remove(p)
		})
	}, nil
}

// agent returns the path on the stage of the agent binary bin, mounting it
// the first time.
func (st *stage) agent(bin string) (string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if p, ok := st.agents[bin]; ok {
		return p, nil
	}
	p := filepath.Join(st.dir, "agent-"+strconv.Itoa(len(st.agents)))
	err := st.do(func() error {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
		if err != nil {
			return err
		}
		f.Close()
		return unix.Mount(bin, p, "", unix.MS_BIND, "")
	})
	if err != nil {
		return "", fmt.Errorf("sandbox: stage the agent binary: %w", err)
	}
	st.agents[bin] = p
	return p, nil
}

// start starts cmd from one of the stage's threads.
func (st *stage) start(cmd interface{ Start() error }) error {
	return st.do(cmd.Start)
}
