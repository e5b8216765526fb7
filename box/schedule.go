package box

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/gen"
)

// Schedule manages a box's cron schedules (UTC): shell commands and agent
// prompts that run on their own. Each run appears in [Box.Runs] with the
// schedule's id, and ends RunCompleted, RunFailed or RunSkipped (the
// previous run of the schedule was still going).
type Schedule struct {
	b *Box
	// types remembers the type of every schedule this namespace has seen,
	// so that Update can refuse a type change before sending it.
	types sync.Map // schedule id → ScheduleType
}

// ScheduleType says what a schedule runs.
type ScheduleType string

// Schedule types.
const (
	// ScheduleExec runs a command.
	ScheduleExec ScheduleType = "exec"
	// SchedulePrompt runs the box's agent with a prompt.
	SchedulePrompt ScheduleType = "prompt"
)

// ScheduleStatus is the state of a schedule.
type ScheduleStatus string

// Schedule statuses.
const (
	ScheduleActive  ScheduleStatus = "active"
	SchedulePaused  ScheduleStatus = "paused"
	ScheduleDeleted ScheduleStatus = "deleted"
)

// ErrScheduleTypeChange is returned (wrapped, before any request) by
// [Schedule.Update] when an update would turn an exec schedule into a
// prompt schedule or back: Command is only for exec schedules, and
// Prompt, Model and Options only for prompt schedules. The server refuses
// such an update too (400), for schedules this Box has not seen yet.
// Like every error of a call's arguments it matches ErrInvalid too.
var ErrScheduleTypeChange = invalidSentinel("box: a schedule's type cannot change")

