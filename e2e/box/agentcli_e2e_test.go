package box_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/modeltest"
	"github.com/upstash/box-go/local"
)

// requireCLI skips a test of a real agent CLI that is not installed here,
// naming it, and fails it under CI, which installs it
// (./scripts/deps.sh --tests). Boxes run on the host's /usr, so a CLI
// installed here is in every box.
func requireCLI(t *testing.T, bin, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and %s is not installed (npm install -g %s; ./scripts/deps.sh --tests does it)", bin, pkg)
		}
		t.Skipf("%s is not installed (npm install -g %s)", bin, pkg)
	}
}

// cliServer is boxd whose model providers are the scripted server.
func cliServer(t *testing.T, models *modeltest.Server) *boxtest.Server {
	return boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.ModelProviderURLs = map[string]string{"anthropic": models.URL, "openai": models.URL + "/v1"}
	}))
}

// streamed is what one agent stream carried.
type streamed struct {
	run       *box.Run
	start     bool
	text      strings.Builder
	reasoning strings.Builder
	calls     []*box.ToolCallChunk
	results   []*box.ToolResultChunk
	finish    *box.FinishChunk
	err       error
}

// lsCall matches a tool input that runs ls: {"command":"ls"}, or Codex's
// {"command":"/bin/bash -lc ls"}.
var lsCall = regexp.MustCompile(`[" ]ls"`)

// checkShellTurn checks a run of the Shell script: reasoning, one call of
// the CLI's shell tool running ls in a workspace of alpha.txt and
// beta.txt, its output, and the answer with it.
func (got *streamed) checkShellTurn(t *testing.T, tool string) {
	t.Helper()
	if !got.start || got.run.Status != box.RunCompleted {
		t.Errorf("start %v, run %+v", got.start, got.run)
	}
	if len(got.calls) != 1 || got.calls[0].ToolName != tool || !lsCall.MatchString(jsonText(got.calls[0].Input)) {
		t.Errorf("tool calls = %+v, want one of %s running ls", got.calls, tool)
	}
	if len(got.results) != 1 || !strings.Contains(toText(got.results[0].Output), "alpha.txt") {
		t.Errorf("tool results = %+v", got.results)
	}
	if !strings.HasPrefix(got.run.Result, "The files are: ") || !strings.Contains(got.run.Result, "beta.txt") {
		t.Errorf("result %q", got.run.Result)
	}
	if !strings.Contains(got.reasoning.String(), "The user wants a command run.") {
		t.Errorf("reasoning = %q", got.reasoning.String())
	}
}

func streamRun(t *testing.T, b *box.Box, p *box.AgentParams) *streamed {
	t.Helper()
	s, err := b.Agent.Stream(t.Context(), p)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	out := &streamed{}
	for c, err := range s.All() {
		if err != nil {
			out.err = err
			break
		}
		switch c := c.(type) {
		case *box.StartChunk:
			out.start = c.RunID != ""
		case *box.TextDeltaChunk:
			out.text.WriteString(c.Text)
		case *box.ReasoningChunk:
			out.reasoning.WriteString(c.Text)
		case *box.ToolCallChunk:
			out.calls = append(out.calls, c)
		case *box.ToolResultChunk:
			out.results = append(out.results, c)
		case *box.FinishChunk:
			out.finish = c
		}
	}
	out.run = s.Run()
	return out
}

// agentRequests are the scripted server's requests that offered tools
// (the agent's turns, not a title request).
func agentRequests(models *modeltest.Server) []*modeltest.Request {
	return agentRequestsSince(models, 0)
}

// agentRequestsSince are those after the first n requests.
func agentRequestsSince(models *modeltest.Server, n int) []*modeltest.Request {
	var out []*modeltest.Request
	for _, r := range models.Requests()[n:] {
		if r.ShellTool() != "" {
			out = append(out, r)
		}
	}
	return out
}

