package box

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Environment variables read by [NewClient] for its defaults.
const (
	envAPIKey           = "UPSTASH_BOX_API_KEY"
	envBaseURL          = "UPSTASH_BOX_BASE_URL"
	envDisableTelemetry = "UPSTASH_DISABLE_TELEMETRY"
)

// DefaultBaseURL is the endpoint used when neither [WithBaseURL] nor
// UPSTASH_BOX_BASE_URL is set.
const DefaultBaseURL = "https://us-east-1.box.upstash.com"

// Defaults of the transport.
const (
	defaultRequestTimeout = 600 * time.Second
	defaultMaxRetries     = 2
	defaultRetryBase      = 500 * time.Millisecond
	defaultRetryMax       = 8 * time.Second
	defaultRetryAfterMax  = 60 * time.Second
	// defaultPollInterval is the wait between polls of a box or snapshot in
	// the creating state, as the official SDKs do.
	defaultPollInterval = 2 * time.Second
)

// ErrNoAPIKey is returned by [NewClient] when no credential was given:
// no API key through [WithAPIKey] or the UPSTASH_BOX_API_KEY environment
// variable, and no token through [WithBearerToken].
var ErrNoAPIKey = errors.New("box: no API key: set UPSTASH_BOX_API_KEY or pass box.WithAPIKey (or box.WithBearerToken)")

// An Option configures a [Client], or one call. Options are applied in
// order on top of the defaults read from the environment, so a later
// option wins over an earlier one and every option wins over the
// environment (except UPSTASH_DISABLE_TELEMETRY, see [WithTelemetry]).
//
// Every call of the SDK takes options as its last arguments, on top of its
// client's: [WithRequestTimeout], [WithMaxRetries], [WithHeader],
// [WithAPIKey], [WithBearerToken] and [WithIdempotent] apply to the
// requests of that call alone:
//
//	run, err := b.Exec.Command(ctx, "make test", box.WithRequestTimeout(30*time.Minute), box.WithMaxRetries(0))
//
// [WithBaseURL], [WithHTTPClient], [WithLogger] and [WithTelemetry] belong
// to a client: given to a call, they make it fail with ErrInvalid before
// anything is sent.
//
// Option is a plain function type rather than an interface: options only set
// fields, and all validation happens once in [NewClient] (or [Client.Clone]),
// which reports every invalid setting together. That keeps each option a
// one-liner and lets the config grow without touching existing options.
type Option func(*clientConfig)

// clientConfig is the resolved configuration of a Client. It is copied by
// value for Clone, so reference-typed fields (header, httpClient) must be
// deep-copied in clone.
type clientConfig struct {
	apiKey         string
	bearerToken    string // WithBearerToken; when set, sent instead of apiKey
	baseURL        string
	httpClient     *http.Client // nil means a fresh client over http.DefaultTransport
	requestTimeout time.Duration
	maxRetries     int
	logger         *slog.Logger // nil means discard
	telemetry      bool
	header         http.Header // extra headers from WithHeader, canonical keys
	idempotent     bool        // WithIdempotent: for a call only

	// Retry tuning; unexported so tests can shrink it.
	retryBase     time.Duration
	retryMax      time.Duration
	retryAfterMax time.Duration
	sleep         func(ctx context.Context, d time.Duration) error // nil means a real timer
	now           func() time.Time                                 // nil means time.Now

	// pollInterval is the wait between polls of a box or snapshot that is
	// still being created; unexported so tests can shrink it.
	pollInterval time.Duration
}

// defaultConfig returns the configuration before any Option: built-in
// defaults overridden by the environment.
func defaultConfig() clientConfig {
	cfg := clientConfig{
		apiKey:         os.Getenv(envAPIKey),
		baseURL:        DefaultBaseURL,
		requestTimeout: defaultRequestTimeout,
		maxRetries:     defaultMaxRetries,
		telemetry:      true,
		header:         http.Header{},
		retryBase:      defaultRetryBase,
		retryMax:       defaultRetryMax,
		retryAfterMax:  defaultRetryAfterMax,
		pollInterval:   defaultPollInterval,
	}
	if v := os.Getenv(envBaseURL); v != "" {
		cfg.baseURL = v
	}
	return cfg
}

