package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Bounds of a box's processes. The sandbox's launcher (bubblewrap, or
// the agent without isolation) starts with OOMScoreAdj and AgentNoFile,
// which every process of the box inherits; the agent lowers the open
// files of each process it starts to BoxNoFile.
const (
	// OOMScoreAdj is the oom_score_adj of a box's processes: under
	// memory pressure on the host the kernel ends a box's process before
	// boxd (0). When boxd has CAP_SYS_RESOURCE (root, but for some
	// containers' root) it is also their floor (oom_score_adj_min): a
	// box's process may raise its score, never lower it.
	OOMScoreAdj = 500
	// NoFileSoft is the soft limit of a box's processes' open files
	// (RLIMIT_NOFILE), the usual one of a login; a process may raise it
	// up to the hard limit (NoFileHard).
	NoFileSoft = 1024
	// AgentNoFile is the agent's own limit of open files (soft and
	// hard), unless boxd's is lower: it serves every call to the box and
	// relays the box's connections.
	AgentNoFile = 65536
	// noFileFloor and noFileCeiling bound NoFileHard.
	noFileFloor   = 1024
	noFileCeiling = 65536
	// noFilePids stands for the process limit of a box that has none.
	noFilePids = 1024
)

// NoFileHard returns the hard limit of open files (RLIMIT_NOFILE) of
// each process of a box that may have pids processes (0: unbounded) on a
// host whose fs.file-max is fileMax: a box's processes, all at their
// limit, hold at most half of the host's open files. It is never below
// 1024, nor above 65536.
func NoFileHard(fileMax, pids int64) uint64 {
	if pids <= 0 {
		pids = noFilePids
	}
	n := fileMax / pids / 2
	return uint64(min(max(n, noFileFloor), noFileCeiling))
}

// fileMax reads fs.file-max; a host whose limit cannot be read is taken
// as one with none.
func fileMax() int64 {
	b, err := os.ReadFile("/proc/sys/fs/file-max")
	if err != nil {
		return 1 << 62
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 1 << 62
	}
	return n
}

// envBound, in a process's environment, makes boxd's binary set its own
// limits as its value says ("soft hard oom_score_adj") and execute its
// arguments (the program's path, then its whole argv) with them, and
// without the variable.
//
// Limits pass from a process to the processes it starts, so the
// sandbox's launcher gets them before it starts anything: set from
// outside (prlimit, /proc/<pid>/oom_score_adj) they would need
// CAP_SYS_RESOURCE once the sandbox's first process has become the box
// user, and be late for processes already started.
const envBound = "BOXD_BOUND"

func init() {
	if v, ok := os.LookupEnv(envBound); ok {
		err := execBound(v)
		fmt.Fprintln(os.Stderr, "boxd: start a sandbox:", err)
		os.Exit(127)
	}
}

// execBound sets the limits that spec names and executes os.Args[1:]. It
// runs from init, on the main thread (where Go's runtime keeps package
// initialisation), whose parent-death signal the launcher keeps.
func execBound(spec string) error {
	var soft, hard uint64
	var oom int
	if _, err := fmt.Sscanf(spec, "%d %d %d", &soft, &hard, &oom); err != nil {
		return fmt.Errorf("bad %s %q", envBound, spec)
	}
	if len(os.Args) < 3 {
		return fmt.Errorf("nothing to run")
	}
	if err := setNoFile(soft, hard); err != nil {
		return fmt.Errorf("limit open files: %w", err)
	}
	// Any process may raise its own score; a /proc that refuses it
	// (some container runtimes') stops only boxd as root, which promises
	// it.
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(oom)), 0); err != nil && os.Geteuid() == 0 {
		return fmt.Errorf("oom_score_adj: %w", err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envBound+"=") })
	return syscall.Exec(os.Args[1], os.Args[2:], env)
}

// agentNoFile is the agent's limit of open files: AgentNoFile, or
// boxd's own when it is lower (raising a hard limit needs
// CAP_SYS_RESOURCE).
func agentNoFile() uint64 {
	hard, err := noFileHard()
	if err != nil {
		return NoFileSoft
	}
	return min(AgentNoFile, hard)
}

// BoxNoFile returns the soft and hard limits of open files of the
// processes of a box that may have pids processes (0: unbounded), on
// this host: NoFileSoft and NoFileHard, never above the agent's.
func BoxNoFile(pids int64) (soft, hard uint64) {
	hard = min(NoFileHard(fileMax(), pids), agentNoFile())
	return min(NoFileSoft, hard), hard
}

// bound makes cmd, the sandbox's launcher, start with the agent's limits:
// through /bin/sh (boundScript), which sets them and executes cmd's
// program in its place, or, on a host without it, through boxd's binary
// (see envBound). Either way cmd's program runs as argv[0] only when that
// is its path, as the launchers' are. The shell costs a millisecond of
// processor time where a start of boxd's binary costs tens, and boxes
// start in bursts.
func bound(cmd *exec.Cmd) {
	n := agentNoFile()
	if haveShell() {
		mode := "lax"
		if os.Geteuid() == 0 {
			mode = "strict"
		}
		cmd.Args = append([]string{"boxd-bound", "-c", boundScript, "boxd-bound", strconv.FormatUint(n, 10), strconv.Itoa(OOMScoreAdj), mode, cmd.Path}, cmd.Args[1:]...)
		cmd.Path = "/bin/sh"
		return
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d %d %d", envBound, n, n, OOMScoreAdj))
	cmd.Args = append([]string{"boxd-bound", cmd.Path}, cmd.Args...)
	cmd.Path = "/proc/self/exe"
}

// boundScript is execBound in the shell: its arguments are the limit of
// open files (soft and hard), the oom_score_adj, whether a /proc that
// refuses that score stops the start ("strict", boxd as root) or not
// ("lax"), and the program to execute with its arguments.
const boundScript = `ulimit -H -n "$1" && ulimit -S -n "$1" || exit 127
{ echo "$2" >/proc/self/oom_score_adj; } 2>/dev/null || [ "$3" = lax ] || { echo "boxd: start a sandbox: cannot set oom_score_adj" >&2; exit 127; }
shift 3
exec "$@"`

// haveShell reports whether /bin/sh is there to run boundScript.
var haveShell = sync.OnceValue(func() bool {
	fi, err := os.Stat("/bin/sh")
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
})
