package box_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/internal/modeltest"
)

// listPages is the script of a model that uses the browser: it calls the
// Chrome DevTools MCP server's list_pages tool, under whatever name the
// CLI gives it, and answers with what the tool returned. Codex offers its
// MCP tools only through a search of them (tool_search), which the script
// makes first; the tools found are the functions of a namespace. A
// request that offers none of this (a title request, or a CLI without the
// server) gets a plain answer.
func listPages(r *modeltest.Request) modeltest.Reply {
	tool := ""
	for _, name := range r.Tools {
		if strings.Contains(name, "chrome-devtools") && strings.HasSuffix(name, "list_pages") {
			tool = name
		}
	}
	call := func(namespace, name string) modeltest.Reply {
		return modeltest.Reply{Text: "Looking at the browser.", Tool: &modeltest.ToolCall{Namespace: namespace, Name: name, Input: map[string]any{}}}
	}
	waited := lastToolCalled(r) == waitForMCP
	switch {
	case r.HasToolResult && waited && tool != "":
		return call("", tool)
	case r.HasToolResult && waited:
		return modeltest.Reply{Text: "no browser after waiting: " + r.ToolResult}
	case r.HasToolResult:
		return modeltest.Reply{Text: "The pages are: " + r.ToolResult}
	case strings.Contains(r.SearchedTools, `"name":"mcp__chrome_devtools"`) && strings.Contains(r.SearchedTools, `"name":"list_pages"`):
		return call("mcp__chrome_devtools", "list_pages")
	case r.SearchedTools != "":
		return modeltest.Reply{Text: "no browser tools found: " + r.SearchedTools}
	case tool != "":
		return call("", tool)
	case r.HasTool("tool_search"):
		return modeltest.Reply{Text: "Looking for a browser tool.", ToolSearch: "list pages open in the browser"}
	case r.HasTool(waitForMCP):
		// Claude Code offers this while its MCP servers still start (on a
		// busy machine), and a model calls it to get their tools.
		return call("", waitForMCP)
	}
	return modeltest.Reply{Text: "no browser"}
}

// waitForMCP is Claude Code's tool that waits for its MCP servers to
// connect; with no input it waits for all of them.
const waitForMCP = "WaitForMcpServers"

// lastToolCalled is the name of the tool the model called last in an
// Anthropic Messages request's conversation, or "".
func lastToolCalled(r *modeltest.Request) string {
	msgs, _ := r.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] != "assistant" {
			continue
		}
		content, _ := m["content"].([]any)
		name := ""
		for _, c := range content {
			if part, _ := c.(map[string]any); part["type"] == "tool_use" {
				name, _ = part["name"].(string)
			}
		}
		return name
	}
	return ""
}

// TestAgentCLIsUseTheBrowser: on a browser box, each real agent CLI
// starts the Chrome DevTools MCP server boxd wires in, offers its tools
// to the model, and a call of one drives the box's own Chromium: the
// model is told of a tab opened through the SDK.
func TestAgentCLIsUseTheBrowser(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	if _, err := exec.LookPath("chrome-devtools-mcp"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set and chrome-devtools-mcp is not installed (./scripts/deps.sh --tests installs it)")
		}
		t.Skip("chrome-devtools-mcp is not installed (npm install -g chrome-devtools-mcp@1.11.0)")
	}
	models := modeltest.New(t, listPages)
	srv := cliServer(t, models)
	ctx := t.Context()
	for _, tc := range []struct {
		bin, pkg string
		agent    *box.AgentOptions
	}{
		{"claude", "@anthropic-ai/claude-code@2.1.197", &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5, APIKey: "sk-ant-scripted"}},
		{"codex", "@openai/codex@0.169.0", &box.AgentOptions{Harness: box.HarnessCodex, Model: box.OpenAICodexGPT5_5, APIKey: "sk-openai-scripted"}},
		{"opencode", "opencode-ai@1.18.33", &box.AgentOptions{Harness: box.HarnessOpenCode, Model: box.Model("anthropic/claude-sonnet-4-5"), APIKey: "sk-ant-opencode"}},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			requireCLI(t, tc.bin, tc.pkg)
			b := newBox(t, srv, &box.CreateParams{Browser: true, Agent: tc.agent})
			marker := "boxd-" + tc.bin + "-tab"
			if _, err := b.Browser.Tabs.Create(ctx, "data:text/html,<title>"+marker+"</title>", nil); err != nil {
				t.Fatal(err)
			}
			before := len(models.Requests())
			got := streamRun(t, b, &box.AgentParams{Prompt: "Which pages are open in the browser?"})
			if got.err != nil {
				t.Fatalf("stream: %v", got.err)
			}
			if !strings.HasPrefix(got.run.Result, "The pages are: ") || !strings.Contains(got.run.Result, marker) {
				var offered []string
				if reqs := agentRequests(models); len(reqs) > 0 {
					offered = reqs[len(reqs)-1].Tools
				}
				t.Errorf("result %q; the tools offered last: %v", got.run.Result, offered)
			}
			for _, r := range agentRequestsSince(models, before) {
				if lastToolCalled(r) == waitForMCP {
					t.Logf("%s's MCP servers were still starting: the model waited for them", tc.bin)
					break
				}
			}
			if err := b.Delete(ctx); err != nil { // its Chromium goes with it
				t.Fatal(err)
			}
		})
	}
}
