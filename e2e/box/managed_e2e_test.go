package box_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/ocitest"
	"github.com/upstash/box-go/local"
)

// TestManagedHarness runs the Claude Code harness through boxd with a
// stand-in `claude` that replays a recorded stream-json session.
func TestManagedHarness(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{
		Agent: &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5, APIKey: "sk-ant-test-key"},
		MCPServers: []box.MCPServer{
			{Name: "fs", Package: "@modelcontextprotocol/server-filesystem", Args: []string{"/workspace"}},
			{Name: "remote", URL: "https://mcp.example/x", Headers: map[string]string{"X-Team": "a"}},
		},
	})

	// Without the CLI in the box, the run fails at once, naming it: a box
	// whose root is an image of busybox alone (the host's /usr may have
	// the real CLI).
	reg := ocitest.NewRegistry(t)
	ref, _ := reg.Push(t, "test/busybox:1", v1.Config{Env: []string{"PATH=/bin"}}, ocitest.BusyboxLayer(t))
	bare := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) { c.Root, c.Images = local.RootImage, map[string]string{"node": ref} }))
	nocli := newBox(t, bare, &box.CreateParams{Agent: &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5, APIKey: "sk-ant-test-key"}})
	_, err := nocli.Agent.Run(ctx, &box.AgentParams{Prompt: "list files"})
	if box.StatusCode(err) != 424 || !strings.Contains(err.Error(), "`claude` is not installed") {
		t.Fatalf("run without the CLI = %v", err)
	}

	dir := t.TempDir()
	script := filepath.Join(dir, "claude")
	stub := "#!/bin/sh\n" +
		"printf '%s\\n' \"$@\" > /home/boxuser/claude-args\n" +
		"[ \"$ANTHROPIC_API_KEY\" = sk-ant-test-key ] || { echo 'no key' >&2; exit 1; }\n" +
		"cat /home/boxuser/claude.jsonl\n"
	if err := os.WriteFile(script, []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	err = b.Files.Upload(ctx, []box.UploadFile{
		{LocalPath: script, Destination: "/home/boxuser/.local/bin/claude"},
		{LocalPath: "../../local/internal/harnesses/testdata/claude-code.jsonl", Destination: "/home/boxuser/claude.jsonl"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "chmod +x /home/boxuser/.local/bin/claude")

	var tools []string
	s, err := b.Agent.Stream(ctx, &box.AgentParams{Prompt: "list files", Options: box.ClaudeCodeOptions{MaxTurns: 4}})
	if err != nil {
		t.Fatal(err)
	}
	var finish *box.FinishChunk
	var reasoning strings.Builder
	for c, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		switch c := c.(type) {
		case *box.ToolCallChunk:
			tools = append(tools, c.ToolName)
		case *box.ReasoningChunk:
			reasoning.WriteString(c.Text)
		case *box.FinishChunk:
			finish = c
		}
	}
	r := s.Run()
	if r.Status != box.RunCompleted || r.Result != "There are two files: `README.md` and `main.go`." {
		t.Fatalf("run = %+v", r)
	}
	if finish == nil || finish.SessionID != "3f1a9c2e-6b7d-4e2a-9c1f-2d8e5a7b4c10" || finish.Usage.OutputTokens != 105 || finish.TotalCostUSD != 0.01893675 {
		t.Errorf("finish = %+v", finish)
	}
	if !strings.HasPrefix(reasoning.String(), "The user wants the file list.") || len(tools) == 0 {
		t.Errorf("reasoning %q, tools %q", reasoning.String(), tools)
	}
	args, err := b.Files.ReadText(ctx, "/home/boxuser/claude-args")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(args, "sk-ant-test-key") || !strings.Contains(args, "--max-turns\n4\n") || !strings.Contains(args, "stream-json") || !strings.Contains(args, "--mcp-config=/home/boxuser/.config/boxd/mcp.json") {
		t.Errorf("claude argv = %q", args)
	}
	// The box's MCP servers are handed to the harness as its MCP config.
	mcp, err := b.Files.ReadText(ctx, "/home/boxuser/.config/boxd/mcp.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"command": "npx"`, `"@modelcontextprotocol/server-filesystem"`, `"/workspace"`, `"url": "https://mcp.example/x"`, `"X-Team": "a"`} {
		if !strings.Contains(mcp, want) {
			t.Errorf("mcp config lacks %s:\n%s", want, mcp)
		}
	}

	// The next run resumes the session the CLI reported.
	if _, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "again"}); err != nil {
		t.Fatal(err)
	}
	if args, _ := b.Files.ReadText(ctx, "/home/boxuser/claude-args"); !strings.Contains(args, "3f1a9c2e-6b7d-4e2a-9c1f-2d8e5a7b4c10") {
		t.Errorf("second run did not resume the session: %q", args)
	}

	// Without a provider key the run fails at once, naming the variable.
	nokey := newBox(t, srv, &box.CreateParams{Agent: &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5}})
	if _, err := nokey.Agent.Run(ctx, &box.AgentParams{Prompt: "hi"}); box.StatusCode(err) != 424 || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("run without a key = %v", err)
	}
}

// TestFirstSDKModelScheme creates a box as the official SDKs' 0.1.x
// releases do, with a top-level model of their scheme and no agent: the
// box gets the harness the model names, and the CLI the model's id of
// today.
func TestFirstSDKModelScheme(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/v2/box", strings.NewReader(`{"model":"claude/opus_4_6","agent_api_key":"sk-ant-old-sdk"}`))
	req.Header.Set("X-Box-Api-Key", srv.APIKey())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var made struct {
		ID    string `json:"id"`
		Model string `json:"model"`
		Agent string `json:"agent"`
	}
	err = json.NewDecoder(resp.Body).Decode(&made)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || made.Model != "claude/opus_4_6" || made.Agent != "claude-code" {
		t.Fatalf("create with a 0.1.x model: %d %+v, %v", resp.StatusCode, made, err)
	}
	b, err := srv.Client().Get(ctx, made.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Delete(context.WithoutCancel(ctx)) })
	stub := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > /home/boxuser/claude-args\ncat /home/boxuser/claude.jsonl\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = b.Files.Upload(ctx, []box.UploadFile{
		{LocalPath: stub, Destination: "/home/boxuser/.local/bin/claude"},
		{LocalPath: "../../local/internal/harnesses/testdata/claude-code.jsonl", Destination: "/home/boxuser/claude.jsonl"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "chmod +x /home/boxuser/.local/bin/claude")
	if r, err := b.Agent.Run(ctx, &box.AgentParams{Prompt: "hello"}); err != nil || r.Status != box.RunCompleted {
		t.Fatalf("a run on the box = %+v, %v", r, err)
	}
	if args, _ := b.Files.ReadText(ctx, "/home/boxuser/claude-args"); !strings.Contains(args, "--model\nclaude-opus-4-6\n") {
		t.Errorf("claude argv = %q", args)
	}
}
