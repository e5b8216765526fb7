package box

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// transport sends requests for a Client. Do adds the API key, telemetry and
// WithHeader headers, bounds each attempt until its response headers
// arrive, retries what is safe to retry, and logs at debug level.
//
// Do has exactly the method set of oapi-codegen's HttpRequestDoer, so the
// generated client can use it directly. Like http.Client, it returns non-2xx
// responses as responses (the last one, once retries are exhausted) and
// reserves errors for requests that got no response.
type transport struct {
	// cfg is the client's configuration, which a call's own options
	// change for that call (see forCall).
	cfg        clientConfig
	idempotent bool // set for one call by WithIdempotent
	client     *http.Client
	header     http.Header // added to each request unless the request sets the key itself
	timeout    time.Duration
	maxRetries int
	logger     *slog.Logger

	retryBase     time.Duration
	retryMax      time.Duration
	retryAfterMax time.Duration
	sleep         func(ctx context.Context, d time.Duration) error // nil: sleepCtx
	now           func() time.Time                                 // nil: time.Now
}

// idempotentKey marks a context whose POST/PATCH requests may be retried.
type idempotentKey struct{}

// withIdempotent marks requests made with the returned context as safe to
// repeat, so the transport retries them like a GET even when the method is
// POST or PATCH (for example a POST that only reads, or one the server
// deduplicates).
func withIdempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}

func isIdempotent(ctx context.Context) bool {
	v, _ := ctx.Value(idempotentKey{}).(bool)
	return v
}

// Do sends req, retrying as described on [WithMaxRetries]. The caller must
// close the body of the returned response. req itself is not modified; its
// body is consumed, and replayed on retries through req.GetBody.
func (t *transport) Do(req *http.Request) (*http.Response, error) {
	if opts := callOptions(req.Context()); len(opts) > 0 {
		ct, err := t.forCall(opts)
		if err != nil {
			return nil, fmt.Errorf("box: %s %s: %w", req.Method, req.URL.EscapedPath(), err)
		}
		return ct.do(req)
	}
	return t.do(req)
}

// forCall returns the transport of one call: the client's, changed by the
// call's own options.
func (t *transport) forCall(opts []Option) (*transport, error) {
	cfg := t.cfg
	cfg.header = t.cfg.header.Clone()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.baseURL != t.cfg.baseURL || cfg.httpClient != t.cfg.httpClient || cfg.logger != t.cfg.logger || cfg.telemetry != t.cfg.telemetry {
		return nil, invalidf("box: WithBaseURL, WithHTTPClient, WithLogger and WithTelemetry apply to a Client, not to one call")
	}
	idem := cfg.idempotent
	cfg.idempotent = false
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ct := *t
	ct.timeout, ct.maxRetries, ct.idempotent = cfg.requestTimeout, cfg.maxRetries, idem
	ct.header = t.header.Clone()
	setCredential(ct.header, cfg)
	for k, vs := range cfg.header {
		ct.header[k] = append([]string(nil), vs...)
	}
	return &ct, nil
}

func (t *transport) do(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	path := req.URL.EscapedPath()
	// A request can be sent again only if its body can be produced again.
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	safe := safeMethod(req.Method) || isIdempotent(ctx) || t.idempotent

	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("box: %s %s: %w", req.Method, path, ctxErr(ctx))
		}
		r, err := t.prepare(ctx, req, attempt)
		if err != nil {
			return nil, fmt.Errorf("box: %s %s: %w", req.Method, path, err)
		}

		start := time.Now()
		resp, err := t.roundTrip(ctx, r)
		t.logAttempt(ctx, r, attempt, time.Since(start), resp, err)

		if err != nil && ctx.Err() != nil {
			// The caller gave up; say so rather than report a
			// transport error that the cancellation caused.
			return nil, fmt.Errorf("box: %s %s: %w", req.Method, path, ctxErr(ctx))
		}
		reason := retryReason(resp, err, safe)
		if reason == "" || !replayable || attempt >= t.maxRetries {
			if err != nil {
				return nil, fmt.Errorf("box: %s %s: %w", req.Method, path, unwrapURLError(err))
			}
			return resp, nil
		}
		delay, ok := t.retryDelay(attempt, resp)
		if !ok {
			// Retry-After asks for more than we are willing to wait:
			// hand the response to the caller, whose *Error carries it.
			return resp, nil
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
			// The retry could not finish in time; the real outcome
			// is more useful than a deadline error after a wait.
			if err != nil {
				return nil, fmt.Errorf("box: %s %s: %w", req.Method, path, unwrapURLError(err))
			}
			return resp, nil
		}
		if resp != nil {
			drainAndClose(resp.Body)
		}
		t.logger.LogAttrs(ctx, slog.LevelDebug, "box: retrying request",
			slog.String("method", req.Method),
			slog.String("url", redactURL(req.URL)),
			slog.Int("next_attempt", attempt+2),
			slog.Duration("delay", delay),
			slog.String("reason", reason),
		)
		if err := t.doSleep(ctx, delay); err != nil {
			if ctx.Err() != nil {
				err = ctxErr(ctx)
			}
			return nil, fmt.Errorf("box: %s %s: %w", req.Method, path, err)
		}
	}
}

