package box

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type severityFinding struct {
	Severity string   `json:"severity" enum:"high,low" jsonschema:"how bad it is"`
	Tags     []string `json:"tags,omitempty" enum:"a,b"`
	Line     int      `json:"line" enum:"1,2,3"`
}

type report struct {
	Findings []severityFinding `json:"findings"`
	Note     *string           `json:"note,omitempty"`
}

func TestSchemaFor(t *testing.T) {
	t.Parallel()
	s, err := SchemaFor[report]()
	if err != nil {
		t.Fatal(err)
	}
	item := s["properties"].(map[string]any)["findings"].(map[string]any)["items"].(map[string]any)
	props := item["properties"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"type": "string", "description": "how bad it is", "enum": []any{"high", "low"}}, props["severity"]); diff != "" {
		t.Errorf("severity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"a", "b"}, props["tags"].(map[string]any)["items"].(map[string]any)["enum"]); diff != "" {
		t.Errorf("tags enum (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{1.0, 2.0, 3.0}, props["line"].(map[string]any)["enum"]); diff != "" {
		t.Errorf("line enum (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"severity", "line"}, item["required"]); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	if item["additionalProperties"] != false {
		t.Errorf("additionalProperties = %v", item["additionalProperties"])
	}
	if _, ok := s["$schema"]; ok {
		t.Error("$schema is sent")
	}
	type bad struct {
		N int `json:"n" enum:"x"`
	}
	if _, err := SchemaFor[bad](); err == nil {
		t.Error("non-numeric enum on an int accepted")
	}
	if _, err := SchemaFor[chan int](); err == nil {
		t.Error("schema for a channel accepted")
	}
}

// sseServer answers every run with the given done output, without
// checking it against the schema, as a server that does not validate
// would; it records the schemas it receives.
func sseServer(t *testing.T, outputs ...string) (*Client, *[]map[string]any) {
	t.Helper()
	var schemas []map[string]any
	n := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "box-1", "status": "idle", "agent": "claude-code", "model": "anthropic/claude-sonnet-4-5", "created_at": 1, "updated_at": 1})
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if s, ok := body["json_schema"].(map[string]any); ok {
			schemas = append(schemas, s)
		}
		out := outputs[min(n, len(outputs)-1)]
		n++
		raw, _ := json.Marshal(map[string]any{"output": out})
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: run_start\ndata: {\"run_id\":\"r%d\"}\n\nevent: done\ndata: %s\n\n", n, raw)
	}))
	t.Cleanup(ts.Close)
	c, err := NewClient(WithAPIKey("k"), WithBaseURL(ts.URL), WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	return c, &schemas
}

func TestRunAsChecksOutput(t *testing.T) {
	t.Parallel()
	bad := `{"findings":[{"severity":"medium","line":1}]}` + strings.Repeat(" ", 600)
	c, schemas := sseServer(t, bad)
	b, err := c.Get(t.Context(), "box-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, run, err := RunAs[report](t.Context(), b.Agent, &AgentParams{Prompt: "x"})
	var oe *OutputError
	if !errors.As(err, &oe) || !strings.Contains(oe.Reason, "severity") || !strings.HasPrefix(oe.Raw, `{"findings"`) || len(oe.Raw) > 500 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "Raw output: {\"findings\"") || run.Status != RunFailed {
		t.Errorf("message %q, run %+v", err.Error(), run)
	}
	if len(*schemas) != 1 || (*schemas)[0]["type"] != "object" {
		t.Errorf("schema sent = %v", *schemas)
	}

	c, _ = sseServer(t, "not json at all", `{"findings":[]}`)
	b, _ = c.Get(t.Context(), "box-1", nil)
	_, _, err = RunAs[report](t.Context(), b.Agent, &AgentParams{Prompt: "x"})
	if !errors.As(err, &oe) || !strings.Contains(oe.Reason, "not JSON") || oe.Raw != "not json at all" {
		t.Errorf("non-JSON: %v", err)
	}

	// A bad output is not retried, though the next attempt would be good:
	// the run was billed, and MaxRetries only resends a run that never
	// started.
	c, schemas = sseServer(t, bad, `{"findings":[{"severity":"low","line":2}]}`)
	b, _ = c.Get(t.Context(), "box-1", nil)
	_, run, err = RunAs[report](t.Context(), b.Agent, &AgentParams{Prompt: "x", MaxRetries: 1})
	if !errors.As(err, &oe) || run.ID != "r1" || run.Status != RunFailed || len(*schemas) != 1 {
		t.Errorf("a bad output with MaxRetries: %+v, %v, %d requests", run, err, len(*schemas))
	}
}

