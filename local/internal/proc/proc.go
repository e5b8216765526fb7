// Package proc lists processes from /proc, with the family relations
// that boxd walks: parent, process group and session.
package proc

import (
	"bytes"
	"os"
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
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp session ...: comm may hold spaces
		// and parentheses, so the fields are counted after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 4 {
			continue
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
