package box

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upstash/box-go/gen"
)

// unsetEnv removes each key for the duration of the test (t.Setenv restores
// the old value afterwards). Tests that call it must not be parallel.
func unsetEnv(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		t.Setenv(k, "")
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}

// keyServer records the X-Box-Api-Key of the last request and counts
// requests.
type keyServer struct {
	*httptest.Server
	requests atomic.Int32
	lastKey  atomic.Value // string
}

func newKeyServer(t *testing.T) *keyServer {
	t.Helper()
	ks := &keyServer{}
	ks.lastKey.Store("")
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.requests.Add(1)
		ks.lastKey.Store(r.Header.Get(headerAPIKey))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ks.Close)
	return ks
}

// ping sends GET /ping through c and fails the test on any error.
func ping(t *testing.T, c *Client) {
	t.Helper()
	req, err := c.newRequest(t.Context(), http.MethodGet, "/ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.send(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestNewClientEnvDefaults(t *testing.T) {
	ks := newKeyServer(t)
	t.Setenv(envAPIKey, "env-key")
	t.Setenv(envBaseURL, ks.URL+"/")

	c, err := NewClient()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BaseURL(); got != ks.URL {
		t.Errorf("BaseURL() = %q, want %q (trailing slash stripped)", got, ks.URL)
	}
	ping(t, c)
	if got := ks.lastKey.Load(); got != "env-key" {
		t.Errorf("server saw key %q, want env-key", got)
	}
}

func TestNewClientDefaultBaseURL(t *testing.T) {
	t.Setenv(envAPIKey, "k")
	for _, env := range []string{"unset", ""} {
		if env == "unset" {
			unsetEnv(t, envBaseURL)
		} else {
			t.Setenv(envBaseURL, env)
		}
		c, err := NewClient()
		if err != nil {
			t.Fatal(err)
		}
		if got := c.BaseURL(); got != "https://us-east-1.box.upstash.com" {
			t.Errorf("UPSTASH_BOX_BASE_URL %s: BaseURL() = %q, want the default", env, got)
		}
	}
}

func TestOptionsOverrideEnv(t *testing.T) {
	ks := newKeyServer(t)
	t.Setenv(envAPIKey, "env-key")
	t.Setenv(envBaseURL, "http://env.invalid")

	c, err := NewClient(WithAPIKey("option-key"), WithBaseURL(ks.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BaseURL(); got != ks.URL {
		t.Errorf("BaseURL() = %q, want %q", got, ks.URL)
	}
	ping(t, c)
	if got := ks.lastKey.Load(); got != "option-key" {
		t.Errorf("server saw key %q, want option-key", got)
	}

	// A later option wins over an earlier one.
	c, err = NewClient(WithAPIKey("first"), WithAPIKey("second"), WithBaseURL(ks.URL))
	if err != nil {
		t.Fatal(err)
	}
	ping(t, c)
	if got := ks.lastKey.Load(); got != "second" {
		t.Errorf("server saw key %q, want second", got)
	}
}

func TestNewClientNoAPIKey(t *testing.T) {
	ks := newKeyServer(t)
	unsetEnv(t, envAPIKey)

	c, err := NewClient(WithBaseURL(ks.URL))
	if c != nil || !errors.Is(err, ErrNoAPIKey) {
		t.Fatalf("NewClient() = %v, %v; want nil, ErrNoAPIKey", c, err)
	}
	for _, want := range []string{"UPSTASH_BOX_API_KEY", "WithAPIKey"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}

	// An explicit empty key overrides the environment and is rejected too.
	t.Setenv(envAPIKey, "env-key")
	if _, err := NewClient(WithAPIKey(""), WithBaseURL(ks.URL)); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("NewClient(WithAPIKey(\"\")) error = %v, want ErrNoAPIKey", err)
	}
	if n := ks.requests.Load(); n != 0 {
		t.Errorf("server got %d requests, want 0", n)
	}
}

func TestBaseURLValidation(t *testing.T) {
	t.Parallel()
	valid := map[string]string{
		"https://box.example.com":           "https://box.example.com",
		"https://box.example.com/":          "https://box.example.com",
		"https://box.example.com//":         "https://box.example.com/", // only one slash is stripped
		"http://127.0.0.1:8080/prefix/":     "http://127.0.0.1:8080/prefix",
		"HTTP://box.example.com":            "HTTP://box.example.com",
		"https://user@box.example.com:9443": "https://user@box.example.com:9443",
	}
	for in, want := range valid {
		c, err := NewClient(WithAPIKey("k"), WithBaseURL(in))
		if err != nil {
			t.Errorf("WithBaseURL(%q): %v", in, err)
			continue
		}
		if got := c.BaseURL(); got != want {
			t.Errorf("WithBaseURL(%q): BaseURL() = %q, want %q", in, got, want)
		}
	}
	invalid := []string{
		"",
		"/",
		"box.example.com",
		"/v2/box",
		"ftp://box.example.com",
		"ws://box.example.com",
		"http://",
		"https://box.example.com?region=eu",
		"https://box.example.com#top",
		"://box.example.com",
		"http://[::1",
	}
	for _, in := range invalid {
		if _, err := NewClient(WithAPIKey("k"), WithBaseURL(in)); err == nil || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("WithBaseURL(%q): error = %v, want an invalid base URL error", in, err)
		}
	}
}

func TestNewClientInvalidOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  Option
		want string
	}{
		{"negative retries", WithMaxRetries(-1), "max retries"},
		{"negative timeout", WithRequestTimeout(-time.Second), "request timeout"},
		{"empty header name", WithHeader("", "v"), "invalid header name"},
		{"header name with space", WithHeader("X Bad", "v"), "invalid header name"},
		{"header value with newline", WithHeader("X-Ok", "a\r\nX-Injected: 1"), "invalid value"},
	}
	for _, tt := range tests {
		_, err := NewClient(WithAPIKey("k"), tt.opt)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want one containing %q", tt.name, err, tt.want)
		}
	}

	// All problems are reported at once.
	_, err := NewClient(WithAPIKey(""), WithBaseURL("nope"), WithMaxRetries(-3))
	if !errors.Is(err, ErrNoAPIKey) || !strings.Contains(err.Error(), "base URL") || !strings.Contains(err.Error(), "max retries") {
		t.Errorf("error = %v, want all three problems", err)
	}

	// Valid edge values are accepted; nil options are ignored.
	if _, err := NewClient(WithAPIKey("k"), WithMaxRetries(0), WithRequestTimeout(0), nil, WithLogger(nil), WithHTTPClient(nil)); err != nil {
		t.Errorf("zero values: %v", err)
	}
}

