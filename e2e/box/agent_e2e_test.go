package box_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

var (
	harnessOnce sync.Once
	harnessBin  string
	harnessErr  error
)

// testHarness builds internal/testharness once for the test binary.
func testHarness(t *testing.T) string {
	t.Helper()
	harnessOnce.Do(func() {
		dir, err := os.MkdirTemp("", "box-testharness-")
		if err != nil {
			harnessErr = err
			return
		}
		harnessBin = filepath.Join(dir, "testharness")
		cmd := exec.Command("go", "build", "-o", harnessBin, "../../internal/testharness")
		// For boxes, which are Linux wherever the test runs (off Linux,
		// on the boxd that BOXTEST_BASE_URL names).
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			harnessErr = errors.New(string(out))
		}
	})
	if harnessErr != nil {
		t.Fatalf("building the test harness: %v", harnessErr)
	}
	return harnessBin
}

// newAgentBox creates a box whose agent is the test harness.
func newAgentBox(t *testing.T, srv *boxtest.Server, model box.Model) *box.Box {
	t.Helper()
	bin := testHarness(t)
	b := newBox(t, srv, &box.CreateParams{Agent: &box.AgentOptions{
		Harness: box.HarnessCustom, Model: model,
		CustomHarness: &box.CustomHarness{Command: "/home/boxuser/bin/testharness"},
	}})
	if err := b.Files.Upload(t.Context(), []box.UploadFile{{LocalPath: bin, Destination: "/home/boxuser/bin/testharness"}}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "chmod +x /home/boxuser/bin/testharness")
	return b
}

