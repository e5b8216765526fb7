package agentrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/harnesses"
	"github.com/upstash/box-go/local/internal/respschema"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
	"github.com/upstash/box-go/stream"
)

// Limits on prompt attachments.
const (
	maxAttachments    = 10
	maxAttachmentSize = 10 << 20
)

// runSpec is a validated agent run request.
type runSpec struct {
	prompt  string
	folder  string
	options map[string]any
	schema  *jsonschema.Schema
	// schemaDoc is the response schema as sent, for the harness.
	schemaDoc []byte
	files     []attachment
	webhook   *gen.Webhook

	// scheduleID marks a run a schedule started (package schedules).
	scheduleID string
	// timeout ends the run as failed once it passes; 0 means no limit.
	timeout time.Duration
	// ended, if set, is called with the run's final record once it is
	// stored, before any webhook is delivered.
	ended func(rec *store.Run)
}

type attachment struct {
	name      string
	mediaType string
	data      []byte
}

// parseRunJSON validates a JSON run request.
func parseRunJSON(body *gen.AgentRunRequest) (*runSpec, error) {
	if body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	spec := &runSpec{prompt: body.Prompt, folder: wire.Deref(body.Folder), options: body.AgentOptions, webhook: body.Webhook}
	if len(body.Files) > maxAttachments {
		return nil, errdefs.Invalid("at most %d files can be attached, got %d", maxAttachments, len(body.Files))
	}
	for i, f := range body.Files {
		name := wire.Deref(f.Filename)
		if name == "" {
			name = fmt.Sprintf("file-%d%s", i+1, extFor(f.MediaType))
		}
		spec.files = append(spec.files, attachment{name: name, mediaType: f.MediaType, data: f.Data})
	}
	if body.JSONSchema != nil {
		sch, err := respschema.Compile(body.JSONSchema)
		if err != nil {
			return nil, err
		}
		spec.schema = sch
		spec.schemaDoc, _ = json.Marshal(body.JSONSchema)
	}
	return spec, spec.check()
}

// parseRunMultipart validates a multipart run request: scalar fields as
// form fields (objects JSON-encoded) and each attachment as a `files` part.
func parseRunMultipart(mr *multipart.Reader) (*runSpec, error) {
	spec := &runSpec{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, bodyError(err)
		}
		name := part.FormName()
		if name == "files" {
			if len(spec.files) == maxAttachments {
				return nil, errdefs.Invalid("at most %d files can be attached", maxAttachments)
			}
			data, err := io.ReadAll(io.LimitReader(part, maxAttachmentSize+1))
			if err != nil {
				return nil, bodyError(err)
			}
			if len(data) > maxAttachmentSize {
				return nil, errdefs.TooLarge("attachment %q is larger than %d bytes", part.FileName(), maxAttachmentSize)
			}
			fname := path.Base(part.FileName())
			if fname == "." || fname == "/" || fname == "" {
				fname = fmt.Sprintf("file-%d", len(spec.files)+1)
			}
			mt := part.Header.Get("Content-Type")
			if mt == "" {
				mt = "application/octet-stream"
			}
			spec.files = append(spec.files, attachment{name: fname, mediaType: mt, data: data})
			continue
		}
		v, err := io.ReadAll(io.LimitReader(part, 4<<20))
		if err != nil {
			return nil, bodyError(err)
		}
		switch name {
		case "prompt":
			spec.prompt = string(v)
		case "folder":
			spec.folder = string(v)
		case "agent_options":
			if err := json.Unmarshal(v, &spec.options); err != nil {
				return nil, errdefs.Invalid("agent_options is not a JSON object: %v", err)
			}
		case "json_schema":
			var m map[string]any
			if err := json.Unmarshal(v, &m); err != nil {
				return nil, errdefs.Invalid("json_schema is not a JSON object: %v", err)
			}
			if spec.schema, err = respschema.Compile(m); err != nil {
				return nil, err
			}
			spec.schemaDoc, _ = json.Marshal(m)
		case "webhook":
			var wh gen.Webhook
			if err := json.Unmarshal(v, &wh); err != nil {
				return nil, errdefs.Invalid("webhook is not a JSON object: %v", err)
			}
			spec.webhook = &wh
		}
	}
	return spec, spec.check()
}

func bodyError(err error) error {
	if errors.As(err, new(*http.MaxBytesError)) {
		return errdefs.TooLarge("request body is too large")
	}
	return errdefs.Invalid("reading request: %v", err)
}

