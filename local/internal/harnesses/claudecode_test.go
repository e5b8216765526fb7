package harnesses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// claudeSession is the recording in testdata/claude-code.jsonl, made with
// --include-partial-messages: thinking and text stream as deltas, and the
// complete assistant messages that follow them add nothing.
var claudeSession = []ev{
	{"thinking", `{"text":"The user wants"}`},
	{"thinking", `{"text":" the file list."}`},
	{"text", `{"text":"Let me "}`},
	{"text", `{"text":"look."}`},
	{"tool", `{"toolCallId":"toolu_01Xq9Lm3Rt7Vb2Nc4Kd8Pe6W","name":"Bash","input":{"command":"ls","description":"List files"}}`},
	{"tool_result", `{"toolCallId":"toolu_01Xq9Lm3Rt7Vb2Nc4Kd8Pe6W","output":"README.md\nmain.go"}`},
	{"text", `{"text":"There are two files: "}`},
	{"text", "{\"text\":\"`README.md` and `main.go`.\"}"},
	{"done", "{\"output\":\"There are two files: `README.md` and `main.go`.\",\"input_tokens\":26156,\"output_tokens\":105,\"cached_input_tokens\":25024,\"total_cost_usd\":0.01893675,\"session_id\":\"3f1a9c2e-6b7d-4e2a-9c1f-2d8e5a7b4c10\"}"},
}

func TestClaudeCodeSession(t *testing.T) {
	diffEvents(t, claudeSession, decodeFile(t, harness(t, "claude-code"), "claude-code.jsonl"))
}

// TestClaudeCodeCompleteMessages: without partial messages (or for
// messages the CLI does not stream) the complete blocks are relayed.
// Subagent messages carry a parent_tool_use_id: their text is thinking.
func TestClaudeCodeCompleteMessages(t *testing.T) {
	lines := `{"type":"system","subtype":"init","session_id":"s-1","model":"claude-opus-4-5-20251101"}
{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"thinking","thinking":"Check the tests.","signature":"sig"}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"Running the tests."}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Task","input":{"description":"Run tests","prompt":"Run go test","subagent_type":"general-purpose"}}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Run go test"}]},"parent_tool_use_id":"toolu_1","session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_sub","role":"assistant","content":[{"type":"text","text":"Running go test now."}]},"parent_tool_use_id":"toolu_1","session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_sub","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"go test ./..."}}]},"parent_tool_use_id":"toolu_1","session_id":"s-1"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2","type":"tool_result","content":"ok  \texample.com/x\t0.01s","is_error":false}]},"parent_tool_use_id":"toolu_1","session_id":"s-1"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":[{"type":"text","text":"All tests pass."},{"type":"text","text":"1 package."}]}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_2","role":"assistant","content":[{"type":"tool_use","id":"toolu_3","name":"Read","input":{"file_path":"/workspace/home/shot.png"}}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_3","type":"tool_result","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0K"}}]}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_3","role":"assistant","content":[{"type":"tool_use","id":"toolu_4","name":"Bash","input":{"command":"rm -rf /"}}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"<tool_use_error>Permission denied</tool_use_error>","is_error":true,"tool_use_id":"toolu_4"}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_4","role":"assistant","content":[{"type":"text","text":"All tests pass."}]},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"result","subtype":"success","is_error":false,"duration_ms":12000,"num_turns":4,"result":"All tests pass.","session_id":"s-1","total_cost_usd":0.0421,"usage":{"input_tokens":40,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":300}}
`
	diffEvents(t, []ev{
		{"thinking", `{"text":"Check the tests."}`},
		{"text", `{"text":"Running the tests."}`},
		{"tool", `{"toolCallId":"toolu_1","name":"Task","input":{"description":"Run tests","prompt":"Run go test","subagent_type":"general-purpose"}}`},
		{"thinking", `{"text":"Running go test now."}`},
		{"tool", `{"toolCallId":"toolu_2","name":"Bash","input":{"command":"go test ./..."}}`},
		{"tool_result", `{"toolCallId":"toolu_2","output":"ok  \texample.com/x\t0.01s"}`},
		{"tool_result", `{"toolCallId":"toolu_1","output":"All tests pass.\n1 package."}`},
		{"tool", `{"toolCallId":"toolu_3","name":"Read","input":{"file_path":"/workspace/home/shot.png"}}`},
		{"tool_result", `{"toolCallId":"toolu_3","output":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0K"}}]}`},
		{"tool", `{"toolCallId":"toolu_4","name":"Bash","input":{"command":"rm -rf /"}}`},
		{"tool_result", `{"toolCallId":"toolu_4","output":"<tool_use_error>Permission denied</tool_use_error>","is_error":true}`},
		{"text", `{"text":"All tests pass."}`},
		{"done", `{"output":"All tests pass.","input_tokens":40,"output_tokens":300,"cached_input_tokens":0,"total_cost_usd":0.0421,"session_id":"s-1"}`},
	}, decodeString(t, harness(t, "claude-code"), lines))
}

