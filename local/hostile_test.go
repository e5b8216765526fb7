package local_test

// Attacks that a hostile box makes on boxd, run for real: real sandboxes,
// real symbolic links, real processes killed under boxd's feet.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/ocitest"
	"github.com/upstash/box-go/local"
	"github.com/upstash/box-go/local/internal/proc"
)

// requireRootSandbox skips a test that needs what only root gets: a user
// namespace and control groups of each box's own.
func requireRootSandbox(t *testing.T) {
	t.Helper()
	if isolation(t) != local.IsolationBwrap || os.Geteuid() != 0 {
		t.Skip("needs boxd as root with bubblewrap")
	}
}

func mustExec(t *testing.T, b *box.Box, script string) string {
	t.Helper()
	r, err := b.Exec.Command(t.Context(), script)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stdout %q, stderr %q", script, r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// killSandbox kills every process of the box from inside, as a box may,
// and waits until its sandbox is gone.
func killSandbox(t *testing.T, b *box.Box) {
	t.Helper()
	old := sandboxOf(b.ID())
	if len(old) == 0 {
		t.Fatal("no sandbox process found")
	}
	mustExec(t, b, "(sleep 0.3; kill -9 -1) >/dev/null 2>&1 &")
	if !waitFor(10*time.Second, func() bool {
		for _, pid := range old {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("sandbox %v still runs after kill -9 -1", old)
	}
}

// hostServer is a server on the host's loopback that counts requests.
func hostServer(t *testing.T) (port string, hits *atomic.Int64) {
	hits = new(atomic.Int64)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("host server\n"))
	}))
	t.Cleanup(hs.Close)
	_, port, _ = net.SplitHostPort(hs.Listener.Addr().String())
	return port, hits
}

// TestPlantedLinksDoNotRedirectBoxd plants symbolic links, at every name
// boxd has used for its files and sockets, in every directory a box can
// write, then kills its own sandbox so that boxd starts a new one. boxd
// must not write, chown or connect through any of them: it keeps its
// files out of the box's reach and hands the agent its sockets open.
func TestPlantedLinksDoNotRedirectBoxd(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	host := t.TempDir()
	victim := filepath.Join(host, "victim")
	if err := os.WriteFile(victim, []byte("host file\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(host, "host.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var dialled atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dialled.Add(1)
			c.Close()
		}
	}()

	// /run/boxd is where the agent's socket and configuration were.
	plant := `for d in /run/boxd /run /workspace /workspace/home /home/boxuser /tmp; do
  mkdir -p "$d" 2>/dev/null
  for n in config.json agent.log ca-certificates.crt passwd; do ln -sfn ` + victim + ` "$d/$n" 2>/dev/null; done
  for n in agent.sock egress.sock; do ln -sfn ` + sock + ` "$d/$n" 2>/dev/null; done
done; true`
	mustExec(t, b, plant)
	if out := mustExec(t, b, "ls /run; test -e /run/boxd/agent.sock && echo linked; true"); strings.Contains(out, "agent.sock\n") {
		t.Logf("links planted: %q", out)
	}
	killSandbox(t, b)

	// The next call starts a new sandbox, which works, network included.
	if got := mustExec(t, b, "echo back"); got != "back\n" {
		t.Fatalf("exec after the restart = %q", got)
	}
	port, hits := hostServer(t)
	if got := mustExec(t, b, "curl -sS --max-time 10 http://host.boxd.internal:"+port+"/"); got != "host server\n" || hits.Load() != 1 {
		t.Errorf("egress after the restart = %q, %d requests", got, hits.Load())
	}
	fi, err := os.Lstat(victim)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := fileOwner(fi)
	content, _ := os.ReadFile(victim)
	if string(content) != "host file\n" || fi.Mode().Perm() != 0o640 || int(uid) != os.Geteuid() {
		t.Errorf("host file through a planted link: %q, mode %v, owner %d", content, fi.Mode(), uid)
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("boxd connected %d times to a host socket a planted link named", n)
	}
}