// prepare returns the request for one attempt: a clone of req bound to ctx,
// with a fresh body on retries and the client's headers filled in where the
// request does not set them itself.
func (t *transport) prepare(ctx context.Context, req *http.Request, attempt int) (*http.Request, error) {
	r := req.Clone(ctx)
	officialEncoding(r.URL)
	if attempt > 0 && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("replaying request body: %w", err)
		}
		r.Body = body
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	for k, vs := range t.header {
		if _, ok := r.Header[k]; !ok {
			r.Header[k] = append([]string(nil), vs...)
		}
	}
	return r, nil
}

// officialEncoding re-encodes u's path segments and query values as the
// official SDKs send them, with JavaScript's encodeURIComponent: a space
// is %20 (not +) in a query, and ':' and '@' are escaped in a path
// segment. The meaning is unchanged; only the spelling is the official
// one, the only one the cloud has been seen to receive.
func officialEncoding(u *url.URL) {
	segs := strings.Split(u.EscapedPath(), "/")
	for i, seg := range segs {
		if d, err := url.PathUnescape(seg); err == nil {
			segs[i] = encodeURIComponent(d)
		}
	}
	raw := strings.Join(segs, "/")
	if p, err := url.PathUnescape(raw); err == nil {
		u.Path, u.RawPath = p, raw
	}
	if u.RawQuery == "" {
		return
	}
	pairs := strings.Split(u.RawQuery, "&")
	for i, kv := range pairs {
		k, v, hasV := strings.Cut(kv, "=")
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			continue
		}
		pairs[i] = encodeURIComponent(dk)
		if hasV {
			pairs[i] += "=" + encodeURIComponent(dv)
		}
	}
	u.RawQuery = strings.Join(pairs, "&")
}

// encodeURIComponent escapes s as JavaScript's encodeURIComponent does:
// every byte but ASCII letters, digits and -_.!~*'() as %XX of its UTF-8.
func encodeURIComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// roundTrip sends one attempt. The request timeout covers only the wait for
// response headers: a timer cancels the attempt's context if it fires
// first; once headers are in, the timer is stopped and the body is bound
// only to ctx, so a long stream is never cut by it.
func (t *transport) roundTrip(ctx context.Context, r *http.Request) (*http.Response, error) {
	if t.timeout <= 0 {
		return t.client.Do(r)
	}
	actx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(t.timeout, cancel)
	resp, err := t.client.Do(r.WithContext(actx))
	if !timer.Stop() {
		// The timer fired (or is firing): whatever came back is
		// cancelled or about to be.
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("request timeout: no response headers within %v: %w", t.timeout, context.DeadlineExceeded)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = wrapBody(resp.Body, cancel)
	return resp, nil
}

// wrapBody releases the attempt's context when the body is closed. It keeps
// io.Writer for 101 Switching Protocols responses, whose body is the
// upgraded connection.
func wrapBody(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if rwc, ok := body.(io.ReadWriteCloser); ok {
		return &cancelRWBody{rwc: rwc, cancel: cancel}
	}
	return &cancelBody{rc: body, cancel: cancel}
}

type cancelBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) { return b.rc.Read(p) }

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}

type cancelRWBody struct {
	rwc    io.ReadWriteCloser
	cancel context.CancelFunc
}

func (b *cancelRWBody) Read(p []byte) (int, error)  { return b.rwc.Read(p) }
func (b *cancelRWBody) Write(p []byte) (int, error) { return b.rwc.Write(p) }

func (b *cancelRWBody) Close() error {
	err := b.rwc.Close()
	b.cancel()
	return err
}

// safeMethod reports whether repeating method cannot change the outcome
// (RFC 9110 idempotent methods).
func safeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete,
		http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// retryReason says why an attempt should be retried, or returns "" when it