// TestClaudeCodeServerTools: a server-side tool (web search) is called and
// answered inside the assistant's message.
func TestClaudeCodeServerTools(t *testing.T) {
	lines := `{"type":"assistant","message":{"id":"msg_1","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"go 1.26 release"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","title":"Go 1.26","url":"https://go.dev/doc/go1.26"}]},{"type":"text","text":"Go 1.26 is out."}]},"parent_tool_use_id":null,"session_id":"s"}
`
	diffEvents(t, []ev{
		{"tool", `{"toolCallId":"srvtoolu_1","name":"web_search","input":{"query":"go 1.26 release"}}`},
		{"tool_result", `{"toolCallId":"srvtoolu_1","output":[{"type":"web_search_result","title":"Go 1.26","url":"https://go.dev/doc/go1.26"}]}`},
		{"text", `{"text":"Go 1.26 is out."}`},
		{"done", `{"output":"Go 1.26 is out.","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"s"}`},
	}, decodeString(t, harness(t, "claude-code"), lines))
}

func TestClaudeCodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{
			"max turns",
			`{"type":"result","subtype":"error_max_turns","is_error":false,"duration_ms":9000,"num_turns":3,"session_id":"s-2","total_cost_usd":0.5,"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":20},"permission_denials":[],"errors":[]}`,
			`{"error":"claude-code: reached the maximum number of turns","input_tokens":115,"output_tokens":20,"cached_input_tokens":100,"total_cost_usd":0.5,"session_id":"s-2"}`,
		},
		{
			"invalid key",
			`{"type":"result","subtype":"success","is_error":true,"duration_ms":300,"num_turns":1,"result":"Invalid API key · Fix external API key","session_id":"s-3","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`,
			`{"error":"claude-code: Invalid API key · Fix external API key","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"s-3"}`,
		},
		{
			"during execution",
			`{"type":"result","subtype":"error_during_execution","is_error":true,"duration_ms":300,"num_turns":1,"session_id":"s-4","total_cost_usd":0.001,"errors":["API Error: 529 {\"type\":\"overloaded_error\"}"]}`,
			`{"error":"claude-code: failed during execution: API Error: 529 {\"type\":\"overloaded_error\"}","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0.001,"session_id":"s-4"}`,
		},
		{
			"budget",
			`{"type":"result","subtype":"error_max_budget_usd","is_error":true,"session_id":"s-5","total_cost_usd":2.01}`,
			`{"error":"claude-code: reached the maximum budget","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":2.01,"session_id":"s-5"}`,
		},
		{
			"unknown subtype",
			`{"type":"result","subtype":"error_new_kind","is_error":true,"session_id":"s-6"}`,
			`{"error":"claude-code: run failed (error_new_kind)","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"s-6"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Text before the failure is relayed, but no done follows.
			lines := `{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"Working on it."}]},"parent_tool_use_id":null}` + "\n" + tc.line + "\n"
			diffEvents(t, []ev{{"text", `{"text":"Working on it."}`}, {"error", tc.want}}, decodeString(t, harness(t, "claude-code"), lines))
		})
	}
}

// TestClaudeCodeNoResult: a CLI that ends without a result event but
// wrote text gets a done with that text; one that wrote nothing gets none.
func TestClaudeCodeNoResult(t *testing.T) {
	h := harness(t, "claude-code")
	lines := `{"type":"system","subtype":"init","session_id":"s-7"}
{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_a"}},"parent_tool_use_id":null,"session_id":"s-7"}
{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"First "}},"parent_tool_use_id":null,"session_id":"s-7"}
{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"look."}},"parent_tool_use_id":null,"session_id":"s-7"}
{"type":"assistant","message":{"id":"msg_a","content":[{"type":"tool_use","id":"t1","name":"Glob","input":{"pattern":"*.go"}}]},"parent_tool_use_id":null,"session_id":"s-7"}
{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_b"}},"parent_tool_use_id":null,"session_id":"s-7"}
{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Partial answer"}},"parent_tool_use_id":null,"session_id":"s-7"}
`
	diffEvents(t, []ev{
		{"text", `{"text":"First "}`},
		{"text", `{"text":"look."}`},
		{"tool", `{"toolCallId":"t1","name":"Glob","input":{"pattern":"*.go"}}`},
		{"text", `{"text":"Partial answer"}`},
		{"done", `{"output":"Partial answer","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"s-7"}`},
	}, decodeString(t, h, lines))
	if got := decodeString(t, h, `{"type":"system","subtype":"init","session_id":"s-8"}`+"\n"); len(got) != 0 {
		t.Errorf("events from a run without output: %v", got)
	}
}

