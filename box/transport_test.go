package box

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/gen"
)

const testAPIKey = "abx_test_0123456789_do_not_log"

// attemptServer serves each request with handler, passing the 1-based
// number of the request.
type attemptServer struct {
	*httptest.Server
	attempts atomic.Int32
}

func newAttemptServer(t *testing.T, handler func(n int, w http.ResponseWriter, r *http.Request)) *attemptServer {
	t.Helper()
	s := &attemptServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler(int(s.attempts.Add(1)), w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// statuses answers the n-th request with codes[n-1], repeating the last.
func statuses(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		code := codes[min(n, len(codes))-1]
		w.WriteHeader(code)
		fmt.Fprintf(w, "attempt %d: %d", n, code)
	}
}

// newTestClient returns a Client for baseURL with millisecond backoff, so
// retry tests are fast; opts are applied last.
func newTestClient(t *testing.T, baseURL string, opts ...Option) *Client {
	t.Helper()
	all := append([]Option{
		WithAPIKey(testAPIKey),
		WithBaseURL(baseURL),
		withRetryBackoff(time.Millisecond, 4*time.Millisecond, time.Minute),
	}, opts...)
	c, err := NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// do sends method path through c's doer and returns the response with its
// body read.
func do(t *testing.T, c *Client, ctx context.Context, method, path string, body io.Reader) (*http.Response, string, error) {
	t.Helper()
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.doer().Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, string(data), err
}

// recordSleeps replaces the backoff sleep with one that only records.
func recordSleeps(got *[]time.Duration) Option {
	var mu sync.Mutex
	return withSleep(func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*got = append(*got, d)
		return ctx.Err()
	})
}

var platformEnv = []string{"UPSTASH_CONSOLE", "VERCEL", "CF_PAGES", "AWS_LAMBDA_FUNCTION_NAME", "AWS_REGION", "CI"}

// headerServer records the headers of the last request.
func headerServer(t *testing.T) (*httptest.Server, func() http.Header) {
	t.Helper()
	var mu sync.Mutex
	var last http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		last = r.Header.Clone()
	}))
	t.Cleanup(srv.Close)
	return srv, func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

func TestAuthAndTelemetryHeaders(t *testing.T) {
	unsetEnv(t, append([]string{envDisableTelemetry}, platformEnv...)...)
	srv, last := headerServer(t)
	c := newTestClient(t, srv.URL)
	ping(t, c)

	h := last()
	want := map[string]string{
		"X-Box-Api-Key":              testAPIKey,
		"Upstash-Telemetry-Sdk":      "box-go@" + Version,
		"Upstash-Telemetry-Runtime":  "go@" + strings.TrimPrefix(runtime.Version(), "go"),
		"Upstash-Telemetry-Platform": "unknown",
	}
	for k, v := range want {
		if got := h.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want [%q]", k, got, v)
		}
	}
	if got := h.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
	if strings.HasPrefix(h.Get("Upstash-Telemetry-Runtime"), "go@go") {
		t.Errorf("runtime header keeps the go prefix: %q", h.Get("Upstash-Telemetry-Runtime"))
	}
}

