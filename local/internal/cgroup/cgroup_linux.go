package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/upstash/box-go/local/internal/mountinfo"
	"github.com/upstash/box-go/local/internal/proc"
)

// controllers whose limits a box gets, in the order a process joins them.
var limitControllers = []string{"memory", "pids", "cpu"}

// hierarchy is one mounted cgroup hierarchy and boxd's place in it.
type hierarchy struct {
	v2          bool
	controllers []string // v1: those of this mount; v2: those boxd may use
	mount       string   // mount point
	own         string   // boxd's own cgroup, as a directory under mount
}

func (h *hierarchy) has(c string) bool { return slices.Contains(h.controllers, c) }

// dir is where the group called name lives in h.
func (h *hierarchy) dir(name string) string { return filepath.Join(h.own, "boxd", name) }

// discover reads which hierarchies are mounted and where boxd is in each.
func discover() ([]*hierarchy, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	mounts, err := mountinfo.Self()
	if err != nil {
		return nil, err
	}
	var out []*hierarchy
	seen := map[string]bool{}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup":
			var ctrls []string
			for _, o := range m.SuperOptions {
				if slices.Contains(limitControllers, o) || o == "freezer" {
					ctrls = append(ctrls, o)
				}
			}
			if len(ctrls) == 0 {
				continue
			}
			key := strings.Join(ctrls, ",")
			path, ok := own[key]
			if !ok || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, &hierarchy{controllers: ctrls, mount: m.Point, own: under(m.Point, m.Root, path)})
		case "cgroup2":
			path, ok := own[""]
			if !ok || seen["\x00v2"] {
				continue
			}
			seen["\x00v2"] = true
			h := &hierarchy{v2: true, mount: m.Point, own: under(m.Point, m.Root, path)}
			if b, err := os.ReadFile(filepath.Join(h.own, "cgroup.controllers")); err == nil {
				for _, c := range strings.Fields(string(b)) {
					if slices.Contains(limitControllers, c) {
						h.controllers = append(h.controllers, c)
					}
				}
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// ownCgroups maps the controllers of each hierarchy (sorted as in
// /proc/self/cgroup, comma-joined; "" for v2) to boxd's cgroup path.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var ctrls []string
		for _, c := range strings.Split(parts[1], ",") {
			if slices.Contains(limitControllers, c) || c == "freezer" {
				ctrls = append(ctrls, c)
			}
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			out[""] = parts[2]
		case len(ctrls) > 0:
			out[strings.Join(ctrls, ",")] = parts[2]
		}
	}
	return out, nil
}

// under joins a cgroup path to the mount point of a hierarchy whose root
// is root.
func under(mnt, root, path string) string {
	rel, ok := strings.CutPrefix(path, root)
	if !ok || root == "/" {
		rel = path
	}
	return filepath.Join(mnt, rel)
}

// Group is the control groups of one box. Its methods may be called
// from several goroutines.
type Group struct {
	mu   sync.Mutex // serialises freezing, thawing and killing
	name string
	// limit holds the groups that limit the box, one per hierarchy that
	// has any of limitControllers; a process joins them all (Add).
	limit []string
	// freezer is the group that freezes the box: v1's freezer hierarchy,
	// or v2's group (where it is also among limit). It is joined only
	// when the box is first frozen.
	freezer   string
	freezerV2 bool
	frozenIn  bool // every process was moved into freezer once
	// unenforced names the limits that no hierarchy could apply.
	unenforced []string
}

