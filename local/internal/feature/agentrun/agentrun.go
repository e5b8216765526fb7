// Package agentrun is the agent runs feature: a run of a box's coding
// agent (a managed harness's CLI, or a custom harness that speaks
// box-sse-v1), streamed to its caller or delivered to a webhook, recorded
// with its tokens, cost and resources, and cancellable while it runs. It
// owns the run records it writes, the harness's invocation and the
// box's model and custom harness settings.
//
// It touches a box only through its Host, the browser only through
// Browser (for the Chrome DevTools MCP server of a browser box), and the
// caller's URL only through the webhook sender. Schedules start prompt
// runs through Start. Its errors are errdefs kinds.
package agentrun

import (
	"context"
	"log/slog"
	"time"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/webhook"
)

// Host is what agent runs need of boxd's core.
type Host interface {
	// Box returns the record of a box, or an error of kind not found.
	Box(idOrName string) (*store.Box, error)
	// EnsureRunning starts box b if it is not running and returns the
	// client of its agent.
	EnsureRunning(ctx context.Context, b *store.Box) (*agent.Client, error)
	// Busy marks a box in use until done is called.
	Busy(id string) (done func())
	// UpdateBox changes a box's record in one transaction.
	UpdateBox(id string, f func(*store.Box) error) error
	// Logf appends an entry to a box's log.
	Logf(boxID, level, source, msg string)
	Logger() *slog.Logger
	// Context is boxd's lifetime; every run's context derives from it.
	Context() context.Context
	// Go runs f in a goroutine that boxd tracks, and reports whether it
	// did: not once Wait has begun. Wait refuses new goroutines and waits
	// for those Go started.
	Go(f func(ctx context.Context)) bool
	Wait()
}

// Records is the store of run records, the records the feature owns
// (boxd's *store.Store).
type Records interface {
	// PutRun creates or replaces a run record; it fails with
	// store.ErrNotFound when the run's box is gone.
	PutRun(r *store.Run) error
	Run(boxID, runID string) (*store.Run, error)
}

// Browser is what agent runs need of the browser feature.
type Browser interface {
	// DevtoolsURL is where box b's processes reach its Chromium's
	// DevTools, starting Chromium if it is not running.
	DevtoolsURL(ctx context.Context, b *store.Box) (string, error)
}

// Config configures the feature.
type Config struct {
	Host Host
	// Records keeps the runs' records.
	Records Records
	// ProviderURLs are the operator's model provider URLs
	// (local.Config.ModelProviderURLs).
	ProviderURLs map[string]string
	Browser      Browser
	Webhooks     *webhook.Sender
}

// Spec is a run that boxd starts itself (a schedule's).
type Spec struct {
	Prompt  string
	Folder  string
	Options map[string]any
	// ScheduleID marks the run as the schedule's.
	ScheduleID string
	// Timeout ends the run as failed once it passes; 0 means no limit.
	Timeout time.Duration
	// Ended is called with the run's record once it is written.
	Ended func(rec *store.Run)
}

// Start starts a run of box b's agent that nobody streams, and returns
// its id.
func (rs *Runs) Start(b *store.Box, spec Spec) (runID string, err error) {
	r, err := rs.begin(b, &runSpec{
		prompt: spec.Prompt, folder: spec.Folder, options: spec.Options,
		scheduleID: spec.ScheduleID, timeout: spec.Timeout, ended: spec.Ended,
	})
	if err != nil {
		return "", err
	}
	r.out.detach() // nobody reads the events of a run boxd started
	return r.id, nil
}

// Close cancels every run and waits for them to be recorded.
func (rs *Runs) Close() { rs.closeAll() }

// HasAgent reports whether box b has an agent to run.
func HasAgent(b *store.Box) bool { return b.Agent != "" || len(b.CustomRunner) > 0 }

// InferHarness is the harness a model names (see inferHarness).
func InferHarness(model string) string { return inferHarness(model) }
