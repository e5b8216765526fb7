// Package schedules is the schedules feature: cron schedules of a box
// that run a command (exec) or start an agent run (prompt), and POST
// each run's outcome to the schedule's webhook. It owns the schedule
// records and their timers. It reaches boxes only through its Host,
// starts agent runs only through Runs (package agentrun), and speaks no
// HTTP: its errors are errdefs kinds.
package schedules

import (
	"context"
	"log/slog"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/feature/agentrun"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/webhook"
)

// Host is what schedules need of boxd's core.
type Host interface {
	// Box returns the record of a box, or an error of kind not found.
	Box(idOrName string) (*store.Box, error)
	// EnsureRunning starts box b if it is not running and returns the
	// client of its agent.
	EnsureRunning(ctx context.Context, b *store.Box) (*agent.Client, error)
	// Busy marks a box in use until done is called.
	Busy(id string) (done func())
	// Logf appends an entry to a box's log.
	Logf(boxID, level, source, msg string)
	Logger() *slog.Logger
	// Clock times the schedules' activations.
	Clock() core.Clock
	// Context is boxd's lifetime; exec runs' contexts derive from it.
	Context() context.Context
	// Go runs f in a goroutine that boxd tracks, and reports whether it
	// did: not once Wait has begun. Wait refuses new goroutines and waits
	// for those Go started.
	Go(f func(ctx context.Context)) bool
	Wait()
	// OnBoxDeleted registers fn to run each time a box is deleted, once
	// its sandbox, files and record are gone.
	OnBoxDeleted(fn func(id string))
}

// Records is the store of schedule records, the records the feature
// owns, and of the run records its schedules write (boxd's *store.Store).
type Records interface {
	PutSchedule(sc *store.Schedule) error
	Schedule(boxID, id string) (*store.Schedule, error)
	// Schedules returns a box's schedules, and AllSchedules every box's.
	Schedules(boxID string) ([]*store.Schedule, error)
	AllSchedules() ([]*store.Schedule, error)
	// UpdateSchedule changes a schedule record with f in one transaction.
	UpdateSchedule(boxID, id string, f func(*store.Schedule) error) (*store.Schedule, error)
	DeleteSchedule(boxID, id string) error
	DeleteSchedules(boxID string) error

	// StartScheduleRun stores the record of a scheduled run that has
	// begun, unless its box is gone.
	StartScheduleRun(r *store.Run) error
	// FinishScheduleRun stores a scheduled run's final record and
	// changes its schedule with f, in one transaction; stored is false
	// when the box is gone.
	FinishScheduleRun(r *store.Run, f func(*store.Schedule)) (stored bool, err error)
	// Runs returns a box's runs, newest first.
	Runs(boxID string) ([]*store.Run, error)
}

// Runs starts the agent runs of prompt schedules (agentrun.Runs).
type Runs interface {
	Start(b *store.Box, spec agentrun.Spec) (runID string, err error)
}

// Config configures the feature.
type Config struct {
	Host Host
	// Records keeps the schedules' records.
	Records  Records
	Runs     Runs
	Webhooks *webhook.Sender
}