// TestEgressAfterSandboxRestart kills a box's sandbox from inside (as an
// OOM kill or a crash would): the new sandbox's egress must work. The
// old egress listener's close used to unlink the new one's socket.
func TestEgressAfterSandboxRestart(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	port, hits := hostServer(t)
	curl := "curl -sS --max-time 10 http://host.boxd.internal:" + port + "/"
	for i := range 3 {
		if got := mustExec(t, b, curl); got != "host server\n" {
			t.Fatalf("egress after %d restarts = %q", i, got)
		}
		killSandbox(t, b)
	}
	if got := mustExec(t, b, curl); got != "host server\n" || hits.Load() != 4 {
		t.Fatalf("egress after 3 restarts = %q, %d requests", got, hits.Load())
	}
}

// procStatus returns the fields of /proc/<pid>/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// asHostUser runs argv as host uid 1000 (an ordinary user of the machine
// boxd runs on) and returns its combined output and error.
func asHostUser(argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = hostUserAttr()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestBoxesHaveIdentitiesOfTheirOwn checks what two boxes and a host user
// can see of each other. Boxes used to share host uid 1000 with the
// kernel keyring that goes with it, and uid 1000 on the host could read
// their environment and run their set-uid files.
func TestBoxesHaveIdentitiesOfTheirOwn(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	srv := boxtest.NewServer(t)
	a, b := newBox(t, srv, nil), newBox(t, srv, nil)

	// The keyring is out of reach: add_key and keyctl are refused.
	keys := `import ctypes, platform
nr = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(nr[0], b"user", b"boxd-test", b"secret", 6, ctypes.c_int(-4))
print(r, ctypes.get_errno())
r = libc.syscall(nr[1], 0, ctypes.c_int(-3), 0)
print(r, ctypes.get_errno())`
	for _, bx := range []*box.Box{a, b} {
		r, err := bx.Exec.Code(t.Context(), &box.CodeParams{Lang: box.LangPython, Code: keys})
		if err != nil {
			t.Fatal(err)
		}
		if r.Stdout != "-1 1\n-1 1\n" {
			t.Errorf("add_key and keyctl in a box = %q %q, want both refused with EPERM", r.Stdout, r.Stderr)
		}
	}

	// Each box's processes are a host uid of their own, with no groups.
	uids := map[string]string{}
	for _, bx := range []*box.Box{a, b} {
		m := marker()
		mustExec(t, bx, "sleep "+m+" >/dev/null 2>&1 &")
		var pids []int
		if !waitFor(5*time.Second, func() bool { pids = procsWith("sleep " + m); return len(pids) > 0 }) {
			t.Fatal("no process found")
		}
		st := procStatus(t, pids[0])
		uid, gid := strings.Fields(st["Uid"]), strings.Fields(st["Gid"])
		if len(uid) != 4 || slices.ContainsFunc(uid, func(u string) bool { return u != uid[0] }) || uid[0] == "0" || uid[0] == "1000" || gid[0] != uid[0] {
			t.Errorf("box %s runs as host uid %v gid %v", bx.ID(), uid, gid)
		}
		if st["Groups"] != "" {
			t.Errorf("box %s has supplementary groups %q", bx.ID(), st["Groups"])
		}
		if other, ok := uids[uid[0]]; ok {
			t.Errorf("boxes %s and %s share host uid %s", other, bx.ID(), uid[0])
		}
		uids[uid[0]] = bx.ID()
		// An ordinary host user cannot read it.
		if out, err := asHostUser("cat", fmt.Sprintf("/proc/%d/environ", pids[0])); err == nil {
			t.Errorf("host uid 1000 read a box process's environment: %q", out)
		}
	}

	// A set-uid copy made in a box gives nothing, in the box or on the
	// host, where the data directory is boxd's alone.
	if got := mustExec(t, a, "cp /usr/bin/id ./sid && chmod 4755 ./sid && ./sid -u"); got != "1000\n" {
		t.Errorf("set-uid file in the box runs as %q", got)
	}
	sid := filepath.Join(srv.DataDir(), "boxes", a.ID(), "fs", "workspace", "home", "sid")
	if _, err := os.Stat(sid); err != nil {
		t.Fatalf("the box's file is not where the test looks: %v", err)
	}
	if out, err := asHostUser(sid, "-u"); err == nil {
		t.Errorf("host uid 1000 ran a box's set-uid file: %q", out)
	}
	for _, d := range []string{srv.DataDir(), filepath.Join(srv.DataDir(), "boxes"), filepath.Join(srv.DataDir(), "boxes", a.ID())} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, %v; want 0700", d, fi.Mode(), err)
		}
	}
}

