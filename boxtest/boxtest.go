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
// (t.Skip) and says so.
//
// As root, boxd keeps one goroutine for the life of the process (the
// thread of its mount namespace): a leak checker such as goleak ignores
// local.MountThreadFunction.
package boxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/local"
)

// Server is a boxd running for one test.
type Server struct {
	srv    *local.Server
	hs     *http.Server
	url    string
	apiKey string
	dir    string
	client *box.Client
}

// Option configures NewServer.
type Option func(*options)

type options struct {
	isolation string
	dataDir   string
	logger    *slog.Logger
	clientOps []box.Option
	maxUpload int64
	clock     local.Clock
	configure []func(*local.Config)
}

// WithIsolation selects local.IsolationBwrap or local.IsolationNone instead
// of the automatic choice.
func WithIsolation(mode string) Option { return func(o *options) { o.isolation = mode } }

// WithDataDir uses dir as boxd's data directory instead of a fresh
// temporary one, for example to restart a server on the same state.
func WithDataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

// WithLogger sends boxd's log to l.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClientOptions adds options to the client that Client returns.
func WithClientOptions(opts ...box.Option) Option {
	return func(o *options) { o.clientOps = append(o.clientOps, opts...) }
}

// WithClock gives boxd a clock for schedules and ephemeral boxes' expiry,
// typically a *FakeClock.
func WithClock(c local.Clock) Option { return func(o *options) { o.clock = c } }

// WithMaxUploadBytes bounds one upload request (default 16 GiB).
func WithMaxUploadBytes(n int64) Option { return func(o *options) { o.maxUpload = n } }

// WithConfig lets f change boxd's configuration after the other options
// have set it, for settings without an option of their own, for example
// GitHubURL and GitHubAPIURL for a stand-in GitHub.
func WithConfig(f func(*local.Config)) Option {
	return func(o *options) { o.configure = append(o.configure, f) }
}

// NewServer starts boxd for the test and registers its shutdown with
// t.Cleanup. It fails the test if boxd cannot start.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	if o.isolation == "" {
		o.isolation = local.IsolationBwrap
		if err := local.CheckIsolation(); errors.Is(err, local.ErrUnsupportedOS) {
			skipOS(t)
		} else if err != nil {
			if os.Getenv("BOXTEST_REQUIRE_BWRAP") != "" {
				t.Fatalf("boxtest: bubblewrap is required (BOXTEST_REQUIRE_BWRAP is set): %v", err)
			}
			t.Logf("boxtest: %v; boxes run WITHOUT isolation", err)
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
	srv, err := local.New(cfg)
	if errors.Is(err, local.ErrUnsupportedOS) {
		skipOS(t)
	}
	if err != nil {
		t.Fatalf("boxtest: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatalf("boxtest: listen: %v", err)
	}
	s := &Server{srv: srv, url: "http://" + l.Addr().String(), apiKey: key, dir: o.dataDir}
	s.hs = &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = s.hs.Serve(l) }()
	t.Cleanup(s.close)

	copts := append([]box.Option{box.WithAPIKey(key), box.WithBaseURL(s.url), box.WithTelemetry(false)}, o.clientOps...)
	s.client, err = box.NewClient(copts...)
	if err != nil {
		t.Fatalf("boxtest: client: %v", err)
	}
	return s
}

// skipOS skips the test on a system where boxd cannot run.
func skipOS(t testing.TB) {
	t.Helper()
	t.Skipf("boxtest: boxd runs boxes only on Linux, not on %s", runtime.GOOS)
}

func (s *Server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.hs.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		_ = s.hs.Close()
	}
	_ = s.hs.Close()
	_ = s.srv.Close()
}

// URL is the server's base URL, for example http://127.0.0.1:41234.
func (s *Server) URL() string { return s.url }

// APIKey is the key the server accepts.
func (s *Server) APIKey() string { return s.apiKey }

// DataDir is boxd's data directory.
func (s *Server) DataDir() string { return s.dir }

// Client is an SDK client configured for this server.
func (s *Server) Client() *box.Client { return s.client }

// Backend is the running boxd.
func (s *Server) Backend() *local.Server { return s.srv }
