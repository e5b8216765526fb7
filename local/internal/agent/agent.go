// Package agent is the in-box agent: boxd's own binary re-executed as the
// first process inside a box's sandbox. It serves the data-plane part of the
// Box API (exec, code, files, and later git and sessions) over a unix socket
// that boxd proxies to, and everything it touches it sees from inside the
// box, so paths and symlinks resolve in the box's view.
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/upstash/box-go/local/internal/sandbox"
)

// Config is what boxd hands the agent in <run>/config.json.
type Config struct {
	BoxID string `json:"box_id"`
	// Env is the box's environment overlay (account env, then the box's own).
	Env map[string]string `json:"env,omitempty"`
	// HostRoot is set only without isolation: the host directory of the box,
	// onto which /workspace, /home/boxuser and /tmp are mapped.
	HostRoot string `json:"host_root,omitempty"`
	// Socket is where to listen, as the agent sees it.
	Socket string `json:"socket"`
	// EgressSocket is boxd's egress proxy for the box, as the agent sees
	// it; ProxyListen is the TCP address where the agent relays to it for
	// the box's programs (port 0 picks a free one). Either empty means no
	// proxy.
	EgressSocket string `json:"egress_socket,omitempty"`
	ProxyListen  string `json:"proxy_listen,omitempty"`
	// CABundle is the box's CA bundle (the system's roots and boxd's
	// egress CA), as the box sees it.
	CABundle string `json:"ca_bundle,omitempty"`
}

// Agent serves one box.
type Agent struct {
	cfg Config
	fs  boxFS
	log *slog.Logger
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

// defaultPath is PATH inside a box.
// The box user's own bin directories come first, so that tools installed
// there (an agent CLI installed with npm, for example) are found.
const defaultPath = "/home/boxuser/.local/bin:/home/boxuser/bin:/usr/local/sbin:/usr/local/bin:/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// env is the environment of processes started in the box.
func (a *Agent) env() []string {
	base := map[string]string{
		"HOME":    a.fs.real(sandbox.UserHome),
		"USER":    sandbox.UserName,
		"LOGNAME": sandbox.UserName,
		"SHELL":   "/bin/bash",
		"LANG":    "C.UTF-8",
		"PATH":    defaultPath,
		"TMPDIR":  a.fs.real("/tmp"),
		"BOX_ID":  a.cfg.BoxID,
	}
	if a.cfg.HostRoot != "" {
		base["PATH"] = os.Getenv("PATH")
	}
	a.proxyEnv(base)
	for k, v := range a.cfg.Env {
		base[k] = v
	}
	out := make([]string, 0, len(base))
	for k, v := range base {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Main is the agent's entry point. It reads its configuration from the file
// named by the sandbox.EnvAgent variable, drops to the box user when started
// as root, and serves until it is killed. It never returns.
func Main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := main1(log); err != nil {
		log.Error("agent failed", "err", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func main1(log *slog.Logger) error {
	path := os.Getenv(sandbox.EnvAgent)
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parse config: %w", err)
	}
	if os.Geteuid() == 0 && cfg.HostRoot == "" {
		if err := dropPrivileges(); err != nil {
			return fmt.Errorf("drop privileges: %w", err)
		}
	}
	os.Unsetenv(sandbox.EnvAgent)
	if cfg.HostRoot == "" {
		os.Setenv("PATH", defaultPath)
	}
	a := New(cfg, log)
	if err := a.startEgress(); err != nil {
		log.Warn("the box has no outbound network", "err", err)
	}
	_ = os.Remove(cfg.Socket)
	l, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.withInternal(a.Handler()), ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func dropPrivileges() error {
	if err := syscall.Setgroups([]int{sandbox.GID}); err != nil {
		return err
	}
	if err := syscall.Setresgid(sandbox.GID, sandbox.GID, sandbox.GID); err != nil {
		return err
	}
	return syscall.Setresuid(sandbox.UID, sandbox.UID, sandbox.UID)
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
