package box

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/gen"
)

// pollServer answers create with "creating" and then serves the statuses
// of polls in order (a number is answered as that HTTP status).
func pollServer(t *testing.T, polls ...any) (*httptest.Server, *atomic.Int32, *[]map[string]any) {
	t.Helper()
	var n atomic.Int32
	var bodies []map[string]any
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v2/box":
			var body map[string]any
			raw, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(raw, &body)
			bodies = append(bodies, body)
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "box-1", "status": "creating", "created_at": 1, "updated_at": 1})
		case r.Method == http.MethodGet && r.URL.Path == "/v2/box/box-1":
			i := int(n.Add(1)) - 1
			if i >= len(polls) {
				i = len(polls) - 1
			}
			if code, ok := polls[i].(int); ok {
				w.WriteHeader(code)
				_, _ = w.Write([]byte(`{"error":"flaky"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "box-1", "status": polls[i], "created_at": 1, "updated_at": 2, "agent": "claude-code", "model": "anthropic/claude-sonnet-4-5"})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts, &n, &bodies
}

func pollClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := NewClient(WithAPIKey("k"), WithBaseURL(url), WithTelemetry(false), WithMaxRetries(0), withPollInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCreatePollsWhileCreating(t *testing.T) {
	t.Parallel()
	// A failed poll (500) is skipped, as in the official SDKs.
	ts, polls, bodies := pollServer(t, http.StatusInternalServerError, "creating", "idle")
	c := pollClient(t, ts.URL)
	b, err := c.Create(t.Context(), &CreateParams{
		Name:    "n",
		Labels:  []string{"a"},
		Agent:   &AgentOptions{Harness: HarnessClaudeCode, Model: "anthropic/claude-sonnet-4-5", APIKey: BoxAPIKeyUpstash},
		Git:     &GitOptions{Token: "ghp_secret", UserName: "Bot"},
		Env:     map[string]string{"A": "1"},
		Browser: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := polls.Load(); got != 3 {
		t.Errorf("polls = %d, want 3", got)
	}
	if in := b.Info(); in.Status != StatusIdle || in.Harness != HarnessClaudeCode || in.Model != "anthropic/claude-sonnet-4-5" {
		t.Errorf("Info = %+v", in)
	}
	want := map[string]any{
		"name": "n", "labels": []any{"a"}, "agent": "claude-code", "model": "anthropic/claude-sonnet-4-5",
		"agent_api_key": "UPSTASH_KEY", "github_token": "ghp_secret", "git_user_name": "Bot",
		"env_vars": map[string]any{"A": "1"}, "browser": true,
	}
	if diff := cmp.Diff(want, (*bodies)[0]); diff != "" {
		t.Errorf("create body (-want +got):\n%s", diff)
	}
	if b.st.gitToken != "ghp_secret" {
		t.Error("git token not kept for clone and push")
	}
}

func TestCreateFailedAndCancelled(t *testing.T) {
	t.Parallel()
	ts, _, _ := pollServer(t, "creating", "error")
	if _, err := pollClient(t, ts.URL).Create(t.Context(), nil); !errors.Is(err, ErrCreateFailed) {
		t.Errorf("Create = %v, want ErrCreateFailed", err)
	}

	ts, _, bodies := pollServer(t, "creating")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := pollClient(t, ts.URL).Create(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Create with a deadline = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Create returned %v after the deadline", d)
	}
	if diff := cmp.Diff(map[string]any{}, (*bodies)[0]); diff != "" {
		t.Errorf("empty create body (-want +got):\n%s", diff)
	}
}

func TestCustomHarnessBody(t *testing.T) {
	t.Parallel()
	p := &CreateParams{KeepAlive: true, InitCommand: "npm start", Agent: &AgentOptions{Harness: HarnessCustom, APIKey: "ignored", CustomHarness: &CustomHarness{Command: "python3", Args: []string{"/workspace/home/agent.py"}}}, MCPServers: []MCPServer{{Name: "fs", Package: "@x/fs", Args: []string{"/"}}, {Name: "remote", URL: "https://mcp.example", Headers: map[string]string{"A": "b"}}}, NetworkPolicy: &NetworkPolicy{Mode: NetworkCustom, AllowedDomains: []string{"example.com"}}}
	r, err := p.request()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(r)
	var got map[string]any
	_ = json.Unmarshal(raw, &got)
	want := map[string]any{
		"keep_alive": true, "init_command": "npm start", "agent": "custom", "model": "custom",
		"custom_runner":  map[string]any{"command": "python3", "args": []any{"/workspace/home/agent.py"}},
		"mcp_servers":    []any{map[string]any{"name": "fs", "source": "npm", "package_or_url": "@x/fs", "args": []any{"/"}}, map[string]any{"name": "remote", "source": "url", "package_or_url": "https://mcp.example", "headers": map[string]any{"A": "b"}}},
		"network_policy": map[string]any{"mode": "custom", "allowed_domains": []any{"example.com"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// TestAllLogsPages iterates over more log entries than one page holds.
func TestAllLogsPages(t *testing.T) {
	t.Parallel()
	const total = 1234
	var pages atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pages.Add(1)
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		lim, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		var logs []map[string]any
		for i := off; i < min(off+lim, total); i++ {
			logs = append(logs, map[string]any{"timestamp": 1, "level": "info", "source": "system", "message": strconv.Itoa(i)})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"logs": logs})
	}))
	defer ts.Close()
	c := pollClient(t, ts.URL)
	b := c.newBox(&gen.BoxData{ID: "box-1", Status: gen.BoxStatusIdle})
	i := 0
	for e, err := range b.AllLogs(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Message != strconv.Itoa(i) {
			t.Fatalf("entry %d is %q", i, e.Message)
		}
		i++
		if i == 600 {
			break // a loop may stop early: no more pages are fetched
		}
	}
	if i != 600 || pages.Load() != 2 {
		t.Errorf("%d entries in %d pages, want 600 in 2", i, pages.Load())
	}
	n := 0
	for _, err := range b.AllLogs(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != total {
		t.Errorf("AllLogs gave %d entries, want %d", n, total)
	}
}

// TestRunLogsPages: a run's logs come from the whole log, however many
// entries come before the run's, from a server that gives a page of 100
// when asked for no limit.
func TestRunLogsPages(t *testing.T) {
	t.Parallel()
	const before, during = 1200, 30
	now := time.Now().Unix()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		lim, err := strconv.Atoi(r.URL.Query().Get("limit"))
		if err != nil {
			lim = 100
		}
		logs := []map[string]any{}
		for i := off; i < min(off+lim, before+during); i++ {
			at := now - 3600
			if i >= before {
				at = now + 1
			}
			logs = append(logs, map[string]any{"timestamp": at, "level": "info", "source": "user", "message": strconv.Itoa(i)})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"logs": logs})
	}))
	defer ts.Close()
	c := pollClient(t, ts.URL)
	b := c.newBox(&gen.BoxData{ID: "box-1", Status: gen.BoxStatusIdle})
	run := newRun(b, RunTypeCommand)
	logs, err := run.Logs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != during || logs[0].Message != strconv.Itoa(before) || logs[during-1].Message != strconv.Itoa(before+during-1) {
		t.Errorf("Run.Logs gave %d entries (%+v), want entries %d to %d", len(logs), logs, before, before+during-1)
	}
}

// TestInitCommandWithoutKeepAlive: an init command goes without keep_alive,
// as the newest official SDK sends it.
func TestInitCommandWithoutKeepAlive(t *testing.T) {
	t.Parallel()
	r, err := (&CreateParams{InitCommand: "npm start"}).request()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(r)
	if string(raw) != `{"init_command":"npm start"}` {
		t.Errorf("create body = %s", raw)
	}
}
