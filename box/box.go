package box

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"time"

	"github.com/upstash/box-go/gen"
)

// ErrKeepAlive is returned when an operation is refused because of the
// box's keep-alive setting, before any request is sent.
var ErrKeepAlive = errors.New("box: keep-alive boxes cannot be paused")

// Box is a handle to one box. Its methods are safe for concurrent use.
//
// A Box tracks a working directory on the client (see [Box.Cd]); exec,
// code, files and git calls are resolved against it.
type Box struct {
	c  *Client
	id string
	wd *cwd

	mu       sync.RWMutex
	info     Info
	gitToken string

	// Exec runs commands and code snippets.
	Exec *Exec
	// Files reads and writes the box's files.
	Files *Files
	// Agent runs the box's coding agent.
	Agent *Agent
	// Git runs git in the box.
	Git *Git
	// Schedule manages the box's cron schedules.
	Schedule *Schedule
	// Labels manages the box's labels.
	Labels *Labels
	// Skills manages the agent skills enabled in the box.
	Skills *Skills
	// Browser drives the box's headless browser (boxes created with
	// Browser: true).
	Browser *Browser
}

func (c *Client) newBox(d *gen.BoxData) *Box {
	b := &Box{c: c, id: d.ID, wd: newCwd(), info: infoFrom(d)}
	b.Exec = &Exec{b: b}
	b.Files = &Files{b: b}
	b.Agent = &Agent{b: b}
	b.Git = &Git{b: b}
	b.Schedule = &Schedule{b: b}
	b.Labels = &Labels{b: b}
	b.Skills = &Skills{b: b}
	b.Browser = newBrowser(b)
	return b
}

// ID returns the box's id.
func (b *Box) ID() string { return b.id }

// Info returns what the API last reported about the box (at creation, at
// Get, or at the last [Box.Refresh]). It makes no request.
func (b *Box) Info() Info {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.info
}

// Refresh fetches the box's current data and returns it.
func (b *Box) Refresh(ctx context.Context) (Info, error) {
	d, err := call[gen.BoxData](b.c.api.GetBox(ctx, b.id))
	if err != nil {
		return Info{}, err
	}
	in := infoFrom(d)
	b.mu.Lock()
	b.info = in
	b.mu.Unlock()
	return in, nil
}

// Cwd returns the working directory the box tracks on the client. It starts
// at /workspace/home.
func (b *Box) Cwd() string { return b.wd.get() }

// Cd changes the tracked working directory. A relative path is resolved
// against the current one; the result is normalised. Cd checks that the
// directory exists in the box (with `ls`) and leaves the working directory
// unchanged if it does not, returning an *fs.PathError that matches
// fs.ErrNotExist. Nothing changes inside the box.
func (b *Box) Cd(ctx context.Context, path string) error {
	target := join(b.wd.get(), path)
	res, err := call[gen.ExecResult](b.c.api.ExecCommand(withIdempotent(ctx), b.id, gen.ExecRequest{Command: []string{"ls", target}}))
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &fs.PathError{Op: "cd", Path: path, Err: fs.ErrNotExist}
	}
	b.wd.set(target)
	return nil
}

// folder is the `folder` value for the current working directory, nil at
// /workspace/home.
func (b *Box) folder() *string { return nonEmpty(folder(b.wd.get())) }

// Delete deletes the box, its processes and its files. It cannot be undone.
func (b *Box) Delete(ctx context.Context) error {
	return none(b.c.api.DeleteBox(ctx, b.id))
}

// Pause freezes every process of the box. Keep-alive boxes cannot be
// paused: that is refused with ErrKeepAlive before any request.
func (b *Box) Pause(ctx context.Context) error {
	if b.Info().KeepAlive {
		return ErrKeepAlive
	}
	return none(b.c.api.PauseBox(withIdempotent(ctx), b.id))
}

// Resume continues a paused box.
func (b *Box) Resume(ctx context.Context) error {
	return none(b.c.api.ResumeBox(withIdempotent(ctx), b.id))
}

// Status returns the box's current status.
func (b *Box) Status(ctx context.Context) (Status, error) {
	r, err := call[gen.BoxStatusResponse](b.c.api.GetBoxStatus(ctx, b.id))
	if err != nil {
		return "", err
	}
	return Status(r.Status), nil
}

// LogEntry is one line of a box's log.
type LogEntry struct {
	Timestamp time.Time
	Level     string // info, warn or error
	Source    string // system, agent or user
	Message   string
}

// LogsParams pages through a box's log.
type LogsParams struct {
	Offset int
	Limit  int // 0 means the server's default
}

// Logs returns the box's log entries, oldest first.
func (b *Box) Logs(ctx context.Context, params *LogsParams) ([]LogEntry, error) {
	var p gen.GetBoxLogsParams
	if params != nil {
		if params.Offset < 0 || params.Limit < 0 {
			return nil, invalidf("box: Logs offset and limit must not be negative")
		}
		if params.Offset > 0 {
			p.Offset = &params.Offset
		}
		if params.Limit > 0 {
			p.Limit = &params.Limit
		}
	}
	r, err := call[gen.LogsResponse](b.c.api.GetBoxLogs(ctx, b.id, &p))
	if err != nil {
		return nil, err
	}
	out := make([]LogEntry, len(r.Logs))
	for i, e := range r.Logs {
		out[i] = LogEntry{Timestamp: unixTime(e.Timestamp), Level: string(e.Level), Source: string(e.Source), Message: e.Message}
	}
	return out, nil
}

// RunRecord is the server's record of a run: an agent run, or a shell run
// (exec, code, or a scheduled command).
type RunRecord struct {
	ID                string
	BoxID             string
	Type              string // agent or shell
	Status            RunStatus
	ScheduleID        string
	Prompt            string
	Model             string
	Output            string
	ErrorMessage      string
	SessionID         string
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64
	CostUSD           float64
	ComputeCostUSD    float64
	CPU               time.Duration
	MemoryPeakBytes   int64
	Duration          time.Duration
	CreatedAt         time.Time
	CompletedAt       time.Time
}

// Runs returns the box's run records, newest first.
func (b *Box) Runs(ctx context.Context) ([]RunRecord, error) {
	r, err := call[gen.RunsResponse](b.c.api.ListBoxRuns(ctx, b.id))
	if err != nil {
		return nil, err
	}
	out := make([]RunRecord, len(r.Runs))
	for i, x := range r.Runs {
		out[i] = RunRecord{
			ID: x.ID, BoxID: x.BoxID, Type: string(x.Type), Status: RunStatus(x.Status),
			ScheduleID: deref(x.ScheduleID), Prompt: deref(x.Prompt), Model: deref(x.Model),
			Output: deref(x.Output), ErrorMessage: deref(x.ErrorMessage), SessionID: deref(x.SessionID),
			InputTokens: x.InputTokens, OutputTokens: x.OutputTokens, CachedInputTokens: deref(x.CachedInputTokens),
			CostUSD: x.CostUSD, ComputeCostUSD: deref(x.ComputeCostUSD), CPU: time.Duration(deref(x.CPUNs)),
			MemoryPeakBytes: deref(x.MemoryPeakBytes), Duration: time.Duration(x.DurationMs) * time.Millisecond,
			CreatedAt: unixTime(x.CreatedAt), CompletedAt: unixTime(deref(x.CompletedAt)),
		}
	}
	return out, nil
}
