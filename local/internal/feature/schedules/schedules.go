package schedules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/feature/agentrun"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// Schedules on boxd.
//
// A schedule's cron expression is read in UTC: five fields (minute, hour,
// day of month, month, day of week, with names like JAN and MON, ranges,
// lists and steps) or one of the descriptors @yearly, @annually, @monthly,
// @weekly, @daily, @midnight and @hourly, which stand for five fields.
// `@every <duration>` and TZ=/CRON_TZ= prefixes are refused: the first is
// not cron, the second contradicts "cron is UTC".
//
// boxd arms one timer per active schedule on Config.Clock for the next
// activation and arms the following one each time it fires, so a fake
// clock drives schedules in tests. Each activation runs in the box, which
// is started or resumed if needed, as every data-plane call does:
//   - an exec schedule runs its command in its folder through the box's
//     agent, recorded as a "shell" run;
//   - a prompt schedule starts an agent run with its prompt, model, agent
//     options and timeout, recorded as an "agent" run.
//
// Each run is recorded with the schedule's id, and ends completed, failed
// or skipped (while it goes on, its record says running). An activation
// that comes while the schedule's previous run is still going does not
// start a second one: it is recorded as a skipped run that names the run
// still going. The schedule keeps the activation time, status and id of
// its latest activation's run, and counts its runs (skipped ones
// included) and failures. After each run, skipped ones included, boxd
// POSTs a scheduleWebhook to the schedule's webhook URL with its headers.
//
// A schedule's created_at, updated_at and last_run_at come from
// Config.Clock; run records keep the real time, like every other run.
//
// Schedule records live in the store and are re-armed when boxd starts;
// activations missed while boxd was down are not made up for. Deleting a
// box deletes its schedules.

// Schedule types and statuses, as on the wire.
const (
	scheduleExec   = "exec"
	schedulePrompt = "prompt"

	scheduleActive = "active"
	schedulePaused = "paused"
)

// maxScheduleOutput bounds the standard output an exec schedule's run
// record keeps: its last bytes.
const maxScheduleOutput = 1 << 20

// cronParser reads five cron fields or a descriptor.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron reads a schedule's cron expression in UTC. It refuses, with a
// message saying why, anything that is not five fields or a descriptor, and
// an expression that never fires (such as 30 February).
func parseCron(expr string, now time.Time) (cron.Schedule, error) {
	e := strings.TrimSpace(expr)
	switch {
	case e == "":
		return nil, errdefs.Invalid("cron is required")
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return nil, errdefs.Invalid("invalid cron %q: time zones are not supported; schedules run in UTC", expr)
	case strings.HasPrefix(e, "@every"):
		return nil, errdefs.Invalid("invalid cron %q: @every is not supported; use five fields, e.g. */5 * * * *", expr)
	}
	sch, err := cronParser.Parse(e)
	if err != nil {
		return nil, errdefs.Invalid("invalid cron %q: %v (want five fields: minute hour day-of-month month day-of-week, in UTC)", expr, err)
	}
	if spec, ok := sch.(*cron.SpecSchedule); ok {
		spec.Location = time.UTC
	}
	if sch.Next(now.UTC()).IsZero() {
		return nil, errdefs.Invalid("invalid cron %q: it never fires", expr)
	}
	return sch, nil
}

// scheduleWebhook is the body boxd POSTs to a schedule's webhook_url after
// each of its runs. It extends the run webhook payload (box_id, run_id,
// status, output, error) with the schedule's id and what a scheduled run
// adds.
type scheduleWebhook struct {
	BoxID      string `json:"box_id"`
	ScheduleID string `json:"schedule_id"`
	RunID      string `json:"run_id"`
	// Type is the schedule's type: exec or prompt.
	Type string `json:"type"`
	// Status is completed, failed or skipped.
	Status string `json:"status"`
	// Output is the command's standard output (its last MiB) or the
	// agent's final answer.
	Output string `json:"output,omitempty"`
	// Error says why the run failed or was skipped.
	Error string `json:"error,omitempty"`
	// ExitCode is the command's exit status (exec schedules whose command
	// ran).
	ExitCode *int `json:"exit_code,omitempty"`
	// ScheduledAt is the activation the run belongs to, in unix seconds.
	ScheduledAt int64 `json:"scheduled_at"`
	DurationMs  int64 `json:"duration_ms"`
}