// TestRefusedRemoveChangesNothing removes trees that cannot be removed
// whole. The answer is a refusal and everything stays; removing the
// directory that held the agent's sockets once answered 403 and broke
// the box for good.
func TestRefusedRemoveChangesNothing(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	remove := func(path string) response {
		return c.do("POST", "/v2/box/"+b.ID()+"/files/remove", map[string]any{"path": path, "recursive": true}, nil)
	}
	if r := remove("/run/boxd"); r.status < 400 || r.status >= 500 {
		t.Errorf("remove /run/boxd = %s, want a 4xx", r)
	}
	if got := mustExec(t, b, "echo still"); got != "still\n" {
		t.Fatalf("exec after removing /run/boxd = %q", got)
	}

	mustExec(t, b, "mkdir -p tree/a tree/ro && echo 1 > tree/a/f && echo 2 > tree/ro/g && chmod 555 tree/ro")
	wantError(t, "remove of a tree with a read-only directory", remove("tree"), http.StatusForbidden, "tree/ro")
	if got := mustExec(t, b, "cat tree/a/f tree/ro/g"); got != "1\n2\n" {
		t.Errorf("after a refused remove the tree holds %q", got)
	}
	if isolation(t) == local.IsolationBwrap {
		before := mustExec(t, b, "ls -A /etc")
		wantError(t, "remove of /etc", remove("/etc"), http.StatusForbidden)
		if after := mustExec(t, b, "ls -A /etc"); after != before {
			t.Errorf("/etc after a refused remove: %q, was %q", after, before)
		}
	}
}

