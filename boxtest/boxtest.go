// Package boxtest runs boxd, the local Box backend, inside a test.
//
// NewServer starts boxd in-process on a loopback port with a fresh data
// directory and returns a ready SDK client; everything is shut down and
// removed by t.Cleanup, like net/http/httptest:
//
//	func TestMyFeature(t *testing.T) {
//		srv := boxtest.NewServer(t)
//		b, err := srv.Client().Create(t.Context(), nil)
//		...
//	}
//
// Boxes are real sandboxes (bubblewrap). Where bubblewrap is not installed
// the server runs without isolation and says so in the test log; set
// BOXTEST_REQUIRE_BWRAP=1 (as this repository's CI does) to make that a
// failure instead. Boxes run on the host's /usr (local.RootHost); set
// local.Config.Root and Images with WithConfig to test runtime images.
//
// boxd runs boxes only on Linux: on other systems NewServer skips the test
// (t.Skip) with a one-line reason.
//
// # A boxd elsewhere
//
// When BOXTEST_BASE_URL is set, NewServer starts nothing: it returns a
// Server for the boxd (or the cloud) at that URL, with the API key from
// BOXTEST_API_KEY, else from UPSTASH_BOX_API_KEY. So the tests of a Mac or
// a Windows machine run against a boxd on a Linux machine or VM:
//
//	BOXTEST_BASE_URL=http://linux-vm:8989 BOXTEST_API_KEY=mykey go test ./...
//
// Such a server is shared and outlives the test. URL and APIKey are the
// remote's, Client talks to it, and the test's cleanup leaves it as it is:
// it neither stops boxd nor deletes the boxes the test made, so a test
// that runs there deletes what it creates (t.Cleanup) and does not assume
// that it sees only its own boxes. DataDir is empty and Backend nil. A test
// that asks for what only a boxd in its own process can give (WithClock,
// WithConfig, WithDataDir, WithIsolation, WithMaxUploadBytes) is skipped
// with the reason; WithLogger is ignored, since boxd logs where it runs.
// NewServer fails the test when the key is missing or the remote does not
// answer with it.
//
// As root, boxd keeps a few goroutines for the life of the process (the
// threads of its mount namespace): a leak checker such as goleak ignores
// local.MountThreadFunction.
package boxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/local"
)

// Server is a boxd running for one test (NewServer) or one program
// (Start).
type Server struct {
	srv       *local.Server
	hs        *http.Server
	url       string
	apiKey    string
	dir       string
	removeDir string // the data directory Start made, which Close removes
	isolation string
	fallback  error
	client    *box.Client

	closeOnce sync.Once
	closeErr  error
}

// Option configures NewServer.
type Option func(*options)

type options struct {
	// inProcess names the options given that only a boxd in this
	// process can honour, for the skip message of a remote server.
	inProcess []string
	isolation string
	dataDir   string
	logger    *slog.Logger
	clientOps []box.Option
	maxUpload int64
	clock     local.Clock
	configure []func(*local.Config)
	// requireIsolation makes a missing bubblewrap an error instead of a
	// reason to run without isolation (BOXTEST_REQUIRE_BWRAP).
	requireIsolation bool
}

// WithIsolation selects local.IsolationBwrap or local.IsolationNone instead
// of the automatic choice.
func WithIsolation(mode string) Option {
	return func(o *options) { o.isolation = mode; o.needs("WithIsolation") }
}

// WithDataDir uses dir as boxd's data directory instead of a fresh
// temporary one, for example to restart a server on the same state.
func WithDataDir(dir string) Option {
	return func(o *options) { o.dataDir = dir; o.needs("WithDataDir") }
}

// WithLogger sends boxd's log to l.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClientOptions adds options to the client that Client returns.
func WithClientOptions(opts ...box.Option) Option {
	return func(o *options) { o.clientOps = append(o.clientOps, opts...) }
}

// WithClock gives boxd a clock for schedules and ephemeral boxes' expiry,
// typically a *FakeClock.
func WithClock(c local.Clock) Option {
	return func(o *options) { o.clock = c; o.needs("WithClock") }
}

