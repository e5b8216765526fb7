// Package harness is the runtime of a custom agent harness: a Go program
// that runs inside a box and answers the box's agent calls.
//
// Configure a box with a custom harness whose command is your program
// (box.AgentOptions{Harness: box.HarnessCustom, CustomHarness: ...}). For
// every agent call, the backend runs it with `-p <prompt> --model <model>
// --stream` (and `--session <id>` when resuming), reads the events it
// writes to standard output in the box-sse-v1 format, and relays them to
// the caller. Your main only needs:
//
//	func main() {
//		harness.Main(func(ctx context.Context, call *harness.Call, emit *harness.Emitter) (*harness.Result, error) {
//			emit.Text("Hello, " + call.Prompt)
//			return &harness.Result{Output: "Hello, " + call.Prompt}, nil
//		})
//	}
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/upstash/box-go/stream"
)

// Call is one agent call, parsed from the command line.
type Call struct {
	// Prompt is the -p or --prompt value ("" if absent).
	Prompt string
	// Model is the --model value (default "custom").
	Model string
	// SessionID is the --session value: the session to resume, or "".
	SessionID string
	// Stream reports whether --stream was given.
	Stream bool
	// Args is the whole command line after the program name.
	Args []string
	// Options are the call's agent options, when the backend passes them
	// (boxd sets BOX_AGENT_OPTIONS to their JSON).
	Options map[string]any
}

// ParseArgs reads a call from command-line arguments. Flags are found by
// name, in any order; other arguments (those of the harness's own
// configured args) are ignored. Values may also be given as --flag=value.
func ParseArgs(args []string) *Call {
	c := &Call{Model: "custom", Args: append([]string(nil), args...)}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := cutFlag(args[i])
		take := func() string {
			if hasValue {
				return value
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch name {
		case "-p", "--prompt":
			c.Prompt = take()
		case "--model":
			c.Model = take()
		case "--session":
			c.SessionID = take()
		case "--stream":
			c.Stream = true
		}
	}
	if raw := os.Getenv("BOX_AGENT_OPTIONS"); raw != "" {
		_ = json.Unmarshal([]byte(raw), &c.Options)
	}
	return c
}

func cutFlag(arg string) (name, value string, ok bool) {
	if len(arg) > 2 && arg[:2] == "--" {
		for i := 2; i < len(arg); i++ {
			if arg[i] == '=' {
				return arg[:i], arg[i+1:], true
			}
		}
	}
	return arg, "", false
}

// ToolCall is a tool call to report with Emitter.Tool.
type ToolCall struct {
	ID    string
	Name  string
	Input map[string]any
}

// Emitter writes events to the backend. Its methods are safe for
// concurrent use; each event is written whole.
type Emitter struct {
	mu  sync.Mutex
	enc *stream.Encoder
}

// Event writes a raw event: data is encoded as compact JSON.
func (e *Emitter) Event(name string, data any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enc.EncodeJSON(name, data)
}

// Text streams a piece of the answer.
func (e *Emitter) Text(text string) error {
	return e.Event("text", struct {
		Text string `json:"text"`
	}{text})
}

// Reasoning streams a piece of reasoning (a `thinking` event).
func (e *Emitter) Reasoning(text string) error {
	return e.Event("thinking", struct {
		Text string `json:"text"`
	}{text})
}

// Tool reports a tool call. A nil Input is sent as {}.
func (e *Emitter) Tool(c ToolCall) error {
	in := c.Input
	if in == nil {
		in = map[string]any{}
	}
	return e.Event("tool", struct {
		ToolCallID string         `json:"toolCallId,omitempty"`
		Name       string         `json:"name"`
		Input      map[string]any `json:"input"`
	}{c.ID, c.Name, in})
}

// ToolResult reports what the tool call with the given id returned.
func (e *Emitter) ToolResult(id string, output any) error {
	return e.Event("tool_result", struct {
		ToolCallID string `json:"toolCallId,omitempty"`
		Output     any    `json:"output"`
	}{id, output})
}

// Result ends a successful call.
type Result struct {
	Output            string
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64
	TotalCostUSD      float64
	// SessionID is the session later calls resume; empty keeps the
	// incoming --session value.
	SessionID string
}

// final is the data of `done` and `error` events, fields in the order the
// protocol writes them.
type final struct {
	Output            *string `json:"output,omitempty"`
	Error             *string `json:"error,omitempty"`
	InputTokens       int64   `json:"input_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens"`
	TotalCostUSD      float64 `json:"total_cost_usd"`
	SessionID         string  `json:"session_id"`
}

// Handler answers one call. Returning a Result writes `done`; returning
// (nil, nil) writes nothing more; returning an error writes `error` and
// makes the process exit non-zero.
type Handler func(ctx context.Context, call *Call, emit *Emitter) (*Result, error)

// Run parses args, calls h and writes the events to w. It returns h's
// error after reporting it as an `error` event.
func Run(ctx context.Context, args []string, w io.Writer, h Handler) error {
	call := ParseArgs(args)
	emit := &Emitter{enc: stream.NewEncoder(w)}
	res, err := safeCall(ctx, h, call, emit)
	if err != nil {
		msg := err.Error()
		if werr := emit.Event("error", final{Error: &msg, SessionID: call.SessionID}); werr != nil {
			return errors.Join(err, werr)
		}
		return err
	}
	if res == nil {
		return nil
	}
	session := res.SessionID
	if session == "" {
		session = call.SessionID
	}
	out := res.Output
	return emit.Event("done", final{
		Output: &out, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens,
		CachedInputTokens: res.CachedInputTokens, TotalCostUSD: res.TotalCostUSD, SessionID: session,
	})
}

// safeCall turns a panic in the handler into an error, so that the caller
// still gets an `error` event.
func safeCall(ctx context.Context, h Handler, call *Call, emit *Emitter) (res *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("harness panicked: %v", p)
		}
	}()
	return h(ctx, call, emit)
}

// Main runs h for the process's own arguments, writing to standard output,
// and exits: 0 after success, 1 after an error. SIGTERM and SIGINT cancel
// the handler's context (boxd sends SIGKILL when a run is cancelled, so a
// handler cannot rely on seeing it).
func Main(h Handler) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := Run(ctx, os.Args[1:], os.Stdout, h)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
