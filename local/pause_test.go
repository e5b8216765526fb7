package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/boxtest"
)

// procStat returns the state and parent of a process from /proc.
func procStat(pid int) (state string, ppid int, ok bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(raw[strings.LastIndexByte(string(raw), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, true
}

// boxProcs returns the processes that the sandbox of box id runs: the
// descendants of its bubblewrap processes.
func boxProcs(id string) []int {
	parents := sandboxOf(id)
	ents, _ := os.ReadDir("/proc")
	var out []int
	for changed := true; changed; {
		changed = false
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || slices.Contains(parents, pid) || slices.Contains(out, pid) {
				continue
			}
			if _, ppid, ok := procStat(pid); ok && (slices.Contains(parents, ppid) || slices.Contains(out, ppid)) {
				out = append(out, pid)
				changed = true
			}
		}
	}
	return out
}

// TestPauseWhileStarting pauses a box at once after creating it, while its
// sandbox is still starting in the background: the pause must freeze
// what that start runs, not only record the box as paused, and the next
// call must wake it and say so.
func TestPauseWhileStarting(t *testing.T) {
	t.Parallel()
	if isolation(t) == "none" {
		t.Skip("needs isolated boxes, whose processes are told apart by their sandbox")
	}
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	for i := range 3 {
		id := newBox(t, srv, nil).ID()
		wantOK(t, "pause", c.do("POST", "/v2/box/"+id+"/pause", nil, nil))
		// Whatever the start brings up in the next moment must be frozen.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			for _, p := range boxProcs(id) {
				if st, _, ok := procStat(p); ok && st != "D" && st != "T" {
					cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
					t.Fatalf("box %d: process %d (%q) of the paused box is in state %s, not frozen", i, p, strings.ReplaceAll(string(cmd), "\x00", " "), st)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st := boxStatus(t, c, id); st != "paused" {
			t.Fatalf("box %d: status %s after the pause", i, st)
		}
		r := decodeExec(t, "exec after the pause", c.do("POST", "/v2/box/"+id+"/exec", execBody("echo awake"), nil))
		if r.Output != "awake\n" {
			t.Errorf("box %d: exec after the pause = %+v", i, r)
		}
		if st := boxStatus(t, c, id); st == "paused" {
			t.Errorf("box %d: status %s after a call woke it", i, st)
		}
	}
}
