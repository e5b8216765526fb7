package box

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/stream"
)

// Attachment limits of the API.
const (
	MaxAttachments    = 10
	MaxAttachmentSize = 10 << 20
)

// Agent runs the box's coding agent.
type Agent struct{ b *Box }

// ToolCall is a tool the agent called.
type ToolCall struct {
	ID    string
	Name  string
	Input map[string]any
}

// ToolResult is what a tool call returned.
type ToolResult struct {
	ID     string
	Output any
}

// Attachment is a file attached to a prompt: a local file (Path), sent as
// a multipart part, or in-memory Data with its MediaType, sent as base64.
// At most MaxAttachments files of MaxAttachmentSize bytes each.
type Attachment struct {
	Path      string
	Data      []byte
	MediaType string
	// Filename names Data; a Path's file name is its base name.
	Filename string
}

// Webhook makes Run fire-and-forget: the server POSTs the result to URL
// (with Headers) when the run ends.
type Webhook struct {
	URL     string
	Headers map[string]string
}

// AgentParams is one agent call.
type AgentParams struct {
	Prompt string
	// Options go to the harness (ClaudeCodeOptions, CodexOptions,
	// OpenCodeOptions or RawOptions).
	Options HarnessOptions
	// Timeout is one deadline for the whole call: submitting the run,
	// opening its stream and reading it, across every attempt and the
	// waits between them. When it passes, the call fails with
	// ErrRunTimeout; the run may go on in the box (Box.CancelRun stops
	// it). 0 means no limit beyond ctx.
	Timeout time.Duration
	// MaxRetries is how many more attempts Run makes after one that failed
	// before its stream opened, and so cannot have started a run: the
	// connection could not be made, or the server answered 408, 429 or
	// 5xx. Attempts wait 1 s, 2 s, 4 s... (at most 30 s) between them. A
	// run that started is never run again: not after a timeout, a
	// cancellation, a failure the run reported, or a connection lost
	// mid-stream, since the first run may still be going (and billed).
	// Not for Stream.
	MaxRetries int
	// OnToolUse and OnToolResult are called, in order, as the agent uses
	// tools.
	OnToolUse    func(ToolCall)
	OnToolResult func(ToolResult)
	Files        []Attachment
	// Webhook makes Run return at once with a running Run. Not for Stream.
	Webhook *Webhook
}

// Chunk is one piece of an agent stream: *StartChunk, *TextDeltaChunk,
// *ReasoningChunk, *ToolCallChunk, *ToolResultChunk, *FinishChunk,
// *StatsChunk or *UnknownChunk. Use a type switch.
type Chunk interface{ isChunk() }

// StartChunk opens a run; RunID is the server's id of the run.
type StartChunk struct{ RunID string }

// TextDeltaChunk is a piece of the agent's answer.
type TextDeltaChunk struct{ Text string }

// ReasoningChunk is a piece of the agent's reasoning; it is not part of the
// answer.
type ReasoningChunk struct{ Text string }

// ToolCallChunk is a tool call.
type ToolCallChunk struct {
	ToolCallID string
	ToolName   string
	Input      map[string]any
}

// ToolResultChunk is a tool call's result.
type ToolResultChunk struct {
	ToolCallID string
	Output     any
}

// Usage is the tokens a run used.
type Usage struct {
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64
}

// FinishChunk ends a run that succeeded.
type FinishChunk struct {
	// Output is the final answer (it replaces the text deltas when set).
	Output       string
	Usage        Usage
	TotalCostUSD float64
	// SessionID identifies the agent session, which later runs continue.
	SessionID string
}

// StatsChunk reports the resources a run used.
type StatsChunk struct {
	CPU             time.Duration
	MemoryPeakBytes int64
}

// UnknownChunk is an event this SDK does not know, passed through.
type UnknownChunk struct {
	Event string
	Data  json.RawMessage
}

func (*StartChunk) isChunk()      {}
func (*TextDeltaChunk) isChunk()  {}
func (*ReasoningChunk) isChunk()  {}
func (*ToolCallChunk) isChunk()   {}
func (*ToolResultChunk) isChunk() {}
func (*FinishChunk) isChunk()     {}
func (*StatsChunk) isChunk()      {}
func (*UnknownChunk) isChunk()    {}