// New makes the groups of the box called name and applies lim. Groups left
// by an earlier boxd under the same name are ended first (see Reap).
func New(name string, lim Limits) (*Group, error) {
	if os.Geteuid() != 0 {
		return nil, ErrUnavailable
	}
	hs, err := discover()
	if err != nil || len(hs) == 0 {
		return nil, ErrUnavailable
	}
	Reap(name)
	g := &Group{name: name}
	enforced := map[string]bool{}
	fail := func(err error) (*Group, error) {
		g.Remove()
		return nil, err
	}
	for _, h := range hs {
		var ctrls []string
		for _, c := range h.controllers {
			if slices.Contains(limitControllers, c) && !enforced[c] {
				ctrls = append(ctrls, c)
			}
		}
		switch {
		case h.v2:
			if len(ctrls) > 0 && enableV2(h, ctrls) != nil {
				ctrls = nil
			}
			dir := h.dir(name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fail(err)
			}
			if g.freezer == "" {
				if _, err := os.Stat(filepath.Join(dir, "cgroup.freeze")); err == nil {
					g.freezer, g.freezerV2 = dir, true
				}
			}
			if len(ctrls) == 0 {
				if g.freezer != dir {
					_ = os.Remove(dir)
				}
				continue
			}
			if err := applyV2(dir, ctrls, lim); err != nil {
				return fail(err)
			}
			g.limit = append(g.limit, dir)
		case h.has("freezer") && len(ctrls) == 0:
			if g.freezer == "" {
				g.freezer = h.dir(name) // made on the first Freeze
			}
			continue
		default:
			if len(ctrls) == 0 {
				continue
			}
			dir := h.dir(name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fail(err)
			}
			if err := applyV1(dir, ctrls, lim); err != nil {
				return fail(err)
			}
			g.limit = append(g.limit, dir)
			if h.has("freezer") && g.freezer == "" {
				g.freezer = dir
			}
		}
		for _, c := range ctrls {
			enforced[c] = true
		}
	}
	for _, c := range limitControllers {
		if !enforced[c] && limitOf(c, lim) {
			g.unenforced = append(g.unenforced, c)
		}
	}
	return g, nil
}

func limitOf(c string, lim Limits) bool {
	switch c {
	case "memory":
		return lim.Memory > 0
	case "pids":
		return lim.Pids > 0
	case "cpu":
		return lim.CPUs > 0
	}
	return false
}

// Unenforced names the limits that could not be applied here (for
// example "memory" when no hierarchy has the memory controller).
func (g *Group) Unenforced() []string { return g.unenforced }

// enableV2 lets boxd's groups below h.own use ctrls. It fails when
// boxd's own group holds processes (cgroup v2 allows controllers only for
// groups without processes of their own) and was not set up for it.
func enableV2(h *hierarchy, ctrls []string) error {
	var b strings.Builder
	for _, c := range ctrls {
		b.WriteString("+" + c + " ")
	}
	for _, dir := range []string{h.own, filepath.Join(h.own, "boxd")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.TrimSpace(b.String())), 0o644); err != nil {
			return err
		}
	}
	return nil
}

const cpuPeriod = 100000 // microseconds

