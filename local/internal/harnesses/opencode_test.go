package harnesses

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// opencodeSession is the recording in testdata/opencode.jsonl, from a
// version that prints no done line: End makes the done event, with the
// usage summed over the two steps.
var opencodeSession = []ev{
	{"thinking", `{"text":"The user wants the file list."}`},
	{"text", `{"text":"Let me look."}`},
	{"tool", `{"toolCallId":"call_d46153bfcf1f4f5c9e90347f","name":"bash","input":{"command":"ls","description":"Lists files in current directory"}}`},
	{"tool_result", `{"toolCallId":"call_d46153bfcf1f4f5c9e90347f","output":"README.md\nmain.go\n"}`},
	{"text", "{\"text\":\"There are two files: `README.md` and `main.go`.\"}"},
	{"done", "{\"output\":\"There are two files: `README.md` and `main.go`.\",\"input_tokens\":24520,\"output_tokens\":117,\"cached_input_tokens\":22964,\"total_cost_usd\":0.0100747,\"session_id\":\"ses_46773e5bcffe8rgbbCsAcLxPFQh\"}"},
}

func TestOpenCodeSession(t *testing.T) {
	diffEvents(t, opencodeSession, decodeFile(t, harness(t, "opencode"), "opencode.jsonl"))
}

// TestOpenCodeDoneLine: newer versions end with a done line; the done
// event comes from it and End adds nothing.
func TestOpenCodeDoneLine(t *testing.T) {
	lines := `{"type":"step_start","timestamp":1,"sessionID":"ses_a","part":{"type":"step-start"}}
{"type":"tool_use","timestamp":2,"sessionID":"ses_a","part":{"type":"tool","callID":"call_1","tool":"read","state":{"status":"error","input":{"filePath":"/workspace/home/missing.txt"},"error":"File not found: /workspace/home/missing.txt","time":{"start":1,"end":2}}}}
{"type":"text","timestamp":3,"sessionID":"ses_a","part":{"type":"text","text":"The file does not exist.","time":{"start":2,"end":3}}}
{"type":"step_finish","timestamp":4,"sessionID":"ses_a","part":{"type":"step-finish","reason":"stop","cost":0,"tokens":{"input":10,"output":5,"reasoning":0,"cache":{"read":0,"write":0}}}}
{"type":"done","timestamp":5,"sessionID":"ses_a","reason":"idle","rejected":[]}
`
	diffEvents(t, []ev{
		{"tool", `{"toolCallId":"call_1","name":"read","input":{"filePath":"/workspace/home/missing.txt"}}`},
		{"tool_result", `{"toolCallId":"call_1","output":"File not found: /workspace/home/missing.txt","is_error":true}`},
		{"text", `{"text":"The file does not exist."}`},
		{"done", `{"output":"The file does not exist.","input_tokens":10,"output_tokens":5,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"ses_a"}`},
	}, decodeString(t, harness(t, "opencode"), lines))
}