// RunError is a run that the server reported as failed (an `error` event
// of the stream), for example a harness error or an output that does not
// match the response schema. A run that was cancelled (by Run.Cancel,
// Box.CancelRun or anyone else) ends with a RunError that also matches
// ErrRunCancelled.
type RunError struct {
	RunID   string
	Message string

	cancelled bool
}

func (e *RunError) Error() string {
	if e.RunID == "" {
		return "box: run failed: " + e.Message
	}
	return "box: run " + e.RunID + " failed: " + e.Message
}

// Is reports whether target is ErrRunCancelled and the run was cancelled.
func (e *RunError) Is(target error) bool { return target == ErrRunCancelled && e.cancelled }

// ErrRunTimeout is returned (wrapped with context.DeadlineExceeded) when
// AgentParams.Timeout passes.
var ErrRunTimeout = errors.New("box: run timed out")

// ErrRunCancelled is matched (errors.Is) by the error of a run that was
// cancelled while it ran, by Run.Cancel, Box.CancelRun or another client;
// the error is a *RunError and the run's status RunCancelled. A cancelled
// run is never retried.
var ErrRunCancelled = errors.New("box: run cancelled")

// ErrRunEnded is matched (errors.Is) by the error of Box.CancelRun for a
// run that is no longer running: it completed, failed or was cancelled
// before. The error is also the server's *Error (409).
var ErrRunEnded = errors.New("box: run already ended")

// cancelledMessage reports whether msg, a run's error event, says the run
// was cancelled: boxd sends "run cancelled", the official SDKs word it
// "Run cancelled".
func cancelledMessage(msg string) bool {
	return strings.EqualFold(strings.TrimSpace(msg), "run cancelled")
}

// RunStream is a streaming run: an agent call (RunStream[Chunk]) or a
// command or snippet (RunStream[ExecChunk]). Read it with Next, Current
// and Err, or range over All, and Close it when done: closing before the
// end marks the run RunDetached (it may go on in the box) and releases the
// connection. Run reports the result once the stream has ended.
type RunStream[T any] struct {
	s      *stream.Stream[T]
	run    *Run
	cancel context.CancelFunc

	mu       sync.Mutex
	finished bool
	// result is the run's Result so far.
	result func() string
	// ok reports whether a stream that ended cleanly succeeded.
	ok func() bool
}

// AgentStream is a streaming agent call.
type AgentStream = RunStream[Chunk]

// Next advances to the next chunk.
func (s *RunStream[T]) Next() bool {
	if s.s.Next() {
		return true
	}
	s.end(s.s.Err())
	return false
}

// Current returns the chunk Next advanced to.
func (s *RunStream[T]) Current() T { return s.s.Current() }

// Err returns the error that ended the stream, if any: a *RunError for a
// failed agent run, or a transport error.
func (s *RunStream[T]) Err() error { return s.s.Err() }

// Close stops reading and releases the connection. A run still going is
// marked RunDetached. Close is idempotent.
func (s *RunStream[T]) Close() error {
	err := s.s.Close()
	s.mu.Lock()
	if !s.finished {
		s.finished = true
		s.run.Status = RunDetached
		s.run.Result = s.result()
		s.run.Cost.Compute = time.Since(s.run.Started)
	}
	s.mu.Unlock()
	s.cancel()
	return err
}

// All ranges over the chunks; a failure is yielded last as (zero, err).
// Breaking out of the loop closes the stream (the run is then detached).
func (s *RunStream[T]) All() iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		defer s.Close()
		for s.Next() {
			if !yield(s.Current(), nil) {
				return
			}
		}
		if err := s.Err(); err != nil {
			var zero T
			yield(zero, err)
		}
	}
}

// Run is the run the stream belongs to. Its Status is RunRunning until the
// stream ends: then RunCompleted, RunFailed, RunCancelled (timeout or
// cancelled context), or RunDetached after an early Close.
func (s *RunStream[T]) Run() *Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}

