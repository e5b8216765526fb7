package agent

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// start starts cmd, a process of the box, with the box's limit of open
// files (Config.OpenFiles) when there is one. The agent's own limit is
// higher: it serves every call to the box, and relays its connections.
//
// A limit passes from a process to the processes it starts, and os/exec
// cannot set one between fork and exec. So the process is started traced,
// which stops it as its exec completes, before the program has run an
// instruction; the agent then lowers its limit (a process may lower the
// limits of another of its user's) and lets it go. Where tracing is
// refused (Yama's ptrace_scope 2 or 3), the limit is set just after the
// start: a program that forks at once may then have a child without it.
func (a *Agent) start(cmd *exec.Cmd) error {
	lim := a.cfg.OpenFiles
	if lim == nil || lim.Hard == 0 {
		return cmd.Start()
	}
	rl := unix.Rlimit{Cur: min(lim.Soft, lim.Hard), Max: lim.Hard}
	if canTrace() {
		return startTraced(cmd, &rl)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_NOFILE, &rl, nil)
	return nil
}

// envProbe, in a process's environment, makes boxd's binary exit at
// once: canTrace starts it traced.
const envProbe = "BOXD_AGENT_PROBE"

func init() {
	if os.Getenv(envProbe) != "" {
		os.Exit(0)
	}
}

// canTrace reports whether the agent may start a process traced; Yama's
// ptrace_scope 2 and 3 refuse it. It starts the agent's own binary as the
// agent was started (through the dynamic loader in a box whose root is an
// image, which /proc/self/exe then is) traced, sees it stop at its exec
// and takes its limit, and kills it there: the probe runs nothing of its
// own. (Let go, it would run boxd's start-up, tens of milliseconds of
// processor time, on every box's first exec.)
var canTrace = sync.OnceValue(func() bool {
	raw, err := os.ReadFile("/proc/self/cmdline")
	if err != nil || len(raw) == 0 {
		return false
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	cmd.Env = []string{envProbe + "=1"}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return false
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return false
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	trapped, err := waitTrapped(cmd.Process.Pid)
	return err == nil && trapped && unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_NOFILE, &rl, nil) == nil
})

// cldTrapped is si_code CLD_TRAPPED: a traced child has stopped.
const cldTrapped = 4

// startTraced starts cmd stopped at its exec, sets its limit of open
// files to rl, and lets it run.
func startTraced(cmd *exec.Cmd, rl *unix.Rlimit) error {
	attr := &syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		c := *cmd.SysProcAttr
		attr = &c
	}
	attr.Ptrace = true
	cmd.SysProcAttr = attr
	// Only the thread that started a traced process may let it go.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	trapped, err := waitTrapped(pid)
	if err == nil && !trapped {
		return nil
	}
	if err == nil {
		err = unix.Prlimit(pid, unix.RLIMIT_NOFILE, rl, nil)
	}
	if derr := unix.PtraceDetach(pid); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		// A process without its limit must not run.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	return nil
}

// waitTrapped waits until traced child pid stops at its exec (true) or
// ends (false). WNOWAIT: a process that ended meanwhile (killed by the
// box) is left for cmd.Wait.
func waitTrapped(pid int) (bool, error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		if !errors.Is(err, unix.EINTR) {
			return err == nil && info.Code == cldTrapped, err
		}
	}
}
