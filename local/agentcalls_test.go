package local_test

import (
	"net/http"
	"testing"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// TestRunHarnessCheckFails: before a managed harness runs, boxd asks the
// box's agent whether the harness's CLI is there. When the agent cannot
// run that check (the box's home has gone, so no command runs from it),
// the run fails at once with what the agent said: the agent's refusal is
// not read as "the CLI is installed".
func TestRunHarnessCheckFails(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, &box.CreateParams{Agent: &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5, APIKey: "sk-ant-test-key"}})
	c := rawFor(t, srv)
	moved := decodeExec(t, "move home away", c.do("POST", "/v2/box/"+b.ID()+"/exec", map[string]any{"command": []string{"mv", "home", "gone"}, "folder": "/workspace"}, nil))
	if *moved.ExitCode != 0 {
		t.Fatalf("mv: %+v", moved)
	}
	r := c.do("POST", "/v2/box/"+b.ID()+"/run/stream", map[string]any{"prompt": "hi"}, nil)
	wantError(t, "run", r, http.StatusFailedDependency, "cannot check for `claude` in the box", "folder /workspace/home does not exist")
}