// ScheduleInfo is what the API reports about a schedule.
type ScheduleInfo struct {
	ID         string
	BoxID      string
	CustomerID string
	Type       ScheduleType
	// Cron is the schedule's cron expression, in UTC.
	Cron string
	// Command is the argv of an exec schedule.
	Command []string
	// Prompt, Model, Options and Timeout are those of a prompt schedule.
	// An empty Model means the box's model; Options are as sent on the
	// wire (in the casing of the box's harness).
	Prompt  string
	Model   Model
	Options RawOptions
	// Timeout ends a run that takes longer; 0 means no limit.
	Timeout time.Duration
	// Folder is the absolute directory the schedule runs in.
	Folder string
	Status ScheduleStatus
	// QStashScheduleID is the id of the cloud's underlying QStash
	// schedule; empty on other backends.
	QStashScheduleID string
	WebhookURL       string
	WebhookHeaders   map[string]string
	// LastRunAt, LastRunStatus and LastRunID describe the schedule's
	// latest run; they are zero until it first runs. LastRunStatus is
	// RunCompleted, RunFailed or RunSkipped.
	LastRunAt     time.Time
	LastRunStatus RunStatus
	LastRunID     string
	// TotalRuns counts the schedule's runs, skipped ones included;
	// TotalFailures the failed ones.
	TotalRuns     int64
	TotalFailures int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// ExecScheduleParams is a schedule that runs a command.
type ExecScheduleParams struct {
	// Cron is a cron expression in UTC, e.g. "*/5 * * * *". Required.
	Cron string
	// Command is the argv, run as is (no shell): use
	// []string{"sh", "-c", "..."} for a shell line. Required.
	Command []string
	// Folder is where the command runs, resolved against the box's
	// working directory (see [Box.Cd]); empty means the working directory
	// itself.
	Folder string
	// WebhookURL, if set, receives a POST after each run, with
	// WebhookHeaders.
	WebhookURL     string
	WebhookHeaders map[string]string
}

// AgentScheduleParams is a schedule that runs the box's agent.
type AgentScheduleParams struct {
	// Cron is a cron expression in UTC, e.g. "0 9 * * 1-5". Required.
	Cron string
	// Prompt is what the agent is asked at each run. Required.
	Prompt string
	// Folder is where the agent runs, resolved against the box's working
	// directory (see [Box.Cd]); empty means the working directory itself.
	Folder string
	// Model overrides the box's model for these runs.
	Model Model
	// Options go to the harness, as with [AgentParams].Options.
	Options HarnessOptions
	// Timeout ends a run that takes longer; 0 means no limit.
	Timeout time.Duration
	// WebhookURL, if set, receives a POST after each run, with
	// WebhookHeaders.
	WebhookURL     string
	WebhookHeaders map[string]string
}

// Optional is one field of an update. Its zero value leaves the field
// unchanged; [Set] gives it a value and [Clear] empties it:
//
//	&box.ScheduleUpdate{
//		Cron:       box.Set("0 18 * * *"),       // changed
//		WebhookURL: box.Clear[string](),         // removed
//		Options:    box.Set[box.HarnessOptions](box.ClaudeCodeOptions{Effort: "high"}),
//	}                                           // every other field unchanged
type Optional[T any] struct {
	v   T
	set bool
}

// Set returns an Optional that sets its field to v.
func Set[T any](v T) Optional[T] { return Optional[T]{v: v, set: true} }

// Clear returns an Optional that empties its field: "", an empty list or
// map, zero, or no options.
func Clear[T any]() Optional[T] { return Optional[T]{set: true} }

// Get returns the value and whether the field is to change; a cleared
// field changes to T's zero value.
func (o Optional[T]) Get() (T, bool) { return o.v, o.set }

// ScheduleUpdate changes some fields of a schedule; fields left at their
// zero value stay as they are (see [Optional]).
type ScheduleUpdate struct {
	// Cron cannot be cleared.
	Cron Optional[string]
	// Command is for exec schedules, and cannot be cleared.
	Command Optional[[]string]
	// Prompt is for prompt schedules, and cannot be cleared.
	Prompt Optional[string]
	// Folder is resolved against the box's working directory; cleared, it
	// goes back to /workspace/home.
	Folder Optional[string]
	// Model is for prompt schedules; cleared, runs use the box's model.
	Model Optional[Model]
	// Options are for prompt schedules; cleared, runs get none.
	Options Optional[HarnessOptions]
	// Timeout cleared means no limit.
	Timeout Optional[time.Duration]
	// WebhookURL cleared means no webhook.
	WebhookURL     Optional[string]
	WebhookHeaders Optional[map[string]string]
}

// Exec creates a schedule that runs a command (POST /schedules, type
// exec) and returns it.
func (s *Schedule) Exec(ctx context.Context, p *ExecScheduleParams, opts ...Option) (*ScheduleInfo, error) {
	ctx = withCallOptions(ctx, opts)
	if p == nil || strings.TrimSpace(p.Cron) == "" {
		return nil, invalidf("box: Cron is required")
	}
	if len(p.Command) == 0 || p.Command[0] == "" {
		return nil, invalidf("box: Command is required")
	}
	return s.create(ctx, gen.CreateScheduleRequest{
		Type: gen.ScheduleTypeExec, Cron: p.Cron, Command: p.Command, Folder: join(s.b.Cwd(), p.Folder),
		WebhookURL: nonEmpty(p.WebhookURL), WebhookHeaders: p.WebhookHeaders,
	})
}

// Agent creates a schedule that runs the box's agent with a prompt (POST
// /schedules, type prompt) and returns it. Like [Agent.Run], it fails
// with ErrNoAgent on a box without an agent.
func (s *Schedule) Agent(ctx context.Context, p *AgentScheduleParams, opts ...Option) (*ScheduleInfo, error) {
	ctx = withCallOptions(ctx, opts)
	if !s.b.hasAgent() {
		return nil, ErrNoAgent
	}
	if p == nil || strings.TrimSpace(p.Cron) == "" {
		return nil, invalidf("box: Cron is required")
	}
	if strings.TrimSpace(p.Prompt) == "" {
		return nil, invalidf("box: Prompt is required")
	}
	if p.Timeout < 0 {
		return nil, invalidf("box: Timeout must not be negative")
	}
	body := gen.CreateScheduleRequest{
		Type: gen.ScheduleTypePrompt, Cron: p.Cron, Prompt: &p.Prompt, Folder: join(s.b.Cwd(), p.Folder),
		Model: nonEmpty(string(p.Model)), WebhookURL: nonEmpty(p.WebhookURL), WebhookHeaders: p.WebhookHeaders,
	}
	if p.Options != nil {
		opts, err := s.options(p.Options)
		if err != nil {
			return nil, err
		}
		body.AgentOptions = opts
	}
	if p.Timeout > 0 {
		ms := millis(p.Timeout)
		body.Timeout = &ms
	}
	return s.create(ctx, body)
}

func (s *Schedule) create(ctx context.Context, body gen.CreateScheduleRequest) (*ScheduleInfo, error) {
	d, err := call[gen.Schedule](s.b.c.api.CreateSchedule(ctx, s.b.id, body))
	if err != nil {
		return nil, err
	}
	return s.info(d), nil
}

// options maps harness options to the wire, refusing options for another
// harness than the box's.
func (s *Schedule) options(o HarnessOptions) (map[string]any, error) {
	opts, harness, err := o.agentOptions()
	if err != nil {
		return nil, err
	}
	if h := s.b.Info().Harness; harness != "" && h != "" && h != harness {
		return nil, invalidf("box: %T are for the %s harness; this box runs %s", o, harness, h)
	}
	return opts, nil
}

// millis is d in whole milliseconds, at least 1 for a positive d.
func millis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if ms == 0 && d > 0 {
		ms = 1
	}
	return ms
}

