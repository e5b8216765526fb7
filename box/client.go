package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"

	"github.com/upstash/box-go/gen"
)

// Header names used on every request.
const (
	headerAPIKey            = "X-Box-Api-Key"
	headerAuthorization     = "Authorization"
	headerTelemetrySDK      = "Upstash-Telemetry-Sdk"
	headerTelemetryRuntime  = "Upstash-Telemetry-Runtime"
	headerTelemetryPlatform = "Upstash-Telemetry-Platform"
)

// A Client talks to the Upstash Box API. It is safe for concurrent use and
// cheap to share; build one with [NewClient] and derive variants with
// [Client.Clone].
type Client struct {
	cfg  clientConfig // resolved and validated; the source for Clone
	http *http.Client // the Client's own copy, with a redirect guard for the API key
	do   *transport   // auth, telemetry, timeouts, retries, logging
	api  *gen.Client  // the generated client, sending through do
}

// NewClient returns a Client configured from the environment and opts.
//
// Defaults come from UPSTASH_BOX_API_KEY, UPSTASH_BOX_BASE_URL (else
// [DefaultBaseURL]) and UPSTASH_DISABLE_TELEMETRY; opts are applied on top,
// in order. NewClient sends no request. It fails with an error matching
// [ErrNoAPIKey] when no API key is configured, and with a descriptive error
// for an invalid base URL, header or negative retry count or timeout.
func NewClient(opts ...Option) (*Client, error) {
	return newClient(defaultConfig(), opts)
}

// Clone returns a new Client with c's configuration and opts applied on top,
// e.g. c.Clone(box.WithMaxRetries(0)). The environment is not read again,
// except UPSTASH_DISABLE_TELEMETRY, which always wins. c is not changed.
func (c *Client) Clone(opts ...Option) (*Client, error) {
	return newClient(c.cfg.clone(), opts)
}

func newClient(cfg clientConfig, opts []Option) (*Client, error) {
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}

	// Work on our own copy of the caller's http.Client so it is never
	// mutated; cfg keeps the unguarded copy so Clone starts from it.
	var hc http.Client
	if cfg.httpClient != nil {
		hc = *cfg.httpClient
	}
	hc.CheckRedirect = guardRedirect(hc.CheckRedirect)

	logger := cfg.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	// Headers the transport adds to every request, computed once here.
	// WithHeader values are set last so they can replace the SDK's own.
	header := http.Header{}
	setCredential(header, cfg)
	if cfg.telemetry {
		for k, v := range telemetryHeaders() {
			header.Set(k, v)
		}
	}
	for k, vs := range cfg.header {
		header[k] = append([]string(nil), vs...)
	}

	t := &transport{
		cfg:           cfg,
		client:        &hc,
		header:        header,
		timeout:       cfg.requestTimeout,
		maxRetries:    cfg.maxRetries,
		logger:        logger,
		retryBase:     cfg.retryBase,
		retryMax:      cfg.retryMax,
		retryAfterMax: cfg.retryAfterMax,
		sleep:         cfg.sleep,
		now:           cfg.now,
	}
	api, err := gen.NewClient(cfg.baseURL, gen.WithHTTPClient(t))
	if err != nil {
		return nil, fmt.Errorf("box: %w", err)
	}
	return &Client{cfg: cfg, http: &hc, do: t, api: api}, nil
}

// setCredential sets the header of cfg's credential in h, and removes the
// other one: a bearer token when there is one, else the API key.
func setCredential(h http.Header, cfg clientConfig) {
	if cfg.bearerToken != "" {
		h.Del(headerAPIKey)
		h.Set(headerAuthorization, "Bearer "+cfg.bearerToken)
		return
	}
	h.Del(headerAuthorization)
	h.Set(headerAPIKey, cfg.apiKey)
}

// BaseURL returns the endpoint the Client sends requests to, without a
// trailing slash, e.g. "https://us-east-1.box.upstash.com".
func (c *Client) BaseURL() string { return c.cfg.baseURL }

// httpDoer is the method set the transport exposes. It matches
// oapi-codegen's HttpRequestDoer, so the generated client can send through
// it and get auth, telemetry, timeouts, retries and logging for free.
type httpDoer interface {
	Do(*http.Request) (*http.Response, error)
}

// doer returns the Client's transport. Non-2xx responses are returned as
// responses (after any retries), not as errors; convert them with
// newAPIError.
func (c *Client) doer() httpDoer { return c.do }

// newRequest builds a request for path (which must start with "/" and may
// carry an already-encoded query, e.g. "/v2/box/abc/files?path=%2Fa") on the
// base URL. Path parameters must be escaped by the caller. If body is a
// *bytes.Buffer, *bytes.Reader or *strings.Reader the request can be
// replayed on retry; any other non-nil body disables retries unless
// GetBody is set on the returned request.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.baseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("box: building %s request: %w", method, err)
	}
	return req, nil
}

// send sends req through the transport and returns the response if its
// status is 2xx. Otherwise it consumes and closes the body and returns an
// *Error. The caller must close the body of a returned response.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.do.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newAPIError(resp)
	}
	return resp, nil
}

// telemetryHeaders returns the Upstash-Telemetry-* headers for this process.
func telemetryHeaders() map[string]string {
	return map[string]string{
		headerTelemetrySDK:      "box-go@" + Version,
		headerTelemetryRuntime:  "go@" + strings.TrimPrefix(runtime.Version(), "go"),
		headerTelemetryPlatform: telemetryPlatform(),
	}
}

// telemetryPlatform guesses the hosting platform from well-known
// environment variables, first match wins.
func telemetryPlatform() string {
	switch {
	case os.Getenv("UPSTASH_CONSOLE") != "":
		return "console"
	case os.Getenv("VERCEL") != "":
		return "vercel"
	case os.Getenv("CF_PAGES") != "":
		return "cloudflare"
	case os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != "" || os.Getenv("AWS_REGION") != "":
		return "aws"
	case os.Getenv("CI") != "":
		return "ci"
	default:
		return "unknown"
	}
}

// errTooManyRedirects mirrors net/http's default redirect limit.
var errTooManyRedirects = errors.New("box: stopped after 10 redirects")

// guardRedirect wraps a CheckRedirect policy so the credential (API key
// or bearer token) is not forwarded when a redirect leaves the original
// host or downgrades from https (net/http strips only its own well-known
// credential headers, and only on a change of domain). The wrapped policy,
// or net/http's default of 10 redirects, then decides as before.
func guardRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 {
			first := via[0].URL
			sameHost := strings.EqualFold(req.URL.Host, first.Host)
			upgrade := first.Scheme == "http" && req.URL.Scheme == "https"
			if !sameHost || (req.URL.Scheme != first.Scheme && !upgrade) {
				req.Header.Del(headerAPIKey)
				req.Header.Del(headerAuthorization)
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errTooManyRedirects
		}
		return nil
	}
}
