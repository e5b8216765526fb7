// Package sandbox starts and controls the isolated process tree of one box.
//
// A running box is one long-lived sandbox whose first process is the in-box
// agent (boxd's own binary, re-executed). With bubblewrap the sandbox has its
// own PID, IPC, UTS and network namespaces, a tmpfs root holding the host's
// /usr read-only, a minimal /etc written for the box, and the box's own
// directories mounted at /workspace, /home/boxuser and /tmp.
//
// When boxd runs as root, each box also has an identity of its own: its
// processes run in a user namespace where the box user (uid 1000) is a host
// uid that no other box and no host user has (Spec.UID), with no other uid
// mapped, and in control groups that bound its CPU, memory and processes.
// The namespace belongs to that uid (see newUserns), so the kernel's
// per-user counts are the box's own. A seccomp filter refuses the kernel
// keyring calls in every sandbox. Every box's processes start with bounded
// open files and an oom_score_adj above boxd's (limits.go), and an agent
// that stops answering has its sandbox killed (liveness.go).
//
// boxd never reaches into anything a box can write by path: the agent's
// listening socket and the egress socket live in boxd's private directory
// and are handed to the agent as open descriptors, and its configuration
// comes on its standard input.
//
// Without bubblewrap (ModeNone) the agent runs as a plain child process and
// maps box paths onto the box's host directory; that mode isolates nothing.
package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/upstash/box-go/local/internal/cgroup"
	"github.com/upstash/box-go/local/internal/proc"
)

// Mode selects how a box is isolated.
type Mode string

const (
	// ModeBwrap runs every box inside a bubblewrap sandbox.
	ModeBwrap Mode = "bwrap"
	// ModeNone runs boxes as plain host processes. Nothing is isolated.
	ModeNone Mode = "none"
)

// Paths inside a box.
const (
	Workspace = "/workspace"
	Home      = "/workspace/home"
	UserHome  = "/home/boxuser"
	UID       = 1000
	GID       = 1000
	UserName  = "boxuser"
	// agentPath is where the agent binary is in a box.
	agentPath = "/run/boxd-agent"
)

// Descriptors the agent is started with (besides 0, 1 and 2: its
// configuration, and its log twice).
const (
	// FDListener is the agent's listening socket, made by boxd.
	FDListener = 3
	// FDEgress is boxd's egress socket for the box, opened O_PATH: the
	// agent connects to it as EgressPath.
	FDEgress = 4
	// FDReady is the write end of a pipe on which the agent says it is
	// serving, with one byte, and which it then keeps open: its end, when
	// the agent dies, tells boxd that the sandbox is broken.
	FDReady = 5
	// FDLifeline is the read end of a pipe whose write end only boxd
	// holds: when boxd ends, however it ends, the agent reads EOF and
	// exits, and with it the sandbox. (bubblewrap's --die-with-parent
	// does not hold once the sandbox has switched to the box user: the
	// kernel forgets a parent-death signal when credentials change.)
	FDLifeline = 6
	// firstBwrapFD is the first descriptor given to bubblewrap itself.
	firstBwrapFD = 7
)

// EgressPath is the path the agent connects to to reach boxd's egress
// proxy: its inherited FDEgress.
const EgressPath = "/proc/self/fd/4"

// EnvAgent, when set in a process's environment, makes boxd's binary run as
// the in-box agent instead of its normal entry point. The agent reads its
// configuration from its standard input.
const EnvAgent = "BOXD_AGENT"

// AgentPath is where the box's processes find boxd's binary: in the box
// with bubblewrap, at its host path without isolation.
func AgentPath(mode Mode, hostBinary string) string {
	if mode == ModeBwrap {
		return agentPath
	}
	return hostBinary
}

// Layout names the host paths of one box. Root is boxd's own (mode 0700):
// the agent's socket and log, the egress socket, the CA bundle, browser
// recordings. Only Files, below it, belongs to the box user and is what
// the box sees.
type Layout struct {
	Root string // <data>/boxes/<id>
}

// Files is the box's own file tree (see Tree).
func (l Layout) Files() Tree { return Tree{Dir: filepath.Join(l.Root, "fs")} }

// Socket is the host path of the agent's unix socket.
func (l Layout) Socket() string { return filepath.Join(l.Root, "agent.sock") }

// Tree is the host directory that holds what a box sees of its own files:
// workspace (/workspace), home (/home/boxuser) and tmp (/tmp).
type Tree struct{ Dir string }

// Workspace is the host directory mounted at /workspace.
func (t Tree) Workspace() string { return filepath.Join(t.Dir, "workspace") }