// end records how the stream ended.
func (s *RunStream[T]) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	s.finished = true
	r := s.run
	r.Cost.Compute = time.Since(r.Started)
	r.Result = s.result()
	switch {
	case err != nil && (r.cancelled.Load() || errors.Is(err, ErrRunCancelled)):
		r.Status = RunCancelled
	case err == nil && s.ok():
		r.Status = RunCompleted
	case err == nil:
		r.Status = RunFailed
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		r.Status = RunCancelled
	default:
		r.Status = RunFailed
	}
	s.cancel()
}

// agentState is what an agent stream accumulates for its Run: the final
// output, and the text deltas' last StreamResultTail bytes, for a run
// that ends without one.
type agentState struct {
	mu     sync.Mutex
	text   *tail
	output *string
}

func (st *agentState) result() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.output != nil && *st.output != "" {
		return strings.TrimSpace(*st.output)
	}
	if st.text == nil {
		return ""
	}
	return strings.TrimSpace(st.text.String())
}

// observe keeps what the Run needs from each chunk and calls callbacks.
func (st *agentState) observe(run *Run, c Chunk, p *AgentParams) {
	st.mu.Lock()
	switch c := c.(type) {
	case *StartChunk:
		if c.RunID != "" {
			run.ID = c.RunID
		}
	case *TextDeltaChunk:
		if st.text == nil {
			st.text = newTail(StreamResultTail)
		}
		st.text.Write([]byte(c.Text))
	case *FinishChunk:
		out := c.Output
		st.output = &out
		run.Cost.InputTokens = c.Usage.InputTokens
		run.Cost.OutputTokens = c.Usage.OutputTokens
		run.Cost.CachedInputTokens = c.Usage.CachedInputTokens
		run.Cost.TotalUSD = c.TotalCostUSD
		run.SessionID = c.SessionID
	}
	st.mu.Unlock()
	switch c := c.(type) {
	case *ToolCallChunk:
		if p.OnToolUse != nil {
			p.OnToolUse(ToolCall{ID: c.ToolCallID, Name: c.ToolName, Input: c.Input})
		}
	case *ToolResultChunk:
		if p.OnToolResult != nil {
			p.OnToolResult(ToolResult{ID: c.ToolCallID, Output: c.Output})
		}
	}
}

func (a *Agent) check(p *AgentParams) error {
	if !a.b.hasAgent() {
		return ErrNoAgent
	}
	if p == nil || strings.TrimSpace(p.Prompt) == "" {
		return invalidf("box: prompt is required")
	}
	if p.MaxRetries < 0 || p.Timeout < 0 {
		return invalidf("box: MaxRetries and Timeout must not be negative")
	}
	if len(p.Files) > MaxAttachments {
		return invalidf("box: at most %d attachments, got %d", MaxAttachments, len(p.Files))
	}
	return nil
}

// Stream starts an agent run and returns its stream of chunks. MaxRetries
// and Webhook are not for streams.
func (a *Agent) Stream(ctx context.Context, p *AgentParams, opts ...Option) (*AgentStream, error) {
	ctx = withCallOptions(ctx, opts)
	if err := a.check(p); err != nil {
		return nil, err
	}
	if p.MaxRetries != 0 || p.Webhook != nil {
		return nil, invalidf("box: MaxRetries and Webhook are for Agent.Run, not Agent.Stream")
	}
	return a.stream(ctx, p, nil, p.Timeout)
}

// stream sends one run request and returns its stream once the response
// headers are in. timeout, if positive, bounds the request and the
// stream; Run passes 0 and sets its one deadline on ctx instead.
func (a *Agent) stream(ctx context.Context, p *AgentParams, schema map[string]any, timeout time.Duration) (*AgentStream, error) {
	run := newRun(a.b, RunTypeAgent)
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrRunTimeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	req, err := a.request(ctx, p, schema, "/run/stream")
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := a.b.c.send(req)
	if err != nil {
		cancel()
		return nil, contextCause(ctx, err)
	}
	dec := stream.NewDecoder(resp.Body)
	st := &agentState{}
	next := func() (Chunk, bool, error) {
		for dec.Next() {
			ev := dec.Event()
			if ev.Type == "error" {
				var e gen.StreamErrorEventData
				_ = json.Unmarshal(ev.Data, &e)
				if e.Error == "" {
					e.Error = "Stream error"
				}
				return nil, false, &RunError{RunID: run.ID, Message: e.Error, cancelled: run.cancelled.Load() || cancelledMessage(e.Error)}
			}
			c := parseChunk(ev.Type, ev.Data)
			if c == nil {
				continue
			}
			st.observe(run, c, p)
			return c, false, nil
		}
		if err := dec.Err(); err != nil {
			return nil, false, contextCause(ctx, err)
		}
		return nil, false, io.EOF
	}
	return &AgentStream{
		s: stream.NewStream(next, resp.Body.Close), run: run, cancel: cancel,
		result: st.result, ok: func() bool { return true },
	}, nil
}

