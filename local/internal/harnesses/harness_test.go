package harnesses

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ev is one emitted run-stream event.
type ev struct{ Event, Data string }

// decode feeds r through a fresh mapper of h and returns what it emitted.
func decode(t *testing.T, h Harness, r io.Reader) []ev {
	t.Helper()
	var got []ev
	if err := Decode(r, h.NewMapper(), func(event string, data []byte) bool {
		if !json.Valid(data) {
			t.Errorf("%s event with invalid JSON data %q", event, data)
		}
		got = append(got, ev{event, string(data)})
		return true
	}); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return got
}

func decodeString(t *testing.T, h Harness, lines string) []ev {
	t.Helper()
	return decode(t, h, strings.NewReader(lines))
}

func decodeFile(t *testing.T, h Harness, name string) []ev {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return decode(t, h, f)
}

func harness(t *testing.T, name string) Harness {
	t.Helper()
	h, ok := Get(name)
	if !ok {
		t.Fatalf("harness %q is not registered", name)
	}
	return h
}

func diffEvents(t *testing.T, want, got []ev) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

// command is the result of Harness.Command.
type command struct {
	Argv  []string
	Env   map[string]string
	Stdin string
}

func mustCommand(t *testing.T, h Harness, spec Spec) command {
	t.Helper()
	argv, env, stdin, err := h.Command(spec)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if spec.APIKey != "" {
		for _, a := range argv {
			if strings.Contains(a, spec.APIKey) {
				t.Errorf("the API key is in argv: %q", a)
			}
		}
	}
	return command{argv, env, stdin}
}

const testKey = "sk-test-0123456789abcdef"

// bigPrompt is longer than any single argument may be.
var bigPrompt = strings.Repeat("Refactor the parser. ", 200<<10/21+1)

func TestRegistry(t *testing.T) {
	for name, bin := range map[string]string{"claude-code": "claude", "codex": "codex", "opencode": "opencode", "cursor": "cursor-agent"} {
		h := harness(t, name)
		if h.Name() != name || h.Binary() != bin {
			t.Errorf("%s: Name %q Binary %q", name, h.Name(), h.Binary())
		}
		if len(h.KeyEnv()) == 0 {
			t.Errorf("%s: no KeyEnv", name)
		}
	}
}