// UserHome is the host directory mounted at /home/boxuser.
func (t Tree) UserHome() string { return filepath.Join(t.Dir, "home") }

// Tmp is the host directory mounted at /tmp.
func (t Tree) Tmp() string { return filepath.Join(t.Dir, "tmp") }

// Prepare creates the box's directories. Root is boxd's alone; the file
// tree belongs to owner, a host uid (and gid) that the box user maps to,
// or stays boxd's with owner 0. A box laid out by an earlier boxd (its
// directories straight under Root) is moved into the tree, and files that
// belong to another owner are given to this one.
func (l Layout) Prepare(owner int) error {
	if err := os.MkdirAll(l.Root, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(l.Root, 0o700); err != nil {
		return err
	}
	t := l.Files()
	if err := l.migrate(); err != nil {
		return fmt.Errorf("move the box's files from an older layout: %w", err)
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{t.Workspace(), filepath.Join(t.Workspace(), "home"), t.UserHome(), t.Tmp()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(t.Tmp(), os.ModeSticky|0o777); err != nil {
		return err
	}
	if owner == 0 {
		return nil
	}
	return chownTree(t.Dir, owner)
}

// migrate moves a box from the layout of older boxd versions, where the
// box's directories and boxd's files shared Root, into Files.
func (l Layout) migrate() error {
	t := l.Files()
	if _, err := os.Lstat(t.Dir); err == nil {
		return nil
	}
	old := filepath.Join(l.Root, "workspace")
	if fi, err := os.Lstat(old); err != nil || !fi.IsDir() {
		return nil
	}
	if err := os.Mkdir(t.Dir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{"workspace", "home", "tmp"} {
		if err := os.Rename(filepath.Join(l.Root, d), filepath.Join(t.Dir, d)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	// The old run and etc directories held what boxd now passes by
	// descriptor.
	_ = os.RemoveAll(filepath.Join(l.Root, "run"))
	_ = os.RemoveAll(filepath.Join(l.Root, "etc"))
	return nil
}

// chownTree gives dir and everything below it to uid (and gid) owner,
// without following links. It does nothing when dir already belongs to
// owner: only a tree made by another layout or identity needs the walk.
func chownTree(dir string, owner int) error {
	mine, err := ownedBy(dir, owner)
	if err != nil {
		return err
	}
	if mine {
		// New directories made below it by Prepare are root's.
		for _, d := range []string{"workspace", "workspace/home", "home", "tmp"} {
			p := filepath.Join(dir, d)
			if mine, err := ownedBy(p, owner); err == nil && !mine {
				if err := os.Lchown(p, owner, owner); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// Nothing runs in the box while it is prepared, so the tree holds
	// still; Lchown never follows a link, and WalkDir does not descend
	// into one.
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, owner, owner)
	})
}

// etcFiles are the files of a box's /etc that boxd writes: the box user,
// its host name, a resolver configuration that points nowhere (names are
// resolved by the egress proxy), and git's system configuration with the
// box's identity, so that commits work in a fresh box.
func etcFiles(spec Spec) map[string]string {
	hostname := spec.Hostname
	return map[string]string{
		"gitconfig":     "# /etc/gitconfig of a box, written by boxd.\n[user]\n\tname = " + gitValue(spec.GitUserName) + "\n\temail = " + gitValue(spec.GitUserEmail) + "\n",
		"passwd":        "root:x:0:0:root:/root:/usr/sbin/nologin\n" + UserName + ":x:1000:1000:Box User:" + UserHome + ":/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\n" + UserName + ":x:1000:\nnogroup:x:65534:\n",
		"hostname":      hostname + "\n",
		"hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
		"resolv.conf":   "nameserver 127.0.0.1\n",
		"profile":       profileFor(cmp.Or(spec.Path, Path)),
	}
}

// gitValue quotes s as a value of a git configuration file.
func gitValue(s string) string {
	s = strings.NewReplacer("\\", "\\\\", `"`, `\"`, "\n", " ", "\r", " ", "\x00", "").Replace(s)
	return `"` + s + `"`
}

// profile is the box's /etc/profile, read by login shells (exec sessions
// with cmd run bash -lc). It keeps the box's PATH (a host's profile would
// put its own in place) and starts nothing: a login shell that forks
// during its start-up (a host profile's $(id -u)) can swallow a signal
// that arrives meanwhile, and the command after it then never gets it.
func profileFor(path string) string {
	return `# /etc/profile of a box, written by boxd.
PATH="` + path + `"
export PATH
if [ -d /etc/profile.d ]; then
  for i in /etc/profile.d/*.sh; do
    if [ -r "$i" ]; then . "$i"; fi
  done
  unset i
fi
`
}

// Path is PATH inside a box. The box user's own bin directories come
// first, so that tools installed there (an agent CLI installed with npm,
// for example) are found.
const Path = "/home/boxuser/.local/bin:/home/boxuser/bin:/usr/local/sbin:/usr/local/bin:/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// etcFromHost lists host /etc entries that carry no secrets and that common
// programs need (dynamic linker cache, TLS roots, alternatives symlinks,
// an interactive shell's bashrc, time zone). The host's gitconfig and npmrc
// are not among them: they often hold credentials or credential helpers.
// Nor is its profile.d: a login shell in the box runs the box's /etc/profile
// alone, and host scripts there fork during the shell's start-up (a signal
// that arrives meanwhile can be swallowed, see profileFor).
var etcFromHost = []string{
	"alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "bash.bashrc", "inputrc", "mime.types", "protocols", "services",
	"os-release", "debian_version", "terminfo", "magic", "python3", "python3.11",
	"fonts", // fontconfig, for the browser's text
}

// Spec describes a sandbox to start.
type Spec struct {
	ID       string
	Layout   Layout
	Hostname string
	Mode     Mode
	// Agent is the path of the binary to run as the in-box agent.
	Agent string
	// AgentConfig is written to the agent's standard input.
	AgentConfig []byte
	// Log receives the agent's stderr.
	Log *os.File
	// CABundle, when set, is a host file (in boxd's private directory)
	// that the box sees read-only at CABundlePath(): the system's roots
	// plus boxd's egress CA.
	CABundle string
	// EgressSocket, when set, is the host path of boxd's egress socket for
	// the box, in boxd's private directory; the agent gets it open.
	EgressSocket string
	// UID, when boxd runs as root with bubblewrap, is the host uid and gid
	// that the box user is: the box's processes run as it and its files
	// belong to it. Zero means the box user is boxd's own user.
	UID int
	// Limits bound the box's CPU, memory and processes (root only).
	Limits cgroup.Limits
	// GitUserName and GitUserEmail are the identity of git commits made
	// in the box (its /etc/gitconfig), unless the box's own git
	// configuration names another.
	GitUserName, GitUserEmail string
	// Image, when set, is the host directory of the unpacked image that
	// is the box's root (prepared by PrepareImageRoot); empty runs the
	// box on the host's /usr.
	Image string
	// Path is PATH in the box, for its /etc/profile; empty is Path.
	Path string
	// Health asks the agent whether it answers, for the liveness watch
	// (see LivenessInterval). Nil leaves the sandbox unwatched.
	Health HealthFunc
}

// hostCABundle is where Debian-like systems keep the CA bundle that
// OpenSSL, curl and Go read by default.
const hostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// CABundlePath is where a box sees its CA bundle: over the system bundle
// when the host has one at the usual place (so that programs that ignore
// SSL_CERT_FILE trust boxd's CA too), else a file of its own.
func CABundlePath() string {
	if fi, err := os.Stat(hostCABundle); err == nil && fi.Mode().IsRegular() {
		return hostCABundle
	}
	return "/etc/boxd-ca-certificates.crt"
}

// Sandbox is one running box.
type Sandbox struct {
	spec Spec
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// started is closed when Start returns: what it set is then set.
	started chan struct{}
	group   *cgroup.Group // nil without control groups
	// init is the host pid of the sandbox's first process inside its PID
	// namespace (bubblewrap's), or the agent's without isolation.
	init int
	// agentPID is the host pid of the agent: init itself without
	// isolation, else init's child.
	agentPID int
	// lifeline is the write end of the agent's FDLifeline.
	lifeline *os.File
	// sock is the agent's socket, opened O_PATH (see Dial).
	sock *os.File
	// initFD is a pidfd of init, for killing it safely; nil until Start
	// has it and once the sandbox is gone.
	fdMu    sync.Mutex
	initFD  *os.File
	cleaned bool
	// unstage removes the box's tree (and image) from boxd's mount
	// namespace; it runs once, when the agent serves or the start fails.
	unstage func()
	stage   *stage

	cleanOnce sync.Once
	agentGone atomic.Bool
	// hung is set when the agent stopped answering (see watchLiveness).
	hung atomic.Bool

	mu     sync.Mutex
	paused bool
	// pauses counts pauses and resumes, for watchLiveness to tell an
	// agent that did not answer because it was frozen meanwhile.
	pauses uint64
	sigs   *signalFreezer // pause by signals, without a freezer group
}

// Start launches the sandbox and waits until its agent serves.
func Start(ctx context.Context, spec Spec) (*Sandbox, error) {
	if spec.Agent == "" {
		return nil, errors.New("sandbox: no agent binary")
	}
	if spec.Mode == ModeBwrap && spec.UID == 0 && os.Geteuid() == 0 {
		// bubblewrap would map the box user onto root.
		return nil, errors.New("sandbox: a box needs a uid of its own when boxd runs as root")
	}
	s := &Sandbox{spec: spec, done: make(chan struct{}), started: make(chan struct{})}
	defer close(s.started)
	var closers []io.Closer // descriptors that are the child's, closed once it has them
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
		closers = nil
	}
	defer closeAll()
	fail := func(err error) (*Sandbox, error) {
		closeAll()
		if s.unstage != nil {
			s.unstage()
		}
		return nil, err
	}

	listener, sock, err := listenAgent(spec.Layout.Socket())
	if err != nil {
		return fail(err)
	}
	closers = append(closers, listener)
	s.sock = sock
	defer func() {
		if s.cmd == nil {
			sock.Close()
		}
	}()
	egress, err := os.Open(os.DevNull)
	if spec.EgressSocket != "" {
		egress, err = openPath(spec.EgressSocket)
	}
	if err != nil {
		return fail(fmt.Errorf("sandbox: egress socket: %w", err))
	}
	closers = append(closers, egress)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	closers = append(closers, readyW)
	defer func() {
		if s.cmd == nil {
			readyR.Close() // else watchAgent closes it
		}
	}()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer cfgW.Close()
	closers = append(closers, cfgR)
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	closers = append(closers, lifeR)
	s.lifeline = lifeW
	defer func() {
		if s.cmd == nil {
			lifeW.Close()
		}
	}()
	files := []*os.File{listener, egress, readyW, lifeR}

	if os.Geteuid() == 0 && (spec.Mode == ModeNone || spec.UID != 0) {
		g, err := cgroup.New(spec.ID, spec.Limits)
		if err != nil && !errors.Is(err, cgroup.ErrUnavailable) {
			return fail(fmt.Errorf("sandbox: control groups: %w", err))
		}
		s.group = g
	}
	defer func() {
		if s.cmd == nil && s.group != nil {
			s.group.Remove()
		}
	}()

	var cmd *exec.Cmd
	var block, info *os.File
	launch := func() error { return cmd.Start() }
	switch spec.Mode {
	case ModeBwrap:
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			return fail(fmt.Errorf("sandbox: bubblewrap (bwrap) not found: %w", err))
		}
		args, extra, err := s.bwrapArgs()
		for _, f := range extra {
			closers = append(closers, f)
		}
		if err != nil {
			return fail(err)
		}
		if s.unstage != nil {
			// Called once the agent runs, and by cleanup.
			s.unstage = sync.OnceFunc(s.unstage)
		}
		// Block and info: bubblewrap says where the sandbox's first
		// process is, then waits while boxd puts it in the box's groups.
		blockR, blockW, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		infoR, infoW, err := os.Pipe()
		if err != nil {
			blockR.Close()
			blockW.Close()
			return fail(err)
		}
		block, info = blockW, infoR
		defer block.Close()
		defer info.Close()
		closers = append(closers, blockR, infoW)
		n := firstBwrapFD + len(extra)
		args = append([]string{"--block-fd", strconv.Itoa(n), "--info-fd", strconv.Itoa(n + 1)}, args...)
		files = append(files, extra...)
		files = append(files, blockR, infoW)
		cmd = exec.Command(bwrap, args...)
		cmd.Env = []string{EnvAgent + "=1", "PATH=/usr/bin:/bin"}
		if spec.UID != 0 {
			st := s.stage
			launch = func() error { return st.start(cmd) }
		}
	case ModeNone:
		cmd = exec.Command(spec.Agent)
		cmd.Env = []string{EnvAgent + "=1", "PATH=" + os.Getenv("PATH")}
		cmd.Dir = spec.Layout.Files().Dir
	default:
		return fail(fmt.Errorf("sandbox: unknown isolation mode %q", spec.Mode))
	}
	bound(cmd)
	cmd.Stdin = cfgR
	cmd.ExtraFiles = files
	if spec.Log != nil {
		cmd.Stdout = spec.Log
		cmd.Stderr = spec.Log
	}
	// As root, bubblewrap's launcher is the first process of a PID
	// namespace of the sandbox's own (see launcherAttr). Without root
	// there is none to make: a box starting when boxd is killed may leave
	// bubblewrap's child behind, asleep, with nothing of the box started.
	ownPIDNS := spec.Mode == ModeBwrap && os.Geteuid() == 0
	cmd.SysProcAttr = launcherAttr(ownPIDNS)
	if err := launch(); err != nil {
		return fail(fmt.Errorf("sandbox: start: %w", err))
	}
	s.cmd = cmd
	go func() {
		s.err = cmd.Wait()
		s.awaitInit()
		s.cleanup()
		close(s.done)
	}()
	ready := s.watchAgent(readyR)
	closeAll() // the child has its ends
	started := false
	defer func() {
		if !started {
			s.Kill()
		}
	}()

	s.init = cmd.Process.Pid
	if info != nil {
		pid, err := readChildPid(info)
		if err != nil {
			<-s.done
			return nil, fmt.Errorf("sandbox: bubblewrap failed: %v (%v)", s.err, err)
		}
		if ownPIDNS {
			if pid, err = hostPID(cmd.Process.Pid, pid); err != nil {
				return nil, err
			}
		}
		s.init = pid
	}
	// bubblewrap's init waits for its command, which waits for the
	// configuration boxd has not sent yet: the pid is still its own.
	if f, err := pidfdOpen(s.init); err == nil {
		s.fdMu.Lock()
		if s.cleaned {
			f.Close()
		} else {
			s.initFD = f
		}
		s.fdMu.Unlock()
	}
	if s.group != nil {
		if err := s.group.Add(s.init); err != nil {
			return nil, fmt.Errorf("sandbox: control groups: %w", err)
		}
	}
	if block != nil {
		if _, err := block.Write([]byte{1}); err != nil {
			return nil, fmt.Errorf("sandbox: bubblewrap failed: %w", err)
		}
		block.Close()
	}
	if _, err := cfgW.Write(spec.AgentConfig); err != nil {
		return nil, fmt.Errorf("sandbox: agent configuration: %w", err)
	}
	cfgW.Close()
	if err := s.waitReady(ctx, ready); err != nil {
		return nil, err
	}
	if s.unstage != nil {
		// bubblewrap made the sandbox's mounts before it started the
		// agent: they are the sandbox's own, and its tree leaves the
		// stage now. The stage then holds only the trees of boxes that
		// are starting, and each bubblewrap, which copies every mount of
		// the stage's namespace into its own, copies only those.
		s.unstage()
	}
	s.agentPID = s.init
	if info != nil {
		// bubblewrap's init has started the agent and nothing else: no
		// call has reached the box yet.
		if kids := proc.Children(s.init); len(kids) == 1 {
			s.agentPID = kids[0]
		}
	}
	started = true
	if spec.Health != nil {
		go s.watchLiveness(spec.Health)
	}
	return s, nil
}

// listenAgent makes the agent's listening socket at path (in boxd's
// private directory) and returns it as a file to hand to the agent, and
// the socket opened O_PATH, for boxd to connect through whatever becomes
// of the path.
func listenAgent(path string) (listener, sock *os.File, err error) {
	_ = os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: agent socket: %w", err)
	}
	// The path stays until the next start replaces it; boxd connects
	// through its own descriptor, not the path.
	l.SetUnlinkOnClose(false)
	sock, err = openPath(path)
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("sandbox: agent socket: %w", err)
	}
	listener, err = l.File()
	l.Close()
	if err != nil {
		sock.Close()
		return nil, nil, fmt.Errorf("sandbox: agent socket: %w", err)
	}
	return listener, sock, nil
}

// readChildPid reads bubblewrap's --info-fd document for the host pid of
// the sandbox's first process.
func readChildPid(info io.Reader) (int, error) {
	var doc struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(io.LimitReader(info, 64<<10)).Decode(&doc); err != nil {
		return 0, err
	}
	if doc.ChildPid <= 0 {
		return 0, errors.New("no child-pid in bubblewrap's info")
	}
	return doc.ChildPid, nil
}

// watchAgent reads the agent's FDReady pipe: the result of its start
// comes on the channel (nil once it serves), and once it is serving the
// pipe's end means that the agent has died. A sandbox whose agent has
// died is of no use, even if background jobs keep it running: it ends,
// and the next call starts a new one.
func (s *Sandbox) watchAgent(ready *os.File) <-chan error {
	got := make(chan error, 1)
	go func() {
		defer ready.Close()
		var b [1]byte
		n, err := ready.Read(b[:])
		if n == 1 {
			got <- nil
			_, _ = io.Copy(io.Discard, ready)
			s.agentGone.Store(true)
			<-s.started
			s.Kill()
			return
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("closed")
		}
		got <- err
	}()
	return got
}

func (s *Sandbox) waitReady(ctx context.Context, got <-chan error) error {
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	select {
	case err := <-got:
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("sandbox: agent exited before it was ready: %v", s.err)
		case <-time.After(time.Second):
			return fmt.Errorf("sandbox: agent did not become ready: %v", err)
		}
	case <-s.done:
		return fmt.Errorf("sandbox: agent exited before it was ready: %v", s.err)
	case <-ctx.Done():
		return ctx.Err()
	case <-deadline.C:
		return errors.New("sandbox: agent did not become ready within 15s")
	}
}

// bwrapArgs returns bubblewrap's arguments (but --block-fd and
// --info-fd) and the descriptors they name, which are handed to it in
// order from firstBwrapFD on. They are returned even with an error, to be
// closed.
func (s *Sandbox) bwrapArgs() ([]string, []*os.File, error) {
	spec := s.spec
	var files []*os.File
	fd := func(f *os.File) string {
		files = append(files, f)
		return strconv.Itoa(firstBwrapFD + len(files) - 1)
	}
	tree, agent := spec.Layout.Files(), spec.Agent
	var a []string
	if spec.UID != 0 {
		// The box user has no rights on boxd's directories: its tree and
		// the agent binary are reached through boxd's stage.
		st, err := theStage()
		if err != nil {
			return nil, files, err
		}
		s.stage = st
		dir, unmount, err := st.mountTree(tree.Dir)
		if err != nil {
			return nil, files, err
		}
		s.unstage = unmount
		tree = Tree{Dir: dir}
		if agent, err = st.agent(spec.Agent); err != nil {
			return nil, files, err
		}
		ns, err := newUserns(spec.UID)
		if err != nil {
			return nil, files, err
		}
		a = append(a, "--userns", fd(ns))
	} else {
		a = append(a, "--unshare-user")
	}
	a = append(a,
		"--uid", strconv.Itoa(UID), "--gid", strconv.Itoa(GID),
		"--die-with-parent",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--hostname", spec.Hostname,
	)
	run := []string{agentPath}
	if spec.Image != "" {
		// The image's tree, read-only, with the mount points that
		// PrepareImageRoot made in it.
		img := spec.Image
		if s.stage != nil {
			dir, unmount, err := s.stage.mountTree(img)
			if err != nil {
				return nil, files, err
			}
			prev := s.unstage
			s.unstage = func() { unmount(); prev() }
			img = dir
		}
		l, err := loaderFor(spec.Agent)
		if err != nil {
			return nil, files, err
		}
		a = append(a, "--ro-bind", img, "/", "--proc", "/proc", "--dev", "/dev", "--perms", "0755", "--tmpfs", "/run")
		a = append(a, l.args()...)
		run = l.argv()
	} else {
		a = append(a,
			"--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin",
			"--symlink", "usr/sbin", "/sbin",
			"--symlink", "usr/lib", "/lib",
			"--proc", "/proc",
			"--dev", "/dev",
			"--perms", "0755", "--dir", "/etc",
			// /run is a file system of its own, as on any machine: what
			// a box keeps there lasts as long as its sandbox.
			"--perms", "0755", "--tmpfs", "/run",
			"--perms", "0755", "--dir", "/home",
			"--perms", "0755", "--dir", "/var",
			"--symlink", "/tmp", "/var/tmp",
		)
		if fi, err := os.Lstat("/lib64"); err == nil {
			if fi.Mode()&os.ModeSymlink != 0 {
				a = append(a, "--symlink", "usr/lib64", "/lib64")
			} else {
				a = append(a, "--ro-bind", "/lib64", "/lib64")
			}
		}
		for _, name := range etcFromHost {
			p := "/etc/" + name
			if _, err := os.Stat(p); err == nil {
				a = append(a, "--ro-bind", p, p)
			}
		}
	}
	a = append(a,
		"--bind", tree.Workspace(), Workspace,
		"--bind", tree.UserHome(), UserHome,
		"--bind", tree.Tmp(), "/tmp",
		"--ro-bind", agent, agentPath,
		"--chdir", Home,
		"--setenv", "HOME", UserHome,
		// Also in the command line, so that ps on the host tells which
		// box a sandbox is.
		"--setenv", "BOX_ID", spec.ID,
	)
	etc := etcFiles(spec)
	names := make([]string, 0, len(etc))
	for name := range etc {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f, err := dataFile(name, []byte(etc[name]))
		if err != nil {
			return nil, files, err
		}
		a = append(a, "--perms", "0644", "--ro-bind-data", fd(f), "/etc/"+name)
	}
	if spec.CABundle != "" {
		f, err := os.Open(spec.CABundle)
		if err != nil {
			return nil, files, fmt.Errorf("sandbox: CA bundle: %w", err)
		}
		dst := CABundlePath()
		if spec.Image != "" {
			dst = ImageCABundle
		}
		a = append(a, "--perms", "0644", "--ro-bind-data", fd(f), dst)
	}
	sc, err := seccompFile()
	if err != nil {
		return nil, files, fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	if sc != nil {
		a = append(a, "--seccomp", fd(sc))
	}
	if spec.Image == "" {
		// The root that bubblewrap built over the host's /usr is a
		// tmpfs: what the box wrote in /, /etc or /var would be lost
		// with the sandbox. It is read-only for the box user, as those
		// directories are for a user who is not root on any machine;
		// the box's files are in /workspace, /home/boxuser and /tmp.
		// (An image's root is mounted read-only already.)
		a = append(a, "--remount-ro", "/")
	}
	return append(append(a, "--"), run...), files, nil
}

// Pid is the host pid of the sandbox's first process: bubblewrap's init in
// the box's PID namespace, or the agent without isolation.
func (s *Sandbox) Pid() int { return s.init }

// Done is closed when the sandbox has exited.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// ErrAgentGone is returned by Dial when the sandbox's agent no longer
// listens (it died, or the sandbox has exited).
var ErrAgentGone = errors.New("sandbox: the box's agent has gone")

// Dial connects to the agent. It goes through boxd's own descriptor of the
// agent's socket, so it reaches this sandbox's agent whatever happened to
// the socket's path since.
func (s *Sandbox) Dial(ctx context.Context) (net.Conn, error) {
	if s.agentGone.Load() {
		return nil, ErrAgentGone
	}
	rc, err := s.sock.SyscallConn()
	if err != nil {
		return nil, ErrAgentGone
	}
	var c net.Conn
	var derr error
	// Control holds the descriptor open while the path names it.
	err = rc.Control(func(fd uintptr) {
		// A unix socket's connect never waits for the agent (a full
		// queue fails at once); the bound is there all the same.
		d := net.Dialer{Timeout: dialTimeout}
		c, derr = d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(int(fd)))
	})
	switch {
	case err != nil:
		return nil, ErrAgentGone
	case errors.Is(derr, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("%w: %w", ErrAgentGone, derr)
	}
	return c, derr
}

// Unenforced names the limits of Spec.Limits that this machine could not
// apply ("memory", "pids", "cpu"), all of them without control groups.
func (s *Sandbox) Unenforced() []string {
	if s.group == nil {
		var all []string
		if s.spec.Limits.Memory > 0 {
			all = append(all, "memory")
		}
		if s.spec.Limits.Pids > 0 {
			all = append(all, "pids")
		}
		if s.spec.Limits.CPUs > 0 {
			all = append(all, "cpu")
		}
		return all
	}
	return s.group.Unenforced()
}

// MemoryPeak is the most memory the box has used at once, in bytes, or 0
// when it is not known.
func (s *Sandbox) MemoryPeak() int64 {
	if s.group == nil {
		return 0
	}
	return s.group.MemoryPeak()
}

// Paused reports whether the sandbox is frozen.
func (s *Sandbox) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// Pause freezes every process of the sandbox.
func (s *Sandbox) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		return nil
	}
	s.pauses++
	if s.group != nil && s.group.CanFreeze() {
		if err := s.group.Freeze(s.init); err != nil {
			return err
		}
	} else {
		s.sigs = &signalFreezer{pid: s.init}
		s.sigs.stop()
	}
	s.paused = true
	return nil
}

