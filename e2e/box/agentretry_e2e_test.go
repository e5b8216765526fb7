package box_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// runFront stands in front of a boxd and counts the run requests that
// reach the server side; it can answer the next ones 503 itself, as a
// gateway in front of the API would.
type runFront struct {
	runs       atomic.Int64 // POST …/run/stream requests received
	refuse     atomic.Int64 // how many of the next ones to refuse
	refuseWith atomic.Int64 // the status they are refused with (0: 503)
	cut        atomic.Int64 // how many of the next streams to cut after run_start
	dials      atomic.Int64 // connections the client tried to open
	noDials    atomic.Int64 // how many of the next dials to refuse
}

// newRunFront serves srv's API through a counting front and returns a
// client of the front whose box b is, and the front. Every request of the
// client opens a new connection, so a refused dial fails exactly one.
func newRunFront(t *testing.T, srv *boxtest.Server, b *box.Box) (*box.Box, *runFront) {
	t.Helper()
	f := &runFront{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/run/stream") {
			f.runs.Add(1)
			if takeOne(&f.refuse) {
				code := cmp.Or(int(f.refuseWith.Load()), http.StatusServiceUnavailable)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				_, _ = w.Write([]byte(`{"error":"refused by the front"}`))
				return
			}
			if takeOne(&f.cut) {
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				srv.Backend().ServeHTTP(&cutAfterStart{ResponseWriter: w, cancel: cancel}, r.WithContext(ctx))
				return
			}
		}
		srv.Backend().ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	// A unix socket with nobody listening: dialling it is refused by the
	// kernel, a real connect failure with no port another test could take.
	dead := filepath.Join(t.TempDir(), "dead.sock")
	l, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	var d net.Dialer
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		f.dials.Add(1)
		if takeOne(&f.noDials) {
			return d.DialContext(ctx, "unix", dead)
		}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := box.NewClient(box.WithAPIKey(srv.APIKey()), box.WithBaseURL(ts.URL), box.WithTelemetry(false), box.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := c.Get(t.Context(), b.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return fb, f
}

// cutAfterStart passes a run stream through until its run_start event
// has reached the client, then closes the connection, as a network that
// fails mid-stream would: the client sees its stream end without a
// terminal event, and boxd sees a client that went away.
type cutAfterStart struct {
	http.ResponseWriter
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   []byte
	done   bool
}

var errCut = errors.New("the front cut the connection")

func (c *cutAfterStart) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return 0, errCut
	}
	n, err := c.ResponseWriter.Write(p)
	c.seen = append(c.seen, p[:n]...)
	if i := bytes.Index(c.seen, []byte("event: run_start\n")); i >= 0 && bytes.Contains(c.seen[i:], []byte("\n\n")) {
		c.cutLocked()
	}
	return n, err
}

// cutLocked sends what was written, then closes the connection.
func (c *cutAfterStart) cutLocked() {
	c.done = true
	rc := http.NewResponseController(c.ResponseWriter)
	_ = rc.Flush()
	if conn, _, err := rc.Hijack(); err == nil {
		conn.Close()
	}
	c.cancel()
}

func (c *cutAfterStart) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		_ = http.NewResponseController(c.ResponseWriter).Flush()
	}
}