// contextCause reports a timeout of AgentParams.Timeout as ErrRunTimeout
// (which still matches context.DeadlineExceeded).
func contextCause(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrRunTimeout) {
		return fmt.Errorf("%w: %w", ErrRunTimeout, context.DeadlineExceeded)
	}
	return err
}

// parseChunk maps one run-stream event to a chunk; nil skips it (empty
// text, or data that is not JSON, as the official clients do).
func parseChunk(event string, data []byte) Chunk {
	if !json.Valid(data) {
		return nil
	}
	switch event {
	case "run_start":
		var d gen.RunStartEventData
		_ = json.Unmarshal(data, &d)
		return &StartChunk{RunID: d.RunID}
	case "text", "thinking":
		var d gen.TextEventData
		_ = json.Unmarshal(data, &d)
		if d.Text == "" {
			return nil
		}
		if event == "text" {
			return &TextDeltaChunk{Text: d.Text}
		}
		return &ReasoningChunk{Text: d.Text}
	case "tool":
		var d gen.ToolEventData
		_ = json.Unmarshal(data, &d)
		in := d.Input
		if in == nil {
			in = map[string]any{}
		}
		return &ToolCallChunk{ToolCallID: toolCallID(d.ToolCallID, d.ToolUseID, d.ToolCallIDCamel, d.ID), ToolName: deref(d.Name), Input: in}
	case "tool_result":
		var d gen.ToolResultEventData
		_ = json.Unmarshal(data, &d)
		return &ToolResultChunk{ToolCallID: toolCallID(d.ToolCallID, d.ToolUseID, d.ToolCallIDCamel, d.ID), Output: d.Output}
	case "done":
		var d gen.DoneEventData
		_ = json.Unmarshal(data, &d)
		return &FinishChunk{
			Output:       deref(d.Output),
			Usage:        Usage{InputTokens: deref(d.InputTokens), OutputTokens: deref(d.OutputTokens), CachedInputTokens: deref(d.CachedInputTokens)},
			TotalCostUSD: deref(d.TotalCostUSD), SessionID: deref(d.SessionID),
		}
	case "stats":
		var d gen.StatsEventData
		_ = json.Unmarshal(data, &d)
		return &StatsChunk{CPU: time.Duration(deref(d.CPUNs)), MemoryPeakBytes: deref(d.MemoryPeakBytes)}
	}
	return &UnknownChunk{Event: event, Data: append(json.RawMessage(nil), data...)}
}

// toolCallID is the first id present, in the order the official clients
// look for them.
func toolCallID(ids ...*string) string {
	for _, id := range ids {
		if id != nil && *id != "" {
			return *id
		}
	}
	return ""
}

// Run runs the agent to completion and returns the run with its final
// text in Result. With Webhook set it returns at once (Status
// RunRunning) and the server POSTs the result to the webhook. An attempt
// that failed before its stream opened is retried up to MaxRetries times;
// a run that started is not (see AgentParams.MaxRetries). Timeout bounds
// the whole call. The error of the last attempt is returned with the run.
func (a *Agent) Run(ctx context.Context, p *AgentParams, opts ...Option) (*Run, error) {
	ctx = withCallOptions(ctx, opts)
	if err := a.check(p); err != nil {
		return nil, err
	}
	if p.Webhook != nil {
		return a.webhook(ctx, p)
	}
	run, _, err := a.runWithRetries(ctx, p, nil, nil)
	return run, err
}

