// Package agent is the in-box agent: boxd's own binary re-executed as the
// first process inside a box's sandbox. It serves the data-plane part of the
// Box API (exec, code, files, sessions) and boxd's internal routes (processes
// whose output boxd streams, bridges to the box's ports) over a unix socket,
// and everything it touches it sees from inside the box, so paths and
// symlinks resolve in the box's view.
//
// Client, beside the server, is boxd's side: every request boxd makes to an
// agent is built there and every answer read there, into one error type.
package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/upstash/box-go/local/internal/sandbox"
)

// Config is what boxd hands the agent on its standard input.
type Config struct {
	BoxID string `json:"box_id"`
	// ImageEnv is the environment of the box's image. It comes under
	// what boxd sets: a variable the agent sets (the proxy variables, the
	// CA bundle's) is left out of it in whatever case the image writes it
	// (Http_Proxy as HTTP_PROXY), so that the box's traffic goes through
	// boxd's egress proxy whatever the image says.
	ImageEnv map[string]string `json:"image_env,omitempty"`
	// Env is the box's environment overlay (account env, then the box's
	// own), over everything else.
	Env map[string]string `json:"env,omitempty"`
	// HostRoot is set only without isolation: the host directory of the box,
	// onto which /workspace, /home/boxuser and /tmp are mapped.
	HostRoot string `json:"host_root,omitempty"`
	// EgressSocket is boxd's egress proxy for the box, as the agent sees
	// it (sandbox.EgressPath: a descriptor it inherits); ProxyListen is the TCP address where the agent relays to it for
	// the box's programs (port 0 picks a free one). Either empty means no
	// proxy.
	EgressSocket string `json:"egress_socket,omitempty"`
	ProxyListen  string `json:"proxy_listen,omitempty"`
	// CABundle is the box's CA bundle (the system's roots and boxd's
	// egress CA), as the box sees it.
	CABundle string `json:"ca_bundle,omitempty"`
	// Path is PATH in the box; empty is sandbox.Path. A box whose root is
	// an image has the image's.
	Path string `json:"path,omitempty"`
	// OpenFiles, when set, is the limit of open files of the box's
	// processes, below the agent's own.
	OpenFiles *OpenFiles `json:"open_files,omitempty"`
}

// OpenFiles is the limit of open files (RLIMIT_NOFILE) of the processes
// that the agent starts in the box.
type OpenFiles struct {
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
}

// Agent serves one box.
type Agent struct {
	cfg Config
	// envMu guards cfg.Env, which boxd may replace (EnvPath).
	envMu sync.RWMutex
	fs    boxFS
	log   *slog.Logger
	// proxyURL, proxyPort and noProxy are the egress relay's, once it
	// listens.
	proxyURL  string
	proxyPort int
	noProxy   string
}

// New returns an agent for cfg.
func New(cfg Config, log *slog.Logger) *Agent {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, fs: boxFS{hostRoot: cfg.HostRoot}, log: log}
}

// loginShell is the box's shell: bash, or sh in an image without it.
func loginShell() string {
	if _, err := os.Stat("/bin/bash"); err != nil {
		return "/bin/sh"
	}
	return "/bin/bash"
}

// defaultPath is PATH inside a box.
const defaultPath = sandbox.Path

