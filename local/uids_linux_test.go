package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
	"github.com/upstash/box-go/local/internal/core"
)

// TestRestartedServerGivesUpATakenUID: a boxd that was down while
// another took the host uid of one of its boxes (boxtest servers restart
// on their data in one test binary; two services share a machine) gives
// that box a new uid of its own, with its files, instead of running it as
// the uid another box has. It used to warn and run it as that uid.
func TestRestartedServerGivesUpATakenUID(t *testing.T) {
	if isolation(t) != local.IsolationBwrap || os.Geteuid() != 0 {
		t.Skip("boxes have host uids of their own only as root with bubblewrap")
	}
	dir := t.TempDir()
	first := boxtest.NewServer(t, boxtest.WithDataDir(dir))
	a := newBox(t, first, nil)
	mustExec(t, a, "echo kept > kept.txt && mkdir -p deep/er && echo too > deep/er/file")
	fs := filepath.Join(dir, "boxes", a.ID(), "fs")
	uid := ownerOf(t, fs)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// Meanwhile another boxd holds the uid, as it does the uids of its
	// boxes: a lock on /run/boxd-uids/<uid>.
	f, err := os.OpenFile(fmt.Sprintf("/run/boxd-uids/%d", uid), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the uid's lock, after its boxd closed: %v", err)
	}

	second := boxtest.NewServer(t, boxtest.WithDataDir(dir))
	again, err := second.Client().Get(t.Context(), a.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, again, "cat kept.txt deep/er/file && id -u"); got != "kept\ntoo\n1000\n" {
		t.Errorf("the box after the restart: %q", got)
	}
	now := ownerOf(t, fs)
	if now == uid {
		t.Fatalf("the restarted box runs as host uid %d, which another boxd holds", uid)
	}
	for _, p := range liveProcs() {
		if p.uid == uid {
			t.Errorf("a process runs as the uid another boxd holds: %s", p)
		}
	}
	if got := ownerOf(t, filepath.Join(fs, "workspace", "home", "deep", "er", "file")); got != now {
		t.Errorf("a file of the box belongs to uid %d, the box is %d", got, now)
	}
	// The new uid is held: it is not given to a box of another boxd.
	g, err := os.OpenFile(fmt.Sprintf("/run/boxd-uids/%d", now), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Errorf("the box's new uid %d is not locked by its boxd", now)
	}
}

// TestIsolationCheckRunsAsNoBoxUID: the check that bubblewrap works here
// (local.CheckIsolation, and every server at its start) ran its sandbox
// as the first host uid of the boxes' range. Made while a box held that
// uid, it ran processes of no box as that box's user, and a delete test
// saw a new box share its uid with a live process. The check runs as
// core.ProbeUID, outside the range.
//
// The test runs alone in its binary (not in parallel), and looks at the
// processes this one starts: while it runs, those are the check's. A
// box's own processes run as its uid before they are in its control
// group, here and in other programs that run boxes on the machine.
func TestIsolationCheckRunsAsNoBoxUID(t *testing.T) {
	if isolation(t) != local.IsolationBwrap || os.Geteuid() != 0 {
		t.Skip("the check runs as a uid of its own only as root with bubblewrap")
	}
	var sawProbe atomic.Bool
	done := make(chan error, 1)
	go func() {
		// Check until the poller below has seen a process of the check,
		// so that the test shows it looked at the check's processes.
		deadline := time.Now().Add(30 * time.Second)
		for !sawProbe.Load() && time.Now().Before(deadline) {
			if err := local.CheckIsolation(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	reported := map[int]bool{}
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("CheckIsolation: %v", err)
			}
			if !sawProbe.Load() {
				t.Fatalf("in 30 s of checks, no process ran as the check's uid %d", core.ProbeUID)
			}
			return
		default:
		}
		for _, p := range liveProcs() {
			if p.box != "" || p.ppid != os.Getpid() {
				continue
			}
			switch {
			case p.uid == core.ProbeUID:
				sawProbe.Store(true)
			case p.uid >= core.UIDFirst && p.uid < core.UIDFirst+core.UIDCount && !reported[p.pid]:
				reported[p.pid] = true
				t.Errorf("a process of no box runs as host uid %d, in the boxes' range: %s (%s)", p.uid, p, procDetail(p.pid))
			}
		}
	}
}

// procDetail tells what process pid is: its command line, its parent's,
// and the variables of its environment that name boxd's roles.
func procDetail(pid int) string {
	read := func(pid int, f string) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		return string(b)
	}
	ppid := 0
	for line := range strings.SplitSeq(read(pid, "status"), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	var roles []string
	for kv := range strings.SplitSeq(read(pid, "environ"), "\x00") {
		if strings.HasPrefix(kv, "BOXD") || strings.HasPrefix(kv, "BOX_") {
			roles = append(roles, kv)
		}
	}
	return fmt.Sprintf("cmdline %q, env %q, parent %d %q", read(pid, "cmdline"), roles, ppid, read(ppid, "cmdline"))
}
