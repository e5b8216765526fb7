package box

import (
	"context"
	"errors"
	"io/fs"
	"iter"
	"sync"
	"syscall"
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
	st *boxState // shared by the handles of one box (see At)

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
	// Desktop drives the box's desktop (boxes created with Desktop:
	// true).
	Desktop *Desktop
}

// boxState is what the handles of one box share.
type boxState struct {
	mu       sync.RWMutex
	info     Info
	gitToken string
}

func (c *Client) newBox(d *gen.BoxData) *Box {
	return c.handle(d.ID, &boxState{info: infoFrom(d)}, newCwd())
}

// handle returns a Box for box id with state st and working directory wd.
func (c *Client) handle(id string, st *boxState, wd *cwd) *Box {
	b := &Box{c: c, id: id, wd: wd, st: st}
	b.Exec = &Exec{b: b}
	b.Files = &Files{b: b}
	b.Agent = &Agent{b: b}
	b.Git = &Git{b: b}
	b.Schedule = &Schedule{b: b}
	b.Labels = &Labels{b: b}
	b.Skills = &Skills{b: b}
	b.Browser = newBrowser(b)
	b.Desktop = newDesktop(b)
	return b
}

// ID returns the box's id.
func (b *Box) ID() string { return b.id }

// Info returns what the API last reported about the box (at creation, at
// Get, or at the last [Box.Refresh]). It makes no request.
func (b *Box) Info() Info {
	b.st.mu.RLock()
	defer b.st.mu.RUnlock()
	return b.st.info
}

// Refresh fetches the box's current data and returns it.
func (b *Box) Refresh(ctx context.Context, opts ...Option) (Info, error) {
	ctx = withCallOptions(ctx, opts)
	d, err := call[gen.BoxData](b.c.api.GetBox(ctx, b.id))
	if err != nil {
		return Info{}, err
	}
	in := infoFrom(d)
	b.st.mu.Lock()
	b.st.info = in
	b.st.mu.Unlock()
	return in, nil
}

// Cwd returns the working directory the box tracks on the client. It starts
// at /workspace/home.
func (b *Box) Cwd() string { return b.wd.get() }

// Cd changes the tracked working directory. A relative path is resolved
// against the current one; the result is normalised. Cd checks that it is
// a directory in the box, and leaves the working directory unchanged if
// it is not, returning an *fs.PathError: when nothing is there it
// matches fs.ErrNotExist and its Err is the server's 404 *Error, and for
// something else than a directory its Err is syscall.ENOTDIR. Nothing
// changes inside the box.
//
// The working directory belongs to this handle, and every goroutine that
// uses it sees the change: give a goroutine a handle of its own with At.
func (b *Box) Cd(ctx context.Context, path string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	target := join(b.wd.get(), path)
	fi, err := b.Files.Stat(ctx, target, &StatParams{Follow: true})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &fs.PathError{Op: "cd", Path: path, Err: pe.Err}
		}
		return err
	}
	if fi.Type != FileTypeDirectory {
		return &fs.PathError{Op: "cd", Path: path, Err: syscall.ENOTDIR}
	}
	b.wd.set(target)
	return nil
}

// At returns a handle to the same box whose working directory is dir,
// resolved against b's; b's own does not change. The two handles share
// the client, its connections and what they know of the box, and each can
// be moved with Cd on its own: give each goroutine that needs a working
// directory of its own a handle from At. At makes no request, so it does
// not check that dir exists (Cd does).
func (b *Box) At(dir string) *Box {
	wd := newCwd()
	wd.set(join(b.wd.get(), dir))
	return b.c.handle(b.id, b.st, wd)
}

// folder is the `folder` value for the current working directory, nil at
// /workspace/home.
func (b *Box) folder() *string { return nonEmpty(folder(b.wd.get())) }

// Delete deletes the box, its processes and its files. It cannot be undone.
func (b *Box) Delete(ctx context.Context, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	return none(b.c.api.DeleteBox(ctx, b.id))
}

// Pause freezes every process of the box. Keep-alive boxes cannot be
// paused: that is refused with ErrKeepAlive before any request.
func (b *Box) Pause(ctx context.Context, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if b.Info().KeepAlive {
		return ErrKeepAlive
	}
	return none(b.c.api.PauseBox(withIdempotent(ctx), b.id))
}

// Resume continues a paused box.
func (b *Box) Resume(ctx context.Context, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	return none(b.c.api.ResumeBox(withIdempotent(ctx), b.id))
}

// Status returns the box's current status.
func (b *Box) Status(ctx context.Context, opts ...Option) (Status, error) {
	ctx = withCallOptions(ctx, opts)
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
func (b *Box) Logs(ctx context.Context, params *LogsParams, opts ...Option) ([]LogEntry, error) {
	ctx = withCallOptions(ctx, opts)
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

// logsPage is how many log entries AllLogs asks for at a time.
const logsPage = 500

// AllLogs ranges over the box's log entries, oldest first, fetching them
// a page at a time as the loop goes on; a failure is yielded last as
// (zero, err).
func (b *Box) AllLogs(ctx context.Context, opts ...Option) iter.Seq2[LogEntry, error] {
	ctx = withCallOptions(ctx, opts)
	return func(yield func(LogEntry, error) bool) {
		for offset := 0; ; {
			page, err := b.Logs(ctx, &LogsParams{Offset: offset, Limit: logsPage})
			if err != nil {
				yield(LogEntry{}, err)
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			if len(page) < logsPage {
				return
			}
			offset += len(page)
		}
	}
}

// AllRuns ranges over the box's run records, newest first; a failure is
// yielded last as (zero, err). The API returns them in one answer.
func (b *Box) AllRuns(ctx context.Context, opts ...Option) iter.Seq2[RunRecord, error] {
	ctx = withCallOptions(ctx, opts)
	return func(yield func(RunRecord, error) bool) {
		runs, err := b.Runs(ctx)
		if err != nil {
			yield(RunRecord{}, err)
			return
		}
		for _, r := range runs {
			if !yield(r, nil) {
				return
			}
		}
	}
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
func (b *Box) Runs(ctx context.Context, opts ...Option) ([]RunRecord, error) {
	ctx = withCallOptions(ctx, opts)
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