func applyV1(dir string, ctrls []string, lim Limits) error {
	for _, c := range ctrls {
		var err error
		switch c {
		case "memory":
			if lim.Memory > 0 {
				v := strconv.FormatInt(lim.Memory, 10)
				err = write(dir, "memory.limit_in_bytes", v)
				// Without swap accounting this file is absent; with it, the
				// limit covers swap too, so that a box cannot swap past it.
				if err == nil {
					if _, serr := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); serr == nil {
						err = write(dir, "memory.memsw.limit_in_bytes", v)
					}
				}
			}
		case "pids":
			if lim.Pids > 0 {
				err = write(dir, "pids.max", strconv.FormatInt(lim.Pids, 10))
			}
		case "cpu":
			if lim.CPUs > 0 {
				if err = write(dir, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err == nil {
					err = write(dir, "cpu.cfs_quota_us", strconv.FormatInt(cpuQuota(lim.CPUs), 10))
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func applyV2(dir string, ctrls []string, lim Limits) error {
	for _, c := range ctrls {
		var err error
		switch c {
		case "memory":
			if lim.Memory > 0 {
				v := strconv.FormatInt(lim.Memory, 10)
				if err = write(dir, "memory.max", v); err == nil {
					if _, serr := os.Stat(filepath.Join(dir, "memory.swap.max")); serr == nil {
						err = write(dir, "memory.swap.max", "0")
					}
				}
			}
		case "pids":
			if lim.Pids > 0 {
				err = write(dir, "pids.max", strconv.FormatInt(lim.Pids, 10))
			}
		case "cpu":
			if lim.CPUs > 0 {
				err = write(dir, "cpu.max", fmt.Sprintf("%d %d", cpuQuota(lim.CPUs), cpuPeriod))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func cpuQuota(cpus float64) int64 {
	return max(1000, int64(math.Round(cpus*cpuPeriod)))
}

func write(dir, file, v string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
		return fmt.Errorf("cgroup: %s=%s: %w", filepath.Join(dir, file), v, err)
	}
	return nil
}

// Add moves process pid into the box's limiting groups. Processes it
// starts afterwards are born in them.
func (g *Group) Add(pid int) error {
	for _, dir := range g.limit {
		if err := write(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Procs lists the processes in the box's groups.
func (g *Group) Procs() []int {
	dirs := append(slices.Clone(g.limit), g.freezer)
	var out []int
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// CanFreeze reports whether the box has a freezer group.
func (g *Group) CanFreeze() bool { return g.freezer != "" }

// Freeze stops every process of the box, those in the groups and the
// ones in extra (with their descendants) that may not have joined them.
// It returns once all are stopped.
func (g *Group) Freeze(extra ...int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freezer == "" {
		return errors.New("cgroup: no freezer")
	}
	if !g.freezerV2 || !slices.Contains(g.limit, g.freezer) {
		if err := os.MkdirAll(g.freezer, 0o755); err != nil {
			return err
		}
		if err := g.adopt(extra); err != nil {
			return err
		}
	}
	if err := g.setFrozen(true); err != nil {
		return err
	}
	// A process forked while the others were being moved may have been
	// missed: move any such straggler in and freeze again.
	if !g.freezerV2 || !slices.Contains(g.limit, g.freezer) {
		if err := g.adopt(extra); err != nil {
			return err
		}
		return g.setFrozen(true)
	}
	return nil
}

// adopt moves every process of the box into the freezer group.
func (g *Group) adopt(extra []int) error {
	pids := g.Procs()
	for _, p := range extra {
		pids = append(pids, p)
		pids = append(pids, proc.Descendants(p)...)
	}
	procs := filepath.Join(g.freezer, "cgroup.procs")
	for _, p := range pids {
		if err := os.WriteFile(procs, []byte(strconv.Itoa(p)), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("cgroup: join freezer: %w", err)
		}
	}
	g.frozenIn = true
	return nil
}

// Thaw continues every process of the box.
func (g *Group) Thaw() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.thaw()
}

func (g *Group) thaw() error {
	if g.freezer == "" || !g.frozenIn && !g.freezerV2 {
		return nil
	}
	return g.setFrozen(false)
}

func (g *Group) setFrozen(frozen bool) error {
	if g.freezerV2 {
		v := map[bool]string{true: "1", false: "0"}[frozen]
		if err := write(g.freezer, "cgroup.freeze", v); err != nil {
			return err
		}
		want := []byte("frozen " + v)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			b, err := os.ReadFile(filepath.Join(g.freezer, "cgroup.events"))
			if err != nil || bytes.Contains(b, want) {
				return nil
			}
		}
		return fmt.Errorf("cgroup: %s did not settle", g.freezer)
	}
	state := map[bool]string{true: "FROZEN", false: "THAWED"}[frozen]
	// The kernel moves to FROZEN once every task has stopped, which can
	// take a while for tasks busy in the kernel (a snapshot reading the
	// disk, a loaded machine). Writing the state again retries the tasks
	// that were not frozen yet.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := write(g.freezer, "freezer.state", state); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(g.freezer, "freezer.state"))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) == state {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %s did not reach state %s", g.freezer, state)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Kill ends every process in the box's groups (a frozen box is thawed
// first: a frozen process cannot die) and waits, briefly, until none is
// left.
func (g *Group) Kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	_ = g.thaw()
	for _, dir := range g.limit {
		if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644) == nil {
			break
		}
	}
	for i := 0; i < 200; i++ {
		pids := g.Procs()
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Remove deletes the box's groups; they must be empty (see Kill).
func (g *Group) Remove() {
	for _, dir := range append(slices.Clone(g.limit), g.freezer) {
		if dir != "" {
			removeDir(dir)
		}
	}
}

// MemoryPeak is the most memory the box's processes have used together,
// in bytes, or 0 when unknown.
func (g *Group) MemoryPeak() int64 {
	for _, dir := range g.limit {
		for _, f := range []string{"memory.max_usage_in_bytes", "memory.peak"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return 0
}

// Reap ends whatever is left in the groups of the box called name, from an
// earlier boxd that died without cleaning up (a paused box's frozen
// sandbox outlives boxd), and removes them. It is safe to call for a box
// that has nothing left.
func Reap(name string) {
	if os.Geteuid() != 0 {
		return
	}
	hs, err := discover()
	if err != nil {
		return
	}
	g := &Group{name: name}
	for _, h := range hs {
		dir := h.dir(name)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		// A frozen process cannot die: thaw first.
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644)
		g.limit = append(g.limit, dir)
	}
	if len(g.limit) > 0 {
		g.Kill()
		g.Remove()
	}
}

func removeDir(dir string) {
	for i := 0; i < 100; i++ {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