// TestBrokenAgentRecovers takes a running box's agent away twice: its
// socket is removed on the host, then the agent process is killed while a
// background job keeps the sandbox itself alive. Calls go on working:
// boxd connects through its own descriptor of the socket, and replaces a
// sandbox whose agent has gone.
func TestBrokenAgentRecovers(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	if err := b.Files.WriteText(t.Context(), "kept.txt", "kept"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(srv.DataDir(), "boxes", b.ID(), "agent.sock")); err != nil {
		t.Fatal(err)
	}
	// Concurrent calls, so that boxd has to make new connections.
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			r, err := b.Exec.Command(t.Context(), "sleep 0.2; cat kept.txt")
			if err == nil && r.Stdout != "kept" {
				err = fmt.Errorf("stdout %q", r.Stdout)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("exec after the agent's socket went: %v", err)
		}
	}

	bg := marker()
	mustExec(t, b, "sleep "+bg+" >/dev/null 2>&1 &")
	// The agent is the child of the sandbox's init whose program is
	// /run/boxd-agent.
	var agent int
	for _, p := range sandboxOf(b.ID()) {
		for _, c := range childrenOf(p) {
			if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c)); strings.HasPrefix(string(cmd), "/run/boxd-agent") {
				agent = c
			}
		}
	}
	if agent == 0 {
		t.Fatal("no agent process found")
	}
	old := sandboxOf(b.ID())
	if err := killPid(agent); err != nil {
		t.Fatal(err)
	}
	// boxd ends the sandbox that has lost its agent, background job and
	// all...
	if !waitFor(5*time.Second, func() bool {
		return len(procsWith("sleep "+bg)) == 0 && !slices.ContainsFunc(old, func(p int) bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", p))
			return err == nil
		})
	}) {
		t.Fatalf("the broken sandbox survives: %v, its background job %v", old, procsWith("sleep "+bg))
	}
	// ...and the next call gets a new one.
	if got := mustExec(t, b, "cat kept.txt"); got != "kept" {
		t.Fatalf("exec after the agent was killed = %q", got)
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	for _, p := range proc.All() {
		if p.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// cgroupFile reads a control file of the v1 hierarchy of controller for
// the process pid, or "" when that hierarchy is not mounted there.
func cgroupFile(t *testing.T, pid int, controller, file string) string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), controller) {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, parts[2], file))
			if err != nil {
				return ""
			}
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// boxProcess starts a background sleep in b and returns its host pid.
func boxProcess(t *testing.T, b *box.Box) int {
	t.Helper()
	m := marker()
	mustExec(t, b, "sleep "+m+" >/dev/null 2>&1 &")
	var pids []int
	if !waitFor(5*time.Second, func() bool { pids = procsWith("sleep " + m); return len(pids) > 0 }) {
		ps, err := b.Exec.Command(t.Context(), "ps -eo pid,stat,args")
		t.Fatalf("the box's process (sleep %s) is not on the host; in the box (%v):\n%+v", m, err, ps)
	}
	return pids[0]
}

// TestDefaultSizes checks that each size gets the cloud's limits: small
// 2 CPUs and 4 GiB, medium 4 and 8, large 8 and 16.
func TestDefaultSizes(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	srv := boxtest.NewServer(t)
	for _, c := range []struct {
		size       box.Size
		quota, mem string
		pids       string
	}{
		{box.SizeSmall, "200000", strconv.Itoa(4 << 30), "1024"},
		{box.SizeMedium, "400000", strconv.Itoa(8 << 30), "2048"},
		{box.SizeLarge, "800000", strconv.Itoa(16 << 30), "4096"},
	} {
		pid := boxProcess(t, newBox(t, srv, &box.CreateParams{Size: c.size}))
		got := []string{cgroupFile(t, pid, "cpu", "cpu.cfs_quota_us"), cgroupFile(t, pid, "memory", "memory.limit_in_bytes"), cgroupFile(t, pid, "pids", "pids.max")}
		if got[0]+got[1]+got[2] == "" {
			t.Skip("no cgroup v1 hierarchies under /sys/fs/cgroup to read the limits from")
		}
		if want := []string{c.quota, c.mem, c.pids}; !slices.Equal(got, want) {
			t.Errorf("%s box: cpu quota, memory and pids limits %q, want %q", c.size, got, want)
		}
	}
}