// TestClaudeCodeCLI drives the real Claude Code CLI in a box through the
// Go SDK, against a scripted Anthropic Messages API: a turn that runs a
// shell command, then the answer with the tool's output; what the stream
// carries, the run's record, a resumed session, options in the CLI's own
// terms, the MCP servers of the box, structured output, and a cancel.
func TestClaudeCodeCLI(t *testing.T) {
	t.Parallel()
	requireCLI(t, "claude", "@anthropic-ai/claude-code@2.1.197")
	usage := modeltest.Usage{Input: 1200, Output: 40, CacheRead: 300}
	models := modeltest.New(t, modeltest.Shell("ls", "The files are", usage))
	mcp := modeltest.NewMCP(t)
	srv := cliServer(t, models)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{
		Agent:      &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5, APIKey: "sk-ant-scripted-key"},
		MCPServers: []box.MCPServer{{Name: "tools", URL: strings.Replace(mcp.URL, "127.0.0.1", "host.boxd.internal", 1)}},
	})
	mustRun(t, b, "touch alpha.txt beta.txt")

	got := streamRun(t, b, &box.AgentParams{Prompt: "Which files are here?"})
	if got.err != nil {
		t.Fatalf("stream: %v (%d requests to the model)", got.err, len(models.Requests()))
	}
	if !got.start || got.run.Status != box.RunCompleted {
		t.Errorf("start %v, run %+v", got.start, got.run)
	}
	if len(got.calls) != 1 || got.calls[0].ToolName != "Bash" || got.calls[0].Input["command"] != "ls" {
		t.Errorf("tool calls = %+v", got.calls)
	}
	if len(got.results) != 1 || !strings.Contains(toText(got.results[0].Output), "alpha.txt") || got.results[0].ToolCallID != got.calls[0].ToolCallID {
		t.Errorf("tool results = %+v", got.results)
	}
	if !strings.Contains(got.reasoning.String(), "The user wants a command run.") {
		t.Errorf("reasoning = %q", got.reasoning.String())
	}
	if want := "The files are: alpha.txt\nbeta.txt"; got.run.Result != want || !strings.Contains(got.text.String(), "The files are") {
		t.Errorf("result %q (text %q), want %q", got.run.Result, got.text.String(), want)
	}
	f := got.finish
	if f == nil || f.SessionID == "" || f.Usage.OutputTokens != 2*40 || f.Usage.CachedInputTokens != 2*300 || f.Usage.InputTokens < 2*1200 {
		t.Fatalf("finish = %+v", f)
	}
	runs, err := b.Runs(ctx)
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs = %v, %v", runs, err)
	}
	rec := runs[0]
	if rec.ID != got.run.ID || rec.SessionID != f.SessionID || rec.OutputTokens != f.Usage.OutputTokens || rec.InputTokens != f.Usage.InputTokens || rec.CostUSD != f.TotalCostUSD || rec.Output != got.run.Result {
		t.Errorf("run record %+v disagrees with the stream's finish %+v", rec, f)
	}

	reqs := agentRequests(models)
	if len(reqs) != 2 {
		t.Fatalf("%d agent requests to the model, want 2", len(reqs))
	}
	first := reqs[0]
	if first.Model != "claude-sonnet-4-5" || first.Key != "sk-ant-scripted-key" || !strings.Contains(first.System, "Claude") || !strings.Contains(first.User, "Which files are here?") {
		t.Errorf("first request: model %q, key %q, system %.80q, user %.200q", first.Model, first.Key, first.System, first.User)
	}
	if !first.HasTool("mcp__tools__echo_upper") {
		t.Errorf("the box's MCP server is not among the tools: %v (the server saw %v)", first.Tools, mcp.Methods())
	}
	if !reqs[1].HasToolResult || !strings.Contains(reqs[1].ToolResult, "beta.txt") {
		t.Errorf("second request's tool result = %q", reqs[1].ToolResult)
	}

	checkResume(t, b, models, first, f.SessionID, usage, box.ClaudeCodeOptions{Effort: "low"})

	// max_turns is Claude Code's turn limit: one turn with a tool call,
	// and the run ends there with the CLI's error.
	models.SetScript(modeltest.Shell("ls", "never", usage))
	before := len(agentRequests(models))
	limited := streamRun(t, b, &box.AgentParams{Prompt: "Look again", Options: box.ClaudeCodeOptions{MaxTurns: 1}})
	var re *box.RunError
	if !errors.As(limited.err, &re) || !strings.Contains(re.Message, "maximum number of turns") || limited.run.Status != box.RunFailed {
		t.Errorf("a run past max_turns 1 = %v, %+v", limited.err, limited.run)
	}
	if n := len(agentRequests(models)) - before; n != 1 {
		t.Errorf("%d model turns under max_turns 1", n)
	}

	// Structured output: the final text is the schema's JSON.
	type inventory struct {
		Files []string `json:"files"`
		Count int      `json:"count"`
	}
	models.SetScript(modeltest.JSON(map[string]any{"files": []any{"alpha.txt", "beta.txt"}, "count": 2}, usage))
	inv, _, err := box.RunAs[inventory](ctx, b.Agent, &box.AgentParams{Prompt: "List the files as JSON"})
	if err != nil || inv.Count != 2 || len(inv.Files) != 2 || inv.Files[1] != "beta.txt" {
		t.Errorf("RunAs = %+v, %v", inv, err)
	}
	// Claude Code enforces the schema itself, with a StructuredOutput
	// tool whose input is the schema.
	if r := models.Requests()[len(models.Requests())-1]; !r.HasTool("StructuredOutput") || !strings.Contains(jsonText(r.Body["tools"]), `"count"`) {
		t.Errorf("the schema did not reach the model as Claude Code's StructuredOutput tool: %v", r.Tools)
	}
	models.SetScript(modeltest.JSON(map[string]any{"files": "alpha.txt", "count": "two"}, usage))
	_, _, err = box.RunAs[inventory](ctx, b.Agent, &box.AgentParams{Prompt: "List the files as JSON"})
	var oe *box.OutputError
	if !errors.As(err, &oe) && !errors.As(err, &re) {
		t.Errorf("RunAs with output off the schema = %v, want an OutputError or the server's RunError", err)
	} else if !strings.Contains(err.Error(), "files") && !strings.Contains(err.Error(), "schema") {
		t.Errorf("the schema error does not say what is wrong: %v", err)
	}

	checkCancel(t, b, models, "[c]laude", usage)
}

