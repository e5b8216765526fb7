// Package local is boxd: a local backend that implements the Upstash Box
// API on the user's own machine, with real sandboxes.
//
// A Server keeps its records in an embedded database under its data
// directory and runs every box as a bubblewrap sandbox whose first process
// is the in-box agent (this same binary, re-executed). Control-plane calls
// (boxes, runs, logs) are answered by the Server; data-plane calls (exec,
// code, files) are proxied to the box's agent over a unix socket.
//
// Programs that embed a Server must let the package's init hook run before
// main does anything else: importing the package is enough, because the
// agent re-executes the program's own binary with an environment variable
// that the hook recognises.
//
// boxd runs only on Linux: elsewhere the package builds, and New fails
// with ErrUnsupportedOS.
package local

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/boxes"
	"github.com/upstash/box-go/local/internal/cgroup"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/feature/agentrun"
	"github.com/upstash/box-go/local/internal/feature/browsers"
	"github.com/upstash/box-go/local/internal/feature/desktop"
	"github.com/upstash/box-go/local/internal/feature/git"
	"github.com/upstash/box-go/local/internal/feature/previews"
	"github.com/upstash/box-go/local/internal/feature/schedules"
	"github.com/upstash/box-go/local/internal/feature/snapshots"
	"github.com/upstash/box-go/local/internal/feature/ssh"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/webhook"
)

// MountThreadFunction names the function of the goroutines (a few) that
// boxd keeps for the life of the process once a box has started as root:
// the threads of boxd's own mount namespace (package sandbox), which must
// never end, since processes started from them, or from their threads
// before they took them, die with them. A leak checker that runs boxd in its process ignores
// it, for example goleak.IgnoreAnyFunction(local.MountThreadFunction).
const MountThreadFunction = "github.com/upstash/box-go/local/internal/sandbox.(*stage).loop"

// Clock is boxd's source of time for what it schedules itself: cron
// schedules, idle pauses and ephemeral boxes' expiry. Tests inject a fake
// one (see boxtest.FakeClock) so that nothing waits for real minutes.
type Clock = core.Clock

// DefaultIdlePause is how long a box that is not keep-alive may go unused
// before boxd pauses it, when Config.IdlePause is zero.
const DefaultIdlePause = core.DefaultIdlePause

// DefaultMinFreeDisk is the free space boxd keeps on its data directory's
// file system when Config.MinFreeDisk is zero: below it, it makes no new
// box, snapshot or image.
const DefaultMinFreeDisk = core.DefaultMinFreeDisk

// Isolation modes.
const (
	// IsolationBwrap runs each box in a bubblewrap sandbox (the default).
	IsolationBwrap = "bwrap"
	// IsolationNone runs box processes directly on the host, with no
	// isolation at all. Use it only where bubblewrap cannot run.
	IsolationNone = "none"
)