// TestSizesLimitBoxes runs programs that take more than a box of their
// size may have: memory, processes and CPU. Each loses what it asked for
// in its own box; the box, boxd and another box go on.
func TestSizesLimitBoxes(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.Sizes = local.Sizes{"small": {CPUs: 0.5, Memory: 128 << 20, Processes: 64}}
	}))
	b := newBox(t, srv, nil)
	other := newBox(t, srv, &box.CreateParams{Size: box.SizeMedium})

	// Memory: the program that takes too much is killed (SIGKILL, by the
	// kernel's OOM killer), and only it.
	r, err := b.Exec.Command(t.Context(), `python3 -c 'b = bytearray(400 << 20); print("allocated")'`)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 137 || strings.Contains(r.Stdout, "allocated") {
		t.Errorf("400 MiB in a 128 MiB box: exit %d, %q %q; want killed (137)", r.ExitCode, r.Stdout, r.Stderr)
	}
	if got := mustExec(t, other, `python3 -c 'b = bytearray(400 << 20); print("allocated")'`); got != "allocated\n" {
		t.Errorf("400 MiB in a medium box = %q", got)
	}
	if got := mustExec(t, b, "echo alive"); got != "alive\n" {
		t.Errorf("the small box after its OOM = %q", got)
	}

	// Processes: fork fails once the box has its 64.
	fork := `import subprocess, errno
ps, failed = [], 0
for i in range(100):
    try:
        ps.append(subprocess.Popen(["sleep", "30"]))
    except OSError as e:
        failed += 1
print(len(ps), failed)
for p in ps:
    p.kill()
    p.wait()`
	cr, err := b.Exec.Code(t.Context(), &box.CodeParams{Lang: box.LangPython, Code: fork})
	if err != nil {
		t.Fatal(err)
	}
	var started, failed int
	if _, err := fmt.Sscan(cr.Stdout, &started, &failed); err != nil || started >= 64 || failed == 0 {
		t.Errorf("100 processes in a box of 64: %q %q; want some refused", cr.Stdout, cr.Stderr)
	}
	if got := mustExec(t, b, "echo alive"); got != "alive\n" {
		t.Errorf("the small box after its fork storm = %q", got)
	}

	// CPU: two processes that spin for 1.5 s get half a CPU between them.
	spin := `import multiprocessing, time
def spin(q):
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        pass
    q.put(time.process_time())
q = multiprocessing.Queue()
ps = [multiprocessing.Process(target=spin, args=(q,)) for _ in range(2)]
for p in ps: p.start()
print(sum(q.get() for _ in ps))
for p in ps: p.join()`
	cr, err = b.Exec.Code(t.Context(), &box.CodeParams{Lang: box.LangPython, Code: spin})
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := strconv.ParseFloat(strings.TrimSpace(cr.Stdout), 64)
	if err != nil || cpu > 1.5*0.5*1.4 {
		t.Errorf("CPU time of two spinning processes for 1.5 s with half a CPU: %q %q, want at most %.2fs", cr.Stdout, cr.Stderr, 1.5*0.5*1.4)
	}
}

// openFDs counts this process's open descriptors (boxd runs in it).
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestEgressFloodStaysInItsBox opens 1,500 connections to the egress
// proxy from one box (in two processes) and holds them. boxd's descriptors grow by that
// box's bound at most, and another box keeps its network; once the flood
// ends the box has its network back.
//
// It counts the whole test binary's descriptors, so it does not run in
// parallel: a sequential top-level test runs while every parallel one is
// paused, and only this test's boxd opens descriptors meanwhile.
func TestEgressFloodStaysInItsBox(t *testing.T) {
	requireRootSandbox(t) // the proxy relay listens in the box's own network namespace
	srv := boxtest.NewServer(t)
	flood, other := newBox(t, srv, nil), newBox(t, srv, nil)
	port, _ := hostServer(t)
	curl := "curl -sS --max-time 20 http://host.boxd.internal:" + port + "/"
	if got := mustExec(t, flood, curl); got != "host server\n" {
		t.Fatalf("egress before the flood = %q", got)
	}
	mustExec(t, other, curl)
	before := openFDs(t)
	// Two processes of 750 connections each: one process of a box may
	// open at most sandbox.NoFileHard files.
	script := `import os, socket, sys, time
name = sys.argv[1]
socks = []
for i in range(750):
    s = socket.socket()
    s.connect(("127.0.0.1", 3128))
    socks.append(s)
    if len(socks) % 50 == 0:
        open("/tmp/opened.tmp" + name, "w").write(str(len(socks)))
        os.rename("/tmp/opened.tmp" + name, "/tmp/opened" + name)
time.sleep(60)`
	if err := flood.Files.WriteText(t.Context(), "/tmp/flood.py", script); err != nil {
		t.Fatal(err)
	}
	mustExec(t, flood, "for i in 1 2; do nohup python3 /tmp/flood.py $i >/tmp/flood$i.log 2>&1 & done")
	if !waitFor(30*time.Second, func() bool {
		for _, i := range []string{"1", "2"} {
			if got, err := flood.Files.ReadText(t.Context(), "/tmp/opened"+i); err != nil || got != "750" {
				return false
			}
		}
		return true
	}) {
		for _, i := range []string{"1", "2"} {
			log, _ := flood.Files.ReadText(t.Context(), "/tmp/flood"+i+".log")
			opened, err := flood.Files.ReadText(t.Context(), "/tmp/opened"+i)
			t.Errorf("flood %s: %s of 750 open (%v); its log: %q", i, opened, err, log)
		}
		ps, _ := flood.Exec.Command(t.Context(), "ps -o pid,stat,etime,args -e")
		t.Fatalf("the flood did not open its connections; ps:\n%+v", ps)
	}
	time.Sleep(time.Second) // let boxd take what it will
	peak := openFDs(t)
	t.Logf("descriptors: %d before the flood, %d during it", before, peak)
	const bound = 256 + 64 // the per-box limit, and slack for the rest of the test binary
	if peak-before > bound {
		t.Errorf("boxd's descriptors went from %d to %d with one box flooding its proxy; want at most %d more", before, peak, bound)
	}
	if got := mustExec(t, other, curl); got != "host server\n" {
		t.Errorf("the other box's egress during the flood = %q", got)
	}
	mustExec(t, flood, "pkill -f 'python3 /tmp/[f]lood.py'; true")
	if !waitFor(30*time.Second, func() bool {
		r, err := flood.Exec.Command(t.Context(), curl)
		return err == nil && r.Stdout == "host server\n"
	}) {
		t.Error("the flooding box did not get its network back after the flood")
	}
}