// Schedules is the schedules feature: it fires the active schedules of
// every box, and serves their operations.
type Schedules struct {
	host Host
	db   Records
	cfg  Config
	// ctx ends when boxd closes; exec runs are bound to it.
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards the maps and serialises changes to schedule records with
	// the arming that follows them.
	mu     sync.Mutex
	closed bool
	armed  map[string]*armedSchedule // by schedule id
	// running holds the schedules whose run is in progress.
	running map[string]*inflight
}

// armedSchedule is an active schedule waiting for its next activation. A
// new one replaces it at each activation and change; a timer whose
// armedSchedule is no longer in scheduler.armed does nothing.
type armedSchedule struct {
	sc   *store.Schedule
	cron cron.Schedule
	at   time.Time
	stop func() bool
}

// inflight is a schedule's run in progress; runID is empty until known.
type inflight struct{ runID string }

// New returns the schedules feature; Start arms the stored schedules.
func New(cfg Config) *Schedules {
	ctx, cancel := context.WithCancel(cfg.Host.Context())
	sch := &Schedules{host: cfg.Host, db: cfg.Records, cfg: cfg, ctx: ctx, cancel: cancel, armed: map[string]*armedSchedule{}, running: map[string]*inflight{}}
	cfg.Host.OnBoxDeleted(sch.forgetBox)
	return sch
}

// Start arms the stored active schedules. Schedules of boxes that no longer
// exist are removed, and runs a killed boxd left going are recorded as
// failed.
func (sch *Schedules) Start() {
	all, err := sch.db.AllSchedules()
	if err != nil {
		sch.host.Logger().Error("cannot read the stored schedules; none is armed", "err", err)
		return
	}
	sch.mu.Lock()
	defer sch.mu.Unlock()
	checked := map[string]bool{}
	for _, sc := range all {
		if _, err := sch.host.Box(sc.BoxID); errors.Is(err, errdefs.ErrNotFound) {
			_ = sch.db.DeleteSchedule(sc.BoxID, sc.ID)
			continue
		}
		if !checked[sc.BoxID] {
			checked[sc.BoxID] = true
			sch.failInterrupted(sc.BoxID)
		}
		sch.arm(sc)
	}
}

// failInterrupted records as failed the scheduled runs of a box that were
// going when boxd was killed.
func (sch *Schedules) failInterrupted(boxID string) {
	runs, err := sch.db.Runs(boxID)
	if err != nil {
		return
	}
	for _, r := range runs {
		if r.ScheduleID == "" || r.Status != "running" {
			continue
		}
		r.Status = "failed"
		r.ErrorMessage = "boxd stopped during the run"
		r.CompletedAt = time.Now().Unix()
		_, _ = sch.db.FinishScheduleRun(r, func(sc *store.Schedule) {
			sc.TotalRuns++
			sc.TotalFailures++
		})
	}
}

// close stops every timer, cancels the exec runs in progress and waits
// for them to be recorded. Agent runs end with the server's runs.
func (sch *Schedules) Close() {
	sch.mu.Lock()
	sch.closed = true
	for id, a := range sch.armed {
		a.stop()
		delete(sch.armed, id)
	}
	sch.mu.Unlock()
	sch.cancel()
	sch.host.Wait()
}

// arm sets the timer of an active schedule for its next activation,
// replacing any earlier timer; a paused one is only disarmed. The caller
// holds sch.mu.
func (sch *Schedules) arm(sc *store.Schedule) {
	sch.disarm(sc.ID)
	if sch.closed || sc.Status != scheduleActive {
		return
	}
	now := sch.host.Clock().Now()
	c, err := parseCron(sc.Cron, now)
	if err != nil {
		sch.host.Logger().Warn("schedule not armed", "schedule", sc.ID, "err", err)
		return
	}
	sch.armAt(sc, c, now, now)
}