// toText renders a tool output (a string or JSON) for matching.
func toText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	}
	var b strings.Builder
	writeText(&b, v)
	return b.String()
}

func writeText(b *strings.Builder, v any) {
	switch v := v.(type) {
	case string:
		b.WriteString(v)
		b.WriteByte('\n')
	case []any:
		for _, x := range v {
			writeText(b, x)
		}
	case map[string]any:
		for _, x := range v {
			writeText(b, x)
		}
	}
}

func jsonText(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// TestCodexCLI drives the real Codex CLI in a box through the SDK against
// a scripted OpenAI Responses API: its reasoning, its exec_command tool
// run and its output, the answer with usage, the session resumed, the reasoning
// effort in the request, structured output, and a cancel.
func TestCodexCLI(t *testing.T) {
	t.Parallel()
	requireCLI(t, "codex", "@openai/codex@0.169.0")
	usage := modeltest.Usage{Input: 900, Output: 30, CacheRead: 200}
	models := modeltest.New(t, modeltest.Shell("ls", "The files are", usage))
	srv := cliServer(t, models)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Agent: &box.AgentOptions{Harness: box.HarnessCodex, Model: box.OpenAICodexGPT5_5, APIKey: "sk-openai-scripted"}})
	mustRun(t, b, "touch alpha.txt beta.txt")

	got := streamRun(t, b, &box.AgentParams{Prompt: "Which files are here?", Options: box.CodexOptions{ModelReasoningEffort: "high"}})
	if got.err != nil {
		t.Fatalf("stream: %v (%d requests to the model)", got.err, len(models.Requests()))
	}
	got.checkShellTurn(t, "command_execution") // Codex reports the commands it runs, not its tool calls
	f := got.finish
	if f == nil || f.SessionID == "" || f.Usage.OutputTokens != 2*30 || f.Usage.InputTokens < 2*900 || f.Usage.CachedInputTokens != 2*200 {
		t.Fatalf("finish = %+v", f)
	}
	runs, err := b.Runs(ctx)
	if i := slices.IndexFunc(runs, func(r box.RunRecord) bool { return r.ID == got.run.ID }); err != nil || i < 0 ||
		runs[i].SessionID != f.SessionID || runs[i].OutputTokens != f.Usage.OutputTokens || runs[i].InputTokens != f.Usage.InputTokens {
		t.Errorf("the run's record disagrees with the stream's finish %+v: %v", f, err)
	}
	reqs := agentRequests(models)
	if len(reqs) != 2 {
		t.Fatalf("%d agent requests to the model, want 2", len(reqs))
	}
	first := reqs[0]
	if first.API != "responses" || first.Model != "gpt-5.5" || first.Key != "sk-openai-scripted" || !strings.Contains(first.System, "Codex") || !strings.Contains(first.User, "Which files are here?") {
		t.Errorf("first request: api %s, model %q, key %q, system %.80q, user %.200q", first.API, first.Model, first.Key, first.System, first.User)
	}
	if effort := jsonText(first.Body["reasoning"]); !strings.Contains(effort, `"effort":"high"`) {
		t.Errorf("the reasoning effort did not reach the model: reasoning %s", effort)
	}
	if !reqs[1].HasToolResult || !strings.Contains(reqs[1].ToolResult, "beta.txt") {
		t.Errorf("second request's tool result = %q", reqs[1].ToolResult)
	}

	checkResume(t, b, models, first, f.SessionID, usage, nil)

	// Structured output: Codex is asked for the schema's JSON.
	type inventory struct {
		Count int `json:"count"`
	}
	models.SetScript(modeltest.JSON(map[string]any{"count": 2}, usage))
	inv, _, err := box.RunAs[inventory](ctx, b.Agent, &box.AgentParams{Prompt: "Count the files"})
	if err != nil || inv.Count != 2 {
		t.Errorf("RunAs = %+v, %v", inv, err)
	}
	if u := models.Requests()[len(models.Requests())-1].User; !strings.Contains(u, `"count"`) {
		t.Errorf("the schema did not reach the model: %.300q", u)
	}

	checkCancel(t, b, models, "[c]odex", usage)
}