func (s *runSpec) check() error {
	if strings.TrimSpace(s.prompt) == "" {
		return errdefs.Invalid("prompt is required")
	}
	for _, f := range s.files {
		if len(f.data) > maxAttachmentSize {
			return errdefs.TooLarge("attachment %q is larger than %d bytes", f.name, maxAttachmentSize)
		}
	}
	if s.webhook != nil && !strings.HasPrefix(s.webhook.URL, "http://") && !strings.HasPrefix(s.webhook.URL, "https://") {
		return errdefs.Invalid("webhook.url must be an http or https URL")
	}
	return nil
}

func extFor(mediaType string) string {
	switch mediaType {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "application/pdf":
		return ".pdf"
	case "text/plain":
		return ".txt"
	case "application/json":
		return ".json"
	}
	return ""
}

// agentRun is one run of a box's agent.
type agentRun struct {
	id     string
	box    *store.Box
	spec   *runSpec
	ctx    context.Context
	cancel context.CancelFunc
	out    *relay
	start  time.Time

	cancelled bool // set under runs.mu
}

// Runs is the agent runs feature: it starts, cancels and records the
// runs of boxes' agents, and serves their operations.
type Runs struct {
	host Host
	db   Records
	cfg  Config

	mu     sync.Mutex
	active map[string]*agentRun
	closed bool
}

// New returns the agent runs feature.
func New(cfg Config) *Runs {
	return &Runs{host: cfg.Host, db: cfg.Records, cfg: cfg, active: map[string]*agentRun{}}
}

// begin registers and starts a run. Its output goes to the returned relay.
func (rs *Runs) begin(b *store.Box, spec *runSpec) (*agentRun, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return nil, errdefs.Unavailable("boxd is shutting down")
	}
	ctx, cancel := context.WithCancel(rs.host.Context())
	if spec.timeout > 0 {
		cancel()
		ctx, cancel = context.WithTimeout(rs.host.Context(), spec.timeout)
	}
	r := &agentRun{id: core.NewID("run-"), box: b, spec: spec, ctx: ctx, cancel: cancel, out: newRelay(), start: time.Now()}
	rec := &store.Run{ID: r.id, BoxID: b.ID, Type: "agent", Status: "running", ScheduleID: spec.scheduleID, Prompt: spec.prompt, Model: b.Model, CreatedAt: r.start.Unix(), Seq: r.start.UnixNano()}
	if err := rs.db.PutRun(rec); err != nil {
		cancel()
		return nil, err
	}
	// Close marks rs closed (under rs.mu, held here) before it waits, so
	// Go refuses nothing a begin asks for while rs is open.
	rs.active[r.id] = r
	if !rs.host.Go(func(context.Context) {
		rs.execute(r, rec)
		cancel()
	}) {
		delete(rs.active, r.id)
		cancel()
		return nil, errdefs.Unavailable("boxd is shutting down")
	}
	return r, nil
}

// cancelRun stops a run in progress. It reports whether the run was
// active.
func (rs *Runs) cancelRun(id string) bool {
	rs.mu.Lock()
	r := rs.active[id]
	if r != nil {
		r.cancelled = true
	}
	rs.mu.Unlock()
	if r == nil {
		return false
	}
	r.cancel()
	return true
}

// closeAll cancels every run and waits for them to be recorded.
func (rs *Runs) closeAll() {
	rs.mu.Lock()
	rs.closed = true
	for _, r := range rs.active {
		r.cancelled = true
		r.cancel()
	}
	rs.mu.Unlock()
	rs.host.Wait()
}

func (rs *Runs) wasCancelled(r *agentRun) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return r.cancelled
}

// retire ends a run's time in the active set, after which it can no
// longer be cancelled, and reports whether it was cancelled. It is called
// once the harness is done, so that a cancel either reached the run or is
// answered "not running", never "cancelled" for a run that then completes.
func (rs *Runs) retire(r *agentRun) (cancelled bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.active, r.id)
	return r.cancelled
}