// takeOne decrements n if it is positive and reports whether it did.
func takeOne(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// agentRunsWith returns the box's agent run records for prompt.
func agentRunsWith(t *testing.T, b *box.Box, prompt string) []box.RunRecord {
	t.Helper()
	runs, err := b.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []box.RunRecord
	for _, r := range runs {
		if r.Type == "agent" && r.Prompt == prompt {
			out = append(out, r)
		}
	}
	return out
}

// TestAgentRunTimeoutAndRetries checks what Agent.Run sends again: a run
// that started is never run a second time (a timeout, a cancel, a failure
// the run reported), a request that could not have started one is
// (a refused connection, a 503 before the stream), and Timeout is one
// deadline over every attempt.
func TestAgentRunTimeoutAndRetries(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	own := newAgentBox(t, srv, "")
	b, front := newRunFront(t, srv, own)
	ctx := t.Context()

	// A run that never finishes, with retries: one run request, and the
	// call returns when Timeout passes.
	const timeout = 3 * time.Second
	prompt := "sleep 3600"
	start := time.Now()
	run, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: prompt, Timeout: timeout, MaxRetries: 3})
	took := time.Since(start)
	if !errors.Is(err, box.ErrRunTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("never-ending run: %v", err)
	}
	if took < timeout || took > timeout+time.Second {
		t.Errorf("the call returned after %v; want just after the %v timeout", took, timeout)
	}
	if n := front.runs.Load(); n != 1 {
		t.Errorf("%d run requests reached the server; want 1", n)
	}
	if recs := agentRunsWith(t, own, prompt); len(recs) != 1 || run == nil || recs[0].ID != run.ID || run.Status != box.RunCancelled {
		t.Fatalf("run %+v, server records %+v", run, recs)
	}
	// The run goes on in the box until it is stopped by id.
	if err := b.CancelRun(ctx, run.ID); err != nil {
		t.Fatalf("CancelRun after the timeout: %v", err)
	}
	waitFor(t, "the timed-out run to be recorded as cancelled", func() bool {
		return agentRunsWith(t, own, prompt)[0].Status == box.RunCancelled
	})

	// A connection that cannot be opened never reached the server: it is
	// retried, after the 1 s backoff (the transport's own retries are off,
	// so that the retry is Agent.Run's).
	front.runs.Store(0)
	front.dials.Store(0)
	front.noDials.Store(1)
	start = time.Now()
	run, err = b.Agent.Run(ctx, &box.AgentParams{Prompt: `json {"try":"dial"}`, MaxRetries: 1}, box.WithMaxRetries(0))
	if err != nil || run.Result != `{"try":"dial"}` || run.Status != box.RunCompleted {
		t.Fatalf("after a refused connection: %+v, %v", run, err)
	}
	if d, n := front.dials.Load(), front.runs.Load(); d != 2 || n != 1 {
		t.Errorf("%d dials and %d run requests; want 2 dials (one refused) and 1 request", d, n)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("retried after %v; want the 1 s backoff", took)
	}
	// Without MaxRetries the refused connection is the answer.
	front.noDials.Store(1)
	var opErr *net.OpError
	if _, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: `json {"try":"once"}`}, box.WithMaxRetries(0)); !errors.As(err, &opErr) || opErr.Op != "dial" {
		t.Errorf("a refused connection without retries: %v", err)
	}

	// A 503 before the stream opens is retried too; the server saw two
	// requests and ran one.
	front.runs.Store(0)
	front.refuse.Store(1)
	prompt = `json {"try":"503"}`
	run, err = b.Agent.Run(ctx, &box.AgentParams{Prompt: prompt, MaxRetries: 2})
	if err != nil || run.Result != `{"try":"503"}` {
		t.Fatalf("after a 503: %+v, %v", run, err)
	}
	if n, recs := front.runs.Load(), agentRunsWith(t, own, prompt); n != 2 || len(recs) != 1 {
		t.Errorf("%d run requests, %d runs; want 2 and 1", n, len(recs))
	}

	// Timeout bounds the retries too: with 503s only, the second attempt
	// comes at 1 s and the third would start after the 1.5 s deadline, so
	// the call ends with the last 503 instead of waiting.
	front.runs.Store(0)
	front.refuse.Store(1 << 20)
	start = time.Now()
	_, err = b.Agent.Run(ctx, &box.AgentParams{Prompt: "x", Timeout: 1500 * time.Millisecond, MaxRetries: 5})
	took = time.Since(start)
	front.refuse.Store(0)
	if box.StatusCode(err) != http.StatusServiceUnavailable {
		t.Errorf("503s until the deadline: %v", err)
	}
	if n := front.runs.Load(); n != 2 || took > 1500*time.Millisecond {
		t.Errorf("%d run requests in %v; want 2 within the 1.5 s timeout", n, took)
	}

	// A failure the run reported is not retried: the run was billed.
	front.runs.Store(0)
	var runErr *box.RunError
	if _, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "fail", MaxRetries: 2}); !errors.As(err, &runErr) || errors.Is(err, box.ErrRunCancelled) {
		t.Errorf("a failing run: %v", err)
	}
	if n := front.runs.Load(); n != 1 {
		t.Errorf("a failing run with retries: %d run requests; want 1", n)
	}

	// A run cancelled by another client is not retried either, and says
	// it was cancelled.
	front.runs.Store(0)
	prompt = "sleep 60"
	type result struct {
		run *box.Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: prompt, MaxRetries: 2})
		done <- result{r, err}
	}()
	var id string
	waitFor(t, "the run to start", func() bool {
		if recs := agentRunsWith(t, own, prompt); len(recs) == 1 && recs[0].Status == box.RunRunning {
			id = recs[0].ID
		}
		return id != ""
	})
	if err := own.CancelRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Agent.Run did not return after the cancel")
	}
	if !errors.Is(res.err, box.ErrRunCancelled) || !errors.As(res.err, &runErr) || res.run.Status != box.RunCancelled || res.run.ID != id {
		t.Errorf("a cancelled run: %+v, %v", res.run, res.err)
	}
	if n, recs := front.runs.Load(), agentRunsWith(t, own, prompt); n != 1 || len(recs) != 1 {
		t.Errorf("a cancelled run with retries: %d run requests, %d runs; want 1 and 1", n, len(recs))
	}
}

