package harnesses

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMCPConfigJSON: the file Claude Code reads with --mcp-config, a
// stdio server (arguments always a list) and an HTTP one.
func TestMCPConfigJSON(t *testing.T) {
	got := string(MCPConfigJSON([]MCPServer{
		{Name: "chrome-devtools", Command: "sh", Args: []string{"-c", `exec tool "$@" <x> && y`}, Env: map[string]string{"A": "1"}},
		{Name: "bare", Command: "server"},
		{Name: "docs", URL: "https://mcp.example/x", Headers: map[string]string{"X-Team": "a"}},
	}))
	want := `{
  "mcpServers": {
    "bare": {
      "args": [],
      "command": "server"
    },
    "chrome-devtools": {
      "args": [
        "-c",
        "exec tool \"$@\" <x> && y"
      ],
      "command": "sh",
      "env": {
        "A": "1"
      }
    },
    "docs": {
      "headers": {
        "X-Team": "a"
      },
      "type": "http",
      "url": "https://mcp.example/x"
    }
  }
}
`
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("MCPConfigJSON (-want +got):\n%s", d)
	}
}

// TestNoMCPServers: without servers, no CLI is given any MCP config.
func TestNoMCPServers(t *testing.T) {
	if got := codexMCPArgs(nil); got != nil {
		t.Errorf("codexMCPArgs(nil) = %q", got)
	}
	if got := string(MCPConfigJSON(nil)); got != "{\n  \"mcpServers\": {}\n}\n" {
		t.Errorf("MCPConfigJSON(nil) = %q", got)
	}
}