// should not. safe means the request may be repeated even if the server
// might have seen it.
//
//   - A transport error is retried for safe requests; for others only when
//     it happened while dialling, so the request never left this process.
//     Certificate errors are never retried.
//   - 429 is retried for every method: the server refused the request
//     before processing it.
//   - 408 and 5xx (except 501 and 505, which will not change on retry) are
//     retried for safe requests only.
func retryReason(resp *http.Response, err error, safe bool) string {
	if err != nil {
		switch {
		case isCertError(err):
			return ""
		case safe:
			return "connection error"
		case isDialError(err):
			return "dial error"
		}
		return ""
	}
	code := resp.StatusCode
	switch {
	case code == http.StatusTooManyRequests:
		return "status 429"
	case !safe:
		return ""
	case code == http.StatusRequestTimeout,
		code >= 500 && code <= 599 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported:
		return fmt.Sprintf("status %d", code)
	}
	return ""
}

func isDialError(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

func isCertError(err error) bool {
	var (
		verifyErr  *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
	)
	return errors.As(err, &verifyErr) || errors.As(err, &unknownCA) ||
		errors.As(err, &hostErr) || errors.As(err, &invalidErr)
}

// retryDelay returns how long to wait before retry number attempt+1. A
// Retry-After header wins over the computed backoff; ok is false when it
// asks for longer than retryAfterMax, in which case retrying is pointless.
func (t *transport) retryDelay(attempt int, resp *http.Response) (d time.Duration, ok bool) {
	if resp != nil {
		if ra, present := parseRetryAfter(resp.Header, t.clock()); present {
			if ra > t.retryAfterMax {
				return 0, false
			}
			return ra, true
		}
	}
	return t.backoff(attempt), true
}

// backoff is exponential with equal jitter: the nominal delay
// retryBase·2^attempt, capped at retryMax, of which the first half is
// always waited and the second half is random. Waiting at least half keeps
// retries from bunching up at zero while the jitter still spreads clients.
func (t *transport) backoff(attempt int) time.Duration {
	d := t.retryBase
	for i := 0; i < attempt && d < t.retryMax; i++ {
		d *= 2
	}
	d = min(d, t.retryMax)
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

func (t *transport) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

func (t *transport) doSleep(ctx context.Context, d time.Duration) error {
	if t.sleep != nil {
		return t.sleep(ctx, d)
	}
	return sleepCtx(ctx, d)
}

// sleepCtx waits for d or until ctx is done, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// ctxErr returns ctx.Err(), joined with the cancellation cause when one was
// given, so errors.Is finds both.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// unwrapURLError drops the *url.Error layer added by http.Client, whose
// text repeats the full URL including its query; the wrapped cause (for
// example a *net.OpError) stays reachable.
func unwrapURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) && uerr.Err != nil {
		return uerr.Err
	}
	return err
}

// drainAndClose reads a little of body so the connection can be reused,
// then closes it. Bodies larger than the limit just cost their connection.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	_ = body.Close()
}

func (t *transport) logAttempt(ctx context.Context, r *http.Request, attempt int, d time.Duration, resp *http.Response, err error) {
	if !t.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("url", redactURL(r.URL)),
		slog.Int("attempt", attempt+1),
		slog.Duration("duration", d),
		slog.Any("headers", redactHeaders(r.Header)),
	}
	if resp != nil {
		attrs = append(attrs, slog.Int("status", resp.StatusCode))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", unwrapURLError(err).Error()))
	}
	t.logger.LogAttrs(ctx, slog.LevelDebug, "box: http request", attrs...)
}

// redactURL returns the escaped path of u followed by its query with every
// value replaced, so logs keep the shape of a request but not its tokens.
func redactURL(u *url.URL) string {
	s := u.EscapedPath()
	if u.RawQuery == "" {
		return s
	}
	parts := strings.Split(u.RawQuery, "&")
	for i, p := range parts {
		if k, _, ok := strings.Cut(p, "="); ok {
			parts[i] = k + "=" + redacted
		}
	}
	return s + "?" + strings.Join(parts, "&")
}

const redacted = "REDACTED"

// sensitiveHeaderWords are substrings (lower case) of header names whose
// values must never be logged.
var sensitiveHeaderWords = []string{"auth", "key", "token", "secret", "password", "cookie", "signature"}

// redactHeaders returns a copy of h in which the value of every header whose
// name suggests a credential (X-Box-Api-Key, Authorization, Cookie, any
// name containing token, key, secret, password or auth) is replaced.
func redactHeaders(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		if isSensitiveHeader(k) {
			red := make([]string, len(vs))
			for i := range red {
				red[i] = redacted
			}
			out[k] = red
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func isSensitiveHeader(name string) bool {
	lower := strings.ToLower(name)
	for _, w := range sensitiveHeaderWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}
