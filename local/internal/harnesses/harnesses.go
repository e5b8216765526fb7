// Package harnesses runs the managed coding-agent CLIs (Claude Code, Codex,
// OpenCode, Cursor) inside a box and maps what they print in their
// streaming JSON modes onto the Box API's run-stream events (text,
// thinking, tool, tool_result, done, error).
package harnesses

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Spec is one agent run.
type Spec struct {
	Model string
	// Prompt is the user's prompt (attachment paths already appended).
	Prompt string
	// SessionID resumes an earlier session when set.
	SessionID string
	// Options are the run's agent_options, in the harness's own casing.
	Options map[string]any
	// APIKey is the provider key for the run.
	APIKey string
	// MCPServers are the MCP servers the run's CLI gets: the box's own,
	// and the Chrome DevTools server of a browser box. Codex and OpenCode
	// are given them in their own config terms; Claude Code reads them
	// from MCPConfig.
	MCPServers []MCPServer
	// MCPConfig is the path, in the box, of the file MCPConfigJSON
	// renders for MCPServers; "" when there are none. Harnesses whose CLI
	// takes such a file pass it on.
	MCPConfig string
	// BaseURLs are the operator's base URLs of model providers
	// ("anthropic", "openai", "openrouter", "vercel"), as the box reaches
	// them: a run against that provider goes there instead. The
	// Anthropic URL is the API's root (the CLI adds /v1/messages), the
	// others end in /v1.
	BaseURLs map[string]string
	// Schema is the run's response schema (JSON), nil for none. A harness
	// whose CLI enforces one is given it; the others get it in the prompt.
	Schema []byte
}

// Harness is a managed harness.
type Harness interface {
	// Name is the harness's wire name, e.g. "claude-code".
	Name() string
	// Binary is the CLI the harness runs, looked up on the box's PATH.
	Binary() string
	// KeyEnv lists the environment variables the CLI reads its provider
	// key from, preferred first. A box env var of one of these names
	// supplies the key when the box has no agent_api_key.
	KeyEnv() []string
	// Command returns the argv, extra environment and standard input of
	// the CLI for spec.
	Command(spec Spec) (argv []string, env map[string]string, stdin string, err error)
	// NewMapper returns a mapper for one run's output.
	NewMapper() Mapper
}

// ReportsSessionTotals reports whether h's CLI reports, at the end of a
// run that resumes a session, the usage of the whole session so far
// instead of the run's own (Codex does). A run's own usage is then the
// difference from what the CLI reported at the end of the session's
// previous run.
func ReportsSessionTotals(h Harness) bool {
	_, ok := h.(sessionTotaler)
	return ok
}

// sessionTotaler is a Harness whose CLI reports session totals.
type sessionTotaler interface{ reportsSessionTotals() }

// Emit relays one run-stream event; data is its JSON. It returns false
// when the run should stop reading.
type Emit func(event string, data []byte) bool

// Mapper turns a CLI's output lines into run-stream events.
type Mapper interface {
	// Line handles one line of output (without its line end).
	Line(line []byte, emit Emit) (more bool)
	// End is called at the end of the output; it may emit a final done.
	End(emit Emit)
}

var registry = map[string]Harness{}

// register adds h to the registry; called from init functions.
func register(h Harness) { registry[h.Name()] = h }

// Get returns the managed harness with the wire name, if any.
func Get(name string) (Harness, bool) {
	h, ok := registry[name]
	return h, ok
}

// MaxLine bounds one output line of a harness CLI.
const MaxLine = 16 << 20

// Decode feeds r to m line by line.
func Decode(r io.Reader, m Mapper, emit Emit) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !m.Line(line, emit) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("a harness output line is longer than %d bytes", MaxLine)
		}
		return err
	}
	m.End(emit)
	return nil
}

// JSON encodes v for an Emit call.
func JSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("{}")
	}
	return b
}