// armAt arms sc for its first activation after from. The caller holds
// sch.mu.
func (sch *Schedules) armAt(sc *store.Schedule, c cron.Schedule, from, now time.Time) {
	a := &armedSchedule{sc: sc, cron: c, at: c.Next(from.UTC())}
	if a.at.IsZero() {
		return // no activation within five years
	}
	a.stop = sch.host.Clock().AfterFunc(a.at.Sub(now), func() { sch.fire(a) })
	sch.armed[sc.ID] = a
}

// disarm stops a schedule's timer. The caller holds sch.mu.
func (sch *Schedules) disarm(id string) {
	if a := sch.armed[id]; a != nil {
		a.stop()
		delete(sch.armed, id)
	}
}

// fire is an activation of a: it arms the next one, then starts the run,
// or records a skipped run when the previous one is still going. It
// returns at once (a fake clock calls it from the goroutine advancing it).
func (sch *Schedules) fire(a *armedSchedule) {
	sch.mu.Lock()
	defer sch.mu.Unlock()
	if sch.closed || sch.armed[a.sc.ID] != a {
		return // paused, changed or deleted since it was armed
	}
	now := sch.host.Clock().Now()
	from := now
	if a.at.After(from) {
		from = a.at
	}
	delete(sch.armed, a.sc.ID)
	sch.armAt(a.sc, a.cron, from, now)

	sc := a.sc
	prev := sch.running[sc.ID]
	var fl *inflight
	if prev == nil {
		fl = &inflight{}
		sch.running[sc.ID] = fl
	}
	// Close marks sch closed (under sch.mu, held here) before it waits,
	// so Go refuses no activation of an open sch.
	sch.host.Go(func(context.Context) {
		if prev != nil {
			sch.skip(sc, a.at, prev)
			return
		}
		sch.run(sc, a.at, fl)
	})
}

// started notes the id of a schedule's run in progress.
func (sch *Schedules) started(fl *inflight, runID string) {
	sch.mu.Lock()
	fl.runID = runID
	sch.mu.Unlock()
}

// ended forgets a schedule's run in progress.
func (sch *Schedules) ended(id string, fl *inflight) {
	sch.mu.Lock()
	if sch.running[id] == fl {
		delete(sch.running, id)
	}
	sch.mu.Unlock()
}

// runOutcome is what a scheduled run adds to its record for the webhook.
type runOutcome struct {
	exitCode *int
}

// run runs one activation of sc.
func (sch *Schedules) run(sc *store.Schedule, at time.Time, fl *inflight) {
	b, err := sch.host.Box(sc.BoxID)
	if err != nil {
		sch.ended(sc.ID, fl)
		if errors.Is(err, errdefs.ErrNotFound) {
			sch.forgetBox(sc.BoxID)
		}
		return
	}
	if sc.Type == schedulePrompt {
		sch.runPrompt(b, sc, at, fl)
		return
	}
	sch.runExec(b, sc, at, fl)
}