// TestAgentRunRetriesBeforeTheStreamOnly checks where Agent.Run draws
// the line for retries. A 408 or a 429 before the stream opens never
// started a run, so it is sent again. A connection cut after run_start is
// not, because the run it started goes on in the box (and is billed on
// the cloud).
func TestAgentRunRetriesBeforeTheStreamOnly(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	own := newAgentBox(t, srv, "")
	b, front := newRunFront(t, srv, own)
	ctx := t.Context()

	// The transport's own retries are off (it retries a 429 itself), so
	// that the second request is Agent.Run's, after its 1 s backoff.
	for _, code := range []int{http.StatusRequestTimeout, http.StatusTooManyRequests} {
		front.runs.Store(0)
		front.refuseWith.Store(int64(code))
		front.refuse.Store(1)
		prompt := fmt.Sprintf(`json {"try":"%d"}`, code)
		start := time.Now()
		run, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: prompt, MaxRetries: 1}, box.WithMaxRetries(0))
		took := time.Since(start)
		if err != nil || run.Status != box.RunCompleted || run.Result != fmt.Sprintf(`{"try":"%d"}`, code) {
			t.Fatalf("after a %d: %+v, %v", code, run, err)
		}
		if n, recs := front.runs.Load(), agentRunsWith(t, own, prompt); n != 2 || len(recs) != 1 {
			t.Errorf("after a %d: %d run requests, %d runs; want 2 and 1", code, n, len(recs))
		}
		if took < time.Second {
			t.Errorf("after a %d: retried after %v; want Agent.Run's 1 s backoff", code, took)
		}
		// Without MaxRetries the status is the answer.
		front.refuse.Store(1)
		if _, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: prompt}, box.WithMaxRetries(0)); box.StatusCode(err) != code {
			t.Errorf("a %d without retries: %v", code, err)
		}
		if n := front.runs.Load(); n != 3 {
			t.Errorf("a %d without retries: %d run requests in all; want 3", code, n)
		}
	}
	front.refuseWith.Store(0)

	// The connection is cut once run_start has reached the client: one
	// run request, the run's own id and an error come back, and the run
	// goes on in the box to its end.
	front.runs.Store(0)
	front.cut.Store(1)
	prompt := "sleep 3"
	start := time.Now()
	run, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: prompt, MaxRetries: 3}, box.WithMaxRetries(3))
	took := time.Since(start)
	if err == nil || errors.Is(err, box.ErrRunTimeout) || errors.Is(err, box.ErrRunCancelled) || box.StatusCode(err) != 0 {
		t.Fatalf("a stream cut after run_start: %+v, %v; want the transport's error", run, err)
	}
	if n := front.runs.Load(); n != 1 {
		t.Errorf("a stream cut after run_start: %d run requests reached the server; want 1", n)
	}
	recs := agentRunsWith(t, own, prompt)
	if len(recs) != 1 || run == nil || run.ID != recs[0].ID {
		t.Fatalf("a stream cut after run_start: run %+v, server records %+v; want the one run, with its id", run, recs)
	}
	if took >= time.Second {
		t.Errorf("the call returned %v after it started; want at once, with no backoff", took)
	}
	waitFor(t, "the run whose stream was cut to end in the box", func() bool {
		return agentRunsWith(t, own, prompt)[0].Status == box.RunCompleted
	})
	if n, recs := front.runs.Load(), agentRunsWith(t, own, prompt); n != 1 || len(recs) != 1 {
		t.Errorf("after the cut run ended: %d run requests, %d runs; want 1 and 1", n, len(recs))
	}
}

// TestBoxCancelRun cancels a run by its id, with no Run in hand, and checks
// what the call says about runs that are not running.
func TestBoxCancelRun(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newAgentBox(t, srv, "")
	ctx := t.Context()

	s, err := b.Agent.Stream(ctx, &box.AgentParams{Prompt: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Next() {
		if _, ok := s.Current().(*box.TextDeltaChunk); ok {
			break
		}
	}
	id := s.Run().ID
	// Another handle of the box, as another process would have.
	other, err := srv.Client().Get(ctx, b.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := other.CancelRun(ctx, id); err != nil {
		t.Fatalf("CancelRun(%s): %v", id, err)
	}
	for s.Next() {
	}
	var runErr *box.RunError
	if !errors.Is(s.Err(), box.ErrRunCancelled) || !errors.As(s.Err(), &runErr) || runErr.RunID != id || s.Run().Status != box.RunCancelled {
		t.Fatalf("the stream after CancelRun: %v, %+v", s.Err(), s.Run())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the stream ended %v after the cancel", took)
	}
	if rec := agentRuns(t, b)[0]; rec.ID != id || rec.Status != box.RunCancelled {
		t.Errorf("run record = %+v", rec)
	}

	// A run that ended: ErrRunEnded, and the server's 409.
	err = other.CancelRun(ctx, id)
	if !errors.Is(err, box.ErrRunEnded) || box.StatusCode(err) != http.StatusConflict {
		t.Errorf("cancelling an ended run: %v", err)
	}
	// Run.Cancel of an ended run is not an error.
	if err := s.Run().Cancel(ctx); err != nil {
		t.Errorf("Run.Cancel of an ended run: %v", err)
	}
	if err := b.CancelRun(ctx, "run-unknown"); !box.IsNotFound(err) || errors.Is(err, box.ErrRunEnded) {
		t.Errorf("cancelling an unknown run: %v", err)
	}
	if err := b.CancelRun(ctx, " "); !errors.Is(err, box.ErrInvalid) {
		t.Errorf("cancelling run %q: %v", " ", err)
	}

	// The wire as the official SDKs send it: a POST with no body.
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+b.ID()+"/runs/"+id+"/cancel", ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("raw cancel of an ended run: %d %s", resp.StatusCode, resp.body)
	}
}
