package harnesses

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cursorSession is the recording in testdata/cursor.jsonl.
var cursorSession = []ev{
	{"thinking", `{"text":"The user wants"}`},
	{"thinking", `{"text":" the file list."}`},
	{"text", `{"text":"Let me look."}`},
	{"tool", `{"toolCallId":"toolu_vrtx_01NHXpK2wDe1y8Sv6YdcPqHu","name":"shell","input":{"command":"ls","workingDirectory":"","timeout":30000}}`},
	{"tool_result", `{"toolCallId":"toolu_vrtx_01NHXpK2wDe1y8Sv6YdcPqHu","output":{"command":"ls","workingDirectory":"/workspace/home","exitCode":0,"signal":"","stdout":"README.md\nmain.go\n","stderr":"","executionTime":41}}`},
	{"text", "{\"text\":\"There are two files: `README.md` and `main.go`.\"}"},
	{"done", "{\"output\":\"Let me look.There are two files: `README.md` and `main.go`.\",\"input_tokens\":21254,\"output_tokens\":96,\"cached_input_tokens\":18432,\"total_cost_usd\":0,\"session_id\":\"c6b62c6f-7ead-4fd6-9922-e952131177ff\"}"},
}

func TestCursorSession(t *testing.T) {
	diffEvents(t, cursorSession, decodeFile(t, harness(t, "cursor"), "cursor.jsonl"))
}

// TestCursorTools covers a rejected command, a failed edit, a function-style
// call and a run that ends without a result (older versions report no
// usage either).
func TestCursorTools(t *testing.T) {
	lines := `{"type":"system","subtype":"init","session_id":"cur-1","model":"GPT-5"}
{"type":"tool_call","subtype":"started","call_id":"c1","tool_call":{"shellToolCall":{"args":{"command":"rm -rf /"}}},"session_id":"cur-1"}
{"type":"tool_call","subtype":"completed","call_id":"c1","tool_call":{"shellToolCall":{"args":{"command":"rm -rf /"},"result":{"rejected":{"command":"rm -rf /","reason":"blocked by policy"}}}},"session_id":"cur-1"}
{"type":"tool_call","subtype":"started","call_id":"c2","tool_call":{"editToolCall":{"args":{"path":"/workspace/home/main.go","streamContent":"package main\n"}}},"session_id":"cur-1"}
{"type":"tool_call","subtype":"completed","call_id":"c2","tool_call":{"editToolCall":{"args":{"path":"/workspace/home/main.go"},"result":{"error":{"errorMessage":"permission denied"}}}},"session_id":"cur-1"}
{"type":"tool_call","subtype":"started","call_id":"c3","tool_call":{"function":{"name":"github.get_issue","arguments":"{\"number\":42}"}},"session_id":"cur-1"}
{"type":"tool_call","subtype":"completed","call_id":"c3","tool_call":{"function":{"name":"github.get_issue","arguments":"{\"number\":42}","result":{"success":{"content":"Issue 42"}}}},"session_id":"cur-1"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Could not edit "},{"type":"text","text":"main.go."}]},"session_id":"cur-1"}
`
	diffEvents(t, []ev{
		{"tool", `{"toolCallId":"c1","name":"shell","input":{"command":"rm -rf /"}}`},
		{"tool_result", `{"toolCallId":"c1","output":{"command":"rm -rf /","reason":"blocked by policy"},"is_error":true}`},
		{"tool", `{"toolCallId":"c2","name":"edit","input":{"path":"/workspace/home/main.go","streamContent":"package main\n"}}`},
		{"tool_result", `{"toolCallId":"c2","output":{"errorMessage":"permission denied"},"is_error":true}`},
		{"tool", `{"toolCallId":"c3","name":"github.get_issue","input":{"number":42}}`},
		{"tool_result", `{"toolCallId":"c3","output":{"content":"Issue 42"}}`},
		{"text", `{"text":"Could not edit main.go."}`},
		{"done", `{"output":"Could not edit main.go.","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"cur-1"}`},
	}, decodeString(t, harness(t, "cursor"), lines))
}