func TestClaudeCodeCommand(t *testing.T) {
	h := harness(t, "claude-code")
	base := []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages", "--permission-mode", "bypassPermissions"}
	args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	var opts map[string]any
	if err := json.Unmarshal([]byte(`{
		"maxTurns": 5, "maxBudgetUsd": 2.5, "effort": "max",
		"thinking": {"type": "enabled", "budgetTokens": 16000},
		"disallowedTools": ["Bash(rm:*)", "WebFetch"],
		"agents": {"reviewer": {"description": "Reviews code", "prompt": "You review code <carefully>."}},
		"fallbackModel": "anthropic/claude-haiku-4-5",
		"systemPrompt": {"type": "preset", "preset": "claude_code", "append": "Answer in French."},
		"promptSuggestions": true, "someFutureKey": 1
	}`), &opts); err != nil {
		t.Fatal(err)
	}
	key := map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_API_KEY": testKey}
	for _, tc := range []struct {
		name string
		spec Spec
		want command
	}{
		{
			"basic",
			Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "List the files", APIKey: testKey},
			command{args("--model", "claude-sonnet-4-5", "List the files"), key, ""},
		},
		{
			"mcp servers: the config file, and the run waits for them",
			Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "Open the page", APIKey: testKey,
				MCPServers: []MCPServer{{Name: "chrome-devtools", Command: "chrome-devtools-mcp"}}, MCPConfig: "/home/boxuser/.config/boxd/mcp.json"},
			command{args("--model", "claude-sonnet-4-5", "--mcp-config=/home/boxuser/.config/boxd/mcp.json", "Open the page"),
				map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_API_KEY": testKey, "MCP_CONNECTION_NONBLOCKING": "0"}, ""},
		},
		{
			"resume and options",
			Spec{Model: "anthropic/claude-opus-4-5", Prompt: "Continue", SessionID: "3f1a9c2e-6b7d-4e2a-9c1f-2d8e5a7b4c10", Options: opts, APIKey: testKey},
			command{args("--model", "claude-opus-4-5", "--resume=3f1a9c2e-6b7d-4e2a-9c1f-2d8e5a7b4c10",
				"--max-turns", "5", "--max-budget-usd", "2.5", "--effort", "max", "--max-thinking-tokens", "16000",
				"--disallowedTools=Bash(rm:*)", "--disallowedTools=WebFetch",
				"--agents", `{"reviewer":{"description":"Reviews code","prompt":"You review code <carefully>."}}`,
				"--fallback-model", "claude-haiku-4-5", "--append-system-prompt", "Answer in French.", "Continue"), key, ""},
		},
		{
			"adaptive thinking and a replaced system prompt",
			Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "Hi", APIKey: testKey, Options: map[string]any{
				"thinking": map[string]any{"type": "adaptive"}, "systemPrompt": "You are terse.", "maxTurns": 0.0}},
			command{args("--model", "claude-sonnet-4-5", "--thinking", "adaptive", "--system-prompt", "You are terse.", "Hi"), key, ""},
		},
		{
			"thinking disabled",
			Spec{Prompt: "Hi", APIKey: testKey, Options: map[string]any{"thinking": map[string]any{"type": "disabled"}}},
			command{args("--thinking", "disabled", "Hi"), key, ""},
		},
		{
			"200 KiB prompt on stdin",
			Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: bigPrompt, APIKey: testKey},
			command{args("--model", "claude-sonnet-4-5"), key, bigPrompt},
		},
		{
			"prompt that looks like a flag on stdin",
			Spec{Prompt: "--help me", APIKey: testKey},
			command{base, key, "--help me"},
		},
		{
			"sonnet 4 alias",
			Spec{Model: "anthropic/claude-sonnet-4", Prompt: "x", APIKey: testKey},
			command{args("--model", "claude-sonnet-4-0", "x"), key, ""},
		},
		{
			"the 0.1.x scheme",
			Spec{Model: "claude/opus_4_6", Prompt: "x", APIKey: testKey},
			command{args("--model", "claude-opus-4-6", "x"), key, ""},
		},
		{
			"the 0.1.x scheme, sonnet 4",
			Spec{Model: "claude/sonnet_4", Prompt: "x", APIKey: testKey, Options: map[string]any{"fallbackModel": "claude/haiku_4_5"}},
			command{args("--model", "claude-sonnet-4-0", "--fallback-model", "claude-haiku-4-5", "x"), key, ""},
		},
		{
			"bare model id",
			Spec{Model: "claude-haiku-4-5", Prompt: "x", APIKey: testKey},
			command{args("--model", "claude-haiku-4-5", "x"), key, ""},
		},
		{
			"openrouter",
			Spec{Model: "openrouter/anthropic/claude-sonnet-4", Prompt: "x", APIKey: testKey,
				Options: map[string]any{"fallbackModel": "openrouter/anthropic/claude-haiku-4-5"}},
			command{args("--model", "anthropic/claude-sonnet-4", "--fallback-model", "anthropic/claude-haiku-4-5", "x"),
				map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_BASE_URL": "https://openrouter.ai/api", "ANTHROPIC_AUTH_TOKEN": testKey, "ANTHROPIC_API_KEY": ""}, ""},
		},
		{
			"the operator's Anthropic endpoint",
			Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "x", APIKey: testKey, BaseURLs: map[string]string{"anthropic": "http://llm.internal:4000", "openai": "http://elsewhere/v1"}},
			command{args("--model", "claude-sonnet-4-5", "x"),
				map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_BASE_URL": "http://llm.internal:4000", "ANTHROPIC_API_KEY": testKey}, ""},
		},
		{
			"the operator's OpenRouter endpoint",
			Spec{Model: "openrouter/anthropic/claude-sonnet-4", Prompt: "x", APIKey: testKey, BaseURLs: map[string]string{"openrouter": "http://or.internal/api/v1"}},
			command{args("--model", "anthropic/claude-sonnet-4", "x"),
				map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_BASE_URL": "http://or.internal/api", "ANTHROPIC_AUTH_TOKEN": testKey, "ANTHROPIC_API_KEY": ""}, ""},
		},
		{
			"vercel",
			Spec{Model: "vercel/anthropic/claude-sonnet-4.6", Prompt: "x", APIKey: testKey},
			command{args("--model", "anthropic/claude-sonnet-4.6", "x"),
				map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_BASE_URL": "https://ai-gateway.vercel.sh", "ANTHROPIC_AUTH_TOKEN": testKey, "ANTHROPIC_API_KEY": ""}, ""},
		},
		{
			// A Grok id of the newest SDK, whose harness it infers as
			// claude-code (vercel/ but not vercel/openai/): the gateway's
			// model id is the rest.
			"vercel grok",
			Spec{Model: "vercel/spacexai/grok-4.3", Prompt: "x", APIKey: testKey},
			command{args("--model", "spacexai/grok-4.3", "x"),
				map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_BASE_URL": "https://ai-gateway.vercel.sh", "ANTHROPIC_AUTH_TOKEN": testKey, "ANTHROPIC_API_KEY": ""}, ""},
		},
		{
			"vercel grok, the id before the move",
			Spec{Model: "vercel/xai/grok-4.3", Prompt: "x", APIKey: testKey},
			command{args("--model", "xai/grok-4.3", "x"),
				map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_BASE_URL": "https://ai-gateway.vercel.sh", "ANTHROPIC_AUTH_TOKEN": testKey, "ANTHROPIC_API_KEY": ""}, ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustCommand(t, h, tc.spec)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Command (-want +got):\n%s", d)
			}
		})
	}
}

func TestClaudeCodeCommandErrors(t *testing.T) {
	h := harness(t, "claude-code")
	for _, tc := range []struct {
		name, want string
		spec       Spec
	}{
		{"openai model", "cannot run openai models", Spec{Model: "openai/gpt-5.5", Prompt: "x"}},
		{"maxTurns string", "maxTurns must be a number", Spec{Prompt: "x", Options: map[string]any{"maxTurns": "5"}}},
		{"maxTurns fraction", "maxTurns must be a non-negative integer", Spec{Prompt: "x", Options: map[string]any{"maxTurns": 2.5}}},
		{"budget", "maxBudgetUsd must be positive", Spec{Prompt: "x", Options: map[string]any{"maxBudgetUsd": 0.0}}},
		{"effort", "effort must be", Spec{Prompt: "x", Options: map[string]any{"effort": "extreme"}}},
		{"thinking type", "thinking.type", Spec{Prompt: "x", Options: map[string]any{"thinking": map[string]any{"type": "sometimes"}}}},
		{"thinking budget", "budgetTokens", Spec{Prompt: "x", Options: map[string]any{"thinking": map[string]any{"type": "enabled"}}}},
		{"disallowedTools", "list of strings", Spec{Prompt: "x", Options: map[string]any{"disallowedTools": "Bash"}}},
		{"systemPrompt", "systemPrompt", Spec{Prompt: "x", Options: map[string]any{"systemPrompt": 42.0}}},
		{"fallback provider", "same provider", Spec{Model: "anthropic/claude-opus-4-5", Prompt: "x", Options: map[string]any{"fallbackModel": "openrouter/anthropic/claude-haiku-4-5"}}},
		{"session", "invalid session id", Spec{Prompt: "x", SessionID: "--dangerously-skip-permissions"}},
		{"huge system prompt", "longer than", Spec{Prompt: "x", Options: map[string]any{"systemPrompt": bigPrompt}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := h.Command(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Command error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestClaudeCodeStandIn(t *testing.T) {
	checkStandIn(t, "claude-code", Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "List the files", APIKey: testKey, Options: map[string]any{"maxTurns": 3.0}},
		"claude-code.jsonl", "ANTHROPIC_API_KEY", claudeSession)
}
