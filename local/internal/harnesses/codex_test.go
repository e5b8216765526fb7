package harnesses

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// codexSession is the recording in testdata/codex.jsonl.
var codexSession = []ev{
	{"thinking", `{"text":"**Listing the workspace**\n\nI'll run ls to see the files."}`},
	{"tool", `{"toolCallId":"item_1","name":"command_execution","input":{"command":"bash -lc ls"}}`},
	{"tool_result", `{"toolCallId":"item_1","output":"README.md\nmain.go\n"}`},
	{"text", "{\"text\":\"There are two files: `README.md` and `main.go`.\"}"},
	{"done", "{\"output\":\"There are two files: `README.md` and `main.go`.\",\"input_tokens\":24763,\"output_tokens\":122,\"cached_input_tokens\":24448,\"total_cost_usd\":0,\"session_id\":\"0199a7f3-52c1-7d20-b4e8-6f1a2c3d4e5f\"}"},
}

func TestCodexSession(t *testing.T) {
	diffEvents(t, codexSession, decodeFile(t, harness(t, "codex"), "codex.jsonl"))
}

// TestCodexItems covers the other tool items: a file change reported only
// when complete, MCP calls that succeed and fail, a web search, a
// declined command, the to-do list, a subagent and a warning item.
func TestCodexItems(t *testing.T) {
	lines := `{"type":"thread.started","thread_id":"t-1"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"error","message":"model rerouted: gpt-5.5 -> gpt-5.4 (HighDemand)"}}
{"type":"item.started","item":{"id":"item_1","type":"todo_list","items":[{"text":"Read the code","completed":false},{"text":"Fix the bug","completed":false}]}}
{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/workspace/home/main.go","kind":"update"}],"status":"completed"}}
{"type":"item.started","item":{"id":"item_3","type":"mcp_tool_call","server":"github","tool":"get_issue","arguments":{"number":42},"result":null,"error":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_3","type":"mcp_tool_call","server":"github","tool":"get_issue","arguments":{"number":42},"result":{"content":[{"type":"text","text":"Issue 42: crash on start"}],"structured_content":null},"error":null,"status":"completed"}}
{"type":"item.started","item":{"id":"item_4","type":"mcp_tool_call","server":"db","tool":"query","arguments":null,"result":null,"error":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_4","type":"mcp_tool_call","server":"db","tool":"query","arguments":null,"result":null,"error":{"message":"connection refused"},"status":"failed"}}
{"type":"item.started","item":{"id":"item_5","type":"web_search","id":"ws_1","query":"go 1.26 iterators","action":{"type":"search","query":"go 1.26 iterators"}}}
{"type":"item.completed","item":{"id":"item_5","type":"web_search","id":"ws_1","query":"go 1.26 iterators","action":{"type":"search","query":"go 1.26 iterators"}}}
{"type":"item.completed","item":{"id":"item_6","type":"command_execution","command":"bash -lc 'rm -rf /'","aggregated_output":"","exit_code":null,"status":"declined"}}
{"type":"item.started","item":{"id":"item_7","type":"collab_tool_call","tool":"spawn_agent","sender_thread_id":"t-1","receiver_thread_ids":["t-2"],"prompt":"Write the tests","agents_states":{},"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_7","type":"collab_tool_call","tool":"spawn_agent","sender_thread_id":"t-1","receiver_thread_ids":["t-2"],"prompt":"Write the tests","agents_states":{"t-2":{"status":"running","message":null}},"status":"completed"}}
{"type":"item.updated","item":{"id":"item_1","type":"todo_list","items":[{"text":"Read the code","completed":true},{"text":"Fix the bug","completed":false}]}}
{"type":"item.completed","item":{"id":"item_8","type":"agent_message","text":"Fixed the crash."}}
{"type":"item.completed","item":{"id":"item_1","type":"todo_list","items":[{"text":"Read the code","completed":true},{"text":"Fix the bug","completed":true}]}}
{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":10}}
`
	diffEvents(t, []ev{
		{"tool", `{"toolCallId":"item_1","name":"todo_list","input":{"items":[{"text":"Read the code","completed":false},{"text":"Fix the bug","completed":false}]}}`},
		{"tool", `{"toolCallId":"item_2","name":"file_change","input":{"changes":[{"path":"/workspace/home/main.go","kind":"update"}]}}`},
		{"tool_result", `{"toolCallId":"item_2","output":[{"path":"/workspace/home/main.go","kind":"update"}]}`},
		{"tool", `{"toolCallId":"item_3","name":"mcp__github__get_issue","input":{"number":42}}`},
		{"tool_result", `{"toolCallId":"item_3","output":"Issue 42: crash on start"}`},
		{"tool", `{"toolCallId":"item_4","name":"mcp__db__query","input":{}}`},
		{"tool_result", `{"toolCallId":"item_4","output":"connection refused","is_error":true}`},
		{"tool", `{"toolCallId":"ws_1","name":"web_search","input":{"action":{"type":"search","query":"go 1.26 iterators"},"query":"go 1.26 iterators"}}`},
		{"tool_result", `{"toolCallId":"ws_1","output":{"type":"search","query":"go 1.26 iterators"}}`},
		{"tool", `{"toolCallId":"item_6","name":"command_execution","input":{"command":"bash -lc 'rm -rf /'"}}`},
		{"tool_result", `{"toolCallId":"item_6","output":"","is_error":true}`},
		{"tool", `{"toolCallId":"item_7","name":"spawn_agent","input":{"prompt":"Write the tests","receiver_thread_ids":["t-2"]}}`},
		{"tool_result", `{"toolCallId":"item_7","output":{"t-2":{"status":"running","message":null}}}`},
		{"text", `{"text":"Fixed the crash."}`},
		{"tool_result", `{"toolCallId":"item_1","output":[{"text":"Read the code","completed":true},{"text":"Fix the bug","completed":true}]}`},
		{"done", `{"output":"Fixed the crash.","input_tokens":100,"output_tokens":10,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"t-1"}`},
	}, decodeString(t, harness(t, "codex"), lines))
}