// Resume thaws every process of the sandbox.
func (s *Sandbox) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused {
		return nil
	}
	s.pauses++
	if s.sigs != nil {
		s.sigs.cont()
		s.sigs = nil
	} else if err := s.group.Thaw(); err != nil {
		return err
	}
	s.paused = false
	return nil
}

// Kill ends every process of the sandbox and waits until all of them are
// gone: killed and reaped. Only then is Done closed, so a box whose
// sandbox is replaced never runs its next one beside what is left of the
// last.
//
// With bubblewrap the sandbox's first process is the init of its PID
// namespace, and its parent is bubblewrap's launcher, boxd's child. The
// init is killed first, through its pidfd: it then never reports anything
// to the launcher, and the kernel ends every other process of the
// namespace before the init itself exits. The launcher reaps the init and
// exits, and boxd reaps the launcher. The launcher is left to do that: one
// killed before it has reaped the init (on a busy machine it may not have
// run yet) leaves the init to whoever adopts it, the host's init, which
// reaps it when it gets to it. Only a launcher that has not exited within
// launcherGrace is killed (see awaitInit for what follows).
func (s *Sandbox) Kill() {
	select {
	case <-s.done:
		return // and cleaned up: nothing of it is left to signal
	default:
	}
	s.mu.Lock()
	if s.sigs != nil {
		s.sigs.cont()
		s.sigs = nil
	}
	s.paused = false
	s.mu.Unlock()
	known := s.spec.Mode == ModeBwrap && s.killInit()
	switch {
	case s.group != nil:
		s.group.Kill()
	case !known:
		// Without isolation the agent's children have process groups of
		// their own and would otherwise outlive it. (With bubblewrap the
		// PID namespace ends with its init.)
		(&signalFreezer{pid: s.init}).kill()
	}
	if !known {
		// No pidfd of bubblewrap's init (Start failed before it had one),
		// or no isolation, where the launcher is the agent itself.
		s.killInit()
		_ = s.cmd.Process.Kill() // os/exec knows whether it is gone
	}
	select {
	case <-s.done:
		return
	case <-time.After(launcherGrace):
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// launcherGrace is how long Kill lets bubblewrap's launcher take to reap
// the sandbox's init and exit before it kills the launcher.
const launcherGrace = 10 * time.Second

// orphanWait bounds how long the end of a sandbox waits for its init to be
// reaped by the host's init, once the launcher has left it (awaitInit).
const orphanWait = 10 * time.Second

// killInit sends SIGKILL to the sandbox's first process, through a pidfd
// taken at start, so that a pid reused since can never be hit. It reports
// whether it had the pidfd.
func (s *Sandbox) killInit() bool {
	s.fdMu.Lock()
	defer s.fdMu.Unlock()
	if s.initFD == nil {
		return false
	}
	pidfdKill(s.initFD)
	return true
}

// awaitInit runs once bubblewrap's launcher has exited, and returns when
// the sandbox's init has been reaped too. The launcher reaps it before it
// exits, except when the agent exited first (bubblewrap then exits with
// the agent's status at once, and leaves its init, and whatever still
// runs in the box, behind) or when Kill had to kill the launcher. The init
// is then an orphan: it is killed, which ends its PID namespace, and is
// reaped here when boxd has adopted it (boxd is PID 1, or a subreaper),
// or waited for, for at most orphanWait, while the host's init reaps it.
func (s *Sandbox) awaitInit() {
	if s.spec.Mode != ModeBwrap {
		return // the launcher is the agent, reaped by cmd.Wait
	}
	s.fdMu.Lock()
	f := s.initFD // closed by cleanup, which runs after this
	s.fdMu.Unlock()
	if f == nil {
		return
	}
	if pidfdReaped(f) {
		return
	}
	pidfdKill(f)
	deadline := time.Now().Add(orphanWait)
	for !pidfdReaped(f) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// cleanup releases what the sandbox held once it has exited: whatever is
// left in its control groups (processes a box without a PID namespace
// left behind) is killed and the groups removed, and its tree leaves the
// stage.
func (s *Sandbox) cleanup() {
	s.cleanOnce.Do(func() {
		s.lifeline.Close()
		s.sock.Close()
		s.fdMu.Lock()
		s.cleaned = true
		if s.initFD != nil {
			s.initFD.Close()
			s.initFD = nil
		}
		s.fdMu.Unlock()
		if s.group != nil {
			s.group.Kill()
			s.group.Remove()
		}
		if s.unstage != nil {
			s.unstage()
		}
	})
}

// Reap ends whatever is left of a box's sandbox from an earlier boxd that
// died without cleaning up: its processes are thawed (a frozen process
// cannot die), killed, and its control groups removed. It is safe to call
// for a box that has nothing left.
func Reap(id string) { cgroup.Reap(id) }

// Available reports whether bubblewrap can start a sandbox on this
// machine, the way Start does: as root, in a user namespace of its own
// (probing with host uid probeUID), from boxd's mount namespace.
func Available(probeUID int) error {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return errors.New("bubblewrap (bwrap) is not installed")
	}
	args := []string{"--unshare-pid", "--unshare-net", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib"}
	if fi, err := os.Lstat("/lib64"); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		args = append(args, "--symlink", "usr/lib64", "/lib64")
	}
	cmd := exec.Command(bwrap)
	launch := cmd.Start
	if os.Geteuid() == 0 {
		ns, err := newUserns(probeUID)
		if err != nil {
			return err
		}
		defer ns.Close()
		st, err := theStage()
		if err != nil {
			return err
		}
		cmd.ExtraFiles = []*os.File{ns}
		args = append(args, "--userns", "3", "--uid", strconv.Itoa(UID), "--gid", strconv.Itoa(GID))
		launch = func() error { return st.start(cmd) }
	} else {
		args = append(args, "--unshare-user")
	}
	cmd.Args = append(append(cmd.Args, args...), "--", "/usr/bin/true")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := launch(); err != nil {
		return fmt.Errorf("bubblewrap cannot start a sandbox here: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("bubblewrap cannot start a sandbox here: %v: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}
