// Command agent asks a box's coding agent to review a file and decodes its
// answer into a Go struct (structured output), streaming the agent's steps
// as they happen.
//
// On the Upstash Box cloud (UPSTASH_BOX_API_KEY set, UPSTASH_BOX_BASE_URL
// unset or the cloud's) it runs Claude Code. On boxd, embedded when
// nothing is set or at UPSTASH_BOX_BASE_URL, it installs a small custom
// harness in the box (this same program, written with the harness
// package) that reviews the file with simple checks, so the example runs
// offline:
//
//	go run ./examples/agent
//
// Boxes run Linux, so from another system the harness is a Linux build of
// this program, made for the boxd's machine and named with -harness:
//
//	GOOS=linux GOARCH=arm64 go build -o reviewer ./examples/agent
//	UPSTASH_BOX_BASE_URL=http://linux-vm:8989 UPSTASH_BOX_API_KEY=mykey go run ./examples/agent -harness reviewer
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strings"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/examples/internal/backend"
	"github.com/upstash/box-go/harness"
)

// Finding is one problem the review found.
type Finding struct {
	Severity string `json:"severity" enum:"high,medium,low" jsonschema:"how serious the problem is"`
	Line     int    `json:"line" jsonschema:"1-based line number"`
	Issue    string `json:"issue"`
}

// Review is the structured answer the agent must give.
type Review struct {
	Verdict  string    `json:"verdict" enum:"approved,changes_requested"`
	Findings []Finding `json:"findings"`
}

const code = `package main

import "os"

func main() {
	f, _ := os.Open("config.json") // error ignored
	defer f.Close()
	// TODO: validate the config
	panic("not implemented")
}
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "harness" {
		harness.Main(review) // running inside the box as its agent
	}
	harnessBin := flag.String("harness", "", "a Linux build of this program, installed in boxd's box as its agent (default: this program, on Linux)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *harnessBin); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, harnessBin string) error {
	be, err := backend.Connect(ctx)
	if err != nil {
		return err
	}
	defer be.Close()
	client := be.Client

	cloud := be.Kind == backend.Cloud
	if !cloud && harnessBin == "" {
		if runtime.GOOS != "linux" {
			return fmt.Errorf("on boxd the review runs this program in the box, and boxes run Linux: build it with GOOS=linux and the GOARCH of boxd's machine, and pass the build with -harness")
		}
		if harnessBin, err = os.Executable(); err != nil {
			return err
		}
	}
	params := &box.CreateParams{Agent: &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5, APIKey: box.BoxAPIKeyUpstash}}
	if !cloud {
		params.Agent = &box.AgentOptions{
			Harness:       box.HarnessCustom,
			Model:         "custom/reviewer",
			CustomHarness: &box.CustomHarness{Command: "/home/boxuser/bin/reviewer", Args: []string{"harness"}},
		}
	}
	b, err := client.Create(ctx, params)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer b.Delete(context.WithoutCancel(ctx))
	fmt.Println("box", b.ID())

	if !cloud {
		if err := b.Files.Upload(ctx, []box.UploadFile{{LocalPath: harnessBin, Destination: "/home/boxuser/bin/reviewer"}}); err != nil {
			return fmt.Errorf("install harness: %w", err)
		}
		if _, err := b.Exec.Command(ctx, "chmod +x /home/boxuser/bin/reviewer"); err != nil {
			return err
		}
	}
	if err := b.Files.WriteText(ctx, "main.go", code); err != nil {
		return err
	}

	rev, run, err := box.RunAs[Review](ctx, b.Agent, &box.AgentParams{
		Prompt:     "Review main.go for bugs. Answer with the verdict and one finding per problem, with its line number.",
		MaxRetries: 1,
		OnToolUse: func(c box.ToolCall) {
			in, _ := json.Marshal(c.Input)
			fmt.Printf("  tool %s %s\n", c.Name, in)
		},
	})
	if err != nil {
		return fmt.Errorf("review: %w", err)
	}
	fmt.Printf("verdict: %s (%d input / %d output tokens, run %s)\n", rev.Verdict, run.Cost.InputTokens, run.Cost.OutputTokens, run.Status)
	for _, f := range rev.Findings {
		fmt.Printf("  line %2d  %-6s %s\n", f.Line, f.Severity, f.Issue)
	}
	return nil
}

// review is the offline harness: it reads the files the prompt names and
// reports what simple patterns find, in the Review shape.
func review(ctx context.Context, call *harness.Call, emit *harness.Emitter) (*harness.Result, error) {
	_ = emit.Reasoning("Reading main.go and looking for ignored errors, panics and TODOs.")
	_ = emit.Tool(harness.ToolCall{ID: "read-1", Name: "Read", Input: map[string]any{"path": "main.go"}})
	src, err := os.ReadFile("main.go")
	if err != nil {
		return nil, err
	}
	_ = emit.ToolResult("read-1", fmt.Sprintf("%d bytes", len(src)))
	checks := []struct {
		re       *regexp.Regexp
		severity string
		issue    string
	}{
		{regexp.MustCompile(`, _ :?= `), "high", "an error is ignored"},
		{regexp.MustCompile(`\bpanic\(`), "medium", "panics instead of returning an error"},
		{regexp.MustCompile(`TODO`), "low", "unfinished work (TODO)"},
	}
	rev := Review{Verdict: "approved", Findings: []Finding{}}
	for i, line := range strings.Split(string(src), "\n") {
		for _, c := range checks {
			if c.re.MatchString(line) {
				rev.Findings = append(rev.Findings, Finding{Severity: c.severity, Line: i + 1, Issue: c.issue})
				rev.Verdict = "changes_requested"
			}
		}
	}
	out, _ := json.Marshal(rev)
	_ = emit.Text(string(out))
	return &harness.Result{Output: string(out), InputTokens: int64(len(call.Prompt) / 4), OutputTokens: int64(len(out) / 4)}, nil
}