// runExec runs an exec schedule's command in the box.
func (sch *Schedules) runExec(b *store.Box, sc *store.Schedule, at time.Time, fl *inflight) {
	start := time.Now()
	rec := &store.Run{
		ID: core.NewID("run-"), BoxID: b.ID, Type: "shell", Status: "running", ScheduleID: sc.ID,
		Prompt: strings.Join(sc.Command, " "), CreatedAt: start.Unix(), Seq: start.UnixNano(),
	}
	sch.started(fl, rec.ID)
	if err := sch.db.StartScheduleRun(rec); err != nil {
		sch.host.Logger().Warn("cannot record scheduled run", "schedule", sc.ID, "err", err)
	}
	ctx := sch.ctx
	if sc.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(sc.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	res, err := sch.process(ctx, b, sc.Command, sc.Folder)
	end := time.Now()
	rec.Status = "completed"
	rec.Output = res.stdout
	rec.CPUNs = res.cpuNs
	rec.MemoryPeak = res.memPeak
	rec.DurationMs = end.Sub(start).Milliseconds()
	rec.CompletedAt = end.Unix()
	var out runOutcome
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		rec.Status = "failed"
		rec.ErrorMessage = fmt.Sprintf("timed out after %s", time.Duration(sc.TimeoutMs)*time.Millisecond)
	case err != nil && sch.ctx.Err() != nil:
		rec.Status = "failed"
		rec.ErrorMessage = "boxd shut down during the run"
	case err != nil:
		rec.Status = "failed"
		rec.ErrorMessage = err.Error()
	default:
		code := res.exitCode
		out.exitCode = &code
		if code != 0 {
			rec.Status = "failed"
			rec.ErrorMessage = fmt.Sprintf("exited with status %d", code)
			if t := strings.TrimSpace(lastLines(res.stderr, 5)); t != "" {
				rec.ErrorMessage += ": " + t
			}
		}
	}
	sch.finish(sc, at, rec, fl, out)
}

// processResult is what a command run through the agent's process route
// produced.
type processResult struct {
	exitCode int
	stdout   string
	stderr   string
	cpuNs    int64
	memPeak  int64
}

// process runs argv in folder in the box, starting or resuming the box if
// needed. An error means the command did not run to its end.
func (sch *Schedules) process(ctx context.Context, b *store.Box, argv []string, folder string) (processResult, error) {
	var res processResult
	rt, err := sch.host.EnsureRunning(ctx, b)
	if err != nil {
		return res, fmt.Errorf("the box did not start: %w", err)
	}
	defer sch.host.Busy(b.ID)()
	p, err := rt.Process(ctx, agent.ProcessRequest{Argv: argv, Folder: folder})
	if err != nil {
		return res, err
	}
	defer p.Close()
	tail := &lastBytes{max: maxScheduleOutput}
	_, err = io.Copy(tail, p.Output)
	res.stdout = tail.String()
	if err != nil {
		return res, fmt.Errorf("reading the command's output: %w", err)
	}
	st, err := p.Wait()
	var ae *agent.Error
	switch {
	case errors.As(err, &ae):
		return res, fmt.Errorf("cannot run %s: %s", argv[0], ae.Message)
	case errors.Is(err, agent.ErrExitUnknown):
		return res, errors.New("the command's outcome was lost")
	case err != nil:
		return res, err
	}
	res.exitCode, res.stderr = st.ExitCode, st.Stderr
	res.cpuNs, res.memPeak = st.CPU.Nanoseconds(), st.MemoryPeak
	return res, nil
}

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	max  int
	buf  []byte
	lost bool
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - l.max; over > 0 {
		l.lost = true
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	return len(p), nil
}

func (l *lastBytes) String() string {
	if l.lost {
		return "[output cut to its last " + strconv.Itoa(l.max) + " bytes]\n" + string(l.buf)
	}
	return string(l.buf)
}

// runPrompt starts an agent run for a prompt schedule. The run is the
// box's usual agent run, with the schedule's model, options and timeout.
func (sch *Schedules) runPrompt(b *store.Box, sc *store.Schedule, at time.Time, fl *inflight) {
	box := *b
	if sc.Model != "" {
		box.Model = sc.Model
	}
	runID, err := sch.cfg.Runs.Start(&box, agentrun.Spec{
		Prompt: sc.Prompt, Folder: sc.Folder, Options: sc.AgentOptions,
		ScheduleID: sc.ID, Timeout: time.Duration(sc.TimeoutMs) * time.Millisecond,
		Ended: func(rec *store.Run) { sch.finish(sc, at, rec, fl, runOutcome{}) },
	})
	if err != nil {
		sch.ended(sc.ID, fl)
		if !sch.isClosed() {
			sch.host.Logger().Warn("scheduled agent run did not start", "schedule", sc.ID, "err", err)
		}
		return
	}
	sch.started(fl, runID)
}