func TestKeyEnvFor(t *testing.T) {
	for _, tc := range []struct {
		harness, model string
		want           []string
	}{
		{"claude-code", "anthropic/claude-sonnet-4-5", []string{"ANTHROPIC_API_KEY"}},
		{"claude-code", "openrouter/anthropic/claude-sonnet-4", []string{"OPENROUTER_API_KEY"}},
		{"claude-code", "vercel/anthropic/claude-sonnet-4.5", []string{"AI_GATEWAY_API_KEY"}},
		{"codex", "openai/gpt-5.3-codex", []string{"OPENAI_API_KEY", "CODEX_API_KEY"}},
		{"codex", "vercel/openai/gpt-5.5", []string{"AI_GATEWAY_API_KEY"}},
		{"opencode", "anthropic/claude-sonnet-4-5", []string{"ANTHROPIC_API_KEY"}},
		{"opencode", "openai/gpt-5.3-codex", []string{"OPENAI_API_KEY"}},
		{"opencode", "opencode/big-pickle", []string{"OPENCODE_API_KEY"}},
		{"opencode", "openrouter/deepseek/deepseek-r1", []string{"OPENROUTER_API_KEY"}},
		{"opencode", "vercel/spacexai/grok-4.3", []string{"AI_GATEWAY_API_KEY"}},
		{"opencode", "vercel/xai/grok-4.3", []string{"AI_GATEWAY_API_KEY"}}, // before the Grok move: still the gateway's key
		{"claude-code", "vercel/spacexai/grok-4.7", []string{"AI_GATEWAY_API_KEY"}},
		{"opencode", "moonshot-ai/kimi-k2", []string{"MOONSHOT_AI_API_KEY"}},
		{"opencode", "", []string{"OPENCODE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "AI_GATEWAY_API_KEY"}},
		{"cursor", "cursor/gpt-5.4", []string{"CURSOR_API_KEY"}},
	} {
		if got := KeyEnvFor(harness(t, tc.harness), tc.model); !slices.Equal(got, tc.want) {
			t.Errorf("KeyEnvFor(%s, %q) = %q, want %q", tc.harness, tc.model, got, tc.want)
		}
	}
}

// TestNotJSON: progress text, broken JSON, other JSON values and unknown
// event types are ignored, whatever the harness.
func TestNotJSON(t *testing.T) {
	garbage := "\x1b[2K\rThinking...\n" +
		"Warning: something on stdout\n" +
		"{\"type\":\"assistant\",\"message\":\n" +
		"[1,2,3]\n" +
		"\"a string\"\n" +
		"null\n" +
		"{}\n" +
		"{\"type\":\"no-such-event\",\"text\":\"x\"}\n" +
		"{\"type\":42}\n" +
		"{\"type\":\"assistant\",\"message\":{\"content\":\"not a list\"}}\n" +
		"{\"type\":\"item.completed\",\"item\":null}\n" +
		"{\"type\":\"tool_use\",\"part\":null}\n" +
		"{\"type\":\"tool_call\",\"subtype\":\"started\",\"tool_call\":{\"weird\":1}}\n"
	for _, name := range []string{"claude-code", "codex", "opencode", "cursor"} {
		t.Run(name, func(t *testing.T) {
			if got := decodeString(t, harness(t, name), garbage); len(got) != 0 {
				t.Errorf("events from garbage: %v", got)
			}
		})
	}
}

// TestLongLine: a line past MaxLine fails the decode instead of being cut.
func TestLongLine(t *testing.T) {
	long := `{"type":"text","part":{"text":"` + strings.Repeat("x", MaxLine) + `"}}` + "\n"
	for _, name := range []string{"claude-code", "codex", "opencode", "cursor"} {
		t.Run(name, func(t *testing.T) {
			err := Decode(strings.NewReader(long), harness(t, name).NewMapper(), func(string, []byte) bool { return true })
			if err == nil || !strings.Contains(err.Error(), "longer than") {
				t.Errorf("Decode = %v, want a line-too-long error", err)
			}
		})
	}
}

// TestLineJustUnderLimit: a large but legal line is decoded whole.
func TestLineJustUnderLimit(t *testing.T) {
	text := strings.Repeat("y", 1<<20)
	line := `{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"` + text + `"}}` + "\n"
	got := decodeString(t, harness(t, "codex"), line)
	if len(got) != 2 || got[0].Event != "text" || len(got[0].Data) != len(text)+len(`{"text":""}`) {
		t.Fatalf("got %d events", len(got))
	}
}

// TestStopEarly: when emit returns false the mapper stops and End is not
// called (boxd stops reading after an error event).
func TestStopEarly(t *testing.T) {
	var n int
	f, err := os.Open("testdata/codex.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Decode(f, harness(t, "codex").NewMapper(), func(string, []byte) bool { n++; return false }); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d events after emit returned false, want 1", n)
	}
}

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		"high":          `"high"`,
		`a "q" \ b`:     `"a \"q\" \\ b"`,
		"line\nbreak\t": `"line\nbreak\t"`,
		"\x01":          `"\u0001"`,
		"héllo":         `"héllo"`,
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCheckSessionID(t *testing.T) {
	for _, id := range []string{"-rf", " x", "a\nb", "x\x00"} {
		if checkSessionID(id) == nil {
			t.Errorf("checkSessionID(%q) = nil", id)
		}
	}
	for _, id := range []string{"3f1a9c2e-6b7d-4e2a-9c1f-2d8e5a7b4c10", "ses_46773e5bcffe8rgbbCsAcLxPFQh"} {
		if err := checkSessionID(id); err != nil {
			t.Errorf("checkSessionID(%q) = %v", id, err)
		}
	}
}

// runStandIn runs the argv of Command against a stand-in executable named
// like the CLI: a shell script that ignores its arguments beyond writing
// them down, saves its standard input and the key variable, and prints
// the recorded output. Its standard output goes through Decode, as boxd
// feeds a real CLI's output. It returns the events, the arguments the
// script received and the standard input it read.
func runStandIn(t *testing.T, h Harness, spec Spec, recording, keyVar string) (events []ev, args []string, stdin, key string) {
	t.Helper()
	argv, env, in, err := h.Command(spec)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if argv[0] != h.Binary() {
		t.Fatalf("argv[0] = %q, want %q", argv[0], h.Binary())
	}
	dir := t.TempDir()
	out, err := filepath.Abs(filepath.Join("testdata", recording))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, h.Binary())
	body := "#!/bin/sh\n" +
		"d=$(dirname \"$0\")\n" +
		"for a in \"$@\"; do printf '%s\\0' \"$a\"; done > \"$d/args\"\n" +
		"cat > \"$d/stdin\"\n" +
		"printf '%s' \"$" + keyVar + "\" > \"$d/key\"\n" +
		"cat '" + out + "'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), script, argv[1:]...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if in != "" {
		cmd.Stdin = strings.NewReader(in)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events = decode(t, h, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stand-in %s: %v: %s", h.Binary(), err, stderr.String())
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	args = strings.Split(strings.TrimSuffix(read("args"), "\x00"), "\x00")
	return events, args, read("stdin"), read("key")
}

// checkStandIn runs the stand-in with a normal and a 200 KiB prompt and
// checks that the recording maps to want, that the process received the
// argv and standard input of Command, and that the key arrived in keyVar.
func checkStandIn(t *testing.T, name string, spec Spec, recording, keyVar string, want []ev) {
	h := harness(t, name)
	prompts := []string{spec.Prompt, bigPrompt}
	if name == "cursor" {
		prompts = prompts[:1] // cursor-agent takes no prompt on stdin
	}
	for _, prompt := range prompts {
		spec.Prompt = prompt
		argv, _, stdin, err := h.Command(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, args, gotStdin, key := runStandIn(t, h, spec, recording, keyVar)
		diffEvents(t, want, got)
		if d := cmp.Diff(argv[1:], args); d != "" {
			t.Errorf("arguments received (-want +got):\n%s", d)
		}
		if gotStdin != stdin {
			t.Errorf("standard input received: %d bytes, want %d", len(gotStdin), len(stdin))
		}
		if !strings.Contains(strings.Join(args, " ")+gotStdin, prompt) {
			t.Errorf("the prompt (%d bytes) reached the CLI neither as an argument nor on stdin", len(prompt))
		}
		if key != spec.APIKey {
			t.Errorf("%s = %q, want the API key", keyVar, key)
		}
	}
}