// checkResume runs twice more (with opts) after a first run whose first
// model request was first: each answer comes in the same session, the
// model's request carries the first run's prompt, and each run reports
// its own usage, one model turn's, in its stream and its record, not the
// session's total (Codex reports the session's).
func checkResume(t *testing.T, b *box.Box, models *modeltest.Server, first *modeltest.Request, session string, usage modeltest.Usage, opts box.HarnessOptions) {
	t.Helper()
	models.SetScript(func(r *modeltest.Request) modeltest.Reply {
		return modeltest.Reply{Text: "Still two files.", Usage: usage}
	})
	for _, prompt := range []string{"And now?", "And once more?"} {
		again := streamRun(t, b, &box.AgentParams{Prompt: prompt, Options: opts})
		if again.err != nil || again.finish == nil || again.finish.SessionID != session || again.run.Result != "Still two files." {
			t.Fatalf("resumed run = %+v, %+v, %v", again.run, again.finish, again.err)
		}
		reqs := agentRequests(models)
		last := reqs[len(reqs)-1]
		history := jsonText(last.Body["messages"]) + jsonText(last.Body["input"])
		if !strings.Contains(last.User, prompt) || last.Turns <= first.Turns || !strings.Contains(history, "Which files are here?") {
			t.Errorf("the resumed request does not carry the first run: turns %d, user %q", last.Turns, last.User)
		}
		u := again.finish.Usage
		if want := int64(usage.Output); u.OutputTokens != want || u.InputTokens < int64(usage.Input) || u.InputTokens >= 2*int64(usage.Input) {
			t.Errorf("resumed run %q reports usage %+v, want one model turn's (output %d, input %d to %d)", prompt, u, usage.Output, usage.Input, 2*usage.Input-1)
		}
		runs, err := b.Runs(t.Context())
		if i := slices.IndexFunc(runs, func(r box.RunRecord) bool { return r.ID == again.run.ID }); err != nil || i < 0 ||
			runs[i].OutputTokens != u.OutputTokens || runs[i].InputTokens != u.InputTokens {
			t.Errorf("the resumed run's record disagrees with its finish %+v: %v", u, err)
		}
	}
}

