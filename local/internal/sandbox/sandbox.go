// Package sandbox starts and controls the isolated process tree of one box.
//
// A running box is one long-lived sandbox whose first process is the in-box
// agent (boxd's own binary, re-executed). With bubblewrap the sandbox has its
// own PID, IPC, UTS and network namespaces, a tmpfs root holding the host's
// /usr read-only, a minimal /etc written for the box, and the box's own
// directories mounted at /workspace, /home/boxuser and /tmp. Without
// bubblewrap (ModeNone) the agent runs as a plain child process and maps box
// paths onto the box's host directory; that mode isolates nothing.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
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
	Workspace  = "/workspace"
	Home       = "/workspace/home"
	UserHome   = "/home/boxuser"
	RunDir     = "/run/boxd"
	SocketName = "agent.sock"
	ConfigName = "config.json"
	UID        = 1000
	GID        = 1000
	UserName   = "boxuser"
)

// EnvAgent, when set in a process's environment, makes boxd's binary run as
// the in-box agent instead of its normal entry point. Its value is the path
// of the agent's configuration file.
const EnvAgent = "BOXD_AGENT_CONFIG"

// Layout names the host directories that back one box.
type Layout struct {
	Root string // <data>/boxes/<id>
}

// Workspace is the host directory mounted at /workspace.
func (l Layout) Workspace() string { return filepath.Join(l.Root, "workspace") }

// UserHome is the host directory mounted at /home/boxuser.
func (l Layout) UserHome() string { return filepath.Join(l.Root, "home") }

// Tmp is the host directory mounted at /tmp.
func (l Layout) Tmp() string { return filepath.Join(l.Root, "tmp") }

// Etc holds the files generated for the box's /etc.
func (l Layout) Etc() string { return filepath.Join(l.Root, "etc") }

// Run holds the agent's socket and configuration; mounted at /run/boxd.
func (l Layout) Run() string { return filepath.Join(l.Root, "run") }

// Socket is the host path of the agent's unix socket.
func (l Layout) Socket() string { return filepath.Join(l.Run(), SocketName) }

