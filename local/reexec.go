package local

import (
	"os"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/sandbox"
)

// init turns this process into a box's agent when boxd started it as one.
// boxd re-executes its own binary inside each sandbox, so every program
// that embeds a Server (cmd/boxd, boxtest users' test binaries) must be
// able to become the agent before its own main runs.
func init() {
	if os.Getenv(sandbox.EnvAgent) != "" {
		agent.Main()
	}
	if os.Getenv(agent.EnvSFTP) == "1" {
		agent.ServeSFTP() // the sftp subsystem of boxd's SSH server
	}
}