// checkCancel cancels a run while the model answers it slowly, and one
// while the CLI's shell tool runs a command: the CLI and what it started
// (processes matching pattern, and the tool's command, which the CLIs
// start in a session of their own) are gone from the box, and the runs'
// records say cancelled.
func checkCancel(t *testing.T, b *box.Box, models *modeltest.Server, pattern string, usage modeltest.Usage) {
	t.Helper()
	models.SetScript(func(r *modeltest.Request) modeltest.Reply {
		return modeltest.Reply{Text: strings.Repeat("slowly ", 200), Slow: 100 * time.Millisecond, Usage: usage}
	})
	before := len(models.Requests())
	slow := startAndCancel(t, b, "Take your time", func() bool { return len(agentRequestsSince(models, before)) > 0 })
	waitGone(t, b, pattern)

	sleep := fmt.Sprintf("sleep 977.%06d", rand.IntN(1000000))
	models.SetScript(modeltest.Shell(sleep, "Slept", usage))
	tool := startAndCancel(t, b, "Sleep a while", func() bool {
		r, err := b.Exec.Command(t.Context(), "pgrep -f '[s]"+sleep[1:]+"' >/dev/null && echo running")
		return err == nil && r.Stdout == "running\n"
	})
	waitGone(t, b, pattern)
	waitGone(t, b, "[s]"+sleep[1:])

	runs, err := b.Runs(t.Context())
	for _, id := range []string{slow, tool} {
		if i := slices.IndexFunc(runs, func(r box.RunRecord) bool { return r.ID == id }); err != nil || i < 0 || runs[i].Status != box.RunCancelled {
			t.Errorf("the cancelled run %s's record (%v): %+v", id, err, runs)
		}
	}
}

// startAndCancel starts a run, waits until started reports that it is
// under way (within 60 s), cancels it and returns its id.
func startAndCancel(t *testing.T, b *box.Box, prompt string, started func() bool) string {
	t.Helper()
	ctx := t.Context()
	s, err := b.Agent.Stream(ctx, &box.AgentParams{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Next() { // the run's id comes with its start
		if _, ok := s.Current().(*box.StartChunk); ok {
			break
		}
	}
	for deadline := time.Now().Add(60 * time.Second); !started(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run %q was not under way within 60 s", prompt)
		}
	}
	run := s.Run()
	if err := run.Cancel(ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	return run.ID
}

// waitGone waits until no process in the box matches pattern.
func waitGone(t *testing.T, b *box.Box, pattern string) {
	t.Helper()
	ctx := t.Context()
	gone := func() bool {
		r, err := b.Exec.Command(ctx, "pgrep -f '"+pattern+"' || echo none")
		return err == nil && r.Stdout == "none\n"
	}
	for deadline := time.Now().Add(20 * time.Second); !gone(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			ps, _ := b.Exec.Command(ctx, "ps -eo pid,ppid,args")
			t.Fatalf("%s still runs after the cancel:\n%s", pattern, ps.Stdout)
		}
	}
}

// TestOpenCodeCLI drives the real OpenCode CLI in a box through the SDK
// against the scripted Anthropic Messages API (OpenCode's anthropic
// provider pointed at the operator's URL): its reasoning, its bash tool
// run and its output, the answer with usage, the session resumed, structured output,
// and a cancel.
func TestOpenCodeCLI(t *testing.T) {
	t.Parallel()
	requireCLI(t, "opencode", "opencode-ai@1.18.33")
	usage := modeltest.Usage{Input: 700, Output: 20, CacheRead: 100}
	models := modeltest.New(t, modeltest.Shell("ls", "The files are", usage))
	srv := cliServer(t, models)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Agent: &box.AgentOptions{Harness: box.HarnessOpenCode, Model: box.Model("anthropic/claude-sonnet-4-5"), APIKey: "sk-ant-opencode"}})
	mustRun(t, b, "touch alpha.txt beta.txt")

	got := streamRun(t, b, &box.AgentParams{Prompt: "Which files are here?"})
	if got.err != nil {
		t.Fatalf("stream: %v (%d requests to the model)", got.err, len(models.Requests()))
	}
	got.checkShellTurn(t, "bash")
	f := got.finish
	if f == nil || f.SessionID == "" || f.Usage.OutputTokens != 2*20 || f.Usage.InputTokens < 2*700 {
		t.Fatalf("finish = %+v", f)
	}
	runs, err := b.Runs(ctx)
	if i := slices.IndexFunc(runs, func(r box.RunRecord) bool { return r.ID == got.run.ID }); err != nil || i < 0 ||
		runs[i].SessionID != f.SessionID || runs[i].OutputTokens != f.Usage.OutputTokens {
		t.Errorf("the run's record disagrees with the stream's finish %+v: %v", f, err)
	}
	reqs := agentRequests(models)
	if len(reqs) != 2 {
		t.Fatalf("%d agent requests to the model, want 2", len(reqs))
	}
	first := reqs[0]
	if first.API != "anthropic" || first.Model != "claude-sonnet-4-5" || first.Key != "sk-ant-opencode" || !strings.Contains(first.System, "opencode") || !strings.Contains(first.User, "Which files are here?") {
		t.Errorf("first request: api %s, model %q, key %q, system %.80q, user %.200q", first.API, first.Model, first.Key, first.System, first.User)
	}

	checkResume(t, b, models, first, f.SessionID, usage, nil)

	type inventory struct {
		Count int `json:"count"`
	}
	models.SetScript(modeltest.JSON(map[string]any{"count": 2}, usage))
	inv, _, err := box.RunAs[inventory](ctx, b.Agent, &box.AgentParams{Prompt: "Count the files"})
	if err != nil || inv.Count != 2 {
		t.Errorf("RunAs = %+v, %v", inv, err)
	}

	checkCancel(t, b, models, "[o]pencode", usage)
}