// TestNoClientInputIsA500 sends the files API inputs at the edges: huge
// offsets, moves across the box's mounts, special files. Each is done, or
// refused with a 4xx that says why; none is a 500, and none hangs.
func TestNoClientInputIsA500(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	id := b.ID()
	mustExec(t, b, "printf 0123456789 > ten.txt && mkdir -p tree/sub && echo leaf > tree/sub/leaf.txt && ln -s sub/leaf.txt tree/link && mkfifo fifo")
	read := func(q string) response {
		return c.do("GET", "/v2/box/"+id+"/files/read?path="+q, nil, nil)
	}
	for _, q := range []string{
		"ten.txt&offset=9223372036854775807&length=1",
		"ten.txt&offset=9223372036854775807",
		"ten.txt&offset=10&length=5",
		"/proc/self/mem",
		"/proc/self/status&offset=9223372036854775807&length=1",
		"fifo",
		"/dev/zero&length=4",
		"/",
		strings.Repeat("x", 5000),
	} {
		r := read(q)
		if r.status >= 500 {
			t.Errorf("read %s = %s", q, r)
		}
	}
	if r := read("ten.txt&offset=9223372036854775807&length=1"); r.status != 200 || !strings.Contains(string(r.body), `"content":""`) {
		t.Errorf("read past the end = %s, want 200 and nothing", r)
	}
	move := func(from, to string) response {
		return c.do("POST", "/v2/box/"+id+"/files/rename", map[string]any{"from": from, "to": to}, nil)
	}
	wantOK(t, "move a file to /tmp", move("/workspace/home/ten.txt", "/tmp/ten.txt"))
	wantOK(t, "move a tree to /tmp", move("/workspace/home/tree", "/tmp/tree"))
	wantOK(t, "move it back home", move("/tmp/tree", "/home/boxuser/tree"))
	if got := mustExec(t, b, "cat /tmp/ten.txt; readlink /home/boxuser/tree/link; cat /home/boxuser/tree/link; test -e tree || test -e /tmp/tree || echo gone"); got != "0123456789sub/leaf.txt\nleaf\ngone\n" {
		t.Errorf("after the moves: %q", got)
	}
	mustExec(t, b, "mkdir -p /tmp/full && touch /tmp/full/x")
	if r := move("/home/boxuser/tree", "/tmp/full"); r.status != http.StatusConflict {
		t.Errorf("move onto a non-empty directory elsewhere = %s, want 409", r)
	}
	if got := mustExec(t, b, "cat /home/boxuser/tree/sub/leaf.txt; ls /tmp/full"); got != "leaf\nx\n" {
		t.Errorf("a refused move changed something: %q", got)
	}
	for _, r := range []response{
		c.do("POST", "/v2/box/"+id+"/files/mkdir", map[string]any{"path": "/workspace/home/fifo"}, nil),
		c.do("POST", "/v2/box/"+id+"/files/write", map[string]any{"path": "/proc/self/status", "content": "x"}, nil),
		c.do("POST", "/v2/box/"+id+"/files/remove", map[string]any{"path": "/proc/self", "recursive": true}, nil),
		c.do("POST", "/v2/box/"+id+"/files/rename", map[string]any{"from": "/proc/self/status", "to": "/tmp/s"}, nil),
		c.do("GET", "/v2/box/"+id+"/files/download?folder=fifo", nil, nil),
		c.do("GET", "/v2/box/"+id+"/files/list?folder=fifo", nil, nil),
	} {
		if r.status >= 500 || r.status < 400 {
			t.Errorf("odd files request = %s, want a 4xx", r)
		}
	}
	// Variables of the box are checked when it is created.
	wantError(t, "env with a NUL byte", c.do("POST", "/v2/box", `{"env_vars": {"RT": "x\u0000y"}}`, nil), http.StatusBadRequest, "NUL")
}