func TestAgentStream(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newAgentBox(t, srv, "custom/demo")
	ctx := t.Context()

	var uses []box.ToolCall
	var results []box.ToolResult
	s, err := b.Agent.Stream(ctx, &box.AgentParams{
		Prompt:       "review the code",
		OnToolUse:    func(c box.ToolCall) { uses = append(uses, c) },
		OnToolResult: func(r box.ToolResult) { results = append(results, r) },
	})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var finish *box.FinishChunk
	var stats *box.StatsChunk
	var start *box.StartChunk
	for c, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		switch c := c.(type) {
		case *box.StartChunk:
			start = c
			kinds = append(kinds, "start")
		case *box.ReasoningChunk:
			kinds = append(kinds, "reasoning:"+c.Text)
		case *box.ToolCallChunk:
			kinds = append(kinds, "tool:"+c.ToolCallID+":"+c.ToolName)
		case *box.ToolResultChunk:
			kinds = append(kinds, "result:"+c.ToolCallID)
		case *box.TextDeltaChunk:
			kinds = append(kinds, "text")
		case *box.FinishChunk:
			finish = c
			kinds = append(kinds, "finish")
		case *box.StatsChunk:
			stats = c
			kinds = append(kinds, "stats")
		default:
			t.Errorf("unexpected chunk %T", c)
		}
	}
	want := []string{"start", "reasoning:Looking at the code.", "tool:call-1:Read", "result:call-1", "text", "finish", "stats"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if finish == nil || finish.Usage != (box.Usage{InputTokens: 120, OutputTokens: 45, CachedInputTokens: 7}) || finish.SessionID != "sess-custom/demo" || finish.TotalCostUSD != 0.0125 {
		t.Errorf("finish = %+v", finish)
	}
	if stats == nil || stats.CPU <= 0 || stats.MemoryPeakBytes <= 0 {
		t.Errorf("stats = %+v; want the real CPU time and peak memory", stats)
	}
	if diff := cmp.Diff([]box.ToolCall{{ID: "call-1", Name: "Read", Input: map[string]any{"path": "main.go"}}}, uses); diff != "" {
		t.Errorf("OnToolUse (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]box.ToolResult{{ID: "call-1", Output: "package main"}}, results); diff != "" {
		t.Errorf("OnToolResult (-want +got):\n%s", diff)
	}
	r := s.Run()
	if r.Status != box.RunCompleted || r.ID != start.RunID || !strings.HasPrefix(r.Result, `{"verdict"`) || r.Cost.InputTokens != 120 || r.Cost.TotalUSD != 0.0125 || r.SessionID != "sess-custom/demo" {
		t.Errorf("run = %+v", r)
	}

	rec := agentRuns(t, b)[0]
	if rec.ID != r.ID || rec.Type != "agent" || rec.Status != box.RunCompleted || rec.InputTokens != 120 || rec.OutputTokens != 45 || rec.CostUSD != 0.0125 || rec.SessionID != "sess-custom/demo" || rec.Prompt != "review the code" || rec.CPU <= 0 {
		t.Errorf("run record = %+v", rec)
	}
	in, err := b.Refresh(ctx)
	if err != nil || in.TotalInputTokens != 120 || in.TotalPrompts != 1 {
		t.Errorf("box totals = %+v, %v", in, err)
	}

	// The next run resumes the session the last one reported.
	r, err = b.Agent.Run(ctx, &box.AgentParams{Prompt: "session"})
	if err != nil || r.Result != "session=sess-custom/demo" {
		t.Errorf("second run = %+v, %v", r, err)
	}
	logs, err := r.Logs(ctx)
	if err != nil || len(logs) == 0 || !strings.Contains(logs[len(logs)-1].Message, "completed") {
		t.Errorf("run logs = %+v, %v", logs, err)
	}
}

type Finding struct {
	Severity string `json:"severity" enum:"high,medium,low" jsonschema:"how bad it is"`
	File     string `json:"file"`
	Issue    string `json:"issue"`
}

type Review struct {
	Verdict  string    `json:"verdict" enum:"approved,changes_requested"`
	Findings []Finding `json:"findings"`
}

func TestRunAs(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newAgentBox(t, srv, "")
	ctx := t.Context()

	review, run, err := box.RunAs[Review](ctx, b.Agent, &box.AgentParams{Prompt: "review"})
	if err != nil {
		t.Fatal(err)
	}
	want := Review{Verdict: "changes_requested", Findings: []Finding{{Severity: "high", File: "main.go", Issue: "no tests"}}}
	if diff := cmp.Diff(want, review); diff != "" {
		t.Errorf("review (-want +got):\n%s", diff)
	}
	if run.Status != box.RunCompleted {
		t.Errorf("run = %+v", run)
	}

	// The server checks the output against the schema: a wrong enum value
	// fails the run with a message naming the field.
	bad := `{"verdict":"maybe","findings":[]}`
	_, run, err = box.RunAs[Review](ctx, b.Agent, &box.AgentParams{Prompt: "json " + bad})
	var runErr *box.RunError
	if !errors.As(err, &runErr) || !strings.Contains(runErr.Message, "verdict") || run.Status != box.RunFailed {
		t.Fatalf("mismatch: %v, run %+v", err, run)
	}

	// A mismatch on the first attempt is not retried, though a second
	// attempt would match: the run that gave it was billed, and MaxRetries
	// only sends again a run that never started.
	good := `{"verdict":"approved","findings":[]}`
	flaky := "flaky " + bad + " " + good
	_, run, err = box.RunAs[Review](ctx, b.Agent, &box.AgentParams{Prompt: flaky, MaxRetries: 1})
	if !errors.As(err, &runErr) || !strings.Contains(runErr.Message, "verdict") || run.Status != box.RunFailed {
		t.Fatalf("a mismatch with MaxRetries: %v, run %+v", err, run)
	}
	if recs := agentRunsWith(t, b, flaky); len(recs) != 1 {
		t.Errorf("a mismatch with MaxRetries ran %d times; want once", len(recs))
	}

	// The raw-schema form.
	schema := map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"type": "string"}}, "required": []any{"verdict"}}
	m, _, err := b.Agent.RunJSON(ctx, &box.AgentParams{Prompt: "json " + good}, schema)
	if err != nil || m["verdict"] != "approved" {
		t.Errorf("RunJSON = %v, %v", m, err)
	}
	if _, _, err := b.Agent.RunJSON(ctx, &box.AgentParams{Prompt: "json [1,2]"}, schema); !errors.As(err, &runErr) {
		t.Errorf("RunJSON with a non-object output = %v", err)
	}
}