func TestCursorErrors(t *testing.T) {
	h := harness(t, "cursor")
	for _, tc := range []struct {
		name, lines string
		want        []ev
	}{
		{
			"error result",
			`{"type":"system","subtype":"init","session_id":"cur-2"}
{"type":"result","subtype":"error","is_error":true,"duration_ms":900,"result":"You've hit your usage limit","session_id":"cur-2"}
`,
			[]ev{{"error", `{"error":"cursor: You've hit your usage limit","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"cur-2"}`}},
		},
		{
			"error result without text",
			`{"type":"result","subtype":"error","is_error":true,"session_id":"cur-3","error":{"message":"model not available"}}
`,
			[]ev{{"error", `{"error":"cursor: model not available","input_tokens":0,"output_tokens":0,"cached_input_tokens":0,"total_cost_usd":0,"session_id":"cur-3"}`}},
		},
		{"nothing", `{"type":"system","subtype":"init","session_id":"cur-4"}` + "\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) { diffEvents(t, tc.want, decodeString(t, h, tc.lines)) })
	}
}

func TestCursorCommand(t *testing.T) {
	h := harness(t, "cursor")
	base := []string{"cursor-agent", "-p", "--output-format", "stream-json", "--force"}
	args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	key := map[string]string{"CURSOR_API_KEY": testKey}
	for _, tc := range []struct {
		name string
		spec Spec
		want command
	}{
		{
			"basic",
			Spec{Model: "cursor/claude-sonnet-4-5", Prompt: "List the files", APIKey: testKey},
			command{args("--model", "claude-sonnet-4-5", "List the files"), key, ""},
		},
		{
			"resume and options",
			Spec{Model: "cursor/gpt-5.4", Prompt: "Continue", SessionID: "c6b62c6f-7ead-4fd6-9922-e952131177ff", APIKey: testKey, Options: map[string]any{
				"mode": "plan", "sandbox": true, "approveMcps": true, "temperature": 0.2}},
			command{args("--model", "gpt-5.4", "--resume", "c6b62c6f-7ead-4fd6-9922-e952131177ff", "--mode", "plan", "--sandbox", "enabled", "--approve-mcps", "Continue"), key, ""},
		},
		{
			"default model",
			Spec{Model: "cursor/default", Prompt: "x", APIKey: testKey, Options: map[string]any{"sandbox": "disabled", "mode": "agent"}},
			command{args("--sandbox", "disabled", "x"), key, ""},
		},
		{
			"prompt that looks like a flag",
			Spec{Model: "cursor/composer-2.5", Prompt: "--version is wrong", APIKey: testKey},
			command{args("--model", "composer-2.5", " --version is wrong"), key, ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, mustCommand(t, h, tc.spec)); d != "" {
				t.Errorf("Command (-want +got):\n%s", d)
			}
		})
	}
}

func TestCursorCommandErrors(t *testing.T) {
	h := harness(t, "cursor")
	for _, tc := range []struct {
		name, want string
		spec       Spec
	}{
		{"200 KiB prompt", "takes the prompt as a command-line argument", Spec{Model: "cursor/gpt-5.4", Prompt: bigPrompt}},
		{"anthropic model", "runs cursor/", Spec{Model: "anthropic/claude-sonnet-4-5", Prompt: "x"}},
		{"mode", "agent_options.mode", Spec{Prompt: "x", Options: map[string]any{"mode": "yolo"}}},
		{"sandbox", "agent_options.sandbox", Spec{Prompt: "x", Options: map[string]any{"sandbox": 1.0}}},
		{"approveMcps", "approveMcps must be a boolean", Spec{Prompt: "x", Options: map[string]any{"approveMcps": "yes"}}},
		{"session", "invalid session id", Spec{Prompt: "x", SessionID: "--force"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := h.Command(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Command error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCursorStandIn(t *testing.T) {
	checkStandIn(t, "cursor", Spec{Model: "cursor/claude-sonnet-4-5", Prompt: "List the files", APIKey: testKey},
		"cursor.jsonl", "CURSOR_API_KEY", cursorSession)
}
