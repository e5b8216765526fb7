package local_test

// Attacks through what the kernel keeps per user or per host rather than
// per box.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// inotifyFlood takes every inotify instance a box may have and holds
// them; it writes how many it got to /tmp/inotify, then sleeps.
const inotifyFlood = `import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while True:
    fd = libc.inotify_init()
    if fd < 0:
        break
    fds.append(fd)
open("/tmp/inotify.tmp", "w").write("%d %d" % (len(fds), ctypes.get_errno()))
os.rename("/tmp/inotify.tmp", "/tmp/inotify")
time.sleep(120)
`

// inotifyOne tries one inotify instance and prints "ok" or the errno.
const inotifyOne = `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
print("ok" if fd >= 0 else "errno %d" % ctypes.get_errno())
`

// TestInotifyFloodStaysInItsBox takes every inotify instance one box
// may have. The kernel charges a user namespace's instances to its owner
// as well: boxes' namespaces were root's, so the flood left root on the
// host, and every other box, with none (EMFILE). Each box's namespace is
// now its own host uid's, and the flood stays in its box.
func TestInotifyFloodStaysInItsBox(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	srv := boxtest.NewServer(t)
	flood, other := newBox(t, srv, nil), newBox(t, srv, nil)

	// The box's user namespace belongs to the box's host uid.
	pid := boxProcess(t, flood)
	uid := strings.Fields(procStatus(t, pid)["Uid"])[0]
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		t.Fatal(err)
	}
	owner, err := unix.IoctlGetUint32(int(ns.Fd()), 0xb704) // NS_GET_OWNER_UID
	ns.Close()
	if err != nil {
		t.Fatalf("NS_GET_OWNER_UID: %v", err)
	}
	if strconv.Itoa(int(owner)) != uid {
		t.Errorf("the box's user namespace belongs to host uid %d; its processes are %s", owner, uid)
	}

	if err := flood.Files.WriteText(t.Context(), "/tmp/flood.py", inotifyFlood); err != nil {
		t.Fatal(err)
	}
	mustExec(t, flood, "nohup python3 /tmp/flood.py >/tmp/flood.log 2>&1 &")
	t.Cleanup(func() {
		_, _ = flood.Exec.Command(context.Background(), "pkill -f 'python3 /tmp/[f]lood.py'; true")
	})
	var got string
	if !waitFor(30*time.Second, func() bool {
		got, err = flood.Files.ReadText(t.Context(), "/tmp/inotify")
		return err == nil
	}) {
		log, _ := flood.Files.ReadText(t.Context(), "/tmp/flood.log")
		t.Fatalf("the flood did not finish: %v; its log: %q", err, log)
	}
	var n, errno int
	if _, err := fmt.Sscan(got, &n, &errno); err != nil || n == 0 || errno != int(syscall.EMFILE) {
		t.Fatalf("the flood got %q (instances, errno); want some, then EMFILE", got)
	}
	t.Logf("the box took %d inotify instances", n)

	// The box is bounded...
	if out := runPython(t, flood, inotifyOne); out != fmt.Sprintf("errno %d\n", syscall.EMFILE) {
		t.Errorf("one more inotify instance in the flooding box: %q, want EMFILE", out)
	}
	// ...and nobody else pays for it: not another box, not root on the
	// host.
	if out := runPython(t, other, inotifyOne); out != "ok\n" {
		t.Errorf("an inotify instance in another box during the flood: %q", out)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Errorf("an inotify instance of root on the host during the flood: %v", err)
	} else {
		unix.Close(fd)
	}
}

// runPython runs code with python3 in b and returns its standard output.
func runPython(t *testing.T, b *box.Box, code string) string {
	t.Helper()
	r, err := b.Exec.Code(t.Context(), &box.CodeParams{Lang: box.LangPython, Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("python in the box: exit %d, %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}
