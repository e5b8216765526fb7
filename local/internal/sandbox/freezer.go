package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// freezer stops and continues every process of a sandbox. It prefers the
// cgroup freezer (v1, then v2) and falls back to SIGSTOP/SIGCONT on the
// sandbox's process tree when boxd cannot manage cgroups.
type freezer interface {
	freeze() error
	thaw() error
	// adoptAll moves every process of the sandbox into the group.
	adoptAll() error
	killAll()
	remove()
}

// cgroupDirs lists where a box's freezer cgroup can be.
func cgroupDirs(id string) []string {
	dirs := []string{filepath.Join("/sys/fs/cgroup/freezer", "boxd", id)}
	if rel := unifiedCgroup(); rel != "" {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", rel, "boxd-"+id))
	}
	return dirs
}

// Reap ends whatever is left of a box's sandbox from an earlier boxd that
// died without cleaning up: its processes are thawed (a frozen process
// cannot die), killed, and its cgroup removed. It is safe to call for a
// box that has nothing left.
func Reap(id string) {
	for _, dir := range cgroupDirs(id) {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644)
		for i := 0; i < 200; i++ {
			killProcs(filepath.Join(dir, "cgroup.procs"))
			b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil || len(strings.TrimSpace(string(b))) == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		removeCgroup(dir)
	}
}

func newFreezer(id string, pid int) freezer {
	// A cgroup left by a boxd that died may still be frozen.
	Reap(id)
	if f, err := newCgroupV1(id, pid); err == nil {
		return f
	}
	if f, err := newCgroupV2(id, pid); err == nil {
		return f
	}
	return &signalFreezer{pid: pid}
}

// adopt moves pid and all its current descendants into the cgroup whose
// cgroup.procs file is procs.
func adopt(procs string, pid int) error {
	for _, p := range append([]int{pid}, descendants(pid)...) {
		if err := os.WriteFile(procs, []byte(strconv.Itoa(p)), 0o644); err != nil && p == pid {
			return err
		}
	}
	return nil
}

type cgroupV1 struct {
	dir string
	pid int
}

func newCgroupV1(id string, pid int) (*cgroupV1, error) {
	base := "/sys/fs/cgroup/freezer"
	if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
		return nil, err
	}
	dir := filepath.Join(base, "boxd", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := adopt(filepath.Join(dir, "cgroup.procs"), pid); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return &cgroupV1{dir: dir, pid: pid}, nil
}

func (c *cgroupV1) set(state string) error {
	// The kernel moves to FROZEN once every task has stopped, which can
	// take a while for tasks busy in the kernel (a snapshot reading the
	// disk, a loaded machine). Writing the state again retries the tasks
	// that were not frozen yet.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := os.WriteFile(filepath.Join(c.dir, "freezer.state"), []byte(state), 0o644); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(c.dir, "freezer.state"))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) == state {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("freezer: %s did not reach state %s", c.dir, state)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (c *cgroupV1) freeze() error   { return c.set("FROZEN") }
func (c *cgroupV1) adoptAll() error { return adopt(filepath.Join(c.dir, "cgroup.procs"), c.pid) }
func (c *cgroupV1) thaw() error     { return c.set("THAWED") }
func (c *cgroupV1) killAll()        { killProcs(filepath.Join(c.dir, "cgroup.procs")) }
func (c *cgroupV1) remove()         { removeCgroup(c.dir) }

type cgroupV2 struct {
	dir string
	pid int
}

// unifiedCgroup returns this process's cgroup v2 path, "" without one.
func unifiedCgroup() string {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(self), "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok {
			return rel
		}
	}
	return ""
}

func newCgroupV2(id string, pid int) (*cgroupV2, error) {
	rel := unifiedCgroup()
	if rel == "" {
		return nil, errors.New("no cgroup v2")
	}
	dir := filepath.Join("/sys/fs/cgroup", rel, "boxd-"+id)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.freeze")); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	if err := adopt(filepath.Join(dir, "cgroup.procs"), pid); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return &cgroupV2{dir: dir, pid: pid}, nil
}

func (c *cgroupV2) set(v string) error {
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.freeze"), []byte(v), 0o644); err != nil {
		return err
	}
	want := []byte("frozen " + v)
	for i := 0; i < 500; i++ {
		b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.events"))
		if err != nil || bytes.Contains(b, want) {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("freezer: %s did not settle", c.dir)
}

func (c *cgroupV2) freeze() error   { return c.set("1") }
func (c *cgroupV2) adoptAll() error { return adopt(filepath.Join(c.dir, "cgroup.procs"), c.pid) }
func (c *cgroupV2) thaw() error     { return c.set("0") }
func (c *cgroupV2) killAll() {
	if os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0o644) != nil {
		killProcs(filepath.Join(c.dir, "cgroup.procs"))
	}
}
func (c *cgroupV2) remove() { removeCgroup(c.dir) }

func killProcs(procs string) {
	b, err := os.ReadFile(procs)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func removeCgroup(dir string) {
	for i := 0; i < 100; i++ {
		if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// signalFreezer stops the sandbox's process tree with signals. It is the
// fallback when no cgroup freezer can be used (boxd not running as root).
type signalFreezer struct{ pid int }

func (s *signalFreezer) signal(sig syscall.Signal) error {
	for _, p := range append([]int{s.pid}, descendants(s.pid)...) {
		_ = syscall.Kill(p, sig)
	}
	return nil
}

func (s *signalFreezer) freeze() error   { return s.signal(syscall.SIGSTOP) }
func (s *signalFreezer) adoptAll() error { return s.signal(syscall.SIGSTOP) }
func (s *signalFreezer) thaw() error     { return s.signal(syscall.SIGCONT) }
func (s *signalFreezer) killAll()        { _ = s.signal(syscall.SIGKILL) }
func (s *signalFreezer) remove()         {}

// descendants lists every process below pid, parents before children.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may contain spaces and parentheses; fields
		// after the last ')' are fixed.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