// countingTransport counts round trips and forwards them to
// http.DefaultTransport.
type countingTransport struct{ n atomic.Int32 }

func (ct *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ct.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestWithHTTPClientIsCopied(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t)
	ct := &countingTransport{}
	hc := &http.Client{Transport: ct, Timeout: time.Minute}

	c, err := NewClient(WithAPIKey("k"), WithBaseURL(ks.URL), WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	ping(t, c)
	if n := ct.n.Load(); n != 1 {
		t.Errorf("caller's transport saw %d round trips, want 1", n)
	}
	if hc.CheckRedirect != nil || hc.Transport != ct || hc.Timeout != time.Minute || hc.Jar != nil {
		t.Errorf("caller's http.Client was modified: %+v", hc)
	}
	if c.http == hc {
		t.Error("Client uses the caller's *http.Client instead of a copy")
	}

	// Changing the caller's client afterwards does not affect the Client
	// or its clones.
	hc.Transport = nil
	ping(t, c)
	clone, err := c.Clone(WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	ping(t, clone)
	if n := ct.n.Load(); n != 3 {
		t.Errorf("caller's transport saw %d round trips, want 3", n)
	}
	if clone.http == c.http || clone.http.CheckRedirect == nil {
		t.Error("clone shares its http.Client or lacks the redirect guard")
	}
}

func TestClone(t *testing.T) {
	t.Parallel()
	var lastKey, lastExtra atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastKey.Store(r.Header.Get(headerAPIKey))
		lastExtra.Store(r.Header.Get("X-Extra"))
	}))
	t.Cleanup(srv.Close)

	orig, err := NewClient(WithAPIKey("key-a"), WithBaseURL(srv.URL), WithMaxRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	clone, err := orig.Clone(WithAPIKey("key-b"), WithHeader("X-Extra", "yes"), WithMaxRetries(5))
	if err != nil {
		t.Fatal(err)
	}
	if clone.BaseURL() != orig.BaseURL() {
		t.Errorf("clone BaseURL = %q, want %q", clone.BaseURL(), orig.BaseURL())
	}

	ping(t, clone)
	if k, x := lastKey.Load(), lastExtra.Load(); k != "key-b" || x != "yes" {
		t.Errorf("clone sent key %q, X-Extra %q; want key-b, yes", k, x)
	}
	ping(t, orig)
	if k, x := lastKey.Load(), lastExtra.Load(); k != "key-a" || x != "" {
		t.Errorf("original sent key %q, X-Extra %q; want key-a and none", k, x)
	}
	if orig.do.maxRetries != 1 || clone.do.maxRetries != 5 {
		t.Errorf("maxRetries: original %d, clone %d; want 1, 5", orig.do.maxRetries, clone.do.maxRetries)
	}

	// A clone of a clone starts from the clone's headers, not the original's.
	clone2, err := clone.Clone(WithHeader("X-Other", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if clone2.cfg.header.Get("X-Extra") != "yes" || orig.cfg.header.Get("X-Other") != "" || clone.cfg.header.Get("X-Other") != "" {
		t.Error("header maps are shared between clones")
	}

	// An invalid option fails the clone and leaves the original usable.
	if _, err := orig.Clone(WithBaseURL("ftp://x")); err == nil {
		t.Error("Clone with an invalid base URL succeeded")
	}
	ping(t, orig)
}

func TestCloneKeepsResolvedEnv(t *testing.T) {
	ks := newKeyServer(t)
	t.Setenv(envAPIKey, "env-at-start")
	c, err := NewClient(WithBaseURL(ks.URL))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envAPIKey, "env-later")
	clone, err := c.Clone()
	if err != nil {
		t.Fatal(err)
	}
	ping(t, clone)
	if got := ks.lastKey.Load(); got != "env-at-start" {
		t.Errorf("clone sent key %q, want the one resolved by NewClient", got)
	}
}

func TestWithHeader(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got []http.Header
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Clone())
	}))
	t.Cleanup(srv.Close)

	c, err := NewClient(WithAPIKey("k"), WithBaseURL(srv.URL),
		WithHeader("x-team", "a"), WithHeader("X-Team", "b"), // later wins, canonical key
		WithHeader("Upstash-Telemetry-Sdk", "box-go@0.1.0,my-cli@1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	ping(t, c)
	req, err := c.newRequest(t.Context(), http.MethodGet, "/ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Team", "per-request")
	resp, err := c.send(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(got))
	}
	if v := got[0].Values("X-Team"); len(v) != 1 || v[0] != "b" {
		t.Errorf("first request X-Team = %q, want [b]", v)
	}
	if v := got[1].Get("X-Team"); v != "per-request" {
		t.Errorf("second request X-Team = %q, want the request's own value", v)
	}
	// An explicit WithHeader is sent even where telemetry is disabled.
	if v := got[0].Get(headerTelemetrySDK); v != "box-go@0.1.0,my-cli@1.2.3" {
		t.Errorf("Upstash-Telemetry-Sdk = %q, want the WithHeader value", v)
	}
	if req.Header.Get(headerAPIKey) != "" {
		t.Error("Do modified the caller's request headers")
	}
}