// runWithRetries runs attempts until one succeeds (and, with a schema,
// its output passes check), or fails in a way that must not be retried.
// p.Timeout is one deadline over all of them.
func (a *Agent) runWithRetries(ctx context.Context, p *AgentParams, schema map[string]any, check func(string) error) (*Run, int, error) {
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, p.Timeout, ErrRunTimeout)
		defer cancel()
	}
	for attempt := 0; ; attempt++ {
		run, started, err := a.runOnce(ctx, p, schema)
		if err == nil && check != nil {
			if err = check(run.Result); err != nil {
				run.Status = RunFailed
			}
		}
		if err == nil {
			return run, attempt, nil
		}
		if started || attempt >= p.MaxRetries || !retryable(err) {
			return run, attempt, err
		}
		wait := 30 * time.Second
		if attempt < 5 {
			wait = time.Second << attempt // 1 s, 2 s, 4 s, 8 s, 16 s
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			// The next attempt could not start in time: the failure
			// says more than a timeout after a wait would.
			return run, attempt, err
		}
		if serr := sleepCtx(ctx, wait); serr != nil {
			return run, attempt, contextCause(ctx, serr)
		}
	}
}

// retryable reports whether a run request that failed before its stream
// opened can be sent again without risking a second run: the connection
// was never made, or the server refused the request in a way that may
// pass (408, 429, 5xx). Cancellation and timeouts are final, and so is any
// other transport failure, since the request may have reached the server.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var apiErr *Error
	if errors.As(err, &apiErr) {
		c := apiErr.StatusCode
		return c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500
	}
	return isDialError(err) && !isCertError(err)
}

// runOnce makes one attempt. started reports whether the run's stream
// opened, after which the run exists on the server and is never retried.
func (a *Agent) runOnce(ctx context.Context, p *AgentParams, schema map[string]any) (run *Run, started bool, err error) {
	s, err := a.stream(ctx, p, schema, 0)
	if err != nil {
		return nil, false, err
	}
	defer s.Close()
	for s.Next() {
	}
	return s.Run(), true, s.Err()
}

func (a *Agent) webhook(ctx context.Context, p *AgentParams) (*Run, error) {
	if p.Webhook.URL == "" {
		return nil, invalidf("box: Webhook.URL is required")
	}
	run := newRun(a.b, RunTypeAgent)
	req, err := a.request(ctx, p, nil, "/run")
	if err != nil {
		return nil, err
	}
	res, err := call[gen.AgentRunAccepted](a.b.c.send(req))
	if err != nil {
		return nil, err
	}
	if res.RunID != nil && *res.RunID != "" {
		run.ID = *res.RunID
	}
	return run, nil
}