// List returns the box's schedules, active and paused, oldest first
// (GET /schedules).
func (s *Schedule) List(ctx context.Context, opts ...Option) ([]*ScheduleInfo, error) {
	ctx = withCallOptions(ctx, opts)
	list, err := call[[]gen.Schedule](s.b.c.api.ListSchedules(ctx, s.b.id))
	if err != nil {
		return nil, err
	}
	out := make([]*ScheduleInfo, len(*list))
	for i := range *list {
		out[i] = s.info(&(*list)[i])
	}
	return out, nil
}

// Get returns one schedule (GET /schedules/{id}).
func (s *Schedule) Get(ctx context.Context, id string, opts ...Option) (*ScheduleInfo, error) {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("schedule id", id); err != nil {
		return nil, err
	}
	d, err := call[gen.Schedule](s.b.c.api.GetSchedule(ctx, s.b.id, id))
	if err != nil {
		return nil, err
	}
	return s.info(d), nil
}

// Update changes the fields of a schedule that u sets (PATCH
// /schedules/{id}, with only those keys) and returns the schedule. A schedule's type cannot change: an update that would
// change it fails with an error matching ErrScheduleTypeChange, before any
// request when this Box has seen the schedule (else the server answers
// 400).
func (s *Schedule) Update(ctx context.Context, id string, u *ScheduleUpdate, opts ...Option) (*ScheduleInfo, error) {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("schedule id", id); err != nil {
		return nil, err
	}
	if u == nil {
		return nil, invalidf("box: ScheduleUpdate is required")
	}
	var body gen.UpdateScheduleRequest
	if v, ok := u.Cron.Get(); ok {
		if strings.TrimSpace(v) == "" {
			return nil, invalidf("box: Cron cannot be cleared")
		}
		body.Cron = &v
	}
	if v, ok := u.Command.Get(); ok {
		if len(v) == 0 || v[0] == "" {
			return nil, invalidf("box: Command cannot be cleared: an exec schedule needs a command")
		}
		body.Command = &v
	}
	if v, ok := u.Prompt.Get(); ok {
		if strings.TrimSpace(v) == "" {
			return nil, invalidf("box: Prompt cannot be cleared: a prompt schedule needs a prompt")
		}
		body.Prompt = &v
	}
	if v, ok := u.Folder.Get(); ok {
		if v != "" {
			v = join(s.b.Cwd(), v)
		}
		body.Folder = &v
	}
	if v, ok := u.Model.Get(); ok {
		m := string(v)
		body.Model = &m
	}
	if v, ok := u.Options.Get(); ok {
		body.AgentOptions = json.RawMessage("null")
		if v != nil {
			opts, err := s.options(v)
			if err != nil {
				return nil, err
			}
			if body.AgentOptions, err = json.Marshal(opts); err != nil {
				return nil, fmt.Errorf("box: Options: %w", err)
			}
		}
	}
	if v, ok := u.Timeout.Get(); ok {
		if v < 0 {
			return nil, invalidf("box: Timeout must not be negative")
		}
		ms := millis(v)
		body.Timeout = &ms
	}
	if v, ok := u.WebhookURL.Get(); ok {
		body.WebhookURL = &v
	}
	if v, ok := u.WebhookHeaders.Get(); ok {
		if v == nil {
			v = map[string]string{}
		}
		body.WebhookHeaders = &v
	}
	if err := s.checkType(id, &body); err != nil {
		return nil, err
	}
	d, err := call[gen.Schedule](s.b.c.api.UpdateSchedule(withIdempotent(ctx), s.b.id, id, body))
	if err != nil {
		return nil, err
	}
	return s.info(d), nil
}