// clone returns a deep copy of cfg that can be modified independently.
func (cfg clientConfig) clone() clientConfig {
	cfg.header = cfg.header.Clone()
	if cfg.httpClient != nil {
		hc := *cfg.httpClient
		cfg.httpClient = &hc
	}
	return cfg
}

// validate normalises cfg in place and reports every invalid setting.
func (cfg *clientConfig) validate() error {
	var errs []error
	if cfg.apiKey == "" && cfg.bearerToken == "" {
		errs = append(errs, ErrNoAPIKey)
	}
	// The credentials' values are never repeated in an error.
	if !validHeaderValue(cfg.apiKey) {
		errs = append(errs, invalidf("box: the API key holds a control character"))
	}
	if !validHeaderValue(cfg.bearerToken) {
		errs = append(errs, invalidf("box: the bearer token holds a control character"))
	}
	base, err := normalizeBaseURL(cfg.baseURL)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.baseURL = base
	if cfg.maxRetries < 0 {
		errs = append(errs, invalidf("box: max retries must not be negative, got %d", cfg.maxRetries))
	}
	if cfg.requestTimeout < 0 {
		errs = append(errs, invalidf("box: request timeout must not be negative, got %v", cfg.requestTimeout))
	}
	for k, vs := range cfg.header {
		if !validHeaderName(k) {
			errs = append(errs, invalidf("box: invalid header name %q", k))
			continue
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				errs = append(errs, invalidf("box: invalid value for header %q", k))
			}
		}
	}
	if cfg.idempotent {
		errs = append(errs, invalidf("box: WithIdempotent applies to one call, not to a Client"))
	}
	// UPSTASH_DISABLE_TELEMETRY wins over WithTelemetry(true), whatever its value.
	if _, ok := os.LookupEnv(envDisableTelemetry); ok {
		cfg.telemetry = false
	}
	return errors.Join(errs...)
}

// normalizeBaseURL strips one trailing slash and checks that s is an
// absolute http or https URL without query or fragment.
func normalizeBaseURL(s string) (string, error) {
	s = strings.TrimSuffix(s, "/")
	u, err := url.Parse(s)
	if err != nil {
		return s, invalidf("box: invalid base URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return s, invalidf("box: invalid base URL %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return s, invalidf("box: invalid base URL %q: missing host", s)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return s, invalidf("box: invalid base URL %q: must not have a query or fragment", s)
	}
	return s, nil
}

// WithIdempotent tells a call that its requests may be sent again: the
// SDK then retries a POST or PATCH of it, as it retries a GET, after a
// connection failure or a 5xx. Give it to a call that is safe to repeat
// (one that only reads, or that the server applies once however often it
// comes); it is not an option of a Client.
func WithIdempotent() Option { return func(c *clientConfig) { c.idempotent = true } }

// callOptionsKey carries the options of a call in its context.
type callOptionsKey struct{}

// withCallOptions returns ctx carrying opts, after any options ctx already
// carries, for the transport to apply to every request made with it.
func withCallOptions(ctx context.Context, opts []Option) context.Context {
	if len(opts) == 0 {
		return ctx
	}
	if prev, ok := ctx.Value(callOptionsKey{}).([]Option); ok {
		opts = append(append([]Option(nil), prev...), opts...)
	}
	return context.WithValue(ctx, callOptionsKey{}, opts)
}

func callOptions(ctx context.Context) []Option {
	opts, _ := ctx.Value(callOptionsKey{}).([]Option)
	return opts
}

// WithAPIKey sets the API key sent as X-Box-Api-Key on every request. It
// overrides UPSTASH_BOX_API_KEY, and a [WithBearerToken] given before it.
func WithAPIKey(key string) Option {
	return func(c *clientConfig) { c.apiKey, c.bearerToken = key, "" }
}

// WithBearerToken makes every request carry token as Authorization: Bearer
// <token> instead of an X-Box-Api-Key header, as the newest official SDKs
// send an OAuth access token from an Upstash login. It overrides
// UPSTASH_BOX_API_KEY and a [WithAPIKey] given before it; a later
// WithAPIKey wins over it. boxd takes its own API key as a bearer token
// too. Like the API key, the token is never logged or put in an error,
// and is not sent on a redirect to another host.
func WithBearerToken(token string) Option {
	return func(c *clientConfig) { c.bearerToken, c.apiKey = token, "" }
}

// WithBaseURL sets the endpoint, e.g. "https://us-east-1.box.upstash.com" or
// the URL of a local server. One trailing slash is stripped. It overrides
// UPSTASH_BOX_BASE_URL. [NewClient] rejects anything but an absolute http or
// https URL.
func WithBaseURL(u string) Option {
	return func(c *clientConfig) { c.baseURL = u }
}

// WithHTTPClient makes the Client send requests through a copy of hc, so its
// Transport, Jar and CheckRedirect are used. hc itself is never modified. A
// nil hc restores the default. Note that hc.Timeout, if set, bounds whole
// requests including streamed bodies; prefer [WithRequestTimeout].
func WithHTTPClient(hc *http.Client) Option {
	return func(c *clientConfig) {
		if hc == nil {
			c.httpClient = nil
			return
		}
		cp := *hc
		c.httpClient = &cp
	}
}

// WithRequestTimeout bounds each attempt of a request until its response
// headers arrive (default 600s; 0 means no limit). A response body that has
// started streaming is bounded only by the caller's context, so long-running
// streams are not cut. An attempt that times out fails with an error
// matching [context.DeadlineExceeded], and may be retried.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *clientConfig) { c.requestTimeout = d }
}