// TestVercelGrokCLI runs a Grok model of the newest SDK through boxd with
// the real Claude Code CLI. The model id is vercel/spacexai/…, and its
// harness is the one the SDK infers for it. The Vercel AI Gateway is the
// scripted server here, at the operator's URL for "vercel". The CLI asks
// the gateway's Anthropic-compatible endpoint for spacexai/grok-4.3 with
// the key as a bearer token. The id from before the gateway's move
// (vercel/xai/…, which the 0.5.5 SDK still sends) is accepted and passed
// on as it is, because boxd keeps no list of models. Whether the gateway
// serves it is the gateway's call, as on the cloud.
func TestVercelGrokCLI(t *testing.T) {
	t.Parallel()
	requireCLI(t, "claude", "@anthropic-ai/claude-code@2.1.197")
	models := modeltest.New(t, func(r *modeltest.Request) modeltest.Reply {
		return modeltest.Reply{Text: "Grok here.", Usage: modeltest.Usage{Input: 100, Output: 5}}
	})
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.ModelProviderURLs = map[string]string{"vercel": models.URL + "/v1"}
	}))
	if h := box.InferHarness(box.VercelGrok4_3); h != box.HarnessClaudeCode {
		t.Fatalf("InferHarness(%s) = %s, want claude-code (vercel/ but not vercel/openai/)", box.VercelGrok4_3, h)
	}
	for _, c := range []struct {
		model   box.Model
		gateway string // the model id the gateway is asked for
	}{
		{box.VercelGrok4_3, "spacexai/grok-4.3"},
		{"vercel/xai/grok-4.3", "xai/grok-4.3"},
	} {
		before := len(models.Requests())
		b := newBox(t, srv, &box.CreateParams{Agent: &box.AgentOptions{Harness: box.InferHarness(c.model), Model: c.model, APIKey: "vck-scripted-key"}})
		run, err := b.Agent.Run(t.Context(), &box.AgentParams{Prompt: "Who are you?"})
		if err != nil || run.Status != box.RunCompleted || run.Result != "Grok here." {
			t.Fatalf("%s: run = %+v, %v (%d requests to the gateway)", c.model, run, err, len(models.Requests())-before)
		}
		reqs := agentRequestsSince(models, before)
		if len(reqs) == 0 {
			t.Fatalf("%s: no agent request reached the gateway", c.model)
		}
		for _, r := range reqs {
			if r.API != "anthropic" || r.Model != c.gateway || r.Key != "vck-scripted-key" || !strings.Contains(r.User, "Who are you?") {
				t.Errorf("%s: the gateway got api %s, model %q, key %q, user %.100q; want anthropic, %q, the box's key", c.model, r.API, r.Model, r.Key, r.User, c.gateway)
			}
		}
	}
}
