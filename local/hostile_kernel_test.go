//go:build linux

package local_test

// Attacks through what the kernel keeps per user or per host rather than
// per box (inotify, open files, the OOM killer's choice), and on the
// in-box agent, which runs as the box's own user.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
	"github.com/upstash/box-go/local/internal/sandbox"
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

	got := startFlood(t, flood, inotifyFlood, "/tmp/inotify")
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

// startFlood runs the Python program script in b in the background and
// waits for it to write the file result, whose content it returns. The
// program is ended with the test.
func startFlood(t *testing.T, b *box.Box, script, result string) string {
	t.Helper()
	if err := b.Files.WriteText(t.Context(), "/tmp/flood.py", script); err != nil {
		t.Fatal(err)
	}
	mustExec(t, b, "nohup python3 /tmp/flood.py >/tmp/flood.log 2>&1 &")
	t.Cleanup(func() {
		_, _ = b.Exec.Command(context.Background(), "pkill -f 'python3 /tmp/[f]lood.py'; true")
	})
	var got string
	var err error
	if !waitFor(60*time.Second, func() bool {
		got, err = b.Files.ReadText(t.Context(), result)
		return err == nil
	}) {
		log, _ := b.Files.ReadText(t.Context(), "/tmp/flood.log")
		t.Fatalf("the flood did not finish: %v; its log: %q", err, log)
	}
	return got
}

// inotifyWatchFlood adds inotify watches until the kernel refuses one:
// on up to 100 instances (fewer than a box may have), each watching every
// file of a directory of %d files, which fmt makes the host's
// fs.inotify.max_user_watches / 100 + 1, so that they are enough. It
// writes how many watches it added and the errno that stopped it to
// /tmp/watches, then holds them.
const inotifyWatchFlood = `import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/w", exist_ok=True)
files = []
for i in range(%d):
    p = "/tmp/w/%%d" %% i
    open(p, "w").close()
    files.append(p.encode())
watches, err, fds = 0, 0, []
while err == 0 and len(fds) < 100:
    fd = libc.inotify_init()
    if fd < 0:
        err = ctypes.get_errno()
        break
    fds.append(fd)
    for p in files:
        if libc.inotify_add_watch(fd, p, 2) < 0:  # IN_MODIFY
            err = ctypes.get_errno()
            break
        watches += 1
open("/tmp/watches.tmp", "w").write("%%d %%d" %% (watches, err))
os.rename("/tmp/watches.tmp", "/tmp/watches")
time.sleep(120)
`

// inotifyWatchOne tries one inotify watch, on /tmp, and prints "ok" or
// the errno.
const inotifyWatchOne = `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
if fd < 0:
    print("init errno %d" % ctypes.get_errno())
elif libc.inotify_add_watch(fd, b"/tmp", 2) < 0:
    print("errno %d" % ctypes.get_errno())
else:
    print("ok")
`