func TestAgentWebhook(t *testing.T) {
	t.Parallel()
	got := make(chan map[string]any, 1)
	var auth string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p map[string]any
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &p)
		auth = r.Header.Get("Authorization")
		got <- p
	}))
	defer hook.Close()
	srv := boxtest.NewServer(t)
	b := newAgentBox(t, srv, "")

	run, err := b.Agent.Run(t.Context(), &box.AgentParams{Prompt: "json {\"ok\":true}", Webhook: &box.Webhook{URL: hook.URL, Headers: map[string]string{"Authorization": "Bearer hook-secret"}}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != box.RunRunning || !strings.HasPrefix(run.ID, "run-") {
		t.Errorf("webhook run = %+v", run)
	}
	select {
	case p := <-got:
		want := map[string]any{"box_id": b.ID(), "run_id": run.ID, "status": "completed", "output": `{"ok":true}`}
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("payload (-want +got):\n%s", diff)
		}
		if auth != "Bearer hook-secret" {
			t.Errorf("webhook header = %q", auth)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook")
	}
}

func TestAgentCancelAndDetach(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newAgentBox(t, srv, "")
	ctx := t.Context()

	s, err := b.Agent.Stream(ctx, &box.AgentParams{Prompt: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	for s.Next() {
		if _, ok := s.Current().(*box.TextDeltaChunk); ok {
			break
		}
	}
	if err := s.Run().Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	for s.Next() {
	}
	var runErr *box.RunError
	if !errors.As(s.Err(), &runErr) || s.Run().Status != box.RunCancelled {
		t.Fatalf("after cancel: %v, %+v", s.Err(), s.Run())
	}
	waitFor(t, "the harness to be killed", func() bool {
		return mustRun(t, b, "pgrep -f 'testharnes[s]' || true").Stdout == ""
	})
	if rec := agentRuns(t, b)[0]; rec.ID != s.Run().ID || rec.Status != box.RunCancelled || rec.ErrorMessage != "run cancelled" {
		t.Errorf("run record after cancel = %+v", rec)
	}
	if err := s.Run().Cancel(ctx); err != nil {
		t.Errorf("cancelling an ended run = %v", err)
	}

	// A client that stops reading detaches; the run goes on and is
	// recorded.
	s, err = b.Agent.Stream(ctx, &box.AgentParams{Prompt: "sleep 1"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
	r := s.Run()
	if r.Status != box.RunDetached {
		t.Errorf("status after break = %v", r.Status)
	}
	waitFor(t, "the detached run to finish on the server", func() bool {
		rec := agentRuns(t, b)[0]
		return rec.ID == r.ID && rec.Status == box.RunCompleted && rec.Output == "slept"
	})
}

// agentRuns returns the box's agent run records, newest first.
func agentRuns(t *testing.T, b *box.Box) []box.RunRecord {
	t.Helper()
	runs, err := b.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []box.RunRecord
	for _, r := range runs {
		if r.Type == "agent" {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatal("no agent runs recorded")
	}
	return out
}

func TestAgentFailures(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newAgentBox(t, srv, "")
	ctx := t.Context()

	var runErr *box.RunError
	r, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "fail"})
	if !errors.As(err, &runErr) || runErr.Message != "the harness failed on purpose" || r.Status != box.RunFailed {
		t.Errorf("fail: %v, %+v", err, r)
	}
	r, err = b.Agent.Run(ctx, &box.AgentParams{Prompt: "crash"})
	if !errors.As(err, &runErr) || !strings.Contains(runErr.Message, "exited with status 3: fatal: something broke") {
		t.Errorf("crash: %v, %+v", err, r)
	}
	if _, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "  "}); err == nil {
		t.Error("blank prompt accepted")
	}
	if _, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "x", Options: box.ClaudeCodeOptions{MaxTurns: 2}}); err == nil || !strings.Contains(err.Error(), "claude-code") {
		t.Errorf("Claude Code options on a custom box: %v", err)
	}
	if _, err := b.Agent.Stream(ctx, &box.AgentParams{Prompt: "x", MaxRetries: 1}); err == nil {
		t.Error("Stream took MaxRetries")
	}
	plain := newBox(t, srv, nil)
	if _, err := plain.Agent.Run(ctx, &box.AgentParams{Prompt: "hi"}); !errors.Is(err, box.ErrNoAgent) {
		t.Errorf("box without agent: %v", err)
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+plain.ID()+"/run/stream", `{"prompt":"hi"}`); resp.StatusCode != http.StatusConflict {
		t.Errorf("server on a box without agent: %d %s", resp.StatusCode, resp.body)
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+b.ID()+"/run/stream", `{"prompt":"hi","json_schema":{"type":12}}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("invalid schema: %d %s", resp.StatusCode, resp.body)
	}

	// Options reach a custom harness as JSON.
	r, err = b.Agent.Run(ctx, &box.AgentParams{Prompt: "options", Options: box.RawOptions{"maxTurns": 3, "mode": "fast"}})
	if err != nil || r.Result != `{"maxTurns":3,"mode":"fast"}` {
		t.Errorf("options: %+v, %v", r, err)
	}
}

func TestAgentAttachments(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newAgentBox(t, srv, "")
	ctx := t.Context()
	local := filepath.Join(t.TempDir(), "shot.png")
	if err := os.WriteFile(local, make([]byte, 1234), 0o644); err != nil {
		t.Fatal(err)
	}
	// In-memory data goes as base64 JSON; a local path makes it multipart.
	for _, files := range [][]box.Attachment{
		{{Data: []byte("hello"), MediaType: "text/plain", Filename: "a.txt"}},
		{{Path: local}, {Data: []byte("hello"), MediaType: "text/plain", Filename: "a.txt"}},
	} {
		r, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "files", Files: files})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			size := "5"
			if f.Path != "" {
				size = "1234"
			}
			if !strings.Contains(r.Result, " "+size) {
				t.Errorf("result %q lacks a %s-byte file", r.Result, size)
			}
		}
	}
	many := make([]box.Attachment, 11)
	for i := range many {
		many[i] = box.Attachment{Data: []byte("x"), MediaType: "text/plain"}
	}
	if _, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "files", Files: many}); err == nil || box.StatusCode(err) != 0 {
		t.Errorf("11 attachments: %v, want a client-side error", err)
	}
	var body strings.Builder
	body.WriteString(`{"prompt":"files","files":[`)
	for i := range 11 {
		if i > 0 {
			body.WriteString(",")
		}
		body.WriteString(`{"data":"eA==","media_type":"text/plain"}`)
	}
	body.WriteString("]}")
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+b.ID()+"/run/stream", body.String()); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("server with 11 attachments: %d %s", resp.StatusCode, resp.body)
	}
	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, make([]byte, box.MaxAttachmentSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "files", Files: []box.Attachment{{Path: big}}}); err == nil {
		t.Error("oversized attachment accepted")
	}
}

// TestAgentStreamKeepsABoundedTail: a stream of 1 MiB of text and no final
// output gives every chunk to the caller, and its Run keeps only the last
// StreamResultTail bytes of the text as its result.
func TestAgentStreamKeepsABoundedTail(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newAgentBox(t, srv, "custom/demo")
	const lines = 1024
	s, err := b.Agent.Stream(t.Context(), &box.AgentParams{Prompt: fmt.Sprintf("long %d", lines)})
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for c, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := c.(*box.TextDeltaChunk); ok {
			all.WriteString(c.Text)
		}
	}
	if all.Len() != lines*1024 {
		t.Fatalf("the stream gave %d bytes of text, want %d", all.Len(), lines*1024)
	}
	got := s.Run().Result
	if len(got) > box.StreamResultTail || len(got) < box.StreamResultTail-1024 || !strings.HasSuffix(strings.TrimSpace(all.String()), got) {
		t.Errorf("Run().Result is %d bytes (want at most %d, the end of the text): %.80q…", len(got), box.StreamResultTail, got)
	}
}