func (sch *Schedules) isClosed() bool {
	sch.mu.Lock()
	defer sch.mu.Unlock()
	return sch.closed
}

// skip records an activation that came while the previous run was going.
func (sch *Schedules) skip(sc *store.Schedule, at time.Time, prev *inflight) {
	sch.mu.Lock()
	prevID := prev.runID
	sch.mu.Unlock()
	now := time.Now()
	rec := &store.Run{
		ID: core.NewID("run-"), BoxID: sc.BoxID, Type: "shell", Status: "skipped", ScheduleID: sc.ID,
		Prompt: strings.Join(sc.Command, " "), CreatedAt: now.Unix(), CompletedAt: now.Unix(), Seq: now.UnixNano(),
		ErrorMessage: "skipped: the previous run of this schedule is still running",
	}
	if prevID != "" {
		rec.ErrorMessage = "skipped: the previous run of this schedule (" + prevID + ") is still running"
	}
	if sc.Type == schedulePrompt {
		rec.Type, rec.Prompt, rec.Model = "agent", sc.Prompt, sc.Model
		if b, err := sch.host.Box(sc.BoxID); err == nil && rec.Model == "" {
			rec.Model = b.Model
		}
	}
	sch.finish(sc, at, rec, nil, runOutcome{})
}

// finish records a scheduled run that ended (or was skipped) together with
// its schedule's last run and totals, then delivers the webhook.
func (sch *Schedules) finish(sc *store.Schedule, at time.Time, rec *store.Run, fl *inflight, out runOutcome) {
	update := func(s *store.Schedule) {
		// The last run is that of the latest activation: a long run that
		// ends after a later activation was skipped does not replace it.
		if at.Unix() >= s.LastRunAt {
			s.LastRunAt = at.Unix()
			s.LastRunStatus = rec.Status
			s.LastRunID = rec.ID
		}
		s.TotalRuns++
		if rec.Status == "failed" {
			s.TotalFailures++
		}
	}
	stored, err := sch.db.FinishScheduleRun(rec, update)
	if err != nil {
		sch.host.Logger().Warn("cannot record scheduled run", "schedule", sc.ID, "run", rec.ID, "err", err)
	}
	if fl != nil {
		sch.ended(sc.ID, fl)
	}
	if !stored && err == nil {
		return // the box was deleted meanwhile
	}
	if rec.Status != "completed" {
		level := "error"
		if rec.Status == "skipped" {
			level = "warn"
		}
		sch.host.Logf(sc.BoxID, level, "system", fmt.Sprintf("schedule %s: run %s %s: %s", sc.ID, rec.ID, rec.Status, rec.ErrorMessage))
	}
	if sc.WebhookURL == "" {
		return
	}
	sch.cfg.Webhooks.Deliver(sc.BoxID, sc.WebhookURL, sc.WebhookHeaders, scheduleWebhook{
		BoxID: sc.BoxID, ScheduleID: sc.ID, RunID: rec.ID, Type: sc.Type, Status: rec.Status,
		Output: rec.Output, Error: rec.ErrorMessage, ExitCode: out.exitCode,
		ScheduledAt: at.Unix(), DurationMs: rec.DurationMs,
	})
}

// Armed is the number of schedules armed.
func (sch *Schedules) Armed() int {
	sch.mu.Lock()
	defer sch.mu.Unlock()
	return len(sch.armed)
}

// forgetBox disarms and deletes the schedules of a deleted box.
func (sch *Schedules) forgetBox(boxID string) {
	sch.mu.Lock()
	defer sch.mu.Unlock()
	for id, a := range sch.armed {
		if a.sc.BoxID == boxID {
			a.stop()
			delete(sch.armed, id)
		}
	}
	if err := sch.db.DeleteSchedules(boxID); err != nil {
		sch.host.Logger().Warn("cannot delete the schedules of a deleted box", "box", boxID, "err", err)
	}
}