// TestInotifyWatchFloodStaysInItsBox adds inotify watches in one box
// until the kernel refuses one (ENOSPC, fs.inotify.max_user_watches).
// Watches are counted per user like instances, and a user namespace's
// are charged to its owner as well: the box's uid, not root. So the box
// gets no more, and root on the host and another box still add theirs.
func TestInotifyWatchFloodStaysInItsBox(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	raw, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		t.Skipf("no inotify limits here: %v", err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	srv := boxtest.NewServer(t)
	flood, other := newBox(t, srv, nil), newBox(t, srv, nil)

	got := startFlood(t, flood, fmt.Sprintf(inotifyWatchFlood, max/100+1), "/tmp/watches")
	var n, errno int
	if _, err := fmt.Sscan(got, &n, &errno); err != nil || n == 0 || errno != int(syscall.ENOSPC) {
		t.Fatalf("the flood got %q (watches, errno); want some, then ENOSPC", got)
	}
	t.Logf("the box added %d inotify watches (max_user_watches %d)", n, max)

	// The box is bounded...
	if out := runPython(t, flood, inotifyWatchOne); out != fmt.Sprintf("errno %d\n", syscall.ENOSPC) {
		t.Errorf("one more inotify watch in the flooding box: %q, want ENOSPC", out)
	}
	// ...and nobody else pays for it: not another box, not root on the
	// host.
	if out := runPython(t, other, inotifyWatchOne); out != "ok\n" {
		t.Errorf("an inotify watch in another box during the flood: %q", out)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("an inotify instance of root on the host during the flood: %v", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, t.TempDir(), unix.IN_MODIFY); err != nil {
		t.Errorf("an inotify watch of root on the host during the flood: %v", err)
	}
}

// agentOf returns the host pid of b's agent: the child of the sandbox's
// init whose program is /run/boxd-agent.
func agentOf(t *testing.T, b *box.Box) int {
	t.Helper()
	for _, p := range sandboxOf(b.ID()) {
		for _, c := range childrenOf(p) {
			if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c)); strings.HasPrefix(string(cmd), "/run/boxd-agent") {
				return c
			}
		}
	}
	t.Fatal("no agent process found")
	return 0
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

// TestBoxProcessLimits checks what each box's process inherits: a bound
// on its open files (boxes used to get boxd's own, 20,000 here), and an
// oom_score_adj above boxd's that it cannot lower.
func TestBoxProcessLimits(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)

	raw, err := os.ReadFile("/proc/sys/fs/file-max")
	if err != nil {
		t.Fatal(err)
	}
	fileMax, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var boxd unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &boxd); err != nil {
		t.Fatal(err)
	}
	_, hard := sandbox.BoxNoFile(1024) // a small box's processes
	// All 1,024 processes of a small box at their limit hold at most
	// half of the host's open files, but for the floor of 1,024 each.
	if hard > 1024 && hard*1024 > uint64(fileMax)/2 || hard < 1024 || hard > boxd.Max {
		t.Errorf("a small box's processes may each open %d files, with fs.file-max %d and boxd's own limit %d", hard, fileMax, boxd.Max)
	}
	want := fmt.Sprintf("%d %d\n", sandbox.NoFileSoft, hard)
	if got := mustExec(t, b, "echo $(ulimit -Sn) $(ulimit -Hn)"); got != want {
		t.Errorf("open files in a box (soft, hard) = %q, want %q (boxd's own: %d %d)", got, want, boxd.Cur, boxd.Max)
	}
	if got := mustExec(t, b, fmt.Sprintf("ulimit -n %d && ulimit -n", hard)); got != fmt.Sprintf("%d\n", hard) {
		t.Errorf("a box's process raising its soft limit to the hard one: %q", got)
	}
	if r, err := b.Exec.Command(t.Context(), fmt.Sprintf("ulimit -Hn %d", hard+1)); err != nil || r.ExitCode == 0 {
		t.Errorf("a box's process raised its hard limit of open files: %+v %v", r, err)
	}
	// A process of the box, and one that the agent did not start itself
	// (a background job's child), hold the bound.
	pid := boxProcess(t, b)
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(limits), fmt.Sprintf("Max open files            %-20d %-20d files", sandbox.NoFileSoft, hard)) {
		t.Errorf("a box process's limits:\n%s", limits)
	}

	// The agent keeps a limit of its own, above its processes': it
	// serves every call to the box.
	agent := agentOf(t, b)
	limits, err = os.ReadFile(fmt.Sprintf("/proc/%d/limits", agent))
	if err != nil {
		t.Fatal(err)
	}
	n := min(uint64(sandbox.AgentNoFile), boxd.Max)
	if !strings.Contains(string(limits), fmt.Sprintf("Max open files            %-20d %-20d files", n, n)) {
		t.Errorf("the agent's limits:\n%s", limits)
	}

	// Under host-wide memory pressure the kernel kills a box's process
	// before boxd; the box cannot change that.
	self, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, b, "cat /proc/self/oom_score_adj"); got != fmt.Sprintf("%d\n", sandbox.OOMScoreAdj) || strings.TrimSpace(string(self)) != "0" {
		t.Errorf("oom_score_adj: %q in a box, %q in boxd", got, self)
	}
	// The floor (oom_score_adj_min) is set by a writer with
	// CAP_SYS_RESOURCE; root in some containers lacks it.
	if capEff(t)&(1<<unix.CAP_SYS_RESOURCE) != 0 {
		if r, err := b.Exec.Command(t.Context(), "echo 0 > /proc/self/oom_score_adj && cat /proc/self/oom_score_adj"); err != nil || r.ExitCode == 0 {
			t.Errorf("a box's process lowered its oom_score_adj: %+v %v", r, err)
		}
	} else {
		t.Log("boxd has no CAP_SYS_RESOURCE here: a box's processes may lower their oom_score_adj to 0")
	}
	if got := mustExec(t, b, "echo 600 > /proc/self/oom_score_adj && cat /proc/self/oom_score_adj"); got != "600\n" {
		t.Errorf("a box's process raising its oom_score_adj: %q", got)
	}
}