// TestCallOptions gives one call options of its own: they apply to its
// requests only, on top of the client's.
func TestCallOptions(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, key, extra string
	}
	var mu sync.Mutex
	var reqs []seen
	var fail atomic.Int32 // answer this many requests with 503
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, seen{r.Method, r.URL.Path, r.Header.Get("X-Box-Api-Key"), r.Header.Get("X-Extra")})
		mu.Unlock()
		if r.URL.Query().Get("path") == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		if fail.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"exit_code":0,"output":"ok","content":"x"}`)
	}))
	defer ts.Close()
	c, err := NewClient(WithAPIKey("client-key"), WithBaseURL(ts.URL), WithTelemetry(false), withRetryBackoff(time.Millisecond, time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	b := c.newBox(&gen.BoxData{ID: "box-1", Status: gen.BoxStatusIdle})
	ctx := t.Context()
	take := func() []seen {
		mu.Lock()
		defer mu.Unlock()
		out := reqs
		reqs = nil
		return out
	}

	if _, err := b.Files.ReadText(ctx, "/a", WithHeader("X-Extra", "one"), WithAPIKey("call-key")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Files.ReadText(ctx, "/b"); err != nil {
		t.Fatal(err)
	}
	if got := take(); len(got) != 2 || got[0].extra != "one" || got[0].key != "call-key" || got[1].extra != "" || got[1].key != "client-key" {
		t.Errorf("headers = %+v", got)
	}

	// Timeout: the call's, not the client's.
	if _, err := b.Files.ReadText(ctx, "/slow", WithRequestTimeout(50*time.Millisecond), WithMaxRetries(0)); err == nil {
		t.Error("a call slower than its own timeout succeeded")
	}
	if _, err := b.Files.ReadText(ctx, "/slow"); err != nil {
		t.Errorf("the same call with the client's timeout: %v", err)
	}
	take()

	// Retries: a GET is retried twice by default, not at all with 0.
	fail.Store(5)
	_, _ = b.Files.ReadText(ctx, "/r", WithMaxRetries(0))
	if n := len(take()); n != 1 {
		t.Errorf("WithMaxRetries(0): %d attempts", n)
	}
	fail.Store(5)
	_, _ = b.Files.ReadText(ctx, "/r")
	if n := len(take()); n != 3 {
		t.Errorf("client's retries: %d attempts", n)
	}
	// A POST is retried only when the call says it may be.
	fail.Store(1)
	if _, err := b.Exec.Command(ctx, "true"); err == nil {
		t.Error("a POST that got a 503 succeeded without a retry")
	}
	if n := len(take()); n != 1 {
		t.Errorf("POST without WithIdempotent: %d attempts", n)
	}
	fail.Store(1)
	if _, err := b.Exec.Command(ctx, "true", WithIdempotent()); err != nil {
		t.Errorf("POST with WithIdempotent: %v", err)
	}
	if n := len(take()); n != 2 {
		t.Errorf("POST with WithIdempotent: %d attempts", n)
	}
	fail.Store(0)

	// Options of a call reach every request it makes.
	if err := b.Files.DownloadDir(ctx, "/d", t.TempDir(), nil, WithHeader("X-Extra", "tree")); err == nil {
		for _, r := range take() {
			if r.extra != "tree" {
				t.Errorf("a request of DownloadDir without the call's header: %+v", r)
			}
		}
	}
	take()

	// What belongs to a client is refused for a call, before sending.
	if _, err := b.Files.ReadText(ctx, "/x", WithBaseURL("http://elsewhere")); !errors.Is(err, ErrInvalid) {
		t.Errorf("WithBaseURL on a call: %v", err)
	}
	if _, err := b.Files.ReadText(ctx, "/x", WithMaxRetries(-1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("WithMaxRetries(-1) on a call: %v", err)
	}
	if n := len(take()); n != 0 {
		t.Errorf("%d requests sent by refused calls", n)
	}
	if _, err := NewClient(WithAPIKey("k"), WithIdempotent()); !errors.Is(err, ErrInvalid) {
		t.Errorf("WithIdempotent on a client: %v", err)
	}
}

// TestBearerToken checks that WithBearerToken sends Authorization: Bearer
// in place of X-Box-Api-Key, on the client or on one call, that the last
// credential option wins, and that the token stays out of errors, logs
// and redirects to another host.
func TestBearerToken(t *testing.T) {
	const token = "eyJhbGciOi.bearer-s3cr3t.sig"
	srv, last := headerServer(t)
	other, otherHeaders := headerServer(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	t.Setenv(envAPIKey, "env-key")

	cred := func(h http.Header) [2]string { return [2]string{h.Get(headerAPIKey), h.Get("Authorization")} }
	var logs strings.Builder
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := NewClient(WithBaseURL(srv.URL), WithBearerToken(token), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	ping(t, c)
	if got := cred(last()); got != [2]string{"", "Bearer " + token} {
		t.Errorf("with WithBearerToken over UPSTASH_BOX_API_KEY: (key, authorization) = %q", got)
	}
	if strings.Contains(logs.String(), "s3cr3t") || !strings.Contains(logs.String(), `"Authorization":["REDACTED"]`) {
		t.Errorf("the log shows the token, or no redacted Authorization:\n%s", logs.String())
	}

	// One call with the API key, then the client's token again.
	b := c.newBox(&gen.BoxData{ID: "box-1"})
	_, _ = b.Files.ReadText(t.Context(), "/a", WithAPIKey("call-key"))
	if got := cred(last()); got != [2]string{"call-key", ""} {
		t.Errorf("a call with WithAPIKey: (key, authorization) = %q", got)
	}
	ping(t, c)
	if got := cred(last()); got != [2]string{"", "Bearer " + token} {
		t.Errorf("the call after it: (key, authorization) = %q", got)
	}

	// The last credential option wins, on a client and on a call.
	for name, tc := range map[string]struct {
		opts []Option
		want [2]string
	}{
		"token then key": {[]Option{WithBearerToken(token), WithAPIKey("k2")}, [2]string{"k2", ""}},
		"key then token": {[]Option{WithAPIKey("k2"), WithBearerToken("t2")}, [2]string{"", "Bearer t2"}},
	} {
		c2, err := c.Clone(tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ping(t, c2)
		if got := cred(last()); got != tc.want {
			t.Errorf("%s: (key, authorization) = %q, want %q", name, got, tc.want)
		}
	}
	keyClient, err := NewClient(WithBaseURL(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = keyClient.newBox(&gen.BoxData{ID: "box-1"}).Files.ReadText(t.Context(), "/a", WithBearerToken("call-token"))
	if got := cred(last()); got != [2]string{"", "Bearer call-token"} {
		t.Errorf("a call with WithBearerToken: (key, authorization) = %q", got)
	}

	// A redirect to another host does not take the token along.
	rc, err := NewClient(WithBaseURL(redirect.URL), WithBearerToken(token))
	if err != nil {
		t.Fatal(err)
	}
	ping(t, rc)
	if h := otherHeaders(); h == nil || h.Get("Authorization") != "" {
		t.Errorf("after a redirect to another host: headers %v, want no Authorization", h)
	}

	// A token alone is a credential; an empty one is not; a broken one is
	// refused without being repeated.
	unsetEnv(t, envAPIKey)
	if _, err := NewClient(WithBaseURL(srv.URL), WithBearerToken(token)); err != nil {
		t.Errorf("NewClient with a token and no API key: %v", err)
	}
	if _, err := NewClient(WithBaseURL(srv.URL), WithBearerToken("")); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("NewClient(WithBearerToken(\"\")) = %v, want ErrNoAPIKey", err)
	}
	_, err = NewClient(WithBaseURL(srv.URL), WithBearerToken("bad\r\nX-Injected: s3cr3t"))
	if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("NewClient with a token holding CRLF = %v, want ErrInvalid without the token", err)
	}
}