// Config configures a Server.
type Config struct {
	// DataDir holds the database and the boxes' files. Required.
	DataDir string
	// APIKey is the key every request must carry, in X-Box-Api-Key or as
	// an Authorization bearer token.
	// Required.
	APIKey string
	// Isolation is IsolationBwrap (default) or IsolationNone.
	Isolation string
	// Logger receives boxd's own log. Nil discards it.
	Logger *slog.Logger
	// MaxBodyBytes bounds JSON request bodies (default 64 MiB).
	MaxBodyBytes int64
	// MaxUploadBytes bounds one file upload request (default 16 GiB).
	// Uploads stream to disk: the bound is of disk, not memory.
	MaxUploadBytes int64
	// Clock times schedules and ephemeral boxes' expiry; nil is the real
	// time.
	Clock Clock
	// PublicURLBase is where public URLs are served, for example
	// "http://localhost:8989": a box's port 3000 is then
	// http://{box-id}-3000.localhost:8989, and boxd serves every request
	// whose Host is such a name, right under the base's host name, as a
	// public URL. Empty means "http://localhost:{port}", with the port
	// that the API request creating or listing the URL came in on. Each
	// URL is a site of its own, out of reach of other boxes' cookies, only
	// where the base's host name is a public suffix (localhost, or a name
	// in the public suffix list): under any other, a page's script can set
	// a cookie for the base's host name that every box's URLs receive.
	PublicURLBase string
	// PublicURLHold is how long a request to a public URL may wait, from
	// its arrival, for the box's port to listen: a paused box is woken by
	// the request and its server may take a moment, and so may a server
	// just started in a running box. After it, the request is answered
	// 503 with Retry-After: 5. Zero means DefaultPublicURLHold (30
	// seconds, as on the cloud), a negative value no wait.
	PublicURLHold time.Duration
	// EgressRootCAs is trusted, besides the system's roots, for the TLS
	// connections boxd opens to add a box's attach_headers (tests use it
	// for their own HTTPS servers).
	EgressRootCAs *x509.CertPool
	// AllowHostLoopback lets boxes reach services on this machine, where
	// their network policy allows the address: on its loopback
	// (127.0.0.1, ::1, also as host.boxd.internal), its link-local
	// addresses, and every address of its network interfaces (its LAN
	// address, a bridge's such as docker0's), which reach a service
	// listening on all interfaces as surely as 127.0.0.1 does. A name in
	// allowed_domains leads there only as host.boxd.internal, or where
	// allowed_cidrs cover the address too. Off (the default of cmd/boxd),
	// no box reaches them under any policy: allow-all means the network,
	// not the machine boxd runs on; other machines, those of the LAN
	// included, stay reachable. boxd lists the machine's addresses again
	// every second, so an address an interface gains counts within it.
	// boxtest and the embedded backend turn it on, for tests whose
	// servers listen on 127.0.0.1. boxd's own API and SSH server are
	// never reachable from a box either way, on any of these addresses.
	AllowHostLoopback bool
	// EgressResolver resolves the host names boxes connect to, before
	// their network policy is applied; nil uses the system resolver. The
	// name host.boxd.internal always means the host's 127.0.0.1.
	EgressResolver func(ctx context.Context, host string) ([]netip.Addr, error)
	// ChromiumPath is the Chromium that boxes created with browser: true
	// run; an isolated box sees only the host's /usr, so it must be there.
	// Empty means Debian's (/usr/lib/chromium/chromium) or the first
	// chromium or google-chrome on PATH.
	ChromiumPath string
	// ModelProviderURLs overrides the base URLs of the model providers
	// that the managed agent CLIs and the browser's AI operations
	// (extract, observe, act) call, by provider: "anthropic" (the API's
	// root, default https://api.anthropic.com), "openai", "openrouter"
	// and "vercel" (ending in /v1, e.g. https://api.openai.com/v1), for a
	// gateway of the operator's (LiteLLM, vLLM, a proxy) or a stand-in in
	// tests. The agent CLIs reach a URL on this machine's loopback as
	// host.boxd.internal (which needs AllowHostLoopback). New refuses an
	// unknown provider and a URL that is not http or https. cmd/boxd sets
	// them with -model-provider-url.
	ModelProviderURLs map[string]string
	// GitHubURL is the GitHub that git clones of "owner/repo" go to, that
	// the box's GitHub token is sent to (and nowhere else), and that pull
	// requests and issues are opened on. Empty means https://github.com.
	// Boxes reach it through boxd's egress proxy, so a server on the
	// host's loopback is http://host.boxd.internal:{port}.
	GitHubURL string
	// IdlePause is how long a box that is not keep-alive may go without
	// use before boxd pauses it; the next call wakes it. Every call to a
	// box is a use, and exec, code, streams, sessions, agent and schedule
	// runs, git and browser recordings count for as long as they run;
	// background processes alone do not. Zero means DefaultIdlePause (15
	// minutes), a negative value never.
	IdlePause time.Duration
	// Sizes are the limits of each box size; a size this map does not
	// have gets DefaultSizes' limits. They are enforced with control
	// groups, so only when boxd runs as root.
	Sizes Sizes
	// GitHubAPIURL is the GitHub REST API that boxd itself calls for pull
	// requests and issues. Empty means https://api.github.com, or
	// {GitHubURL}/api/v3 (GitHub Enterprise) when GitHubURL is set to
	// another host.
	GitHubAPIURL string
	// WarmPool is how many sandboxes boxd keeps started ahead of creates
	// for each root and size that creates use: a create then claims a
	// ready one and gives it its identity, instead of starting one. With
	// RootHost, the host root's default size is kept from the start; any
	// other root and size once a create has used it. Zero or less keeps
	// none, so that the embedded backend and boxtest start only the boxes
	// asked for; cmd/boxd keeps DefaultWarmPool (its -warm-pool). A ready
	// sandbox costs about 10 MB of memory (its agent's proportional set
	// size, bubblewrap's included) and no processor time while it waits. A create that names a git identity, has a name that is a
	// host name, or restores a snapshot starts a sandbox of its own.
	WarmPool int
	// Root is what a new box's root file system is: RootHost (what empty
	// means) or RootImage. Boxes keep the root they were created with.
	Root string
	// MinFreeDisk is the free space, in bytes, that boxd keeps on its data
	// directory's file system: below it, creates and snapshots are
	// refused (507) with a message that says so. Zero means
	// DefaultMinFreeDisk (256 MiB), a negative value no check. Boxes share
	// the file system and have no quota of their own: one that fills it
	// gets ENOSPC, and boxd's calls that write answer 507 until space is
	// freed.
	MinFreeDisk int64
	// MaxImageSize bounds what a runtime image may unpack to, in bytes:
	// its layers' archives, uncompressed, added up. A create whose image
	// is larger fails (502). Zero means DefaultMaxImageSize (16 GiB), a
	// negative value no bound. While an image unpacks, boxd also keeps
	// MinFreeDisk free: a pull that would go below it stops (507).
	MaxImageSize int64
	// Images maps runtimes to OCI image references in RootImage mode,
	// over DefaultImages. New refuses an unknown runtime and a reference
	// that does not parse. Registry credentials come from the docker
	// configuration (DOCKER_CONFIG or ~/.docker/config.json).
	Images map[string]string
	// SSHAuthTimeout is how long an SSH connection may take from its
	// accept to its authentication; then it is closed. Zero means
	// DefaultSSHAuthTimeout (20 seconds), a negative value no deadline.
	SSHAuthTimeout time.Duration
	// SSHMaxUnauthenticated bounds the SSH connections that are accepted
	// and not yet authenticated, from all clients together; past it a new
	// connection is closed at once, unread. Zero means
	// DefaultSSHMaxUnauthenticated (256), a negative value no bound.
	SSHMaxUnauthenticated int
	// SSHMaxUnauthenticatedPerIP is the same bound for each client
	// address (for IPv6, each /64). Zero means
	// DefaultSSHMaxUnauthenticatedPerIP (16), a negative value no bound.
	SSHMaxUnauthenticatedPerIP int
	// SSHAuthorizedKeys is an OpenSSH authorized_keys file: each key in
	// it logs in over SSH to any box, as the API key does as a password
	// and as the account's keys (added over the API) do. Lines with
	// options are skipped (boxd honours none of them). boxd reads the
	// file again when it changes; New fails when it cannot be read.
	// Empty means none.
	SSHAuthorizedKeys string
}