// Prepare creates the box's directories. When boxd runs as root and boxes
// are isolated, they belong to the box user (uid 1000); without isolation
// the agent runs as boxd's own user and so do the files.
func (l Layout) Prepare(hostname string, mode Mode) error {
	for _, d := range []string{l.Root, l.Workspace(), filepath.Join(l.Workspace(), "home"), l.UserHome(), l.Tmp(), l.Etc(), l.Run()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(l.Tmp(), os.ModeSticky|0o777); err != nil {
		return err
	}
	if err := writeEtc(l.Etc(), hostname); err != nil {
		return err
	}
	if os.Geteuid() == 0 && mode == ModeBwrap {
		for _, d := range []string{l.Workspace(), filepath.Join(l.Workspace(), "home"), l.UserHome(), l.Tmp(), l.Run()} {
			if err := os.Lchown(d, UID, GID); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeEtc(dir, hostname string) error {
	files := map[string]string{
		"passwd":        "root:x:0:0:root:/root:/usr/sbin/nologin\n" + UserName + ":x:1000:1000:Box User:" + UserHome + ":/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\n" + UserName + ":x:1000:\nnogroup:x:65534:\n",
		"hostname":      hostname + "\n",
		"hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
		"resolv.conf":   "nameserver 127.0.0.1\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// etcFromHost lists host /etc entries that carry no secrets and that common
// programs need (dynamic linker cache, TLS roots, alternatives symlinks,
// shell start-up files, time zone).
var etcFromHost = []string{
	"alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "profile", "profile.d", "bash.bashrc", "inputrc", "mime.types", "protocols", "services",
	"os-release", "debian_version", "gitconfig", "npmrc", "terminfo", "magic", "python3", "python3.11",
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
	// AgentConfig is written to <run>/config.json for the agent to read.
	AgentConfig []byte
	// Log receives the agent's stderr.
	Log *os.File
	// CABundle, when set, is a host file bound read-only at
	// CABundlePath() in the box: the system's roots plus boxd's egress CA.
	CABundle string
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
	spec   Spec
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	freeze freezer

	mu     sync.Mutex
	paused bool
}

// Start launches the sandbox and waits until its agent accepts connections.
func Start(ctx context.Context, spec Spec) (*Sandbox, error) {
	if spec.Agent == "" {
		return nil, errors.New("sandbox: no agent binary")
	}
	cfgPath := filepath.Join(spec.Layout.Run(), ConfigName)
	if err := os.WriteFile(cfgPath, spec.AgentConfig, 0o600); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 && spec.Mode == ModeBwrap {
		if err := os.Chown(cfgPath, UID, GID); err != nil {
			return nil, err
		}
	}
	_ = os.Remove(spec.Layout.Socket())

	var cmd *exec.Cmd
	switch spec.Mode {
	case ModeBwrap:
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, fmt.Errorf("sandbox: bubblewrap (bwrap) not found: %w", err)
		}
		cmd = exec.Command(bwrap, bwrapArgs(spec)...)
		cmd.Env = []string{EnvAgent + "=" + RunDir + "/" + ConfigName, "PATH=/usr/bin:/bin"}
	case ModeNone:
		cmd = exec.Command(spec.Agent)
		cmd.Env = []string{EnvAgent + "=" + cfgPath, "PATH=" + os.Getenv("PATH")}
		cmd.Dir = spec.Layout.Root
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	default:
		return nil, fmt.Errorf("sandbox: unknown isolation mode %q", spec.Mode)
	}
	if spec.Log != nil {
		cmd.Stdout = spec.Log
		cmd.Stderr = spec.Log
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: start: %w", err)
	}
	s := &Sandbox{spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Kill()
		return nil, err
	}
	// With bubblewrap the freezer group is made on the first Pause, off the
	// start path: joining a new cgroup costs milliseconds that a box which
	// is never paused should not pay, and the PID namespace already ends
	// every process with the box. Without isolation there is no PID
	// namespace: a background job orphaned by its shell leaves the agent's
	// process tree, and only the group, joined now so that every later
	// process is born in it, still finds it when the box is deleted.
	if spec.Mode == ModeNone {
		s.freeze = newFreezer(spec.ID, cmd.Process.Pid)
	}
	return s, nil
}

func (s *Sandbox) waitReady(ctx context.Context) error {
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	delay := 100 * time.Microsecond
	for {
		c, err := net.Dial("unix", s.spec.Layout.Socket())
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("sandbox: agent exited before it was ready: %v", s.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return errors.New("sandbox: agent did not become ready within 15s")
		case <-time.After(delay):
		}
		// The agent is typically ready within tens of milliseconds; a
		// connect attempt on a unix socket is cheap, so poll finely.
		if delay < time.Millisecond {
			delay *= 2
		}
	}
}

func bwrapArgs(spec Spec) []string {
	l := spec.Layout
	a := []string{
		"--die-with-parent",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--hostname", spec.Hostname,
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin",
		"--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib",
		"--proc", "/proc",
		"--dev", "/dev",
		"--perms", "0755", "--dir", "/etc",
		"--perms", "0755", "--dir", "/run",
		"--perms", "0755", "--dir", "/home",
		"--perms", "0755", "--dir", "/var",
		"--symlink", "/tmp", "/var/tmp",
		"--bind", l.Workspace(), Workspace,
		"--bind", l.UserHome(), UserHome,
		"--bind", l.Tmp(), "/tmp",
		"--bind", l.Run(), RunDir,
		"--ro-bind", spec.Agent, "/run/boxd-agent",
		"--chdir", Home,
		"--setenv", "HOME", UserHome,
	}
	if fi, err := os.Lstat("/lib64"); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			a = append(a, "--symlink", "usr/lib64", "/lib64")
		} else {
			a = append(a, "--ro-bind", "/lib64", "/lib64")
		}
	}
	entries, _ := os.ReadDir(l.Etc())
	for _, e := range entries {
		a = append(a, "--ro-bind", filepath.Join(l.Etc(), e.Name()), "/etc/"+e.Name())
	}
	for _, name := range etcFromHost {
		p := "/etc/" + name
		if _, err := os.Stat(p); err == nil {
			a = append(a, "--ro-bind", p, p)
		}
	}
	if spec.CABundle != "" {
		a = append(a, "--ro-bind", spec.CABundle, CABundlePath())
	}
	if os.Geteuid() == 0 {
		// The agent starts as uid 0 with only these capabilities and drops
		// to the box user before it serves anything.
		a = append(a, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")
	} else {
		a = append(a, "--unshare-user", "--uid", strconv.Itoa(UID), "--gid", strconv.Itoa(GID))
	}
	return append(a, "--", "/run/boxd-agent")
}

// Pid is the host pid of the sandbox's first process.
func (s *Sandbox) Pid() int { return s.cmd.Process.Pid }

// Done is closed when the sandbox has exited.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// Socket is the host path of the agent's unix socket.
func (s *Sandbox) Socket() string { return s.spec.Layout.Socket() }

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
	if s.freeze == nil {
		s.freeze = newFreezer(s.spec.ID, s.cmd.Process.Pid)
	}
	if err := s.freeze.freeze(); err != nil {
		return err
	}
	// A process forked while the group was being joined may have been
	// missed: move any such straggler in and freeze again.
	if err := s.freeze.adoptAll(); err != nil {
		return err
	}
	if err := s.freeze.freeze(); err != nil {
		return err
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
	if err := s.freeze.thaw(); err != nil {
		return err
	}
	s.paused = false
	return nil
}

// Kill ends every process of the sandbox and waits for it to exit.
func (s *Sandbox) Kill() {
	s.mu.Lock()
	f := s.freeze
	if s.paused && f != nil {
		_ = f.thaw()
	}
	s.paused = false
	s.mu.Unlock()
	if f == nil {
		// No freezer group yet: kill the process tree. With bubblewrap the
		// PID namespace ends with its init anyway; without isolation the
		// agent's children have process groups of their own and would
		// otherwise outlive it.
		f = &signalFreezer{pid: s.cmd.Process.Pid}
	}
	f.killAll()
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
	f.remove()
}

// Available reports whether bubblewrap can start a sandbox on this machine.
func Available() error {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return errors.New("bubblewrap (bwrap) is not installed")
	}
	args := []string{"--unshare-pid", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib"}
	if fi, err := os.Lstat("/lib64"); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		args = append(args, "--symlink", "usr/lib64", "/lib64")
	}
	if os.Geteuid() != 0 {
		args = append(args, "--unshare-user")
	}
	args = append(args, "--", "/usr/bin/true")
	out, err := exec.Command(bwrap, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bubblewrap cannot start a sandbox here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