func TestTelemetryPlatform(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{nil, "unknown"},
		{[]string{"UPSTASH_CONSOLE"}, "console"},
		{[]string{"VERCEL"}, "vercel"},
		{[]string{"CF_PAGES"}, "cloudflare"},
		{[]string{"AWS_LAMBDA_FUNCTION_NAME"}, "aws"},
		{[]string{"AWS_REGION"}, "aws"},
		{[]string{"CI"}, "ci"},
		{[]string{"CI", "VERCEL"}, "vercel"},
		{[]string{"CI", "AWS_REGION", "UPSTASH_CONSOLE"}, "console"},
	}
	srv, last := headerServer(t)
	for _, tt := range tests {
		t.Run(tt.want+"/"+strings.Join(tt.env, "+"), func(t *testing.T) {
			unsetEnv(t, append([]string{envDisableTelemetry}, platformEnv...)...)
			for _, k := range tt.env {
				t.Setenv(k, "1")
			}
			ping(t, newTestClient(t, srv.URL))
			if got := last().Get(headerTelemetryPlatform); got != tt.want {
				t.Errorf("platform = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTelemetryDisabled(t *testing.T) {
	srv, last := headerServer(t)
	check := func(t *testing.T, c *Client) {
		t.Helper()
		ping(t, c)
		h := last()
		for k := range h {
			if strings.HasPrefix(k, "Upstash-Telemetry-") {
				t.Errorf("telemetry header %s sent while disabled", k)
			}
		}
		if h.Get(headerAPIKey) != testAPIKey {
			t.Error("API key missing")
		}
	}
	t.Run("option", func(t *testing.T) {
		unsetEnv(t, envDisableTelemetry)
		check(t, newTestClient(t, srv.URL, WithTelemetry(false)))
	})
	// The environment variable wins over WithTelemetry(true), whatever its
	// value, even empty.
	for _, v := range []string{"", "1", "false"} {
		t.Run("env="+v, func(t *testing.T) {
			t.Setenv(envDisableTelemetry, v)
			c := newTestClient(t, srv.URL, WithTelemetry(true))
			check(t, c)
			clone, err := c.Clone(WithTelemetry(true))
			if err != nil {
				t.Fatal(err)
			}
			check(t, clone)
		})
	}
}

func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, statuses(503, 503, 200))
	c := newTestClient(t, srv.URL) // default: 2 retries

	resp, body, err := do(t, c, t.Context(), http.MethodGet, "/v2/box", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || body != "attempt 3: 200" {
		t.Errorf("got %d %q, want 200 from attempt 3", resp.StatusCode, body)
	}
	if n := srv.attempts.Load(); n != 3 {
		t.Errorf("attempts = %d, want 3", n)
	}
}

func TestMaxRetries(t *testing.T) {
	t.Parallel()
	for _, retries := range []int{0, 1, 3} {
		srv := newAttemptServer(t, statuses(503))
		c := newTestClient(t, srv.URL, WithMaxRetries(retries))
		resp, body, err := do(t, c, t.Context(), http.MethodGet, "/v2/box", nil)
		if err != nil {
			t.Fatal(err)
		}
		// The last response is handed back intact.
		want := fmt.Sprintf("attempt %d: 503", retries+1)
		if resp.StatusCode != 503 || body != want {
			t.Errorf("retries=%d: got %d %q, want 503 %q", retries, resp.StatusCode, body, want)
		}
		if n := srv.attempts.Load(); int(n) != retries+1 {
			t.Errorf("retries=%d: attempts = %d, want %d", retries, n, retries+1)
		}
	}
}

func TestRetryPolicyByMethodAndStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method     string
		status     int
		idempotent bool
		attempts   int
	}{
		{"GET", 500, false, 3},
		{"GET", 502, false, 3},
		{"GET", 504, false, 3},
		{"GET", 408, false, 3},
		{"GET", 429, false, 3},
		{"GET", 501, false, 1},
		{"GET", 505, false, 1},
		{"GET", 400, false, 1},
		{"GET", 404, false, 1},
		{"GET", 409, false, 1},
		{"HEAD", 503, false, 3},
		{"PUT", 503, false, 3},
		{"DELETE", 503, false, 3},
		{"OPTIONS", 503, false, 3},
		{"POST", 500, false, 1},
		{"POST", 503, false, 1},
		{"POST", 408, false, 1},
		{"POST", 429, false, 3},
		{"PATCH", 502, false, 1},
		{"PATCH", 429, false, 3},
		{"POST", 500, true, 3},
		{"PATCH", 503, true, 3},
		{"POST", 400, true, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s_%d_idempotent=%v", tt.method, tt.status, tt.idempotent), func(t *testing.T) {
			t.Parallel()
			srv := newAttemptServer(t, statuses(tt.status))
			c := newTestClient(t, srv.URL)
			ctx := t.Context()
			if tt.idempotent {
				ctx = withIdempotent(ctx)
			}
			resp, _, err := do(t, c, ctx, tt.method, "/v2/box/b1/exec", strings.NewReader(`{"command":["ls"]}`))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if n := srv.attempts.Load(); int(n) != tt.attempts {
				t.Errorf("attempts = %d, want %d", n, tt.attempts)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		retryAfter string
		wantSleeps []time.Duration // nil: check the backoff range instead
		attempts   int
	}{
		{"seconds", "7", []time.Duration{7 * time.Second, 7 * time.Second}, 3},
		{"zero", "0", []time.Duration{0, 0}, 3},
		{"http date", now.Add(30 * time.Second).Format(http.TimeFormat), []time.Duration{30 * time.Second, 30 * time.Second}, 3},
		{"date in the past", now.Add(-time.Hour).Format(http.TimeFormat), []time.Duration{0, 0}, 3},
		{"at the cap", "60", []time.Duration{time.Minute, time.Minute}, 3},
		{"over the cap is not waited for", "61", []time.Duration{}, 1},
		{"date over the cap", now.Add(time.Hour).Format(http.TimeFormat), []time.Duration{}, 1},
		{"malformed falls back to backoff", "soon", nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", tt.retryAfter)
				w.WriteHeader(http.StatusTooManyRequests)
			})
			var sleeps []time.Duration
			c := newTestClient(t, srv.URL,
				withRetryBackoff(500*time.Millisecond, 8*time.Second, time.Minute),
				recordSleeps(&sleeps),
				withClock(func() time.Time { return now }))
			resp, _, err := do(t, c, t.Context(), http.MethodPost, "/v2/box", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 429 {
				t.Errorf("status = %d, want 429", resp.StatusCode)
			}
			if n := srv.attempts.Load(); int(n) != tt.attempts {
				t.Errorf("attempts = %d, want %d", n, tt.attempts)
			}
			if tt.wantSleeps == nil {
				if len(sleeps) != 2 || sleeps[0] < 250*time.Millisecond || sleeps[0] > 500*time.Millisecond ||
					sleeps[1] < 500*time.Millisecond || sleeps[1] > time.Second {
					t.Errorf("sleeps = %v, want backoff around 500ms then 1s", sleeps)
				}
				return
			}
			if fmt.Sprint(sleeps) != fmt.Sprint(tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", sleeps, tt.wantSleeps)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	tr := &transport{retryBase: 500 * time.Millisecond, retryMax: 8 * time.Second}
	nominal := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	for attempt, nom := range nominal {
		for range 200 {
			d := tr.backoff(attempt)
			if d < nom/2 || d > nom {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", attempt, d, nom/2, nom)
			}
		}
	}
	if d := tr.backoff(1000); d < 4*time.Second || d > 8*time.Second {
		t.Errorf("backoff(1000) = %v, want capped at 8s", d)
	}
	zero := &transport{}
	if d := zero.backoff(3); d != 0 {
		t.Errorf("zero backoff = %v", d)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, statuses(503))
	sleeping := make(chan struct{})
	var once sync.Once
	c := newTestClient(t, srv.URL,
		withRetryBackoff(10*time.Second, 10*time.Second, time.Minute),
		withSleep(func(ctx context.Context, d time.Duration) error {
			once.Do(func() { close(sleeping) })
			return sleepCtx(ctx, d) // the real sleep
		}))

	cause := errors.New("user pressed ctrl-c")
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		<-sleeping
		cancel(cause)
	}()
	start := time.Now()
	_, _, err := do(t, c, ctx, http.MethodGet, "/v2/box", nil)
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("Do took %v after cancel, want prompt return", elapsed)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Errorf("err = %v, want context.Canceled with the cause", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v claims a deadline", err)
	}
	if n := srv.attempts.Load(); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}

func TestCancelledBeforeSend(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, statuses(200))
	c := newTestClient(t, srv.URL)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := do(t, c, ctx, http.MethodGet, "/v2/box", nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n := srv.attempts.Load(); n != 0 {
		t.Errorf("attempts = %d, want 0", n)
	}
}

func TestDeadlineShorterThanBackoffReturnsResponse(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, statuses(503))
	c := newTestClient(t, srv.URL, withRetryBackoff(10*time.Second, 10*time.Second, time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	resp, _, err := do(t, c, ctx, http.MethodGet, "/v2/box", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || time.Since(start) > time.Second {
		t.Errorf("got %d after %v, want the 503 at once", resp.StatusCode, time.Since(start))
	}
	if n := srv.attempts.Load(); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}

// slowHeaders blocks requests for which block(n) is true until the client
// goes away or the test ends.
func slowHeaders(t *testing.T, block func(n int) bool) *attemptServer {
	t.Helper()
	release := make(chan struct{})
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if block(n) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		io.WriteString(w, "fast")
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv
}

func TestRequestTimeoutBeforeHeaders(t *testing.T) {
	t.Parallel()
	srv := slowHeaders(t, func(int) bool { return true })
	c := newTestClient(t, srv.URL, WithRequestTimeout(50*time.Millisecond), WithMaxRetries(0))
	start := time.Now()
	_, _, err := do(t, c, t.Context(), http.MethodGet, "/v2/box?token=s3cr3t", nil)
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("timeout took %v", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want DeadlineExceeded and not Canceled", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error text leaks the query: %v", err)
	}
}

func TestRequestTimeoutIsPerAttempt(t *testing.T) {
	t.Parallel()
	// GET: the slow first attempt times out and the retry succeeds.
	srv := slowHeaders(t, func(n int) bool { return n == 1 })
	c := newTestClient(t, srv.URL, WithRequestTimeout(50*time.Millisecond))
	resp, body, err := do(t, c, t.Context(), http.MethodGet, "/v2/box", nil)
	if err != nil || resp.StatusCode != 200 || body != "fast" {
		t.Fatalf("got %v %q %v, want 200 fast", resp, body, err)
	}
	if n := srv.attempts.Load(); n != 2 {
		t.Errorf("GET attempts = %d, want 2", n)
	}

	// POST: the server may have started on it, so no retry.
	srv = slowHeaders(t, func(n int) bool { return n == 1 })
	c = newTestClient(t, srv.URL, WithRequestTimeout(50*time.Millisecond))
	if _, _, err := do(t, c, t.Context(), http.MethodPost, "/v2/box", strings.NewReader("{}")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("POST err = %v, want DeadlineExceeded", err)
	}
	if n := srv.attempts.Load(); n != 1 {
		t.Errorf("POST attempts = %d, want 1", n)
	}
}

func TestRequestTimeoutDoesNotCutStream(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := range 6 {
			time.Sleep(40 * time.Millisecond)
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	})
	c := newTestClient(t, srv.URL, WithRequestTimeout(60*time.Millisecond), WithMaxRetries(0))
	start := time.Now()
	resp, body, err := do(t, c, t.Context(), http.MethodPost, "/v2/box/b1/exec-stream", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("stream cut after %v: %v", time.Since(start), err)
	}
	if resp.StatusCode != 200 || strings.Count(body, "data: ") != 6 {
		t.Errorf("got %d %q, want all 6 events", resp.StatusCode, body)
	}
}

func TestStreamBoundByCallerContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	c := newTestClient(t, srv.URL, WithRequestTimeout(time.Minute))
	ctx, cancel := context.WithCancel(t.Context())
	req, err := c.newRequest(ctx, http.MethodGet, "/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.doer().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line = %q, %v", line, err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("read after cancel: %v, want context.Canceled", err)
	}
}

func TestBodyReplayedOnRetry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(data)+" len="+fmt.Sprint(r.ContentLength))
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	c := newTestClient(t, srv.URL)
	payload := `{"command":["echo","hi"]}`
	resp, _, err := do(t, c, withIdempotent(t.Context()), http.MethodPost, "/v2/box/b1/exec", bytes.NewReader([]byte(payload)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %v, %v; want 200", resp, err)
	}
	want := payload + fmt.Sprintf(" len=%d", len(payload))
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{want, want}, bodies); diff != "" {
		t.Errorf("bodies seen by the server (-want +got):\n%s", diff)
	}
}

func TestNoRetryWithoutGetBody(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, statuses(503, 200))
	c := newTestClient(t, srv.URL)
	req, err := c.newRequest(t.Context(), http.MethodPut, "/v2/box/b1/files", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A body net/http cannot rewind, so GetBody stays nil.
	req.Body = io.NopCloser(io.MultiReader(strings.NewReader("part1"), strings.NewReader("part2")))
	resp, err := c.doer().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("status = %d, want 503", resp.StatusCode)
	}
	if n := srv.attempts.Load(); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}