// Server is boxd. It is an http.Handler.
type Server struct {
	cfg struct {
		Config
		Isolation sandbox.Mode
	}
	log         *slog.Logger
	db          *store.Store
	core        *core.Core
	boxes       *boxes.Boxes
	runs        *agentrun.Runs
	net         *network
	images      *images
	schedules   *schedules.Schedules
	snapshots   *snapshots.Snapshots
	previews    *previews.Previews
	git         *git.Git
	browsers    *browsers.Browsers
	desktops    *desktop.Desktops
	agentBinary string
	// webhooks delivers run webhooks.
	webhooks *webhook.Sender
	handler  http.Handler

	// ctx is boxd's lifetime: every context boxd makes for work of its
	// own (a run, a start, a pause, a schedule, an init command) derives
	// from it, and it ends once Close has closed every part.
	ctx    context.Context
	cancel context.CancelFunc
	// closers are the parts' closes, which Close runs in reverse order of
	// their start, and closeErr what closing the store returned.
	closers  []func()
	closeErr error

	// ports are those boxd's API is served on, as learnt from Serve and
	// from each request's local address; boxes never reach them.
	ports sync.Map // uint16 → struct{}

	// ssh serves ServeSSH's listeners; Close stops them.
	ssh *ssh.SSH

	closeOnce sync.Once
}