// WithMaxUploadBytes bounds one upload request (default 16 GiB).
func WithMaxUploadBytes(n int64) Option {
	return func(o *options) { o.maxUpload = n; o.needs("WithMaxUploadBytes") }
}

// WithConfig lets f change boxd's configuration after the other options
// have set it, for settings without an option of their own, for example
// GitHubURL and GitHubAPIURL for a stand-in GitHub.
func WithConfig(f func(*local.Config)) Option {
	return func(o *options) { o.configure = append(o.configure, f); o.needs("WithConfig") }
}

// needs records that the option name applies to a boxd in this process.
func (o *options) needs(name string) {
	if !slices.Contains(o.inProcess, name) {
		o.inProcess = append(o.inProcess, name)
	}
}

// Environment variables that point NewServer at a boxd that is already
// running (see the package documentation).
const (
	EnvBaseURL = "BOXTEST_BASE_URL"
	EnvAPIKey  = "BOXTEST_API_KEY"
)

// NewServer starts boxd for the test and registers its shutdown with
// t.Cleanup. It fails the test if boxd cannot start, and skips it where
// boxd cannot run. When BOXTEST_BASE_URL is set it starts nothing and
// returns a Server for the boxd at that URL instead (see the package
// documentation).
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := apply(opts)
	if base := os.Getenv(EnvBaseURL); base != "" {
		return remote(t, base, o)
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	o.requireIsolation = os.Getenv("BOXTEST_REQUIRE_BWRAP") != ""
	s, err := start(o)
	if errors.Is(err, local.ErrUnsupportedOS) {
		skipOS(t)
	}
	if err != nil {
		t.Fatalf("boxtest: %v", err)
	}
	if s.fallback != nil {
		t.Logf("boxtest: %v; boxes run WITHOUT isolation", s.fallback)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Start starts boxd in this process, for a program that is not a test (an
// example, a tool, a demo): on a loopback port, with a fresh data
// directory unless WithDataDir names one. Close stops it and removes the
// data directory Start made. NewServer is Start for a test.
//
// Boxes run in bubblewrap sandboxes; where bubblewrap is missing and
// WithIsolation does not choose, they run without isolation, and
// IsolationFallback says why. Off Linux, Start fails with an error that
// wraps local.ErrUnsupportedOS. BOXTEST_BASE_URL means nothing to Start.
func Start(opts ...Option) (*Server, error) {
	return start(apply(opts))
}

func apply(opts []Option) *options {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// start is Start and NewServer's common part.
func start(o *options) (_ *Server, err error) {
	removeDir := ""
	if o.dataDir == "" {
		if o.dataDir, err = os.MkdirTemp("", "boxd-"); err != nil {
			return nil, err
		}
		removeDir = o.dataDir
	}
	defer func() {
		if err != nil && removeDir != "" {
			_ = os.RemoveAll(removeDir)
		}
	}()
	var fallback error
	if o.isolation == "" {
		o.isolation = local.IsolationBwrap
		if err := local.CheckIsolation(); errors.Is(err, local.ErrUnsupportedOS) {
			return nil, err
		} else if err != nil {
			if o.requireIsolation {
				return nil, fmt.Errorf("bubblewrap is required (BOXTEST_REQUIRE_BWRAP is set): %w", err)
			}
			fallback = err
			o.isolation = local.IsolationNone
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	key := "box_test_" + hex.EncodeToString(b[:])
	// A test's own servers listen on 127.0.0.1: boxes may reach them.
	cfg := local.Config{DataDir: o.dataDir, APIKey: key, Isolation: o.isolation, Logger: o.logger, MaxUploadBytes: o.maxUpload, Clock: o.clock, AllowHostLoopback: true, Root: local.RootHost}
	for _, f := range o.configure {
		f(&cfg)
	}
	srv, l, err := local.Listen(cfg, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{srv: srv, url: "http://" + l.Addr().String(), apiKey: key, dir: o.dataDir, removeDir: removeDir, isolation: o.isolation, fallback: fallback}
	s.hs = &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = s.hs.Serve(l) }()
	copts := append([]box.Option{box.WithAPIKey(key), box.WithBaseURL(s.url), box.WithTelemetry(false)}, o.clientOps...)
	if s.client, err = box.NewClient(copts...); err != nil {
		s.Close()
		return nil, fmt.Errorf("client: %w", err)
	}
	return s, nil
}

// skipOS skips the test on a system where boxd cannot run.
func skipOS(t testing.TB) {
	t.Helper()
	t.Skipf("boxtest: boxd runs boxes only on Linux, not on %s (set %s and %s for a boxd elsewhere)", runtime.GOOS, EnvBaseURL, EnvAPIKey)
}

// remoteProbeTimeout bounds NewServer's first request to a remote boxd.
const remoteProbeTimeout = 30 * time.Second

// remote returns a Server for the boxd at base, once it has answered a
// request with the key.
func remote(t testing.TB, base string, o *options) *Server {
	t.Helper()
	if len(o.inProcess) > 0 {
		t.Skipf("boxtest: %s names a boxd elsewhere, and the test asks for %s, which only a boxd in its own process gives", EnvBaseURL, strings.Join(o.inProcess, ", "))
	}
	key := os.Getenv(EnvAPIKey)
	if key == "" {
		key = os.Getenv("UPSTASH_BOX_API_KEY")
	}
	if key == "" {
		t.Fatalf("boxtest: %s is set, but neither %s nor UPSTASH_BOX_API_KEY", EnvBaseURL, EnvAPIKey)
	}
	copts := append([]box.Option{box.WithAPIKey(key), box.WithBaseURL(base), box.WithTelemetry(false)}, o.clientOps...)
	c, err := box.NewClient(copts...)
	if err != nil {
		t.Fatalf("boxtest: %s=%s: %v", EnvBaseURL, redacted(base), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), remoteProbeTimeout)
	defer cancel()
	if _, err := c.List(ctx, &box.ListParams{Label: "boxtest-probe"}); err != nil {
		t.Fatalf("boxtest: the boxd at %s=%s: %v", EnvBaseURL, redacted(base), err)
	}
	return &Server{url: base, apiKey: key, client: c}
}

// redacted is s without a password, if it is a URL that has one.
func redacted(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

// Close stops a boxd that Start or NewServer started, its boxes with it,
// and removes the data directory that Start made. It does nothing for a
// boxd elsewhere (BOXTEST_BASE_URL). NewServer's cleanup calls it.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.srv == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.hs.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			_ = s.hs.Close()
		}
		_ = s.hs.Close()
		s.closeErr = s.srv.Close()
		if s.removeDir != "" {
			if err := os.RemoveAll(s.removeDir); err != nil && s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}

// Isolation is local.IsolationBwrap or local.IsolationNone: how the boxes
// of a boxd in this process run. It is "" for a boxd elsewhere.
func (s *Server) Isolation() string { return s.isolation }

// IsolationFallback says why boxes run without isolation when Start or
// NewServer chose that itself (bubblewrap is missing or cannot run); it is
// nil when they run in sandboxes or when WithIsolation chose.
func (s *Server) IsolationFallback() error { return s.fallback }

// URL is the server's base URL, for example http://127.0.0.1:41234, or
// BOXTEST_BASE_URL.
func (s *Server) URL() string { return s.url }

// APIKey is the key the server accepts.
func (s *Server) APIKey() string { return s.apiKey }

// DataDir is boxd's data directory, or "" for a boxd elsewhere
// (BOXTEST_BASE_URL).
func (s *Server) DataDir() string { return s.dir }

// Client is an SDK client configured for this server.
func (s *Server) Client() *box.Client { return s.client }

// Backend is the running boxd, or nil for a boxd elsewhere
// (BOXTEST_BASE_URL).
func (s *Server) Backend() *local.Server { return s.srv }