// request builds a run request: JSON, or multipart when a local file is
// attached.
func (a *Agent) request(ctx context.Context, p *AgentParams, schema map[string]any, suffix string) (*http.Request, error) {
	body := gen.AgentRunRequest{Prompt: p.Prompt, Folder: a.b.folder(), JSONSchema: schema}
	if p.Options != nil {
		opts, harness, err := p.Options.agentOptions()
		if err != nil {
			return nil, err
		}
		if h := a.b.Info().Harness; harness != "" && h != "" && h != harness {
			return nil, invalidf("box: %T are for the %s harness; this box runs %s", p.Options, harness, h)
		}
		body.AgentOptions = opts
	}
	if p.Webhook != nil {
		body.Webhook = &gen.Webhook{URL: p.Webhook.URL, Headers: p.Webhook.Headers}
	}
	path := "/v2/box/" + encodeURIComponent(a.b.id) + suffix
	multipartFiles := false
	for i, f := range p.Files {
		switch {
		case f.Path != "" && f.Data != nil:
			return nil, invalidf("box: attachment %d: set Path or Data, not both", i)
		case f.Path != "":
			multipartFiles = true
		case f.Data != nil:
			if f.MediaType == "" {
				return nil, invalidf("box: attachment %d: MediaType is required with Data", i)
			}
			if len(f.Data) > MaxAttachmentSize {
				return nil, invalidf("box: attachment %d is larger than %d bytes", i, MaxAttachmentSize)
			}
		default:
			return nil, invalidf("box: attachment %d: set Path or Data", i)
		}
	}
	if !multipartFiles {
		for _, f := range p.Files {
			body.Files = append(body.Files, gen.AgentFile{Data: f.Data, MediaType: f.MediaType, Filename: nonEmpty(f.Filename)})
		}
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		req, err := a.b.c.newRequest(ctx, http.MethodPost, path, bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	}
	raw, ctype, err := multipartRun(body, p.Files)
	if err != nil {
		return nil, err
	}
	req, err := a.b.c.newRequest(ctx, http.MethodPost, path, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ctype)
	return req, nil
}

// multipartRun encodes a run with local files: scalar fields as form
// fields (objects as JSON), each file as a `files` part typed by its
// extension. Attachments are at most 10 × 10 MB, so the body is built in
// memory, which also lets the transport replay it.
func multipartRun(body gen.AgentRunRequest, files []Attachment) ([]byte, string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("prompt", body.Prompt)
	if body.Folder != nil {
		_ = mw.WriteField("folder", *body.Folder)
	}
	for name, v := range map[string]any{"json_schema": body.JSONSchema, "agent_options": body.AgentOptions, "webhook": body.Webhook} {
		if isNil(v) {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, "", err
		}
		_ = mw.WriteField(name, string(raw))
	}
	for i, f := range files {
		name, data, mt := f.Filename, f.Data, f.MediaType
		if f.Path != "" {
			fi, err := os.Stat(f.Path)
			if err != nil {
				return nil, "", fmt.Errorf("box: attachment %d: %w", i, err)
			}
			if fi.Size() > MaxAttachmentSize {
				return nil, "", invalidf("box: attachment %s is larger than %d bytes", f.Path, MaxAttachmentSize)
			}
			if data, err = os.ReadFile(f.Path); err != nil {
				return nil, "", fmt.Errorf("box: attachment %d: %w", i, err)
			}
			name = filepath.Base(f.Path)
			if mt == "" {
				mt = mediaTypeFor(name)
			}
		}
		if name == "" {
			name = fmt.Sprintf("file-%d", i+1)
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files"; filename=%q`, name))
		h.Set("Content-Type", mt)
		part, err := mw.CreatePart(h)
		if err != nil {
			return nil, "", err
		}
		_, _ = part.Write(data)
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), mw.FormDataContentType(), nil
}

func isNil(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return v == nil
	case *gen.Webhook:
		return v == nil
	}
	return false
}

// mediaTypeFor types an attachment by its extension, as the official SDKs
// do.
func mediaTypeFor(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	case ".svg":
		return "image/svg+xml"
	case ".pdf":
		return "application/pdf"
	case ".csv":
		return "text/csv"
	case ".txt", ".ts", ".js", ".py":
		return "text/plain"
	case ".json":
		return "application/json"
	case ".xml":
		return "application/xml"
	case ".html":
		return "text/html"
	case ".md":
		return "text/markdown"
	}
	return "application/octet-stream"
}

// Cancel stops an agent run on the server; its stream, if any, then ends
// with RunCancelled and an error matching ErrRunCancelled. A run that
// already ended is not an error. Command and code runs have ended when
// they return, so Cancel does nothing for them.
func (r *Run) Cancel(ctx context.Context, opts ...Option) error {
	if r.box == nil || r.Type != RunTypeAgent {
		return nil
	}
	r.cancelled.Store(true)
	err := r.box.CancelRun(ctx, r.ID, opts...)
	if errors.Is(err, ErrRunEnded) {
		return nil
	}
	return err
}

// CancelRun stops the box's agent run with the given id (a Run's ID, or a
// RunRecord's) with POST /v2/box/{id}/runs/{runId}/cancel; no Run is
// needed, so another process can stop a run. A stream of the run ends
// with RunCancelled and an error matching ErrRunCancelled. A run that is
// no longer running is an error matching ErrRunEnded (the server's 409),
// and an unknown run id one for which IsNotFound is true.
func (b *Box) CancelRun(ctx context.Context, runID string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("run id", runID); err != nil {
		return err
	}
	// Cancelling twice has the effect of cancelling once, so the request
	// is safe to send again.
	err := none(b.c.api.CancelRun(withIdempotent(ctx), b.id, runID))
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusConflict {
		return fmt.Errorf("%w: %w", ErrRunEnded, err)
	}
	return err
}