// New opens the data directory and returns a Server. It does not listen;
// use it as an http.Handler or call Serve.
func New(cfg Config) (*Server, error) {
	if err := osSupported(); err != nil {
		return nil, err
	}
	if cfg.DataDir == "" {
		return nil, errors.New("boxd: DataDir is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("boxd: APIKey is required")
	}
	if err := browsers.CheckProviderURLs(cfg.ModelProviderURLs); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 16 << 30
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	s := &Server{log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cfg.Config = cfg
	switch cfg.Isolation {
	case "", IsolationBwrap:
		s.cfg.Isolation = sandbox.ModeBwrap
		if err := sandbox.Available(core.ProbeUID); err != nil {
			return nil, fmt.Errorf("boxd: %w (install bubblewrap, or run with isolation %q, which isolates nothing)", err, IsolationNone)
		}
	case IsolationNone:
		s.cfg.Isolation = sandbox.ModeNone
		s.log.Warn("boxd is running WITHOUT isolation: box processes run directly on this machine as " + whoRuns())
	default:
		return nil, fmt.Errorf("boxd: unknown isolation %q (want %q or %q)", cfg.Isolation, IsolationBwrap, IsolationNone)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("boxd: %w", err)
	}
	var err error
	if s.images, err = newImages(s); err != nil {
		return nil, fmt.Errorf("boxd: %w", err)
	}
	s.log.Info(s.images.describe())
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("boxd: cannot find own binary for the in-box agent: %w", err)
	}
	s.agentBinary = exe
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "boxes"), 0o700); err != nil {
		return nil, fmt.Errorf("boxd: %w", err)
	}
	// The data directory is boxd's alone: boxes reach their own files
	// through boxd's mount namespace (package sandbox), not by path, and
	// no host user may reach anything a box wrote (a set-uid program, a
	// key in a file).
	for _, d := range []string{cfg.DataDir, filepath.Join(cfg.DataDir, "boxes")} {
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("boxd: %w", err)
		}
	}
	db, err := store.Open(filepath.Join(cfg.DataDir, "boxd.db"))
	if err != nil {
		return nil, fmt.Errorf("boxd: %w", err)
	}
	s.db = db
	if rec := db.Recovered(); rec.Runs > 0 || rec.Dropped > 0 {
		s.log.Info("run journal replayed", "runs", rec.Runs, "dropped_deleted_boxes", rec.Dropped)
	}
	for _, why := range db.Recovered().Ignored {
		s.log.Warn("run journal: part ignored (a torn tail is what a power loss leaves)", "detail", why)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.onClose(func() { s.closeErr = s.db.Close() })
	// Processes a killed boxd left behind (a paused box's frozen sandbox
	// outlives its parent) end now, before any box starts again.
	if boxes, err := db.Boxes(); err == nil {
		for _, b := range boxes {
			sandbox.Reap(b.ID)
		}
	}
	if s.net, err = newNetwork(s); err != nil {
		s.Close()
		return nil, fmt.Errorf("boxd: %w", err)
	}
	// The parts start in the order of what they use, and Close closes them
	// in the reverse order.
	s.onClose(s.net.close)
	s.core = core.New(core.Config{
		Context:     s.ctx,
		Store:       db,
		Log:         s.log,
		DataDir:     cfg.DataDir,
		Isolation:   s.cfg.Isolation,
		Limits:      cfg.Sizes.of,
		Clock:       cfg.Clock,
		IdlePause:   cfg.IdlePause,
		MinFreeDisk: cfg.MinFreeDisk,
		WarmPool:    cfg.WarmPool,
		AgentBinary: exe,
		Images:      s.images,
		Network:     s.net,
	})
	s.onClose(s.core.Close)
	if s.previews, err = previews.New(previews.Config{
		Host:            s.core,
		Records:         db,
		BaseURL:         cfg.PublicURLBase,
		Hold:            cfg.PublicURLHold,
		IsAPICredential: func(r *http.Request) bool { return s.carriesKey(r, true) },
		APIKeyHeader:    headerAPIKey,
	}); err != nil {
		s.Close()
		return nil, fmt.Errorf("boxd: %w", err)
	}
	s.net.previews = s.previews
	s.onClose(s.previews.Close)
	s.browsers = browsers.New(browsers.Config{
		Host:         s.core.NewFeatureHost(),
		Recordings:   db,
		ChromiumPath: cfg.ChromiumPath,
		Isolation:    s.cfg.Isolation,
		ProviderURLs: cfg.ModelProviderURLs,
		// The desktops are made below, before boxd serves.
		Desktop:             func(id string) bool { return s.desktops.Running(id) },
		DesktopDevtoolsPort: desktop.DevtoolsPort,
	})
	s.onClose(s.browsers.Close)
	s.webhooks = webhook.New(s.ctx, s.core.Logf)
	s.runs = agentrun.New(agentrun.Config{
		Host:         s.core.NewFeatureHost(),
		Records:      db,
		ProviderURLs: cfg.ModelProviderURLs,
		Browser:      s.browsers,
		Webhooks:     s.webhooks,
	})
	s.onClose(s.runs.Close)
	s.onClose(s.core.CloseInits)
	// Stored schedules get their timers back (package schedules).
	s.schedules = schedules.New(schedules.Config{Host: s.core.NewFeatureHost(), Records: db, Runs: s.runs, Webhooks: s.webhooks})
	s.schedules.Start()
	s.onClose(s.schedules.Close)
	chromium, chromiumErr := s.browsers.Chromium()
	s.desktops = desktop.New(desktop.Config{Host: s.core, ChromiumPath: chromium, ProviderURLs: cfg.ModelProviderURLs})
	s.onClose(s.desktops.Close)
	desktops := func() error {
		if s.cfg.Isolation != sandbox.ModeBwrap {
			return errdefs.NotImplemented("desktops need boxd's bubblewrap isolation: each box's display is its own only in a sandbox")
		}
		return desktop.Available(chromiumErr)
	}
	s.boxes = boxes.New(boxes.Config{Core: s.core, Images: s.images, PolicyChanged: s.net.policyChanged, Desktops: desktops})
	s.snapshots = snapshots.New(snapshots.Config{
		Host:           s.core,
		Records:        db,
		Dir:            filepath.Join(cfg.DataDir, "snapshots"),
		ValidateCreate: boxes.ValidateCreate,
		CreateBox:      s.boxes.Create,
	})
	s.git = git.New(git.Config{Host: s.core, GitHubURL: cfg.GitHubURL, GitHubAPIURL: cfg.GitHubAPIURL})
	// The SSH servers that ServeSSH starts later close first.
	if s.ssh, err = ssh.New(ssh.Config{
		Host:               s.core,
		Keys:               db,
		DataDir:            cfg.DataDir,
		APIKey:             cfg.APIKey,
		AuthorizedKeysFile: cfg.SSHAuthorizedKeys,
		Isolation:          s.cfg.Isolation,
		AgentBinary:        exe,
		Guard:              newSSHGuard(cfg, s.log),
	}); err != nil {
		s.Close()
		return nil, fmt.Errorf("boxd: %w", err)
	}
	s.onClose(s.ssh.Close)
	s.handler = s.withPreviews(s.routes())
	// Expired ephemeral boxes go, and keep-alive boxes with an init
	// command start again.
	s.core.Start()
	if s.images.mode == RootHost {
		s.core.Prewarm("", "small")
	}
	return s, nil
}