// checkType refuses an update that would change the schedule's type:
// always when it mixes exec and prompt fields, and against the known type
// of a schedule seen before.
func (s *Schedule) checkType(id string, body *gen.UpdateScheduleRequest) error {
	promptOnly := body.Prompt != nil || (body.Model != nil && *body.Model != "") ||
		(body.AgentOptions != nil && string(body.AgentOptions) != "null")
	if body.Command != nil && promptOnly {
		return fmt.Errorf("%w: Command is for exec schedules, Prompt, Model and Options for prompt schedules", ErrScheduleTypeChange)
	}
	known, ok := s.types.Load(id)
	switch {
	case !ok:
	case known == ScheduleExec && promptOnly:
		return fmt.Errorf("%w: schedule %s runs a command; Prompt, Model and Options are for prompt schedules", ErrScheduleTypeChange, id)
	case known == SchedulePrompt && body.Command != nil:
		return fmt.Errorf("%w: schedule %s runs the agent; Command is for exec schedules", ErrScheduleTypeChange, id)
	}
	return nil
}

// Pause stops a schedule from firing until Resume (POST
// /schedules/{id}/pause). A run in progress goes on. Pausing a paused
// schedule is not an error.
func (s *Schedule) Pause(ctx context.Context, id string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("schedule id", id); err != nil {
		return err
	}
	return none(s.b.c.api.PauseSchedule(withIdempotent(ctx), s.b.id, id))
}

// Resume makes a paused schedule fire again from its next activation
// (POST /schedules/{id}/resume); activations missed while it was paused
// are not made up for.
func (s *Schedule) Resume(ctx context.Context, id string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("schedule id", id); err != nil {
		return err
	}
	return none(s.b.c.api.ResumeSchedule(withIdempotent(ctx), s.b.id, id))
}

// Delete deletes a schedule (DELETE /schedules/{id}). A run in progress
// goes on; run records stay.
func (s *Schedule) Delete(ctx context.Context, id string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("schedule id", id); err != nil {
		return err
	}
	if err := none(s.b.c.api.DeleteSchedule(ctx, s.b.id, id)); err != nil {
		return err
	}
	s.types.Delete(id)
	return nil
}

// info converts a schedule and remembers its type.
func (s *Schedule) info(d *gen.Schedule) *ScheduleInfo {
	in := &ScheduleInfo{
		ID: d.ID, BoxID: d.BoxID, CustomerID: deref(d.CustomerID), Type: ScheduleType(d.Type), Cron: d.Cron,
		Command: d.Command, Prompt: deref(d.Prompt), Model: Model(deref(d.Model)), Folder: deref(d.Folder),
		Timeout: time.Duration(deref(d.Timeout)) * time.Millisecond, Status: ScheduleStatus(d.Status),
		QStashScheduleID: deref(d.QstashScheduleID), WebhookURL: deref(d.WebhookURL), WebhookHeaders: d.WebhookHeaders,
		LastRunAt: unixTime(deref(d.LastRunAt)), LastRunStatus: RunStatus(deref(d.LastRunStatus)), LastRunID: deref(d.LastRunID),
		TotalRuns: d.TotalRuns, TotalFailures: d.TotalFailures, CreatedAt: unixTime(d.CreatedAt), UpdatedAt: unixTime(d.UpdatedAt),
	}
	if d.AgentOptions != nil {
		in.Options = RawOptions(d.AgentOptions)
	}
	if in.Type == ScheduleExec || in.Type == SchedulePrompt {
		s.types.Store(in.ID, in.Type)
	}
	return in
}