// TestCodexLastMessage: the output is the last agent message, not all
// of them.
func TestCodexLastMessage(t *testing.T) {
	lines := `{"type":"thread.started","thread_id":"t"}
{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Looking."}}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Done: all good."}}
{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":2}}
`
	got := decodeString(t, harness(t, "codex"), lines)
	if want := `{"output":"Done: all good.","input_tokens":1,"output_tokens":2,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"t"}`; got[len(got)-1].Data != want {
		t.Errorf("done = %s, want %s", got[len(got)-1].Data, want)
	}
}

func TestCodexErrors(t *testing.T) {
	h := harness(t, "codex")
	start := `{"type":"thread.started","thread_id":"t-9"}` + "\n" + `{"type":"turn.started"}` + "\n"
	for _, tc := range []struct {
		name, lines string
		want        []ev
	}{
		{
			"turn failed",
			start + `{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion)"}
{"type":"error","message":"exceeded retry limit, last status: 401 Unauthorized"}
{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 401 Unauthorized"}}
`,
			[]ev{{"error", `{"error":"codex: exceeded retry limit, last status: 401 Unauthorized","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"t-9"}`}},
		},
		{
			"turn failed without a message",
			start + `{"type":"error","message":"stream error: model not found"}
{"type":"turn.failed","error":{"message":""}}
`,
			[]ev{{"error", `{"error":"codex: stream error: model not found","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"t-9"}`}},
		},
		{
			"retried error then success",
			start + `{"type":"error","message":"Reconnecting... 1/5"}
{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"OK"}}
{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":0,"output_tokens":1}}
`,
			[]ev{
				{"text", `{"text":"OK"}`},
				{"done", `{"output":"OK","input_tokens":5,"output_tokens":1,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"t-9"}`},
			},
		},
		{
			"error then exit",
			start + `{"type":"error","message":"unexpected status 400 Bad Request: model gpt-9 does not exist"}
`,
			[]ev{{"error", `{"error":"codex: unexpected status 400 Bad Request: model gpt-9 does not exist","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"t-9"}`}},
		},
		{
			"text then exit",
			start + `{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Half done."}}
`,
			[]ev{
				{"text", `{"text":"Half done."}`},
				{"done", `{"output":"Half done.","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"t-9"}`},
			},
		},
		{"nothing", start, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { diffEvents(t, tc.want, decodeString(t, h, tc.lines)) })
	}
}