// DefaultWarmPool is cmd/boxd's Config.WarmPool.
const DefaultWarmPool = 2

// WaitWarmPool waits until the warm pool (Config.WarmPool) is full for
// every root and size it keeps, or stopped filling short of that (for
// want of disk or memory), or ctx ends. Tests and benchmarks use it to
// measure creates against a pool that is ready.
func (s *Server) WaitWarmPool(ctx context.Context) error { return s.core.WaitWarmPool(ctx) }

// WarmPoolSize is how many ready sandboxes the warm pool holds.
func (s *Server) WarmPoolSize() int { return s.core.PoolSize() }

func whoRuns() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return "the current user"
}

// DefaultPublicURLHold is how long a public URL request waits for its
// port to listen when Config.PublicURLHold is zero.
const DefaultPublicURLHold = previews.DefaultHold

// withPreviews serves public URL requests (by Host) and passes everything
// else to next.
func (s *Server) withPreviews(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, port, ok := s.previews.Target(r.Host); ok {
			s.previews.Serve(w, r, id, port)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Resources are what the boxes of one size may use.
type Resources struct {
	// CPUs is CPU time, in cores.
	CPUs float64
	// Memory is the most memory, in bytes, that a box's processes may
	// use together; past it the kernel ends one of them (out of memory).
	Memory int64
	// Processes bounds a box's processes and threads together; past it
	// fork fails (EAGAIN).
	Processes int64
}

// Sizes maps a box size ("small", "medium", "large") to its resources.
type Sizes map[string]Resources

// DefaultSizes are the sizes of the Upstash Box cloud: small is 2 CPUs and
// 4 GiB, medium 4 and 8, large 8 and 16, with 1024, 2048 and 4096
// processes and threads.
func DefaultSizes() Sizes {
	return Sizes{
		"small":  {CPUs: 2, Memory: 4 << 30, Processes: 1024},
		"medium": {CPUs: 4, Memory: 8 << 30, Processes: 2048},
		"large":  {CPUs: 8, Memory: 16 << 30, Processes: 4096},
	}
}

// of returns the limits of size ("" is small).
func (s Sizes) of(size string) cgroup.Limits {
	if size == "" {
		size = "small"
	}
	r, ok := s[size]
	if !ok {
		r = DefaultSizes()[size]
	}
	return cgroup.Limits{CPUs: r.CPUs, Memory: r.Memory, Pids: r.Processes}
}

// ServeHTTP serves the Box API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		s.ownPort(a)
	}
	s.handler.ServeHTTP(w, r)
}