func TestOpenCodeErrors(t *testing.T) {
	h := harness(t, "opencode")
	for _, tc := range []struct {
		name, lines string
		want        []ev
	}{
		{
			"API error",
			`{"type":"step_start","timestamp":1,"sessionID":"ses_b","part":{"type":"step-start"}}
{"type":"error","timestamp":2,"sessionID":"ses_b","error":{"name":"APIError","data":{"message":"invalid x-api-key","statusCode":401,"isRetryable":false}}}
{"type":"done","timestamp":3,"sessionID":"ses_b","reason":"idle","rejected":[]}
`,
			[]ev{{"error", `{"error":"opencode: invalid x-api-key","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"ses_b"}`}},
		},
		{
			"error without a message",
			`{"type":"error","timestamp":2,"sessionID":"ses_c","error":{"name":"ProviderModelNotFoundError","data":{"providerID":"openai","modelID":"gpt-9"}}}
`,
			[]ev{{"error", `{"error":"opencode: ProviderModelNotFoundError","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"ses_c"}`}},
		},
		{"nothing", `{"type":"step_start","timestamp":1,"sessionID":"ses_d","part":{"type":"step-start"}}` + "\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) { diffEvents(t, tc.want, decodeString(t, h, tc.lines)) })
	}
}

func TestOpenCodeCommand(t *testing.T) {
	h := harness(t, "opencode")
	base := []string{"opencode", "run", "--format", "json", "--thinking"}
	args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	const perm = `{"*":"allow"}`
	env := func(kv ...string) map[string]string {
		m := map[string]string{"OPENCODE_PERMISSION": perm}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want command
	}{
		{
			"anthropic",
			Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "List the files", APIKey: testKey},
			command{args("--model", "anthropic/claude-sonnet-4-5"), env("ANTHROPIC_API_KEY", testKey), "List the files"},
		},
		{
			"openai with options, resumed",
			Spec{Model: "openai/gpt-5.3-codex", Prompt: "Continue", SessionID: "ses_46773e5bcffe8rgbbCsAcLxPFQh", APIKey: testKey, Options: map[string]any{
				"reasoningEffort": "high", "textVerbosity": "low", "reasoningSummary": "auto", "maxTurns": 3.0}},
			command{args("--model", "openai/gpt-5.3-codex", "--session", "ses_46773e5bcffe8rgbbCsAcLxPFQh"), env("OPENAI_API_KEY", testKey,
				"OPENCODE_CONFIG_CONTENT", `{"provider":{"openai":{"models":{"gpt-5.3-codex":{"options":{"reasoningEffort":"high","reasoningSummary":"auto","textVerbosity":"low"}}}}}}`), "Continue"},
		},
		{
			"anthropic thinking",
			Spec{Model: "anthropic/claude-opus-4-5", Prompt: "x", APIKey: testKey, Options: map[string]any{"thinking": map[string]any{"type": "enabled", "budgetTokens": 16000.0}}},
			command{args("--model", "anthropic/claude-opus-4-5"), env("ANTHROPIC_API_KEY", testKey,
				"OPENCODE_CONFIG_CONTENT", `{"provider":{"anthropic":{"models":{"claude-opus-4-5":{"options":{"thinking":{"budgetTokens":16000,"type":"enabled"}}}}}}}`), "x"},
		},
		{
			"mcp servers beside provider options",
			Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "x", APIKey: testKey, Options: map[string]any{"reasoningEffort": "high"}, MCPServers: []MCPServer{
				{Name: "chrome-devtools", Command: "sh", Args: []string{"-c", "exec tool"}, Env: map[string]string{"A": "1"}, Timeout: time.Minute},
				{Name: "docs", URL: "https://mcp.example/x", Headers: map[string]string{"X-Team": "a"}},
			}},
			command{args("--model", "anthropic/claude-sonnet-4-5"), env("ANTHROPIC_API_KEY", testKey, "OPENCODE_CONFIG_CONTENT",
				`{"mcp":{"chrome-devtools":{"command":["sh","-c","exec tool"],"enabled":true,"environment":{"A":"1"},"timeout":60000,"type":"local"},`+
					`"docs":{"enabled":true,"headers":{"X-Team":"a"},"type":"remote","url":"https://mcp.example/x"}},`+
					`"provider":{"anthropic":{"models":{"claude-sonnet-4-5":{"options":{"reasoningEffort":"high"}}}}}}`), "x"},
		},
		{
			"zen",
			Spec{Model: "opencode/big-pickle", Prompt: "x", APIKey: testKey},
			command{args("--model", "opencode/big-pickle"), env("OPENCODE_API_KEY", testKey), "x"},
		},
		{
			"openrouter",
			Spec{Model: "openrouter/anthropic/claude-sonnet-4", Prompt: "x", APIKey: testKey, Options: map[string]any{"reasoningEffort": "medium"}},
			command{args("--model", "openrouter/anthropic/claude-sonnet-4"), env("OPENROUTER_API_KEY", testKey,
				"OPENCODE_CONFIG_CONTENT", `{"provider":{"openrouter":{"models":{"anthropic/claude-sonnet-4":{"options":{"reasoningEffort":"medium"}}}}}}`), "x"},
		},
		{
			// The Grok ids as the newest SDK sends them (box.VercelGrok4_3).
			"vercel grok",
			Spec{Model: "vercel/spacexai/grok-4.3", Prompt: "x", APIKey: testKey},
			command{args("--model", "vercel/spacexai/grok-4.3"), env("AI_GATEWAY_API_KEY", testKey), "x"},
		},
		{
			"vercel grok reasoning",
			Spec{Model: "vercel/spacexai/grok-4.20-reasoning", Prompt: "x", APIKey: testKey, Options: map[string]any{"reasoningEffort": "high"}},
			command{args("--model", "vercel/spacexai/grok-4.20-reasoning"), env("AI_GATEWAY_API_KEY", testKey,
				"OPENCODE_CONFIG_CONTENT", `{"provider":{"vercel":{"models":{"spacexai/grok-4.20-reasoning":{"options":{"reasoningEffort":"high"}}}}}}`), "x"},
		},
		{
			// The id before the gateway's move, which the 0.5.5 SDK still
			// sends: accepted and passed on unchanged, as every model id
			// is (boxd keeps no list of models). Whether the gateway still
			// serves it is the gateway's answer, as on the cloud.
			"vercel grok, the id before the move",
			Spec{Model: "vercel/xai/grok-4.3", Prompt: "x", APIKey: testKey},
			command{args("--model", "vercel/xai/grok-4.3"), env("AI_GATEWAY_API_KEY", testKey), "x"},
		},
		{
			"no model",
			Spec{Prompt: "x", APIKey: testKey, Options: map[string]any{"reasoningEffort": "high"}},
			command{base, env("OPENCODE_API_KEY", testKey), "x"},
		},
		{
			"200 KiB prompt",
			Spec{Model: "opencode/gpt-5.4", Prompt: bigPrompt, APIKey: testKey},
			command{args("--model", "opencode/gpt-5.4"), env("OPENCODE_API_KEY", testKey), bigPrompt},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, mustCommand(t, h, tc.spec)); d != "" {
				t.Errorf("Command (-want +got):\n%s", d)
			}
		})
	}
}

func TestOpenCodeCommandErrors(t *testing.T) {
	h := harness(t, "opencode")
	for _, tc := range []struct {
		name, want string
		spec       Spec
	}{
		{"no provider", "provider/model", Spec{Model: "big-pickle", Prompt: "x"}},
		{"cursor model", "cannot run cursor models", Spec{Model: "cursor/gpt-5.4", Prompt: "x"}},
		{"effort type", "reasoningEffort must be a string", Spec{Model: "openai/gpt-5.4", Prompt: "x", Options: map[string]any{"reasoningEffort": 3.0}}},
		{"thinking type", "thinking must be an object", Spec{Model: "anthropic/claude-opus-4-5", Prompt: "x", Options: map[string]any{"thinking": "on"}}},
		{"session", "invalid session id", Spec{Prompt: "x", SessionID: "ses 1\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := h.Command(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Command error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestOpenCodeStandIn(t *testing.T) {
	checkStandIn(t, "opencode", Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "List the files", APIKey: testKey},
		"opencode.jsonl", "ANTHROPIC_API_KEY", opencodeSession)
}
