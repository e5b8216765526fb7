// Package cgroup gives each box control groups of its own: limits on CPU
// time, memory and the number of processes, a freezer for pause, and a way
// to end every process of the box at once.
//
// It works with cgroup v1 (one hierarchy per controller, as on this
// project's CI machines) and v2 (one unified hierarchy). A box's groups are
// made below boxd's own, at <boxd's cgroup>/boxd/<name> in each hierarchy,
// so that whatever limits boxd itself lives under also bound its boxes.
// Only root can make them; without them nothing is limited, and pausing
// falls back to signals (see package sandbox).
//
// Control groups are Linux's: the mechanism is in cgroup_linux.go, and on
// other systems New always fails with ErrUnavailable.
package cgroup

import "errors"

// Limits bound a box. A zero field leaves that resource unlimited.
type Limits struct {
	// CPUs is CPU time, in cores (1.5 is one and a half cores' time).
	CPUs float64
	// Memory is the most memory the box's processes may use, in bytes;
	// past it the kernel's OOM killer ends one of them.
	Memory int64
	// Pids is the most processes and threads the box may have; past it
	// fork and clone fail with EAGAIN.
	Pids int64
}

// ErrUnavailable is returned by New when boxd cannot make control groups
// (it is not root, no hierarchy is mounted, or the system is not Linux).
var ErrUnavailable = errors.New("cgroup: control groups are not available")