// ownPort notes a TCP address boxd serves on (its API, its SSH server):
// no box may connect to its port on this machine. Serve and ServeSSH note
// their listeners before they accept, and every API request notes the
// address it came in on (a box exists only once a request has created
// it), so boxd also knows the listeners of programs that serve its API
// with their own http.Server.
func (s *Server) ownPort(a net.Addr) {
	if ta, ok := a.(*net.TCPAddr); ok {
		if _, seen := s.ports.Load(uint16(ta.Port)); !seen {
			s.ports.Store(uint16(ta.Port), struct{}{})
		}
	}
}

func (s *Server) isOwnPort(port uint16) bool {
	_, ok := s.ports.Load(port)
	return ok
}

// Listen is boxd's one start-up for a program that serves it (cmd/boxd,
// box serve, boxtest): New, then a TCP listener on addr, whose port is
// out of every box's reach from the start. The caller serves l (Serve, or
// an http.Server of its own with the Server as its handler) and closes
// the Server; a listen that fails closes it.
func Listen(cfg Config, addr string) (*Server, net.Listener, error) {
	srv, err := New(cfg)
	if err != nil {
		return nil, nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Close()
		return nil, nil, fmt.Errorf("boxd: listen: %w", err)
	}
	srv.ownPort(l.Addr())
	return srv, l, nil
}

// Serve accepts connections on l until ctx ends, then shuts down.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.ownPort(l.Addr())
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return nil
	}
}

// Close stops every box's processes and closes the database. Box files and
// records stay, and a new Server on the same data directory picks them up.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		for _, c := range slices.Backward(s.closers) {
			c()
		}
		// Whatever of boxd's own work is left ends now.
		s.cancel()
	})
	return s.closeErr
}

// onClose registers close to be run by Close, before those registered
// earlier: New registers each part's as it starts it.
func (s *Server) onClose(close func()) {
	s.closers = append(s.closers, close)
}

// authenticate lets through the requests that carry the API key, in
// X-Box-Api-Key or as an Authorization bearer token, compared in constant
// time.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.carriesKey(r, false) {
			api.WriteError(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// carriesKey reports whether r carries boxd's API key: in X-Box-Api-Key,
// which is the one checked when it is there, or else as the token of
// Authorization: Bearer (the newest official SDKs send an OAuth token
// there; boxd takes its own key in its place). With bearerOnly, only the
// Authorization header is looked at: it tells the proxies whether that
// header is boxd's credential rather than the app's.
func (s *Server) carriesKey(r *http.Request, bearerOnly bool) bool {
	var got string
	if k := r.Header.Get(headerAPIKey); k != "" && !bearerOnly {
		got = k
	} else if tok, ok := bearerToken(r.Header.Get("Authorization")); ok {
		got = tok
	} else {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.APIKey)) == 1
}

// headerAPIKey is the header of the API key.
const headerAPIKey = "X-Box-Api-Key"

// bearerToken is the token of an Authorization header of the Bearer
// scheme (its name in any case).
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// CheckIsolation reports whether bubblewrap sandboxes can be started on
// this machine; nil means IsolationBwrap will work. Off Linux, where boxd
// runs in no mode, the error wraps ErrUnsupportedOS.
func CheckIsolation() error {
	if err := osSupported(); err != nil {
		return err
	}
	return sandbox.Available(core.ProbeUID)
}