// WithMaxRetries sets how many times a failed request may be retried after
// its first attempt (default 2; 0 disables retries; negative is an error).
//
// Only requests that are safe to repeat are retried: GET, HEAD, PUT,
// DELETE and OPTIONS after a connection error, a request timeout, or a 408,
// 429 or 5xx response (except 501 and 505); POST and PATCH only after a 429
// or a failure to connect, since otherwise the server may already have acted
// on them. A request whose body cannot be replayed is never retried. Waits
// grow exponentially from 500ms to 8s with jitter; a Retry-After header
// sets the wait instead, and one asking for more than a minute ends the
// retries. The caller's context bounds everything: if its deadline would
// pass during a wait, the last response or error is returned at once.
func WithMaxRetries(n int) Option {
	return func(c *clientConfig) { c.maxRetries = n }
}

// WithLogger makes the Client log each HTTP attempt and retry decision at
// [slog.LevelDebug]. Logs carry the method, the URL path (query values
// redacted), status, attempt and duration, and never the API key, other
// credentials or bodies. A nil logger (the default) discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) { c.logger = l }
}

// WithTelemetry turns the anonymous Upstash-Telemetry-* headers (SDK
// version, Go version, platform) on or off. They are on by default. If
// UPSTASH_DISABLE_TELEMETRY is set, with any value, they are off regardless
// of this option.
func WithTelemetry(enabled bool) Option {
	return func(c *clientConfig) { c.telemetry = enabled }
}

// WithHeader adds a header to every request, replacing an earlier
// WithHeader for the same key. It also replaces a header the SDK would set
// itself (X-Box-Api-Key, Authorization, Upstash-Telemetry-*). [NewClient] rejects invalid
// names and values.
func WithHeader(key, value string) Option {
	return func(c *clientConfig) {
		if c.header == nil {
			c.header = http.Header{}
		}
		c.header[http.CanonicalHeaderKey(key)] = []string{value}
	}
}

// withRetryBackoff overrides the exponential backoff: the first retry waits
// about base, doubling up to maxDelay; Retry-After values above afterMax are not
// waited for. Unexported: tests use it to keep retries fast.
func withRetryBackoff(base, maxDelay, afterMax time.Duration) Option {
	return func(c *clientConfig) {
		c.retryBase, c.retryMax, c.retryAfterMax = base, maxDelay, afterMax
	}
}

// withPollInterval sets the wait between creation polls.
func withPollInterval(d time.Duration) Option {
	return func(c *clientConfig) { c.pollInterval = d }
}

// withSleep replaces the backoff sleep; tests use it to record delays.
func withSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *clientConfig) { c.sleep = sleep }
}

// withClock replaces time.Now for Retry-After HTTP dates.
func withClock(now func() time.Time) Option {
	return func(c *clientConfig) { c.now = now }
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s has no control characters other than
// horizontal tab, so it cannot split or inject header lines.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