// outcome is what a run produced.
type outcome struct {
	text   strings.Builder // text deltas
	done   *gen.DoneEventData
	errMsg string
	// errEvent is the data of the error event that ends a failed run's
	// stream. It is sent only once the run is recorded, as is the end of
	// every stream, so that a client that saw a run fail finds it
	// recorded, and a cancel after that is answered 409.
	errEvent []byte
	exitCode int
	cpuNs    int64
	memPeak  int64
	stderr   string
	// For a harness whose CLI reports a resumed session's whole usage:
	// sessionTotals is set, base is what it reported at the end of the
	// session's previous run (nil for none), and reported is what it
	// reported at the end of this one, kept for the next.
	sessionTotals bool
	base          *store.Usage
	baseSession   string
	reported      *store.Usage
}

// execute runs the harness, relays its events and records the result.
func (rs *Runs) execute(r *agentRun, rec *store.Run) {
	r.out.send("run_start", gen.RunStartEventData{RunID: r.id})
	var o outcome
	status := "completed"
	err := rs.runHarness(r, &o)
	switch {
	case rs.retire(r):
		status = "cancelled"
		o.fail("run cancelled")
	case err != nil && errors.Is(r.ctx.Err(), context.DeadlineExceeded):
		status = "failed"
		o.fail(fmt.Sprintf("run timed out after %s", r.spec.timeout))
	case err != nil:
		status = "failed"
		o.fail(err.Error())
	case o.errMsg != "":
		status = "failed"
	}
	if r.spec.scheduleID != "" && status == "cancelled" {
		status = "failed" // a scheduled run ends completed, failed or skipped
	}

	output := o.text.String()
	if o.done != nil && wire.Deref(o.done.Output) != "" {
		output = wire.Deref(o.done.Output)
	}
	now := time.Now()
	rec.Status = status
	rec.Output = output
	rec.ErrorMessage = o.errMsg
	rec.CPUNs = o.cpuNs
	rec.MemoryPeak = o.memPeak
	rec.DurationMs = now.Sub(r.start).Milliseconds()
	rec.CompletedAt = now.Unix()
	if d := o.done; d != nil {
		rec.InputTokens = wire.Deref(d.InputTokens)
		rec.OutputTokens = wire.Deref(d.OutputTokens)
		rec.CachedTokens = wire.Deref(d.CachedInputTokens)
		rec.CostUSD = wire.Deref(d.TotalCostUSD)
		rec.SessionID = wire.Deref(d.SessionID)
	}
	if err := rs.db.PutRun(rec); err != nil && !errors.Is(err, store.ErrNotFound) { // not found: the box was deleted
		rs.host.Logger().Warn("cannot record run", "run", r.id, "err", err)
	}
	_ = rs.host.UpdateBox(r.box.ID, func(b *store.Box) error {
		b.TotalInputTokens += rec.InputTokens
		b.TotalOutputTokens += rec.OutputTokens
		b.TotalPrompts++
		b.TotalCPUNs += rec.CPUNs
		b.TotalTokenCostUSD += rec.CostUSD
		b.LastActivity = now.Unix()
		if rec.SessionID != "" {
			b.SessionID = rec.SessionID
			b.SessionUsage = o.reported
		}
		return nil
	})
	msg := fmt.Sprintf("agent run %s %s in %s", r.id, status, now.Sub(r.start).Round(time.Millisecond))
	level := "info"
	if status != "completed" {
		level = "error"
		msg += ": " + o.errMsg
	}
	rs.host.Logf(r.box.ID, level, "agent", msg)
	// The record is written before the stream ends (or fails), so that a
	// client that saw the end finds the run recorded.
	if o.errEvent != nil {
		r.out.sendRaw("error", o.errEvent)
	}
	r.out.send("stats", gen.StatsEventData{CPUNs: &o.cpuNs, MemoryPeakBytes: &o.memPeak})
	r.out.end()
	if r.spec.ended != nil {
		r.spec.ended(rec)
	}
	if r.spec.webhook != nil {
		rs.cfg.Webhooks.Deliver(r.box.ID, r.spec.webhook.URL, r.spec.webhook.Headers, gen.WebhookPayload{
			BoxID: r.box.ID, RunID: &r.id, Status: webhookStatus(status), Output: &output, Error: wire.NonEmpty(o.errMsg),
		})
	}
}

func webhookStatus(status string) gen.WebhookPayloadStatus {
	if status == "completed" {
		return gen.WebhookPayloadStatusCompleted
	}
	return gen.WebhookPayloadStatusFailed
}