// The API.

func (sch *Schedules) schedule(boxID, id string) (*store.Schedule, error) {
	sc, err := sch.db.Schedule(boxID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errdefs.NotFound("schedule not found")
	}
	return sc, err
}

// scheduleFolder makes a schedule's folder absolute: empty is
// /workspace/home, a relative one is relative to it.
func scheduleFolder(f string) (string, error) {
	if strings.IndexByte(f, 0) >= 0 {
		return "", errdefs.Invalid("folder contains a NUL byte")
	}
	if f == "" {
		return sandbox.Home, nil
	}
	if !strings.HasPrefix(f, "/") {
		f = sandbox.Home + "/" + f
	}
	return path.Clean(f), nil
}

func checkScheduleWebhook(u string, headers map[string]string) error {
	if u != "" {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return errdefs.Invalid("webhook_url must be an http or https URL")
		}
	}
	for k, v := range headers {
		if !headerToken(k) {
			return errdefs.Invalid("webhook_headers: %q is not a valid header name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return errdefs.Invalid("webhook_headers: the value of %q contains a line break or NUL", k)
		}
	}
	return nil
}

func headerToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func (sch *Schedules) CreateSchedule(ctx context.Context, req gen.CreateScheduleRequestObject) (gen.CreateScheduleResponseObject, error) {
	b, err := sch.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	body := req.Body
	if body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	now := sch.host.Clock().Now()
	if _, err := parseCron(body.Cron, now); err != nil {
		return nil, err
	}
	sc := &store.Schedule{
		ID: core.NewID("sched-"), BoxID: b.ID, Type: string(body.Type), Cron: strings.TrimSpace(body.Cron), Status: scheduleActive,
		WebhookURL: wire.Deref(body.WebhookURL), WebhookHeaders: body.WebhookHeaders,
		CreatedAt: now.Unix(), UpdatedAt: now.Unix(), Seq: time.Now().UnixNano(),
	}
	switch body.Type {
	case gen.ScheduleTypeExec:
		if len(body.Command) == 0 || body.Command[0] == "" {
			return nil, errdefs.Invalid("command is required for exec schedules")
		}
		if body.Prompt != nil || body.Model != nil || body.AgentOptions != nil {
			return nil, errdefs.Invalid("prompt, model and agent_options are for prompt schedules, not exec schedules")
		}
		sc.Command = body.Command
	case gen.ScheduleTypePrompt:
		if strings.TrimSpace(wire.Deref(body.Prompt)) == "" {
			return nil, errdefs.Invalid("prompt is required for prompt schedules")
		}
		if body.Command != nil {
			return nil, errdefs.Invalid("command is for exec schedules, not prompt schedules")
		}
		if b.Ephemeral {
			return nil, errdefs.Invalid("ephemeral boxes have no agent: use an exec schedule")
		}
		if !agentrun.HasAgent(b) {
			return nil, errdefs.Invalid("the box has no agent: create it with an agent, or set a model with PUT /config/model")
		}
		sc.Prompt, sc.Model, sc.AgentOptions = *body.Prompt, wire.Deref(body.Model), body.AgentOptions
	default:
		return nil, errdefs.Invalid("type must be exec or prompt, not %q", body.Type)
	}
	if sc.Folder, err = scheduleFolder(body.Folder); err != nil {
		return nil, err
	}
	if sc.TimeoutMs = wire.Deref(body.Timeout); sc.TimeoutMs < 0 {
		return nil, errdefs.Invalid("timeout must not be negative")
	}
	if err := checkScheduleWebhook(sc.WebhookURL, sc.WebhookHeaders); err != nil {
		return nil, err
	}
	if len(sc.WebhookHeaders) == 0 {
		sc.WebhookHeaders = nil
	}
	if len(sc.AgentOptions) == 0 {
		sc.AgentOptions = nil
	}
	sch.mu.Lock()
	defer sch.mu.Unlock()
	if err := sch.db.PutSchedule(sc); err != nil {
		return nil, err
	}
	sch.arm(sc)
	return gen.CreateSchedule200JSONResponse(scheduleData(sc)), nil
}