func TestHarnessOptionsCasing(t *testing.T) {
	t.Parallel()
	yes := true
	for _, c := range []struct {
		opts HarnessOptions
		want map[string]any
		h    Harness
	}{
		{ClaudeCodeOptions{MaxTurns: 5, MaxBudgetUSD: 1.5, Effort: "max", Thinking: &Thinking{Type: "enabled", BudgetTokens: 16000}, DisallowedTools: []string{"Bash"}, PromptSuggestions: &yes, FallbackModel: "anthropic/claude-sonnet-4-5", SystemPrompt: "be brief"},
			map[string]any{"maxTurns": 5.0, "maxBudgetUsd": 1.5, "effort": "max", "thinking": map[string]any{"type": "enabled", "budgetTokens": 16000.0}, "disallowedTools": []any{"Bash"}, "promptSuggestions": true, "fallbackModel": "anthropic/claude-sonnet-4-5", "systemPrompt": "be brief"}, HarnessClaudeCode},
		{CodexOptions{ModelReasoningEffort: "high", ModelReasoningSummary: "concise", Personality: "pragmatic", WebSearch: true},
			map[string]any{"model_reasoning_effort": "high", "model_reasoning_summary": "concise", "personality": "pragmatic", "web_search": true}, HarnessCodex},
		{OpenCodeOptions{ReasoningEffort: "low", TextVerbosity: "high", ReasoningSummary: "auto", Thinking: &Thinking{Type: "enabled", BudgetTokens: 8000}},
			map[string]any{"reasoningEffort": "low", "textVerbosity": "high", "reasoningSummary": "auto", "thinking": map[string]any{"type": "enabled", "budgetTokens": 8000.0}}, HarnessOpenCode},
		{RawOptions{"anything": []any{1.0}}, map[string]any{"anything": []any{1.0}}, ""},
	} {
		got, h, err := c.opts.agentOptions()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(got)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		if diff := cmp.Diff(c.want, m); diff != "" || h != c.h {
			t.Errorf("%T (%s) (-want +got):\n%s", c.opts, h, diff)
		}
	}
	for _, bad := range []HarnessOptions{ClaudeCodeOptions{Effort: "extreme"}, ClaudeCodeOptions{Thinking: &Thinking{Type: "on"}}, CodexOptions{WebSearch: "sometimes"}, CodexOptions{WebSearch: 1}, OpenCodeOptions{TextVerbosity: "max"}} {
		if _, _, err := bad.agentOptions(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestInferHarness(t *testing.T) {
	t.Parallel()
	for model, want := range map[Model]Harness{
		"custom/x": HarnessCustom, CursorDefault: HarnessCursor, VercelGPT5_5: HarnessCodex, VercelClaudeFable5: HarnessClaudeCode,
		OpenRouterGPT4_1: HarnessClaudeCode, OpenCodeBigPickle: HarnessOpenCode, OpenAICodexGPT5_6: HarnessCodex,
		ClaudeCodeOpus4_8: HarnessClaudeCode, "mistral/large": HarnessClaudeCode, "": HarnessClaudeCode,
	} {
		if got := InferHarness(model); got != want {
			t.Errorf("InferHarness(%q) = %s, want %s", model, got, want)
		}
	}
}