func TestCodexCommand(t *testing.T) {
	h := harness(t, "codex")
	base := []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-c", "features.plugins=false", "-c", "analytics.enabled=false"}
	args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	key := map[string]string{"CODEX_API_KEY": testKey, "OPENAI_API_KEY": testKey}
	const session = "0199a7f3-52c1-7d20-b4e8-6f1a2c3d4e5f"
	for _, tc := range []struct {
		name string
		spec Spec
		want command
	}{
		{
			"basic",
			Spec{Model: "openai/gpt-5.3-codex", Prompt: "List the files", APIKey: testKey},
			command{args("--model", "gpt-5.3-codex", "List the files"), key, ""},
		},
		{
			"options and resume",
			Spec{Model: "openai/gpt-5.3-codex", Prompt: "Continue", SessionID: session, APIKey: testKey, Options: map[string]any{
				"model_reasoning_effort": "high", "model_reasoning_summary": "detailed", "personality": "pragmatic", "web_search": true, "modelReasoningEffort": "low"}},
			command{args("--model", "gpt-5.3-codex",
				"-c", `model_reasoning_effort="high"`, "-c", `model_reasoning_summary="detailed"`, "-c", `personality="pragmatic"`, "-c", `web_search="live"`,
				"resume", session, "Continue"), key, ""},
		},
		{
			"the operator's OpenAI endpoint",
			Spec{Model: "openai/gpt-5.5", Prompt: "x", APIKey: testKey, BaseURLs: map[string]string{"openai": "http://llm.internal:4000/v1"}},
			command{args("--model", "gpt-5.5", "-c", `model_provider="boxd-openai"`, "-c", `model_providers.boxd-openai.name="OpenAI"`,
				"-c", `model_providers.boxd-openai.base_url="http://llm.internal:4000/v1"`, "-c", `model_providers.boxd-openai.env_key="CODEX_API_KEY"`,
				"-c", `model_providers.boxd-openai.wire_api="responses"`, "x"), key, ""},
		},
		{
			"the operator's OpenRouter endpoint",
			Spec{Model: "openrouter/openai/o3", Prompt: "x", APIKey: testKey, BaseURLs: map[string]string{"openrouter": "http://or.internal/v1", "openai": "http://not-this/v1"}},
			command{args("--model", "openai/o3", "-c", `model_provider="openrouter"`, "-c", `model_providers.openrouter.name="OpenRouter"`,
				"-c", `model_providers.openrouter.base_url="http://or.internal/v1"`, "-c", `model_providers.openrouter.env_key="OPENROUTER_API_KEY"`,
				"-c", `model_providers.openrouter.wire_api="responses"`, "x"), map[string]string{"OPENROUTER_API_KEY": testKey}, ""},
		},
		{
			"mcp servers",
			Spec{Model: "openai/gpt-5.5", Prompt: "x", APIKey: testKey, SessionID: session, MCPServers: []MCPServer{
				{Name: "chrome-devtools", Command: "sh", Args: []string{"-c", `exec tool "$@"`, "tool", "--browserUrl", "http://127.0.0.1:9222"},
					Env: map[string]string{"B": "2", "A": "1"}, Timeout: 90 * time.Second},
				{Name: "team.docs", URL: "https://mcp.example/x", Headers: map[string]string{"X-Team": "a"}},
			}},
			command{args("--model", "gpt-5.5", "-c", "mcp_optional_startup_grace_ms=0",
				"-c", `mcp_servers.chrome-devtools.command="sh"`,
				"-c", `mcp_servers.chrome-devtools.args=["-c", "exec tool \"$@\"", "tool", "--browserUrl", "http://127.0.0.1:9222"]`,
				"-c", `mcp_servers.chrome-devtools.env={ "A" = "1", "B" = "2" }`,
				"-c", `mcp_servers.chrome-devtools.env_vars=["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy", "NODE_USE_ENV_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"]`,
				"-c", "mcp_servers.chrome-devtools.startup_timeout_sec=90", "-c", "mcp_servers.chrome-devtools.tool_timeout_sec=90",
				"-c", `mcp_servers.team_docs.url="https://mcp.example/x"`, "-c", `mcp_servers.team_docs.http_headers={ "X-Team" = "a" }`,
				"resume", session, "x"), key, ""},
		},
		{
			"camelCase keys",
			Spec{Prompt: "x", APIKey: testKey, Options: map[string]any{"modelReasoningEffort": "xhigh", "webSearch": "live"}},
			command{args("-c", `model_reasoning_effort="xhigh"`, "-c", `web_search="live"`, "x"), key, ""},
		},
		{
			"web search off",
			Spec{Prompt: "x", APIKey: testKey, Options: map[string]any{"web_search": false}},
			command{args("-c", `web_search="disabled"`, "x"), key, ""},
		},
		{
			"web search cached",
			Spec{Prompt: "x", APIKey: testKey, Options: map[string]any{"web_search": "cached"}},
			command{args("-c", `web_search="cached"`, "x"), key, ""},
		},
		{
			"200 KiB prompt on stdin, resumed",
			Spec{Model: "openai/gpt-5.2-codex", Prompt: bigPrompt, SessionID: session, APIKey: testKey},
			command{args("--model", "gpt-5.2-codex", "resume", session, "-"), key, bigPrompt},
		},
		{
			"prompt that looks like a flag on stdin",
			Spec{Prompt: "-v is broken", APIKey: testKey},
			command{args("-"), key, "-v is broken"},
		},
		{
			"openrouter",
			Spec{Model: "openrouter/openai/o3", Prompt: "x", APIKey: testKey},
			command{args("--model", "openai/o3", "-c", `model_provider="openrouter"`,
				"-c", `model_providers.openrouter.name="OpenRouter"`, "-c", `model_providers.openrouter.base_url="https://openrouter.ai/api/v1"`,
				"-c", `model_providers.openrouter.env_key="OPENROUTER_API_KEY"`, "-c", `model_providers.openrouter.wire_api="responses"`, "x"),
				map[string]string{"OPENROUTER_API_KEY": testKey}, ""},
		},
		{
			"vercel",
			Spec{Model: "vercel/openai/gpt-5.5", Prompt: "x", APIKey: testKey},
			command{args("--model", "openai/gpt-5.5", "-c", `model_provider="vercel"`,
				"-c", `model_providers.vercel.name="Vercel AI Gateway"`, "-c", `model_providers.vercel.base_url="https://ai-gateway.vercel.sh/v1"`,
				"-c", `model_providers.vercel.env_key="AI_GATEWAY_API_KEY"`, "-c", `model_providers.vercel.wire_api="responses"`, "x"),
				map[string]string{"AI_GATEWAY_API_KEY": testKey}, ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, mustCommand(t, h, tc.spec)); d != "" {
				t.Errorf("Command (-want +got):\n%s", d)
			}
		})
	}
}

func TestCodexCommandErrors(t *testing.T) {
	h := harness(t, "codex")
	for _, tc := range []struct {
		name, want string
		spec       Spec
	}{
		{"anthropic model", "cannot run anthropic models", Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "x"}},
		{"effort", "model_reasoning_effort", Spec{Prompt: "x", Options: map[string]any{"model_reasoning_effort": "turbo"}}},
		{"web_search", "web_search", Spec{Prompt: "x", Options: map[string]any{"web_search": 1.0}}},
		{"session", "invalid session id", Spec{Prompt: "x", SessionID: "-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := h.Command(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Command error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCodexStandIn(t *testing.T) {
	checkStandIn(t, "codex", Spec{Model: "openai/gpt-5.3-codex", Prompt: "List the files", APIKey: testKey, SessionID: "0199a7f3-52c1-7d20-b4e8-6f1a2c3d4e5f"},
		"codex.jsonl", "CODEX_API_KEY", codexSession)
}
