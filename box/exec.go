package box

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/stream"
)

// RunType says what a Run ran.
type RunType string

// Run types.
const (
	RunTypeAgent   RunType = "agent"
	RunTypeCommand RunType = "command"
	RunTypeCode    RunType = "code"
)

// RunStatus is the state of a Run.
type RunStatus string

// Run statuses. RunDetached means the caller stopped reading a stream
// early; the run may still be going on the server.
const (
	RunRunning   RunStatus = "running"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
	RunDetached  RunStatus = "detached"
	// RunSkipped is reported for scheduled runs that did not start
	// because the previous one was still going.
	RunSkipped RunStatus = "skipped"
)

// Cost is what a run used.
type Cost struct {
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64
	// Compute is the wall-clock time the client saw the run take.
	Compute  time.Duration
	TotalUSD float64
}

// Run is the result of a command, a code snippet or an agent call.
type Run struct {
	ID     string
	Type   RunType
	Status RunStatus
	// Result is stdout for a command or snippet that exited 0, otherwise
	// stderr (or stdout when stderr is empty). For agents it is the final
	// text.
	Result string
	// Stdout and Stderr are the outputs of a command or snippet.
	Stdout string
	Stderr string
	// ExitCode is the exit status of a command or snippet (128+n when
	// killed by signal n); zero for agent runs.
	ExitCode int
	Cost     Cost
	// SessionID is the agent session of an agent run.
	SessionID string
	// Started is when the client started the run.
	Started time.Time

	box *Box
	// cancelled is set by Cancel, so that a stream the cancel ends reports
	// RunCancelled rather than RunFailed.
	cancelled *atomic.Bool
}

func newRun(b *Box, typ RunType) *Run {
	return &Run{ID: newRunID(), Type: typ, Status: RunRunning, Started: time.Now(), box: b, cancelled: new(atomic.Bool)}
}

// newRunID returns a client-side id for runs the server does not name.
func newRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Exec runs commands and code in a box. Commands run in the box's tracked
// working directory.
type Exec struct{ b *Box }

// Command runs command with `sh -c` in the box and waits for it. A command
// that exits non-zero is not an error: the Run reports RunFailed and its
// ExitCode. Background processes it starts keep running.
func (e *Exec) Command(ctx context.Context, command string, opts ...Option) (*Run, error) {
	ctx = withCallOptions(ctx, opts)
	if command == "" {
		return nil, invalidf("box: command is required")
	}
	run := newRun(e.b, RunTypeCommand)
	res, err := call[gen.ExecResult](e.b.c.api.ExecCommand(ctx, e.b.id, gen.ExecRequest{
		Command: []string{"sh", "-c", command},
		Folder:  e.b.folder(),
	}))
	if err != nil {
		return nil, err
	}
	run.finish(res)
	return run, nil
}

// Lang is the language of a code snippet.
type Lang string

// Languages of Exec.Code.
const (
	LangJS     Lang = "js"
	LangTS     Lang = "ts"
	LangPython Lang = "python"
)

// CodeParams is a code snippet to run.
type CodeParams struct {
	Code string
	Lang Lang
	// Timeout ends the snippet after this long; 0 means no limit. It is
	// sent in milliseconds.
	Timeout time.Duration
}

func (p *CodeParams) request(folder *string) (gen.CodeRequest, error) {
	if p == nil || p.Code == "" {
		return gen.CodeRequest{}, invalidf("box: code is required")
	}
	switch p.Lang {
	case LangJS, LangTS, LangPython:
	default:
		return gen.CodeRequest{}, invalidf("box: Lang must be js, ts or python, not %q", p.Lang)
	}
	if p.Timeout < 0 {
		return gen.CodeRequest{}, invalidf("box: Timeout must not be negative")
	}
	r := gen.CodeRequest{Code: p.Code, Language: gen.CodeRequestLanguage(p.Lang), Folder: folder}
	if p.Timeout > 0 {
		ms := max(p.Timeout.Milliseconds(), 1)
		r.Timeout = &ms
	}
	return r, nil
}

// Code runs a JavaScript, TypeScript or Python snippet in the box and
// waits for it.
func (e *Exec) Code(ctx context.Context, params *CodeParams, opts ...Option) (*Run, error) {
	ctx = withCallOptions(ctx, opts)
	body, err := params.request(e.b.folder())
	if err != nil {
		return nil, err
	}
	run := newRun(e.b, RunTypeCode)
	res, err := call[gen.ExecResult](e.b.c.api.ExecCode(ctx, e.b.id, body))
	if err != nil {
		return nil, err
	}
	run.finish(res)
	return run, nil
}

// finish fills a command or code run from its result.
func (r *Run) finish(res *gen.ExecResult) {
	r.ExitCode = res.ExitCode
	r.Stdout = res.Output
	r.Stderr = deref(res.Error)
	r.Cost.Compute = time.Since(r.Started)
	if res.ExitCode == 0 {
		r.Status = RunCompleted
		r.Result = r.Stdout
		return
	}
	r.Status = RunFailed
	r.Result = r.Stderr
	if r.Result == "" {
		r.Result = r.Stdout
	}
}

// RunLog is a box log entry written while a run was going.
type RunLog struct {
	Timestamp time.Time
	Level     string
	Message   string
}

// Logs returns the box's log entries from the run's start on, read
// through the whole log a page at a time (see Box.AllLogs).
func (r *Run) Logs(ctx context.Context, opts ...Option) ([]RunLog, error) {
	ctx = withCallOptions(ctx, opts)
	if r.box == nil {
		return nil, invalidf("box: Run.Logs needs a Run that a call on a box returned; this one has no box")
	}
	from := r.Started.Truncate(time.Second)
	var out []RunLog
	for e, err := range r.box.AllLogs(ctx) {
		if err != nil {
			return nil, err
		}
		if !e.Timestamp.Before(from) {
			out = append(out, RunLog{Timestamp: e.Timestamp, Level: e.Level, Message: e.Message})
		}
	}
	return out, nil
}