func TestPostRetriedAfterDialError(t *testing.T) {
	t.Parallel()
	var bodies []string
	var mu sync.Mutex
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(data))
		mu.Unlock()
	})
	var dials atomic.Int32
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused (simulated)")}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	c := newTestClient(t, srv.URL, WithHTTPClient(&http.Client{Transport: tr}))
	resp, _, err := do(t, c, t.Context(), http.MethodPost, "/v2/box", strings.NewReader(`{"name":"x"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %v, %v; want 200 after a retry", resp, err)
	}
	if d, n := dials.Load(), srv.attempts.Load(); d != 2 || n != 1 {
		t.Errorf("dials = %d, server requests = %d; want 2, 1", d, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || bodies[0] != `{"name":"x"}` {
		t.Errorf("server saw bodies %q", bodies)
	}
}

func TestConnectionDroppedAfterSend(t *testing.T) {
	t.Parallel()
	hangUp := func(n int, w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	for _, tt := range []struct {
		method   string
		attempts int
	}{{"GET", 3}, {"POST", 1}} {
		srv := newAttemptServer(t, hangUp)
		c := newTestClient(t, srv.URL)
		_, _, err := do(t, c, t.Context(), tt.method, "/v2/box?token=s3cr3t", strings.NewReader("{}"))
		if err == nil {
			t.Fatalf("%s: no error for a dropped connection", tt.method)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: err = %v, looks like a context error", tt.method, err)
		}
		if !strings.HasPrefix(err.Error(), "box: "+tt.method+" /v2/box: ") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: err = %q, want method and path without the query", tt.method, err)
		}
		if n := srv.attempts.Load(); int(n) != tt.attempts {
			t.Errorf("%s: attempts = %d, want %d", tt.method, n, tt.attempts)
		}
	}
}

func TestHeadersOnEveryAttempt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(headerAPIKey)+"|"+r.Header.Get("X-Extra"))
		mu.Unlock()
		if n < 3 {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	c := newTestClient(t, srv.URL, WithHeader("X-Extra", "1"))
	if _, _, err := do(t, c, t.Context(), http.MethodGet, "/v2/box", nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := testAPIKey + "|1"
	if diff := cmp.Diff([]string{want, want, want}, keys); diff != "" {
		t.Errorf("headers per attempt (-want +got):\n%s", diff)
	}
}

func TestRedirectDoesNotLeakAPIKey(t *testing.T) {
	t.Parallel()
	other, otherHeaders := headerServer(t)
	sameHostKey := make(chan string, 1)
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/elsewhere":
			http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, "/here", http.StatusFound)
		case "/here":
			sameHostKey <- r.Header.Get(headerAPIKey)
		}
	})
	c := newTestClient(t, srv.URL)

	if resp, _, err := do(t, c, t.Context(), http.MethodGet, "/elsewhere", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("cross-host redirect: %v, %v", resp, err)
	}
	if h := otherHeaders(); h.Get(headerAPIKey) != "" {
		t.Error("API key was forwarded to another host")
	}
	if resp, _, err := do(t, c, t.Context(), http.MethodGet, "/moved", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("same-host redirect: %v, %v", resp, err)
	}
	if got := <-sameHostKey; got != testAPIKey {
		t.Errorf("same-host redirect carried key %q, want it kept", got)
	}
}

func TestUpgradeResponseStaysWritable(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(rw, buf); err == nil {
			rw.Write(buf)
			rw.Flush()
		}
	})
	c := newTestClient(t, srv.URL, WithRequestTimeout(time.Minute))
	req, err := c.newRequest(t.Context(), http.MethodGet, "/upgrade", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := c.doer().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		t.Fatalf("status %d, writable body %v", resp.StatusCode, ok)
	}
	if _, err := rwc.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(rwc, buf); err != nil || string(buf) != "hello" {
		t.Errorf("echo = %q, %v", buf, err)
	}
}

func TestLogsAreRedacted(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, statuses(503, 200))
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newTestClient(t, srv.URL, WithLogger(logger),
		WithHeader("X-Session-Token", "hdr-s3cr3t"),
		WithHeader("Authorization", "Basic YXV0aC1zM2NyM3Q="))

	_, _, err := do(t, c, withIdempotent(t.Context()), http.MethodPost,
		"/v2/box/b1/files/download?path=%2Fwork%2Fq-s3cr3t&sig=sig-s3cr3t", strings.NewReader(`{"body":"body-s3cr3t"}`))
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, secret := range []string{testAPIKey, "s3cr3t", "YXV0aC1zM2NyM3Q"} {
		if strings.Contains(out, secret) {
			t.Errorf("log output contains %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{
		`"method":"POST"`,
		`"url":"/v2/box/b1/files/download?path=REDACTED&sig=REDACTED"`,
		`"attempt":1`, `"attempt":2`, `"status":503`, `"status":200`,
		`"duration":`, `"msg":"box: retrying request"`, `"X-Box-Api-Key":["REDACTED"]`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %s:\n%s", want, out)
		}
	}
}

func TestRedactHeaders(t *testing.T) {
	t.Parallel()
	in := http.Header{
		"X-Box-Api-Key":         {"abx_1"},
		"Authorization":         {"Bearer t"},
		"Proxy-Authorization":   {"Basic p"},
		"Cookie":                {"a=1", "b=2"},
		"X-Session-Token":       {"tok"},
		"X-Client-Secret":       {"sec"},
		"X-Db-Password":         {"pw"},
		"X-Amz-Security-Key":    {"k"},
		"Content-Type":          {"application/json"},
		"Upstash-Telemetry-Sdk": {"box-go@0.1.0"},
		"Accept":                {"*/*"},
	}
	orig := in.Clone()
	want := http.Header{
		"X-Box-Api-Key":         {"REDACTED"},
		"Authorization":         {"REDACTED"},
		"Proxy-Authorization":   {"REDACTED"},
		"Cookie":                {"REDACTED", "REDACTED"},
		"X-Session-Token":       {"REDACTED"},
		"X-Client-Secret":       {"REDACTED"},
		"X-Db-Password":         {"REDACTED"},
		"X-Amz-Security-Key":    {"REDACTED"},
		"Content-Type":          {"application/json"},
		"Upstash-Telemetry-Sdk": {"box-go@0.1.0"},
		"Accept":                {"*/*"},
	}
	got := redactHeaders(in)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("redactHeaders (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orig, in); diff != "" {
		t.Errorf("redactHeaders modified its input:\n%s", diff)
	}
	got["Accept"][0] = "changed"
	if in.Get("Accept") != "*/*" {
		t.Error("redactHeaders shares value slices with its input")
	}
	if len(redactHeaders(nil)) != 0 {
		t.Error("redactHeaders(nil) not empty")
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://h/v2/box":                       "/v2/box",
		"https://h/v2/box/a%2Fb/files?path=%2Fx": "/v2/box/a%2Fb/files?path=REDACTED",
		"https://h/x?a=1&b&c=":                   "/x?a=REDACTED&b&c=REDACTED",
	} {
		req, err := http.NewRequest(http.MethodGet, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := redactURL(req.URL); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewRequest(t *testing.T) {
	t.Parallel()
	c := newTestClient(t, "https://box.example.com/prefix/")
	for path, want := range map[string]string{
		"/v2/box":                    "https://box.example.com/prefix/v2/box",
		"v2/box":                     "https://box.example.com/prefix/v2/box",
		"/v2/box/b1/files?path=a":    "https://box.example.com/prefix/v2/box/b1/files?path=a",
		"/v2/box/settings/env/A%2FB": "https://box.example.com/prefix/v2/box/settings/env/A%2FB",
	} {
		req, err := c.newRequest(t.Context(), http.MethodGet, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := req.URL.String(); got != want {
			t.Errorf("newRequest(%q) URL = %q, want %q", path, got, want)
		}
	}
	req, err := c.newRequest(t.Context(), http.MethodPost, "/v2/box", strings.NewReader("{}"))
	if err != nil || req.GetBody == nil {
		t.Errorf("newRequest with a strings.Reader: GetBody nil or %v", err)
	}
	if _, err := c.newRequest(t.Context(), "BAD METHOD", "/v2/box", nil); err == nil {
		t.Error("newRequest accepted an invalid method")
	}
}

func TestSleepCtx(t *testing.T) {
	t.Parallel()
	if err := sleepCtx(t.Context(), time.Millisecond); err != nil {
		t.Errorf("short sleep: %v", err)
	}
	if err := sleepCtx(t.Context(), 0); err != nil {
		t.Errorf("zero sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled sleep: %v", err)
	}
}

func TestDoerMatchesGeneratedClientInterface(t *testing.T) {
	t.Parallel()
	c := newTestClient(t, "https://box.example.com")
	var _ interface {
		Do(*http.Request) (*http.Response, error)
	} = c.doer()
	if c.doer() == nil {
		t.Fatal("doer() is nil")
	}
}

// TestOfficialURLEncoding checks the request line as the server receives
// it: path parameters and query values are spelled as the official SDKs'
// encodeURIComponent spells them.
func TestOfficialURLEncoding(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lines []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lines = append(lines, r.Method+" "+r.RequestURI)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":"","labels":[],"message":"ok"}`)
	}))
	defer ts.Close()
	c, err := NewClient(WithAPIKey("k"), WithBaseURL(ts.URL), WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	b := c.newBox(&gen.BoxData{ID: "box-1", Status: gen.BoxStatusIdle})
	ctx := t.Context()
	const odd = "sp ace+a&b=c%d:e@f#g?h/é"
	_, _ = b.Files.ReadText(ctx, "/"+odd)
	_, _ = b.Labels.Remove(ctx, "env:prod")
	_ = c.SetEnv(ctx, "A:B @é/+", "v")
	_, _ = b.Files.List(ctx, "/dir with space")
	// A path segment with every character that needs care: the box id.
	ob := c.newBox(&gen.BoxData{ID: odd, Status: gen.BoxStatusIdle})
	const encoded = "sp%20ace%2Ba%26b%3Dc%25d%3Ae%40f%23g%3Fh%2F%C3%A9"
	_, _ = ob.Files.ReadText(ctx, "x")
	_, _ = ob.Exec.Command(ctx, "true")
	_ = ob.Files.Write(ctx, "big", make([]byte, 100<<10))
	if s, err := ob.Exec.Session(ctx, &SessionParams{Cmd: "true"}); err == nil {
		s.Close()
	}
	want := []string{
		"GET /v2/box/box-1/files/read?path=%2Fsp%20ace%2Ba%26b%3Dc%25d%3Ae%40f%23g%3Fh%2F%C3%A9",
		"DELETE /v2/box/box-1/config/labels/env%3Aprod",
		"PUT /v2/box/settings/env/A%3AB%20%40%C3%A9%2F%2B",
		"GET /v2/box/box-1/files/list?folder=%2Fdir%20with%20space",
		"GET /v2/box/" + encoded + "/files/read?path=%2Fworkspace%2Fhome%2Fx",
		"POST /v2/box/" + encoded + "/exec",
		"POST /v2/box/" + encoded + "/files/upload",
		"GET /v2/box/" + encoded + "/exec-session",
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("request lines (-want +got):\n%s", diff)
	}
	// The playlist URL is handed out, not sent: it is spelled the same.
	rec := ob.Browser.Recordings.recording(&gen.Recording{ID: odd})
	if want := ts.URL + "/v2/box/" + encoded + "/browser/recordings/" + encoded + "/playlist"; rec.PlaylistURL != want {
		t.Errorf("PlaylistURL = %s, want %s", rec.PlaylistURL, want)
	}
}

func TestEncodeURIComponent(t *testing.T) {
	t.Parallel()
	// What JavaScript's encodeURIComponent gives for each.
	for in, want := range map[string]string{
		"abcXYZ019":            "abcXYZ019",
		"-_.!~*'()":            "-_.!~*'()",
		" +&=%:@#?/":           "%20%2B%26%3D%25%3A%40%23%3F%2F",
		"é✓":                   "%C3%A9%E2%9C%93",
		"[a]{b}|c\\d^e`f\"g<>": "%5Ba%5D%7Bb%7D%7Cc%5Cd%5Ee%60f%22g%3C%3E",
	} {
		if got := encodeURIComponent(in); got != want {
			t.Errorf("encodeURIComponent(%q) = %q, want %q", in, got, want)
		}
	}
}