// env is the environment of processes started in the box.
func (a *Agent) env() []string {
	base := map[string]string{
		"HOME":    a.fs.real(sandbox.UserHome),
		"USER":    sandbox.UserName,
		"LOGNAME": sandbox.UserName,
		"SHELL":   loginShell(),
		"LANG":    "C.UTF-8",
		"PATH":    cmp.Or(a.cfg.Path, defaultPath),
		"TMPDIR":  a.fs.real("/tmp"),
		"BOX_ID":  a.cfg.BoxID,
	}
	if a.cfg.HostRoot != "" {
		base["PATH"] = os.Getenv("PATH")
	}
	// The image's environment, but for what boxd sets in any case.
	boxd := map[string]string{}
	a.proxyEnv(boxd)
	set := map[string]bool{}
	for k := range boxd {
		set[strings.ToUpper(k)] = true
	}
	for k, v := range a.cfg.ImageEnv {
		if !set[strings.ToUpper(k)] {
			base[k] = v
		}
	}
	maps.Copy(base, boxd)
	a.envMu.RLock()
	maps.Copy(base, a.cfg.Env)
	a.envMu.RUnlock()
	out := make([]string, 0, len(base))
	for k, v := range base {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Main is the agent's entry point. boxd starts it with its configuration
// on standard input and these descriptors: its listening socket
// (sandbox.FDListener), boxd's egress socket (sandbox.FDEgress) and a
// pipe to say it is ready on (sandbox.FDReady). It serves until it is
// killed, and never returns.
func Main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := main1(log); err != nil {
		log.Error("agent failed", "err", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func main1(log *slog.Logger) error {
	// The agent runs as the box user, as the box's processes do: not
	// dumpable, it is out of their reach all the same. They cannot trace
	// it (a stopped agent would hang every call boxd makes to the box),
	// take its descriptors with pidfd_getfd (its listening socket: they
	// would read what boxd sends it), nor read its memory or environment
	// through /proc. It reaches its own /proc/self as before.
	if err := notDumpable(); err != nil {
		return fmt.Errorf("make the agent untraceable: %w", err)
	}
	// Nothing the agent inherited may reach the box's processes: they
	// get only what each exec gives them.
	keepFromChildren()
	raw, err := io.ReadAll(io.LimitReader(os.Stdin, 16<<20))
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	if null, err := os.Open(os.DevNull); err == nil {
		_ = dupTo(null, 0)
		null.Close()
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parse config: %w", err)
	}
	if os.Geteuid() == 0 && cfg.HostRoot == "" {
		return errors.New("the agent of an isolated box must not run as root")
	}
	os.Unsetenv(sandbox.EnvAgent)
	if cfg.HostRoot == "" {
		os.Setenv("PATH", cmp.Or(cfg.Path, defaultPath))
	}
	lf := os.NewFile(sandbox.FDListener, "agent.sock")
	l, err := net.FileListener(lf)
	lf.Close() // the listener has a copy
	if err != nil {
		return fmt.Errorf("listening socket: %w", err)
	}
	a := New(cfg, log)
	if err := a.startEgress(); err != nil {
		log.Warn("the box has no outbound network", "err", err)
	}
	srv := &http.Server{Handler: a.withInternal(a.Handler()), ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		srv.Close()
	}()
	go watchLifeline(cfg.HostRoot == "", log)
	// Kept open (and so referenced) for as long as the agent lives.
	ready := os.NewFile(sandbox.FDReady, "ready")
	_, _ = ready.Write([]byte{1})
	defer runtime.KeepAlive(ready)
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// watchLifeline ends the box once boxd has gone: the write end of the
// lifeline pipe closes with boxd, however it ends. In a sandbox the agent
// kills every process of the box (they are all the box user's, and all in
// the box's PID namespace) and exits; the sandbox's init, left alone,
// exits too. Without isolation it only exits: its processes are the host
// user's, and the next boxd ends them (their control group, as root).
func watchLifeline(isolated bool, log *slog.Logger) {
	f := os.NewFile(sandbox.FDLifeline, "lifeline")
	var b [1]byte
	for {
		if _, err := f.Read(b[:]); err != nil {
			log.Info("boxd is gone; the box ends")
			if isolated {
				_ = kill(-1, syscall.SIGKILL)
			}
			os.Exit(0)
		}
	}
}

// keepFromChildren marks every descriptor above standard error
// close-on-exec, so that no process the agent starts inherits one.
func keepFromChildren() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			closeOnExec(fd)
		}
	}
}

// apiError is an error with the HTTP status it should be answered with.
type apiError struct {
	Status int
	Msg    string
}

func (e *apiError) Error() string { return e.Msg }

func errorf(status int, format string, args ...any) error {
	return &apiError{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// statusOf returns the HTTP status for err.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return http.StatusInternalServerError
}

func trimNUL(s string) string { return strings.ReplaceAll(s, "\x00", "") }
