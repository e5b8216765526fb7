package harness

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseArgs(t *testing.T) {
	t.Setenv("BOX_AGENT_OPTIONS", `{"maxTurns":3}`)
	for _, args := range [][]string{
		{"-p", "hello world", "--model", "custom/demo", "--session", "s1", "--stream"},
		{"/workspace/home/agent.py", "--stream", "--session=s1", "--model", "custom/demo", "--prompt", "hello world"},
	} {
		c := ParseArgs(args)
		want := &Call{Prompt: "hello world", Model: "custom/demo", SessionID: "s1", Stream: true, Args: args, Options: map[string]any{"maxTurns": 3.0}}
		if diff := cmp.Diff(want, c); diff != "" {
			t.Errorf("ParseArgs(%q) (-want +got):\n%s", args, diff)
		}
	}
	t.Setenv("BOX_AGENT_OPTIONS", "")
	if c := ParseArgs(nil); c.Model != "custom" || c.Prompt != "" || c.Stream || c.Options != nil {
		t.Errorf("defaults = %+v", c)
	}
	if c := ParseArgs([]string{"-p"}); c.Prompt != "" {
		t.Errorf("-p without value = %+v", c)
	}
}

func TestRunWritesBoxSSEv1(t *testing.T) {
	var out bytes.Buffer
	err := Run(context.Background(), []string{"-p", "hello world", "--model", "custom/demo", "--session", "s1", "--stream"}, &out,
		func(ctx context.Context, c *Call, emit *Emitter) (*Result, error) {
			_ = emit.Text("hi ")
			_ = emit.Reasoning("thinking")
			_ = emit.Tool(ToolCall{ID: "1", Name: "Bash", Input: map[string]any{"command": "ls"}})
			_ = emit.ToolResult("1", "file.txt")
			_ = emit.Event("custom-event", map[string]any{"any": "payload"})
			return &Result{Output: "CUSTOM_OK " + c.Prompt, InputTokens: 2, OutputTokens: 3}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	want := "event: text\ndata: {\"text\":\"hi \"}\n\n" +
		"event: thinking\ndata: {\"text\":\"thinking\"}\n\n" +
		"event: tool\ndata: {\"toolCallId\":\"1\",\"name\":\"Bash\",\"input\":{\"command\":\"ls\"}}\n\n" +
		"event: tool_result\ndata: {\"toolCallId\":\"1\",\"output\":\"file.txt\"}\n\n" +
		"event: custom-event\ndata: {\"any\":\"payload\"}\n\n" +
		"event: done\ndata: {\"output\":\"CUSTOM_OK hello world\",\"input_tokens\":2,\"output_tokens\":3,\"cached_input_tokens\":0,\"total_cost_usd\":0,\"session_id\":\"s1\"}\n\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestRunError(t *testing.T) {
	var out bytes.Buffer
	boom := errors.New("boom")
	err := Run(context.Background(), []string{"--session", "s9"}, &out, func(ctx context.Context, c *Call, emit *Emitter) (*Result, error) {
		return nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v", err)
	}
	want := "event: error\ndata: {\"error\":\"boom\",\"input_tokens\":0,\"output_tokens\":0,\"cached_input_tokens\":0,\"total_cost_usd\":0,\"session_id\":\"s9\"}\n\n"
	if got := out.String(); got != want {
		t.Errorf("output = %q, want %q", got, want)
	}

	out.Reset()
	err = Run(context.Background(), nil, &out, func(ctx context.Context, c *Call, emit *Emitter) (*Result, error) { panic("oops") })
	if err == nil || !bytes.Contains(out.Bytes(), []byte(`"error":"harness panicked: oops"`)) {
		t.Errorf("panic: %v, %q", err, out.String())
	}

	out.Reset()
	if err := Run(context.Background(), nil, &out, func(ctx context.Context, c *Call, emit *Emitter) (*Result, error) { return nil, nil }); err != nil || out.Len() != 0 {
		t.Errorf("nil result: %v, %q", err, out.String())
	}
}