// capEff returns this process's effective capabilities.
func capEff(t *testing.T) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(procStatus(t, os.Getpid())["CapEff"], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// attackAgent, run in a box, finds the box's agent and tries to trace it
// and to take its descriptors, and prints the errno of each (0: it
// worked). An attach that works is undone at once, so that an agent
// without the fix answers the rest of the test.
const attackAgent = `import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
agent = 0
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read()
    except OSError:
        continue
    if cmd.startswith(b"/run/boxd-agent"):
        agent = int(p)
assert agent, "no agent"
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
r = libc.ptrace(PTRACE_ATTACH, agent, 0, 0)
attach = 0 if r == 0 else ctypes.get_errno()
if r == 0:
    os.waitpid(agent, 0x40000000)  # __WALL
    libc.ptrace(PTRACE_DETACH, agent, 0, 0)
nr = {"x86_64": (434, 438), "aarch64": (434, 438)}[platform.machine()]
pidfd = libc.syscall(nr[0], agent, 0)
getfd = libc.syscall(nr[1], pidfd, 3, 0) if pidfd >= 0 else -1
getfd = 0 if getfd >= 0 else ctypes.get_errno()
environ = 0
try:
    open("/proc/%d/environ" % agent).read()
except OSError as e:
    environ = e.errno
print(attach, getfd, environ)
`

// TestAgentIsOutOfTheBoxsReach: the agent runs as the box's user, and
// was dumpable, so a box's process could stop it with PTRACE_ATTACH (and
// with it every call boxd made to the box), or take its listening socket
// with pidfd_getfd and answer boxd's requests itself. Neither works now,
// without help from Yama (this host has none), and the box answers.
func TestAgentIsOutOfTheBoxsReach(t *testing.T) {
	t.Parallel()
	if isolation(t) != local.IsolationBwrap {
		t.Skip("needs bubblewrap: without it the agent is boxd's user's")
	}
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	eperm := fmt.Sprintf("%d %d %d\n", syscall.EPERM, syscall.EPERM, syscall.EACCES)
	if got := runPython(t, b, attackAgent); got != eperm {
		t.Errorf("ptrace attach, pidfd_getfd and /proc/environ of the agent from the box: errno %q, want %q", got, eperm)
	}
	if got := mustExec(t, b, "echo still"); got != "still\n" {
		t.Errorf("the box after the attack: %q", got)
	}
}

// TestHungAgentIsReplaced stops a box's agent, as any process of the box
// can (it runs as the box's user): calls to the box used to hang for as
// long as their callers waited. Now a call fails within the liveness
// bound, and the next one runs in a new sandbox.
func TestHungAgentIsReplaced(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	if err := b.Files.WriteText(t.Context(), "kept.txt", "kept"); err != nil {
		t.Fatal(err)
	}
	bg := marker()
	mustExec(t, b, "sleep "+bg+" >/dev/null 2>&1 &")
	agent := agentOf(t, b)
	old := sandboxOf(b.ID())
	if err := syscall.Kill(agent, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(agent, syscall.SIGKILL) })

	bound := sandbox.LivenessInterval + sandbox.LivenessTimeout
	ctx, cancel := context.WithTimeout(t.Context(), 3*bound)
	defer cancel()
	start := time.Now()
	r, err := c.send(ctx, "POST", "/v2/box/"+b.ID()+"/exec", execBody("echo hello"), nil)
	took := time.Since(start)
	t.Logf("the call to the stopped agent ended after %v: %v %v", took.Round(time.Millisecond), r, err)
	if err != nil || r.status != 502 {
		// The agent is still stopped: the rest would hang.
		t.Fatalf("exec in a box whose agent is stopped: %v %v, want 502", r, err)
	}
	// The sandbox's kill and boxd's answer take a moment beyond the
	// bound; the machine may be busy.
	if took > bound+5*time.Second {
		t.Errorf("the call to a stopped agent took %v; the bound is %v", took, bound)
	}

	// The next call works, in a new sandbox: the old one is gone, its
	// background job with it.
	if got := mustExec(t, b, "cat kept.txt"); got != "kept" {
		t.Fatalf("exec after the agent was stopped = %q", got)
	}
	for _, p := range old {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(p))); err == nil {
			t.Errorf("the hung sandbox's process %d still runs", p)
		}
	}
	if len(procsWith("sleep "+bg)) != 0 {
		t.Error("the hung sandbox's background job still runs")
	}
	logs, err := b.Logs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range logs {
		found = found || strings.Contains(l.Message, "did not answer")
	}
	if !found {
		t.Errorf("the box's logs do not say why its sandbox was replaced: %+v", logs)
	}
}

// TestPausedBoxOutlivesLivenessChecks: a paused box's agent is frozen
// and answers nothing, which is no reason to replace its sandbox. It
// stays paused past the liveness bound, and resumes with its processes.
func TestPausedBoxOutlivesLivenessChecks(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	bg := marker()
	mustExec(t, b, "sleep "+bg+" >/dev/null 2>&1 &")
	agent := agentOf(t, b)
	if err := b.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(sandbox.LivenessInterval + sandbox.LivenessTimeout + 2*time.Second)
	if err := syscall.Kill(agent, 0); err != nil {
		t.Fatalf("the paused box's agent is gone: %v", err)
	}
	if err := b.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, b, "pgrep -f 'sleep "+bg+"' >/dev/null && echo alive"); got != "alive\n" {
		t.Errorf("the resumed box's background job: %q", got)
	}
	if now := agentOf(t, b); now != agent {
		t.Errorf("the resumed box has a new agent (%d, was %d)", now, agent)
	}
}
