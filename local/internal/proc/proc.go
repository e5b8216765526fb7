// Package proc lists processes from /proc, with the family relations
// that boxd walks: parent, process group and session.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Process is one process, as its /proc/<pid>/stat describes it.
type Process struct {
	PID, PPID, PGID, SID int
}

// All lists the processes this process can see.
func All() []Process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// After the comm: state ppid pgrp session ...
		f, err := statFields("/proc/" + e.Name() + "/stat")
		if err != nil || len(f) < 4 {
			continue // gone meanwhile
		}
		p := Process{PID: pid}
		p.PPID, _ = strconv.Atoi(f[1])
		p.PGID, _ = strconv.Atoi(f[2])
		p.SID, _ = strconv.Atoi(f[3])
		out = append(out, p)
	}
	return out
}

// Descendants lists every process below pid, parents before children.
func Descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range All() {
		children[p.PPID] = append(children[p.PPID], p.PID)
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

// InSession lists the processes whose session id is sid.
func InSession(sid int) []int {
	var out []int
	for _, p := range All() {
		if p.SID == sid {
			out = append(out, p.PID)
		}
	}
	return out
}

// UIDs returns every uid that a process alive now has, as its real,
// effective, saved or file-system uid; zombies count, since their uid is
// still theirs until they are reaped.
func UIDs() map[uint32]bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[uint32]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone meanwhile
		}
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
			if !ok {
				continue
			}
			for _, f := range strings.Fields(string(rest)) {
				if u, err := strconv.ParseUint(f, 10, 32); err == nil {
					out[uint32(u)] = true
				}
			}
			break
		}
	}
	return out
}

// Activity is what /proc tells of a process's progress: whether it runs,
// is stopped, or sleeps, and how much processor time it has had.
type Activity struct {
	// Start is the process's start time, in clock ticks after boot: with
	// its pid, it names one process, whatever reuses the pid later.
	Start uint64
	// CPU is the user and system time of all its threads, in clock ticks.
	CPU uint64
	// Running is set when one of its threads is running or waiting for a
	// processor, or in an uninterruptible wait (on the disk, on memory):
	// the process is making progress, however slowly.
	Running bool
	// Stopped is set when every one of its threads is stopped, by a
	// signal or by a tracer.
	Stopped bool
}

// ActivityOf reads the activity of process pid. It fails once the
// process is gone.
func ActivityOf(pid int) (Activity, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	f, err := statFields(dir + "/stat")
	if err != nil {
		return Activity{}, err
	}
	// After the comm: state(0) ... utime(11) stime(12) ... starttime(19).
	if len(f) < 20 {
		return Activity{}, fmt.Errorf("proc: %s/stat has %d fields after the command", dir, len(f))
	}
	var a Activity
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	a.CPU = utime + stime
	a.Start, _ = strconv.ParseUint(f[19], 10, 64)
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return Activity{}, err
	}
	stopped := 0
	for _, t := range tasks {
		tf, err := statFields(dir + "/task/" + t.Name() + "/stat")
		if err != nil || len(tf) == 0 {
			continue // the thread ended meanwhile
		}
		switch tf[0] {
		case "R", "D":
			a.Running = true
		case "T", "t":
			stopped++
		}
	}
	a.Stopped = stopped > 0 && stopped == len(tasks)
	return a, nil
}

// statFields returns the fields of a /proc stat file that follow the
// command's name, which may hold spaces and parentheses.
func statFields(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("proc: %s: no command name", path)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// Children lists the processes whose parent is pid, in increasing order.
// It reads the children files of pid's threads, which the kernel keeps
// when it is built with CONFIG_PROC_CHILDREN, rather than every process's
// stat: a start of a box asks this, and on a machine with many boxes the
// walk of /proc cost more than the rest of the start. Without those files
// it walks /proc.
func Children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil // gone
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) {
			if _, terr := os.Stat(dir + t.Name()); terr == nil {
				return childrenOf(pid) // no children files here
			}
			continue // the thread ended meanwhile
		}
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out
}

// childrenOf is Children, from a walk of every process.
func childrenOf(pid int) []int {
	var out []int
	for _, p := range All() {
		if p.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// NSPIDs returns the pids of process pid in each PID namespace it is in,
// from the one of this process's view down to its own innermost (the
// NSpid line of /proc/<pid>/status), and its parent's pid. It fails once
// the process is gone.
func NSPIDs(pid int) (nspids []int, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, 0, err
	}
	ppid = -1
	for line := range strings.Lines(string(b)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key {
		case "PPid":
			if ppid, err = strconv.Atoi(strings.TrimSpace(val)); err != nil {
				return nil, 0, fmt.Errorf("proc: %d: PPid %q", pid, strings.TrimSpace(val))
			}
		case "NSpid":
			for _, f := range strings.Fields(val) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return nil, 0, fmt.Errorf("proc: %d: NSpid %q", pid, strings.TrimSpace(val))
				}
				nspids = append(nspids, n)
			}
		}
	}
	if len(nspids) == 0 || ppid < 0 {
		return nil, 0, fmt.Errorf("proc: %d: no NSpid or PPid in its status", pid)
	}
	return nspids, ppid, nil
}