// TestRootIsReadOnly: a box's /, /etc and /var are the sandbox's own
// tmpfs, gone with it, so the box user cannot write there (as a user who
// is not root cannot on any machine) and nothing it writes is lost
// silently at the next start; /run is a tmpfs of its own, and the box's
// files live in /workspace, /home/boxuser and /tmp.
func TestRootIsReadOnly(t *testing.T) {
	t.Parallel()
	if isolation(t) != local.IsolationBwrap {
		t.Skip("needs bubblewrap")
	}
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	for _, p := range []string{"/x", "/etc/x", "/var/x", "/etc/passwd", "/home/x"} {
		r, err := b.Exec.Command(t.Context(), "echo hi >> "+p)
		if err != nil {
			t.Fatal(err)
		}
		if r.ExitCode == 0 || !strings.Contains(r.Stderr+r.Stdout, "Read-only file system") {
			t.Errorf("writing %s: exit %d, %q %q; want a read-only file system", p, r.ExitCode, r.Stdout, r.Stderr)
		}
	}
	mustExec(t, b, "echo hi > /run/x && echo hi > /tmp/x && echo hi > /workspace/home/x && echo hi > /home/boxuser/x && mkdir -p /tmp/d/e")
	if got := mustExec(t, b, "findmnt -no FSTYPE /run || stat -f -c %T /run"); !strings.Contains(got, "tmpfs") {
		t.Errorf("/run is %q, want a tmpfs", got)
	}
}

// TestFilesAPICannotWriteTheRoot is TestRootIsReadOnly through the files
// API, which the in-box agent serves as the box user: every way of
// writing to /, /etc, /var or /home is refused with 403
// (fs.ErrPermission through the SDK), and nothing is lost silently:
// nothing appears there, /etc/passwd is as it was, and the file a refused
// rename would have moved is still where it was, whole. So on the host's
// /usr and in a runtime image.
func TestFilesAPICannotWriteTheRoot(t *testing.T) {
	t.Parallel()
	if isolation(t) != local.IsolationBwrap {
		t.Skip("needs bubblewrap")
	}
	t.Run("host", func(t *testing.T) {
		t.Parallel()
		cannotWriteTheRoot(t, newBox(t, boxtest.NewServer(t), nil))
	})
	t.Run("image", func(t *testing.T) {
		t.Parallel()
		reg := ocitest.NewRegistry(t)
		ref := busyboxImage(t, reg, "test/busybox:1")
		srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
			c.Root = local.RootImage
			c.Images = map[string]string{"python": ref}
		}))
		cannotWriteTheRoot(t, newBox(t, srv, &box.CreateParams{Runtime: box.Runtime("python")}))
	})
}

