// Command testharness is a custom agent harness for tests and examples. It
// answers prompts by their first word:
//
//	review      text, reasoning, a tool call with its result, and a JSON
//	            review as the final output, with usage and a session id
//	json <doc>  <doc> as the final output
//	flaky <a> <b>  <a> the first time it runs in a box, <b> afterwards
//	options     the agent options it received, as JSON
//	files       the attached file paths listed in the prompt, with sizes
//	sleep <s>   text every 100 ms for <s> seconds, then done
//	long <n>    <n> lines of text of 1 KiB each (numbered), and no output
//	fail        an error event
//	crash       exits 3 with a message on stderr and no done
//	session     the --session it was given
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/upstash/box-go/harness"
)

func main() {
	harness.Main(handle)
}

func handle(ctx context.Context, c *harness.Call, emit *harness.Emitter) (*harness.Result, error) {
	first, _, _ := strings.Cut(c.Prompt, "\n")
	word, rest, _ := strings.Cut(first, " ")
	switch word {
	case "review":
		_ = emit.Reasoning("Looking at the code.")
		_ = emit.Tool(harness.ToolCall{ID: "call-1", Name: "Read", Input: map[string]any{"path": "main.go"}})
		_ = emit.ToolResult("call-1", "package main")
		out := `{"verdict":"changes_requested","findings":[{"severity":"high","file":"main.go","issue":"no tests"}]}`
		_ = emit.Text(out)
		return &harness.Result{Output: out, InputTokens: 120, OutputTokens: 45, CachedInputTokens: 7, TotalCostUSD: 0.0125, SessionID: "sess-" + c.Model}, nil
	case "json":
		_ = emit.Text(rest)
		return &harness.Result{Output: rest}, nil
	case "flaky":
		first, second, _ := strings.Cut(rest, " ")
		marker := "/tmp/testharness-flaky"
		if _, err := os.Stat(marker); err != nil {
			_ = os.WriteFile(marker, []byte("1"), 0o644)
			return &harness.Result{Output: first}, nil
		}
		return &harness.Result{Output: second}, nil
	case "options":
		raw, _ := json.Marshal(c.Options)
		return &harness.Result{Output: string(raw)}, nil
	case "files":
		var lines []string
		for _, l := range strings.Split(c.Prompt, "\n") {
			if p, ok := strings.CutPrefix(l, "- "); ok {
				p, _, _ = strings.Cut(p, " (")
				fi, err := os.Stat(p)
				if err != nil {
					return nil, err
				}
				lines = append(lines, fmt.Sprintf("%s %d", p, fi.Size()))
			}
		}
		return &harness.Result{Output: strings.Join(lines, "\n")}, nil
	case "sleep":
		secs, _ := strconv.ParseFloat(rest, 64)
		deadline := time.Now().Add(time.Duration(secs * float64(time.Second)))
		for time.Now().Before(deadline) {
			_ = emit.Text(".")
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		return &harness.Result{Output: "slept"}, nil
	case "long":
		n, _ := strconv.Atoi(rest)
		for i := range n {
			line := fmt.Sprintf("%07d ", i)
			if err := emit.Text(line + strings.Repeat("x", 1023-len(line)) + "\n"); err != nil {
				return nil, err
			}
		}
		return &harness.Result{}, nil
	case "fail":
		return nil, fmt.Errorf("the harness failed on purpose")
	case "crash":
		fmt.Fprintln(os.Stderr, "fatal: something broke")
		os.Exit(3)
	case "session":
		return &harness.Result{Output: "session=" + c.SessionID, SessionID: "next-session"}, nil
	}
	_ = emit.Text("echo: " + c.Prompt)
	return &harness.Result{Output: "echo: " + c.Prompt}, nil
}