// runHarness starts the box's harness in the box and relays its events.
// It returns an error for a run that could not complete; an `error` event
// from the harness is recorded in o.errMsg instead.
func (rs *Runs) runHarness(r *agentRun, o *outcome) error {
	rt, err := rs.host.EnsureRunning(r.ctx, r.box)
	if err != nil {
		return err
	}
	defer rs.host.Busy(r.box.ID)()
	prompt := r.spec.prompt
	if len(r.spec.files) > 0 {
		paths, err := rs.writeAttachments(r.ctx, rt, r.id, r.spec.files)
		if err != nil {
			return fmt.Errorf("attachments: %w", err)
		}
		prompt += "\n\nAttached files:\n"
		for i, p := range paths {
			prompt += fmt.Sprintf("- %s (%s)\n", p, r.spec.files[i].mediaType)
		}
	}
	in := harnessInput{prompt: prompt, options: r.spec.options, schema: r.spec.schemaDoc}
	if _, managed := harnesses.Get(r.box.Agent); managed {
		if in.mcpServers, err = rs.runMCPServers(r.ctx, r.box); err != nil {
			return fmt.Errorf("mcp servers: %w", err)
		}
	}
	if len(in.mcpServers) > 0 {
		if err := rs.writeBoxFile(r.ctx, rt, mcpConfigPath, harnesses.MCPConfigJSON(in.mcpServers)); err != nil {
			return fmt.Errorf("mcp servers: %w", err)
		}
		in.mcpConfig = mcpConfigPath
	}
	inv, err := harnessCommand(r.box, in, core.Env(r.box), rs.boxProviderURLs())
	if err != nil {
		return err
	}
	if inv.sessionTotals {
		o.sessionTotals = true
		if r.box.SessionID != "" {
			o.base, o.baseSession = r.box.SessionUsage, r.box.SessionID
		}
	}
	p, err := rt.Process(r.ctx, agent.ProcessRequest{Argv: inv.argv, Folder: r.spec.folder, Env: inv.env, Stdin: inv.stdin})
	if err != nil {
		return err
	}
	defer p.Close()
	emit := func(event string, data []byte) bool {
		return rs.handleEvent(r, o, event, data)
	}
	if inv.mapper != nil {
		err = harnesses.Decode(p.Output, inv.mapper, emit)
	} else {
		dec := stream.NewDecoder(p.Output)
		for dec.Next() {
			ev := dec.Event()
			if !emit(ev.Type, ev.Data) {
				break
			}
		}
		err = dec.Err()
	}
	st, waitErr := p.Wait()
	if rs.wasCancelled(r) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading harness output: %w", err)
	}
	var ae *agent.Error
	switch {
	case errors.As(waitErr, &ae):
		return errors.New(inv.notRunnable(ae.Message))
	case waitErr != nil && o.done == nil && o.errMsg == "":
		// Without the harness's own outcome, the process's is needed.
		return waitErr
	}
	o.exitCode, o.cpuNs, o.memPeak, o.stderr = st.ExitCode, st.CPU.Nanoseconds(), st.MemoryPeak, st.Stderr
	if o.done == nil && o.errMsg == "" && o.exitCode != 0 {
		msg := fmt.Sprintf("%s exited with status %d", inv.name, o.exitCode)
		if t := strings.TrimSpace(lastLines(o.stderr, 5)); t != "" {
			msg += ": " + t
		}
		return errors.New(msg)
	}
	if o.done == nil && o.errMsg == "" && r.spec.schema != nil {
		// No done event: the accumulated text is the result.
		if err := respschema.Validate(r.spec.schema, o.text.String()); err != nil {
			return err
		}
	}
	return nil
}

// handleEvent relays one harness event and keeps what the run record
// needs. It returns false to stop reading (after an error event).
func (rs *Runs) handleEvent(r *agentRun, o *outcome, event string, data []byte) bool {
	switch event {
	case "run_start", "stats":
		// boxd sends these itself.
		return true
	case "text":
		var t gen.TextEventData
		if json.Unmarshal(data, &t) == nil {
			o.text.WriteString(t.Text)
		}
	case "done":
		var d gen.DoneEventData
		if err := json.Unmarshal(data, &d); err != nil {
			o.fail("harness sent an invalid done event: " + err.Error())
			return false
		}
		if r.spec.schema != nil {
			final := wire.Deref(d.Output)
			if final == "" {
				final = o.text.String()
			}
			if err := respschema.Validate(r.spec.schema, final); err != nil {
				o.fail(err.Error())
				return false
			}
		}
		if o.sessionTotals {
			data = o.ownUsage(&d, data)
		}
		o.done = &d
	case "error":
		var e gen.StreamErrorEventData
		_ = json.Unmarshal(data, &e)
		o.errMsg = e.Error
		if o.errMsg == "" {
			o.errMsg = "harness reported an error"
		}
		// Relayed as the harness sent it (with its usage, say), at the
		// end (see outcome.errEvent).
		o.errEvent = append([]byte(nil), data...)
		return false
	}
	r.out.sendRaw(event, data)
	return true
}