func (sch *Schedules) ListSchedules(ctx context.Context, req gen.ListSchedulesRequestObject) (gen.ListSchedulesResponseObject, error) {
	b, err := sch.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	all, err := sch.db.Schedules(b.ID)
	if err != nil {
		return nil, err
	}
	out := gen.ListSchedules200JSONResponse{}
	for _, sc := range all {
		out = append(out, scheduleData(sc))
	}
	return out, nil
}

func (sch *Schedules) GetSchedule(ctx context.Context, req gen.GetScheduleRequestObject) (gen.GetScheduleResponseObject, error) {
	b, err := sch.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	sc, err := sch.schedule(b.ID, req.ScheduleID)
	if err != nil {
		return nil, err
	}
	return gen.GetSchedule200JSONResponse(scheduleData(sc)), nil
}

// UpdateSchedule changes the keys present in the body: "", [] and {} clear
// a field, agent_options null clears the options. The type cannot change:
// command is refused on prompt schedules and prompt on exec schedules
// (model and agent_options too, unless they clear).
func (sch *Schedules) UpdateSchedule(ctx context.Context, req gen.UpdateScheduleRequestObject) (gen.UpdateScheduleResponseObject, error) {
	b, err := sch.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	u := req.Body
	if u == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	var opts map[string]any
	clearOpts := false
	if raw := bytes.TrimSpace(u.AgentOptions); len(raw) > 0 {
		if string(raw) == "null" {
			clearOpts = true
		} else if err := json.Unmarshal(raw, &opts); err != nil || opts == nil {
			return nil, errdefs.Invalid("agent_options must be an object or null")
		} else if len(opts) == 0 {
			clearOpts, opts = true, nil
		}
	}
	now := sch.host.Clock().Now()
	sch.mu.Lock()
	defer sch.mu.Unlock()
	sc, err := sch.db.UpdateSchedule(b.ID, req.ScheduleID, func(sc *store.Schedule) error {
		if u.Cron != nil {
			if _, err := parseCron(*u.Cron, now); err != nil {
				return err
			}
			sc.Cron = strings.TrimSpace(*u.Cron)
		}
		switch sc.Type {
		case scheduleExec:
			switch {
			case u.Prompt != nil:
				return errdefs.Invalid("prompt is for prompt schedules; this is an exec schedule and its type cannot change")
			case wire.Deref(u.Model) != "" || opts != nil:
				return errdefs.Invalid("model and agent_options are for prompt schedules; this is an exec schedule and its type cannot change")
			}
			if u.Command != nil {
				if len(*u.Command) == 0 || (*u.Command)[0] == "" {
					return errdefs.Invalid("command cannot be empty: an exec schedule needs a command")
				}
				sc.Command = *u.Command
			}
		case schedulePrompt:
			if u.Command != nil {
				return errdefs.Invalid("command is for exec schedules; this is a prompt schedule and its type cannot change")
			}
			if u.Prompt != nil {
				if strings.TrimSpace(*u.Prompt) == "" {
					return errdefs.Invalid("prompt cannot be empty: a prompt schedule needs a prompt")
				}
				sc.Prompt = *u.Prompt
			}
			if u.Model != nil {
				sc.Model = *u.Model
			}
			if clearOpts {
				sc.AgentOptions = nil
			} else if opts != nil {
				sc.AgentOptions = opts
			}
		}
		if u.Folder != nil {
			f, err := scheduleFolder(*u.Folder)
			if err != nil {
				return err
			}
			sc.Folder = f
		}
		if u.Timeout != nil {
			if *u.Timeout < 0 {
				return errdefs.Invalid("timeout must not be negative")
			}
			sc.TimeoutMs = *u.Timeout
		}
		if u.WebhookURL != nil {
			sc.WebhookURL = *u.WebhookURL
		}
		if u.WebhookHeaders != nil {
			sc.WebhookHeaders = *u.WebhookHeaders
			if len(sc.WebhookHeaders) == 0 {
				sc.WebhookHeaders = nil
			}
		}
		if err := checkScheduleWebhook(sc.WebhookURL, sc.WebhookHeaders); err != nil {
			return err
		}
		sc.UpdatedAt = now.Unix()
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errdefs.NotFound("schedule not found")
	}
	if err != nil {
		return nil, err
	}
	sch.arm(sc)
	return gen.UpdateSchedule200JSONResponse(scheduleData(sc)), nil
}

// setScheduleStatus pauses or resumes a schedule.
func (sch *Schedules) setScheduleStatus(boxID, id, status string) error {
	b, err := sch.host.Box(boxID)
	if err != nil {
		return err
	}
	now := sch.host.Clock().Now()
	sch.mu.Lock()
	defer sch.mu.Unlock()
	sc, err := sch.db.UpdateSchedule(b.ID, id, func(sc *store.Schedule) error {
		if sc.Status != status {
			sc.Status = status
			sc.UpdatedAt = now.Unix()
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return errdefs.NotFound("schedule not found")
	}
	if err != nil {
		return err
	}
	sch.arm(sc)
	return nil
}

func (sch *Schedules) PauseSchedule(ctx context.Context, req gen.PauseScheduleRequestObject) (gen.PauseScheduleResponseObject, error) {
	if err := sch.setScheduleStatus(req.ID, req.ScheduleID, schedulePaused); err != nil {
		return nil, err
	}
	return gen.PauseSchedule200JSONResponse(wire.Message("Schedule paused")), nil
}

func (sch *Schedules) ResumeSchedule(ctx context.Context, req gen.ResumeScheduleRequestObject) (gen.ResumeScheduleResponseObject, error) {
	if err := sch.setScheduleStatus(req.ID, req.ScheduleID, scheduleActive); err != nil {
		return nil, err
	}
	return gen.ResumeSchedule200JSONResponse(wire.Message("Schedule resumed")), nil
}

func (sch *Schedules) DeleteSchedule(ctx context.Context, req gen.DeleteScheduleRequestObject) (gen.DeleteScheduleResponseObject, error) {
	b, err := sch.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	sch.mu.Lock()
	defer sch.mu.Unlock()
	if err := sch.db.DeleteSchedule(b.ID, req.ScheduleID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, errdefs.NotFound("schedule not found")
		}
		return nil, err
	}
	sch.disarm(req.ScheduleID)
	return gen.DeleteSchedule200JSONResponse(wire.Message("Schedule deleted")), nil
}

func scheduleData(sc *store.Schedule) gen.Schedule {
	d := gen.Schedule{
		ID: sc.ID, BoxID: sc.BoxID, CustomerID: wire.Ptr(wire.CustomerID), Type: gen.ScheduleType(sc.Type), Cron: sc.Cron,
		Status: gen.ScheduleStatus(sc.Status), Command: sc.Command, Folder: wire.Ptr(sc.Folder),
		Prompt: wire.NonEmpty(sc.Prompt), Model: wire.NonEmpty(sc.Model), AgentOptions: sc.AgentOptions,
		WebhookURL: wire.NonEmpty(sc.WebhookURL), WebhookHeaders: sc.WebhookHeaders,
		LastRunID: wire.NonEmpty(sc.LastRunID), TotalRuns: sc.TotalRuns, TotalFailures: sc.TotalFailures,
		CreatedAt: sc.CreatedAt, UpdatedAt: sc.UpdatedAt,
	}
	if sc.TimeoutMs > 0 {
		d.Timeout = wire.Ptr(sc.TimeoutMs)
	}
	if sc.LastRunAt != 0 {
		d.LastRunAt = wire.Ptr(sc.LastRunAt)
	}
	if sc.LastRunStatus != "" {
		d.LastRunStatus = wire.Ptr(gen.ScheduleLastRunStatus(sc.LastRunStatus))
	}
	return d
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