func cannotWriteTheRoot(t *testing.T, b *box.Box) {
	ctx := t.Context()
	passwd, err := b.Files.Read(ctx, "/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Files.WriteText(ctx, "/workspace/home/keep", "kept\n"); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fs.ErrPermission) || box.StatusCode(err) != http.StatusForbidden {
			t.Errorf("%s = %v (status %d), want 403, fs.ErrPermission", what, err, box.StatusCode(err))
		}
	}
	for _, dir := range []string{"/", "/etc", "/var", "/home"} {
		if _, err := b.Files.Stat(ctx, dir, nil); errors.Is(err, fs.ErrNotExist) && dir != "/" && dir != "/etc" {
			// An image without it: making it is refused.
			refused("Mkdir "+dir+"/d with parents", b.Files.Mkdir(ctx, dir+"/d", &box.MkdirParams{Parents: true}))
			if _, err := b.Files.Stat(ctx, dir, nil); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Stat %s after the refused Mkdir: %v, want fs.ErrNotExist", dir, err)
			}
			continue
		}
		p, d := path.Join(dir, "x"), path.Join(dir, "d")
		refused("Write "+p, b.Files.Write(ctx, p, []byte("hi")))
		_, err := b.Files.WriteFrom(ctx, p, strings.NewReader("hi"), nil)
		refused("WriteFrom "+p, err)
		refused("Upload "+p, b.Files.Upload(ctx, []box.UploadFile{{Destination: p, Reader: strings.NewReader("hi")}}))
		refused("Mkdir "+d, b.Files.Mkdir(ctx, d, nil))
		refused("Mkdir "+d+"/e with parents", b.Files.Mkdir(ctx, d+"/e", &box.MkdirParams{Parents: true}))
		refused("Rename /workspace/home/keep to "+p, b.Files.Rename(ctx, "/workspace/home/keep", p))
		for _, q := range []string{p, d} {
			if _, err := b.Files.Stat(ctx, q, nil); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Stat %s after the refused writes: %v, want fs.ErrNotExist", q, err)
			}
		}
	}
	refused("Write /etc/passwd", b.Files.WriteText(ctx, "/etc/passwd", "root::0:0::/:/bin/sh\n"))
	refused("Remove /etc/passwd", b.Files.Remove(ctx, "/etc/passwd", nil))
	// A move out of /etc copies across file systems, then removes the
	// original: it is refused before it copies, so the target is neither
	// made nor replaced.
	refused("Rename /etc/passwd to a new file", b.Files.Rename(ctx, "/etc/passwd", "/workspace/home/passwd"))
	refused("Rename /etc/passwd over a file", b.Files.Rename(ctx, "/etc/passwd", "/workspace/home/keep"))
	if got, err := b.Files.Read(ctx, "/etc/passwd"); err != nil || !bytes.Equal(got, passwd) {
		t.Errorf("/etc/passwd after the refused writes: %q, %v; want %q", got, err, passwd)
	}
	if got, err := b.Files.ReadText(ctx, "/workspace/home/keep"); err != nil || got != "kept\n" {
		t.Errorf("the file the refused renames would have moved or replaced: %q, %v", got, err)
	}
	// The box itself sees the same: nothing of the refused writes.
	if got := mustExec(t, b, "ls -d /x /d /etc/x /etc/d /var/x /var/d /home/x /home/d /workspace/home/passwd 2>/dev/null; true"); got != "" {
		t.Errorf("what the refused writes left, as the box sees it: %q", got)
	}
}