// ExecChunk is a piece of a command's stream: *OutputChunk or, last,
// *ExitChunk. Use a type switch.
type ExecChunk interface{ isExecChunk() }

// OutputChunk is output of the command, stdout and stderr interleaved as
// the server sends them. Chunk boundaries are arbitrary. A stream hands
// out one OutputChunk, whose Data is valid until its next call to Next
// (the next turn of an All loop): copy Data to keep it.
type OutputChunk struct{ Data []byte }

// ExitChunk ends a stream: the command exited.
type ExitChunk struct {
	ExitCode int
	CPU      time.Duration
}

func (*OutputChunk) isExecChunk() {}
func (*ExitChunk) isExecChunk()   {}

// StreamResultTail is how much of a streamed command's output its Run's
// Result keeps: the last 64 KiB. A stream hands every byte to its reader
// as it comes and keeps nothing else, so memory stays the same at any
// output size.
const StreamResultTail = 64 << 10

// ExecStream is a streaming command or snippet. Read it chunk by chunk
// (Next, Current, All), or as an io.Reader of its output: io.Copy(dst, s)
// copies the output (stdout and stderr, as they were written) until the
// command exits, without copying it in between (ExecStream is an
// io.WriterTo). The command's exit code is then in Run().ExitCode.
type ExecStream struct {
	*RunStream[ExecChunk]
	pending []byte // output of the current chunk not yet read by Read
}

// Stream runs command with `sh -c` and streams its output as it is
// produced. The Run ends RunCompleted or RunFailed by exit code; its
// Result is the last StreamResultTail bytes of the output.
func (e *Exec) Stream(ctx context.Context, command string, opts ...Option) (*ExecStream, error) {
	ctx = withCallOptions(ctx, opts)
	if command == "" {
		return nil, invalidf("box: command is required")
	}
	body, err := json.Marshal(gen.ExecRequest{Command: []string{"sh", "-c", command}, Folder: e.b.folder()})
	if err != nil {
		return nil, err
	}
	return e.stream(ctx, RunTypeCommand, "/exec-stream", body)
}

// StreamCode runs a snippet and streams its output.
func (e *Exec) StreamCode(ctx context.Context, params *CodeParams, opts ...Option) (*ExecStream, error) {
	ctx = withCallOptions(ctx, opts)
	req, err := params.request(e.b.folder())
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return e.stream(ctx, RunTypeCode, "/code-stream", body)
}

func (e *Exec) stream(ctx context.Context, typ RunType, suffix string, body []byte) (*ExecStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := e.b.c.newRequest(ctx, http.MethodPost, "/v2/box/"+encodeURIComponent(e.b.id)+suffix, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.b.c.send(req)
	if err != nil {
		cancel()
		return nil, err
	}
	run := newRun(e.b, typ)
	dec := stream.NewExecDecoder(resp.Body)
	var mu sync.Mutex
	tail := newTail(StreamResultTail)
	var exit *ExitChunk
	// One chunk value, reused: its Data is valid until the next call to
	// Next, as the decoder's buffer is.
	out := &OutputChunk{}
	next := func() (ExecChunk, bool, error) {
		for dec.Next() {
			c := dec.Chunk()
			if len(c.Output) > 0 {
				mu.Lock()
				tail.Write(c.Output)
				mu.Unlock()
				out.Data = c.Output
				return out, false, nil
			}
			if c.Exit != nil {
				mu.Lock()
				exit = &ExitChunk{ExitCode: c.Exit.Code, CPU: time.Duration(c.Exit.CPUNs)}
				run.ExitCode = exit.ExitCode
				mu.Unlock()
				return exit, true, nil
			}
		}
		if err := dec.Err(); err != nil {
			var ee *stream.ExecError
			if errors.As(err, &ee) {
				return nil, false, &RunError{Message: ee.Message}
			}
			return nil, false, err
		}
		return nil, false, io.EOF
	}
	return &ExecStream{RunStream: &RunStream[ExecChunk]{
		s: stream.NewStream(next, resp.Body.Close), run: run, cancel: cancel,
		result: func() string { mu.Lock(); defer mu.Unlock(); return tail.String() },
		ok:     func() bool { mu.Lock(); defer mu.Unlock(); return exit == nil || exit.ExitCode == 0 },
	}}, nil
}

// Read reads the command's output. It returns io.EOF once the command has
// exited (its exit code is in Run().ExitCode), or the error that ended
// the stream.
func (s *ExecStream) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if !s.Next() {
			if err := s.Err(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		if c, ok := s.Current().(*OutputChunk); ok {
			s.pending = c.Data
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// WriteTo writes the command's output to w as it comes, until the command
// exits, and returns the number of bytes written.
func (s *ExecStream) WriteTo(w io.Writer) (int64, error) {
	var n int64
	if len(s.pending) > 0 {
		m, err := w.Write(s.pending)
		n += int64(m)
		s.pending = nil
		if err != nil {
			return n, err
		}
	}
	for s.Next() {
		if c, ok := s.Current().(*OutputChunk); ok {
			m, err := w.Write(c.Data)
			n += int64(m)
			if err != nil {
				return n, err
			}
		}
	}
	return n, s.Err()
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	buf []byte
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) {
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return
	}
	if len(t.buf)+len(p) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-(t.max-len(p)):]...)
	}
	t.buf = append(t.buf, p...)
}

func (t *tail) String() string {
	if len(t.buf) > t.max {
		return string(t.buf[len(t.buf)-t.max:])
	}
	return string(t.buf)
}