// ownUsage turns d, the done event of a CLI that reports a resumed
// session's whole usage, into the run's own, and returns its new data.
// What the CLI reported is kept for the session's next run. A report
// below the base (a session the CLI counted anew) is the run's own.
func (o *outcome) ownUsage(d *gen.DoneEventData, data []byte) []byte {
	got := store.Usage{InputTokens: wire.Deref(d.InputTokens), CachedInputTokens: wire.Deref(d.CachedInputTokens), OutputTokens: wire.Deref(d.OutputTokens)}
	o.reported = &got
	b := o.base
	if b == nil || wire.Deref(d.SessionID) != o.baseSession ||
		got.InputTokens < b.InputTokens || got.CachedInputTokens < b.CachedInputTokens || got.OutputTokens < b.OutputTokens {
		return data
	}
	d.InputTokens = wire.Ptr(got.InputTokens - b.InputTokens)
	d.CachedInputTokens = wire.Ptr(got.CachedInputTokens - b.CachedInputTokens)
	d.OutputTokens = wire.Ptr(got.OutputTokens - b.OutputTokens)
	out, err := json.Marshal(d)
	if err != nil {
		return data
	}
	return out
}

// fail makes msg the run's error, recorded and sent as its stream's error
// event.
func (o *outcome) fail(msg string) {
	o.errMsg = msg
	o.errEvent, _ = json.Marshal(gen.StreamErrorEventData{Error: msg})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writeAttachments stores a run's attachments in the box and returns their
// box paths.
func (rs *Runs) writeAttachments(ctx context.Context, rt *agent.Client, runID string, files []attachment) ([]string, error) {
	dir := "/tmp/boxd-attachments/" + runID
	var paths []string
	seen := map[string]int{}
	for _, f := range files {
		name := f.name
		if n := seen[name]; n > 0 {
			name = fmt.Sprintf("%d-%s", n, name)
		}
		seen[f.name]++
		p := dir + "/" + name
		if err := rs.writeBoxFile(ctx, rt, p, f.data); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// writeBoxFile writes data to path in the box through its agent.
func (rs *Runs) writeBoxFile(ctx context.Context, rt *agent.Client, path string, data []byte) error {
	if err := rt.WriteFile(ctx, path, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// relay carries a run's events to the client that started it. The run
// never blocks on the client: frames queue here, and a client that went
// away just stops reading them.
type relay struct {
	mu       sync.Mutex
	frames   []frame
	ended    bool
	detached bool
	notify   chan struct{}
}

type frame struct {
	event string
	data  []byte
}

func newRelay() *relay { return &relay{notify: make(chan struct{}, 1)} }

func (r *relay) send(event string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	r.sendRaw(event, data)
}

func (r *relay) sendRaw(event string, data []byte) {
	r.mu.Lock()
	if !r.detached {
		r.frames = append(r.frames, frame{event, append([]byte(nil), data...)})
	}
	r.mu.Unlock()
	r.wake()
}

func (r *relay) end() {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.wake()
}

func (r *relay) wake() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// detach drops queued and future frames (the client went away).
func (r *relay) detach() {
	r.mu.Lock()
	r.detached = true
	r.frames = nil
	r.mu.Unlock()
}

// take returns the queued frames and whether the run has ended.
func (r *relay) take() ([]frame, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.frames
	r.frames = nil
	return f, r.ended
}

// sseResponse streams a run's events as the response of run/stream.
type sseResponse struct {
	ctx context.Context
	run *agentRun
}

func (s sseResponse) VisitStreamAgentRunResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	enc := stream.NewEncoder(w)
	for {
		frames, ended := s.run.out.take()
		for _, f := range frames {
			if err := enc.Encode(f.event, f.data); err != nil {
				// The client went away; the run goes on and is recorded.
				s.run.out.detach()
				return nil
			}
		}
		if ended {
			return nil
		}
		select {
		case <-s.run.out.notify:
		case <-s.ctx.Done():
			s.run.out.detach()
			return nil
		}
	}
}
