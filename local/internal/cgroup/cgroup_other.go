//go:build !linux

package cgroup

// Group is the control groups of one box. Only Linux has control groups:
// New never returns one here.
type Group struct{}

// New fails with ErrUnavailable: only Linux has control groups.
func New(name string, lim Limits) (*Group, error) { return nil, ErrUnavailable }

// Reap does nothing: there are no control groups to reap.
func Reap(name string) {}

// Unenforced names every limit: none can be applied.
func (g *Group) Unenforced() []string { return []string{"memory", "pids", "cpu"} }

// Add fails with ErrUnavailable.
func (g *Group) Add(pid int) error { return ErrUnavailable }

// Procs returns no process.
func (g *Group) Procs() []int { return nil }

// CanFreeze reports false: there is no freezer.
func (g *Group) CanFreeze() bool { return false }

// Freeze fails with ErrUnavailable.
func (g *Group) Freeze(extra ...int) error { return ErrUnavailable }

// Thaw fails with ErrUnavailable.
func (g *Group) Thaw() error { return ErrUnavailable }

// Kill does nothing.
func (g *Group) Kill() {}

// Remove does nothing.
func (g *Group) Remove() {}

// MemoryPeak returns 0, unknown.
func (g *Group) MemoryPeak() int64 { return 0 }
