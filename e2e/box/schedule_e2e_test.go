package box_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// scheduleStart is where the fake clocks of these tests start: half a
// minute before an activation of "* * * * *".
var scheduleStart = time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)

// schedHook is the body boxd POSTs to a schedule's webhook.
type schedHook struct {
	BoxID       string `json:"box_id"`
	ScheduleID  string `json:"schedule_id"`
	RunID       string `json:"run_id"`
	Type        string `json:"type"`
	Status      string `json:"status"`
	Output      string `json:"output"`
	Error       string `json:"error"`
	ExitCode    *int   `json:"exit_code"`
	ScheduledAt int64  `json:"scheduled_at"`
	DurationMs  int64  `json:"duration_ms"`

	auth string // the Authorization header it came with
}

// hookReceiver collects schedule webhooks.
type hookReceiver struct {
	URL string

	mu      sync.Mutex
	got     []schedHook
	arrived chan struct{}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{arrived: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var p schedHook
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Errorf("webhook body %q: %v", raw, err)
		}
		p.auth = r.Header.Get("Authorization")
		h.mu.Lock()
		h.got = append(h.got, p)
		h.mu.Unlock()
		select {
		case h.arrived <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// wait returns the n-th webhook (counting from 1) of a schedule.
func (h *hookReceiver) wait(t *testing.T, scheduleID string, n int) schedHook {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		var mine []schedHook
		for _, p := range h.got {
			if p.ScheduleID == scheduleID {
				mine = append(mine, p)
			}
		}
		h.mu.Unlock()
		if len(mine) >= n {
			return mine[n-1]
		}
		select {
		case <-h.arrived:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("webhook %d of schedule %s did not arrive (got %d)", n, scheduleID, len(mine))
		}
	}
}

func (h *hookReceiver) count(scheduleID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, p := range h.got {
		if p.ScheduleID == scheduleID {
			n++
		}
	}
	return n
}

func newScheduleServer(t *testing.T, start time.Time, opts ...boxtest.Option) (*boxtest.Server, *boxtest.FakeClock) {
	clock := boxtest.NewFakeClock(start)
	return boxtest.NewServer(t, append([]boxtest.Option{boxtest.WithClock(clock)}, opts...)...), clock
}

// scheduleRuns returns a schedule's run records, newest first.
func scheduleRuns(t *testing.T, b *box.Box, scheduleID string) []box.RunRecord {
	t.Helper()
	runs, err := b.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []box.RunRecord
	for _, r := range runs {
		if r.ScheduleID == scheduleID {
			out = append(out, r)
		}
	}
	return out
}

func getSchedule(t *testing.T, b *box.Box, id string) *box.ScheduleInfo {
	t.Helper()
	s, err := b.Schedule.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScheduleExec(t *testing.T) {
	t.Parallel()
	srv, clock := newScheduleServer(t, scheduleStart)
	hooks := newHookReceiver(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	mustRun(t, b, "mkdir -p jobs")
	if err := b.Cd(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}

	ok, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{
		Cron:           "* * * * *",
		Command:        []string{"sh", "-c", "pwd >> cron.log; echo ran"},
		WebhookURL:     hooks.URL,
		WebhookHeaders: map[string]string{"Authorization": "Bearer hook-secret"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &box.ScheduleInfo{
		ID: ok.ID, BoxID: b.ID(), CustomerID: ok.CustomerID, Type: box.ScheduleExec, Cron: "* * * * *",
		Command: []string{"sh", "-c", "pwd >> cron.log; echo ran"}, Folder: "/workspace/home/jobs", Status: box.ScheduleActive,
		WebhookURL: hooks.URL, WebhookHeaders: map[string]string{"Authorization": "Bearer hook-secret"},
		CreatedAt: scheduleStart, UpdatedAt: scheduleStart,
	}
	if diff := cmp.Diff(want, ok); diff != "" {
		t.Errorf("created schedule (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(ok.ID, "sched-") {
		t.Errorf("id %q", ok.ID)
	}
	bad, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: "* * * * *", Command: []string{"sh", "-c", "echo oops >&2; exit 3"}, Folder: "/tmp", WebhookURL: hooks.URL})
	if err != nil {
		t.Fatal(err)
	}
	if bad.Folder != "/tmp" {
		t.Errorf("absolute folder = %q", bad.Folder)
	}

	// Nothing runs before the minute.
	clock.Advance(29 * time.Second)
	time.Sleep(50 * time.Millisecond)
	if runs := scheduleRuns(t, b, ok.ID); len(runs) != 0 {
		t.Fatalf("runs before the activation: %+v", runs)
	}

	clock.Advance(time.Second) // 00:01:00
	first := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	h := hooks.wait(t, ok.ID, 1)
	zero := 0
	wantHook := schedHook{BoxID: b.ID(), ScheduleID: ok.ID, RunID: h.RunID, Type: "exec", Status: "completed", Output: "ran\n", ExitCode: &zero, ScheduledAt: first.Unix(), DurationMs: h.DurationMs, auth: "Bearer hook-secret"}
	if diff := cmp.Diff(wantHook, h, cmp.AllowUnexported(schedHook{})); diff != "" {
		t.Errorf("webhook (-want +got):\n%s", diff)
	}
	runs := scheduleRuns(t, b, ok.ID)
	if len(runs) != 1 || runs[0].ID != h.RunID || runs[0].Status != box.RunCompleted || runs[0].Type != "shell" || runs[0].Output != "ran\n" || runs[0].Prompt != "sh -c pwd >> cron.log; echo ran" || runs[0].CompletedAt.IsZero() {
		t.Errorf("runs = %+v", runs)
	}
	got := getSchedule(t, b, ok.ID)
	if got.TotalRuns != 1 || got.TotalFailures != 0 || got.LastRunStatus != box.RunCompleted || got.LastRunID != h.RunID || !got.LastRunAt.Equal(first) {
		t.Errorf("after one run: %+v", got)
	}

	fh := hooks.wait(t, bad.ID, 1)
	three := 3
	if fh.Status != "failed" || fh.ExitCode == nil || *fh.ExitCode != three || !strings.Contains(fh.Error, "exited with status 3: oops") || fh.auth != "" {
		t.Errorf("failed webhook = %+v", fh)
	}
	if runs := scheduleRuns(t, b, bad.ID); len(runs) != 1 || runs[0].Status != box.RunFailed || !strings.Contains(runs[0].ErrorMessage, "oops") {
		t.Errorf("failed runs = %+v", runs)
	}

	clock.Advance(time.Minute)
	hooks.wait(t, ok.ID, 2)
	hooks.wait(t, bad.ID, 2)
	if log, err := b.Files.ReadText(ctx, "/workspace/home/jobs/cron.log"); err != nil || log != "/workspace/home/jobs\n/workspace/home/jobs\n" {
		t.Errorf("cron.log = %q, %v", log, err)
	}
	got = getSchedule(t, b, bad.ID)
	if got.TotalRuns != 2 || got.TotalFailures != 2 || got.LastRunStatus != box.RunFailed || !got.LastRunAt.Equal(first.Add(time.Minute)) {
		t.Errorf("failing schedule after two runs: %+v", got)
	}
	list, err := b.Schedule.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != ok.ID || list[1].ID != bad.ID || list[0].TotalRuns != 2 {
		t.Errorf("List = %+v, %v", list, err)
	}

	// Deleted, it fires no more.
	if err := b.Schedule.Delete(ctx, bad.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Schedule.Get(ctx, bad.ID); !box.IsNotFound(err) {
		t.Errorf("Get after Delete: %v", err)
	}
	clock.Advance(time.Minute)
	hooks.wait(t, ok.ID, 3)
	if n := hooks.count(bad.ID); n != 2 {
		t.Errorf("deleted schedule fired: %d webhooks", n)
	}
}

func TestScheduleSkipsWhileRunning(t *testing.T) {
	t.Parallel()
	srv, clock := newScheduleServer(t, scheduleStart)
	hooks := newHookReceiver(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()

	s, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{
		Cron:       "* * * * *",
		Command:    []string{"sh", "-c", "while [ ! -e /tmp/release ]; do sleep 0.05; done; echo released"},
		WebhookURL: hooks.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second)
	var running box.RunRecord
	waitFor(t, "the first run to be recorded as running", func() bool {
		runs := scheduleRuns(t, b, s.ID)
		if len(runs) == 1 && runs[0].Status == box.RunRunning {
			running = runs[0]
			return true
		}
		return false
	})

	// Two activations while it runs: both skipped, saying why.
	clock.Advance(time.Minute)
	clock.Advance(time.Minute)
	h2, h3 := hooks.wait(t, s.ID, 1), hooks.wait(t, s.ID, 2)
	if h2.ScheduledAt > h3.ScheduledAt {
		h2, h3 = h3, h2
	}
	for _, h := range []schedHook{h2, h3} {
		if h.Status != "skipped" || !strings.Contains(h.Error, running.ID) || h.ExitCode != nil {
			t.Errorf("skipped webhook = %+v", h)
		}
	}
	if h2.ScheduledAt != scheduleStart.Add(90*time.Second).Unix() || h3.ScheduledAt != scheduleStart.Add(150*time.Second).Unix() {
		t.Errorf("skipped activations at %d and %d", h2.ScheduledAt, h3.ScheduledAt)
	}
	runs := scheduleRuns(t, b, s.ID)
	if len(runs) != 3 || runs[0].Status != box.RunSkipped || runs[1].Status != box.RunSkipped || !strings.Contains(runs[0].ErrorMessage, "still running") {
		t.Errorf("runs while the first goes on = %+v", runs)
	}
	if got := getSchedule(t, b, s.ID); got.TotalRuns != 2 || got.LastRunStatus != box.RunSkipped || got.LastRunID != h3.RunID {
		t.Errorf("schedule while the first run goes on: %+v", got)
	}

	mustRun(t, b, "touch /tmp/release")
	h1 := hooks.wait(t, s.ID, 3)
	if h1.RunID != running.ID || h1.Status != "completed" || h1.Output != "released\n" {
		t.Errorf("first run's webhook = %+v", h1)
	}
	// The last run stays the latest activation's.
	if got := getSchedule(t, b, s.ID); got.TotalRuns != 3 || got.TotalFailures != 0 || got.LastRunStatus != box.RunSkipped || got.LastRunID != h3.RunID {
		t.Errorf("schedule after the first run ended: %+v", got)
	}

	// With the run over, the next activation runs again.
	clock.Advance(time.Minute)
	if h := hooks.wait(t, s.ID, 4); h.Status != "completed" {
		t.Errorf("next activation: %+v", h)
	}
	if got := getSchedule(t, b, s.ID); got.TotalRuns != 4 || got.LastRunStatus != box.RunCompleted {
		t.Errorf("schedule after the next run: %+v", got)
	}
}

func TestScheduleAgent(t *testing.T) {
	t.Parallel()
	srv, clock := newScheduleServer(t, scheduleStart)
	hooks := newHookReceiver(t)
	b := newAgentBox(t, srv, "custom/demo")
	ctx := t.Context()

	opts, err := b.Schedule.Agent(ctx, &box.AgentScheduleParams{
		Cron: "1 * * * *", Prompt: "options", Model: "custom/nightly",
		Options: box.RawOptions{"maxTurns": 3}, Timeout: 30 * time.Second,
		WebhookURL: hooks.URL, WebhookHeaders: map[string]string{"Authorization": "Bearer a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Type != box.SchedulePrompt || opts.Prompt != "options" || opts.Model != "custom/nightly" || opts.Timeout != 30*time.Second ||
		!cmp.Equal(opts.Options, box.RawOptions{"maxTurns": float64(3)}) || opts.Folder != box.WorkspaceHome || opts.Command != nil {
		t.Errorf("agent schedule = %+v", opts)
	}
	slow, err := b.Schedule.Agent(ctx, &box.AgentScheduleParams{Cron: "* * * * *", Prompt: "sleep 5", Timeout: 500 * time.Millisecond, WebhookURL: hooks.URL})
	if err != nil {
		t.Fatal(err)
	}

	// 00:01 runs both; at 00:02 the slow one is still going, so that
	// activation is skipped; then its timeout fails it.
	clock.Advance(30 * time.Second)
	clock.Advance(time.Minute)
	h := hooks.wait(t, opts.ID, 1)
	if h.Status != "completed" || h.Output != `{"maxTurns":3}` || h.Type != "prompt" || h.auth != "Bearer a" || h.ExitCode != nil {
		t.Errorf("agent webhook = %+v", h)
	}
	runs := scheduleRuns(t, b, opts.ID)
	if len(runs) != 1 || runs[0].ID != h.RunID || runs[0].Type != "agent" || runs[0].Status != box.RunCompleted || runs[0].Model != "custom/nightly" || runs[0].Prompt != "options" {
		t.Errorf("agent runs = %+v", runs)
	}

	skipped := hooks.wait(t, slow.ID, 1)
	if skipped.Status != "skipped" {
		t.Errorf("slow schedule's second activation: %+v", skipped)
	}
	failed := hooks.wait(t, slow.ID, 2)
	if failed.Status != "failed" || !strings.Contains(failed.Error, "timed out after 500ms") {
		t.Errorf("slow schedule's first run: %+v", failed)
	}
	runs = scheduleRuns(t, b, slow.ID)
	statuses := map[box.RunStatus]box.RunRecord{}
	for _, r := range runs {
		statuses[r.Status] = r
	}
	if len(runs) != 2 || statuses[box.RunSkipped].Type != "agent" || statuses[box.RunSkipped].Model != "custom/demo" || statuses[box.RunFailed].ID != failed.RunID {
		t.Errorf("slow runs = %+v", runs)
	}
	if got := getSchedule(t, b, slow.ID); got.TotalRuns != 2 || got.TotalFailures != 1 || got.LastRunStatus != box.RunSkipped {
		t.Errorf("slow schedule = %+v", got)
	}
	if n := hooks.count(opts.ID); n != 1 {
		t.Errorf("the 1 * * * * schedule ran %d times", n)
	}

	// A box without an agent has no prompt schedules.
	plain := newBox(t, srv, nil)
	if _, err := plain.Schedule.Agent(ctx, &box.AgentScheduleParams{Cron: "* * * * *", Prompt: "hi"}); !errors.Is(err, box.ErrNoAgent) {
		t.Errorf("Agent schedule on a box without an agent: %v", err)
	}
	if _, err := b.Schedule.Agent(ctx, &box.AgentScheduleParams{Cron: "* * * * *", Prompt: "hi", Options: box.CodexOptions{Personality: "friendly"}}); err == nil || !strings.Contains(err.Error(), "codex") {
		t.Errorf("Codex options on a custom box: %v", err)
	}
}

func TestScheduleInvalidCron(t *testing.T) {
	t.Parallel()
	srv, _ := newScheduleServer(t, scheduleStart)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	for _, tc := range []struct{ cron, why string }{
		{"* * * *", "expected exactly 5 fields"},
		{"* * * * * *", "expected exactly 5 fields"},
		{"61 * * * *", "above maximum"},
		{"* * * * MON-XYZ", "XYZ"},
		{"@every 5m", "@every is not supported"},
		{"TZ=Europe/Paris 0 9 * * *", "UTC"},
		{"@fortnightly", "unrecognized descriptor"},
		{"0 0 30 2 *", "never fires"},
	} {
		_, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: tc.cron, Command: []string{"true"}})
		var apiErr *box.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, tc.why) || !strings.Contains(apiErr.Message, "invalid cron") {
			t.Errorf("cron %q: %v; want 400 saying %q", tc.cron, err, tc.why)
		}
	}
	for _, cron := range []string{"@hourly", "@daily", "0 9 * * MON-FRI", "*/15 0-6 1,15 JAN *"} {
		if _, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: cron, Command: []string{"true"}}); err != nil {
			t.Errorf("cron %q: %v", cron, err)
		}
	}
	if _, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: " ", Command: []string{"true"}}); err == nil {
		t.Error("blank cron accepted")
	}
	if _, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: "* * * * *"}); err == nil {
		t.Error("no command accepted")
	}
}

func TestScheduleUpdate(t *testing.T) {
	t.Parallel()
	srv, clock := newScheduleServer(t, scheduleStart)
	hooks := newHookReceiver(t)
	b := newAgentBox(t, srv, "custom/demo")
	ctx := t.Context()

	ex, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{
		Cron: "* * * * *", Command: []string{"echo", "one"}, WebhookURL: hooks.URL,
		WebhookHeaders: map[string]string{"Authorization": "Bearer x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)

	// Unset fields stay; set ones change; cleared ones go.
	mustRun(t, b, "mkdir -p sub")
	got, err := b.Schedule.Update(ctx, ex.ID, &box.ScheduleUpdate{
		Cron:           box.Set("0 * * * *"),
		Command:        box.Set([]string{"echo", "two"}),
		Folder:         box.Set("sub"),
		WebhookHeaders: box.Clear[map[string]string](),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := *ex
	want.Cron, want.Command, want.Folder, want.WebhookHeaders = "0 * * * *", []string{"echo", "two"}, "/workspace/home/sub", nil
	want.UpdatedAt = scheduleStart.Add(10 * time.Second)
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("after update (-want +got):\n%s", diff)
	}

	// The new cron is armed: nothing at 00:01, a run at 01:00, in sub.
	clock.Advance(time.Minute)
	time.Sleep(100 * time.Millisecond)
	if n := hooks.count(ex.ID); n != 0 {
		t.Fatalf("the old cron fired %d times", n)
	}
	clock.Advance(time.Hour)
	if h := hooks.wait(t, ex.ID, 1); h.Output != "two\n" || h.ScheduledAt != time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC).Unix() {
		t.Errorf("webhook after update = %+v", h)
	}

	// Clearing the URL stops the webhooks; clearing the folder resets it.
	got, err = b.Schedule.Update(ctx, ex.ID, &box.ScheduleUpdate{WebhookURL: box.Clear[string](), Folder: box.Clear[string]()})
	if err != nil || got.WebhookURL != "" || got.Folder != box.WorkspaceHome || got.Cron != "0 * * * *" {
		t.Errorf("after clearing: %+v, %v", got, err)
	}

	// The type cannot change, nor can required fields be cleared.
	for name, u := range map[string]*box.ScheduleUpdate{
		"prompt":  {Prompt: box.Set("hi")},
		"model":   {Model: box.Set[box.Model]("custom/x")},
		"options": {Options: box.Set[box.HarnessOptions](box.RawOptions{"a": 1})},
	} {
		if _, err := b.Schedule.Update(ctx, ex.ID, u); !errors.Is(err, box.ErrScheduleTypeChange) {
			t.Errorf("%s on an exec schedule: %v", name, err)
		}
	}
	// A Box that has not seen the schedule leaves it to the server.
	other, err := srv.Client().Get(ctx, b.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Schedule.Update(ctx, ex.ID, &box.ScheduleUpdate{Prompt: box.Set("hi")})
	if box.StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "type cannot change") {
		t.Errorf("server-side type change: %v", err)
	}
	if _, err := b.Schedule.Update(ctx, ex.ID, &box.ScheduleUpdate{Command: box.Clear[[]string]()}); err == nil {
		t.Error("Command cleared")
	}
	if _, err := b.Schedule.Update(ctx, ex.ID, &box.ScheduleUpdate{Cron: box.Set("not cron")}); box.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("invalid cron in update: %v", err)
	}
	if _, err := b.Schedule.Update(ctx, "sched-nope", &box.ScheduleUpdate{Cron: box.Set("@daily")}); !box.IsNotFound(err) {
		t.Errorf("unknown schedule: %v", err)
	}

	// A prompt schedule: model, options and timeout can be cleared.
	ag, err := b.Schedule.Agent(ctx, &box.AgentScheduleParams{
		Cron: "@daily", Prompt: "options", Model: "custom/nightly", Options: box.RawOptions{"maxTurns": 3}, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = b.Schedule.Update(ctx, ag.ID, &box.ScheduleUpdate{Prompt: box.Set("options please")})
	if err != nil || got.Prompt != "options please" || got.Model != "custom/nightly" || got.Options == nil || got.Timeout != time.Minute {
		t.Errorf("prompt changed: %+v, %v", got, err)
	}
	got, err = b.Schedule.Update(ctx, ag.ID, &box.ScheduleUpdate{
		Model: box.Clear[box.Model](), Options: box.Clear[box.HarnessOptions](), Timeout: box.Clear[time.Duration](),
	})
	if err != nil || got.Model != "" || got.Options != nil || got.Timeout != 0 || got.Prompt != "options please" {
		t.Errorf("cleared: %+v, %v", got, err)
	}
	got, err = b.Schedule.Update(ctx, ag.ID, &box.ScheduleUpdate{Options: box.Set[box.HarnessOptions](box.RawOptions{"effort": "low"})})
	if err != nil || !cmp.Equal(got.Options, box.RawOptions{"effort": "low"}) {
		t.Errorf("options set: %+v, %v", got, err)
	}
	if _, err := b.Schedule.Update(ctx, ag.ID, &box.ScheduleUpdate{Command: box.Set([]string{"true"})}); !errors.Is(err, box.ErrScheduleTypeChange) {
		t.Errorf("command on a prompt schedule: %v", err)
	}
	if _, err := other.Schedule.Update(ctx, ag.ID, &box.ScheduleUpdate{Command: box.Set([]string{"true"})}); box.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("server-side command on a prompt schedule: %v", err)
	}
	if _, err := b.Schedule.Update(ctx, ag.ID, &box.ScheduleUpdate{Prompt: box.Clear[string]()}); err == nil {
		t.Error("Prompt cleared")
	}
}

func TestSchedulePauseResume(t *testing.T) {
	t.Parallel()
	srv, clock := newScheduleServer(t, scheduleStart)
	hooks := newHookReceiver(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()

	s, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: "* * * * *", Command: []string{"true"}, WebhookURL: hooks.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Schedule.Pause(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Schedule.Pause(ctx, s.ID); err != nil {
		t.Errorf("second Pause: %v", err)
	}
	if got := getSchedule(t, b, s.ID); got.Status != box.SchedulePaused {
		t.Errorf("status after Pause = %s", got.Status)
	}
	if list, err := b.Schedule.List(ctx); err != nil || len(list) != 1 || list[0].Status != box.SchedulePaused {
		t.Errorf("List of a paused schedule = %+v, %v", list, err)
	}
	clock.Advance(3 * time.Minute)
	time.Sleep(100 * time.Millisecond)
	if runs := scheduleRuns(t, b, s.ID); len(runs) != 0 {
		t.Fatalf("a paused schedule ran: %+v", runs)
	}
	if err := b.Schedule.Resume(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if got := getSchedule(t, b, s.ID); got.Status != box.ScheduleActive {
		t.Errorf("status after Resume = %s", got.Status)
	}
	clock.Advance(time.Minute)
	if h := hooks.wait(t, s.ID, 1); h.Status != "completed" || h.ScheduledAt != scheduleStart.Add(4*time.Minute-30*time.Second).Unix() {
		t.Errorf("after Resume: %+v", h)
	}
	if err := b.Schedule.Pause(ctx, "sched-nope"); !box.IsNotFound(err) {
		t.Errorf("Pause of an unknown schedule: %v", err)
	}
	if err := b.Schedule.Resume(ctx, ""); err == nil {
		t.Error("Resume with no id")
	}
}

// TestScheduleOnPausedBox checks that an activation wakes a paused box, as
// any data-plane call does.
func TestScheduleOnPausedBox(t *testing.T) {
	t.Parallel()
	srv, clock := newScheduleServer(t, scheduleStart)
	hooks := newHookReceiver(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()

	s, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: "* * * * *", Command: []string{"sh", "-c", "echo woke > woke.txt"}, WebhookURL: hooks.URL})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "true") // the sandbox is up
	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Status(ctx); st != box.StatusPaused {
		t.Fatalf("status = %s", st)
	}
	clock.Advance(30 * time.Second)
	if h := hooks.wait(t, s.ID, 1); h.Status != "completed" {
		t.Fatalf("run on a paused box: %+v", h)
	}
	if st, _ := b.Status(ctx); st != box.StatusIdle {
		t.Errorf("status after the run = %s; want the box woken", st)
	}
	if got, err := b.Files.ReadText(ctx, "woke.txt"); err != nil || got != "woke\n" {
		t.Errorf("woke.txt = %q, %v", got, err)
	}
}

// TestScheduleSurvivesRestart checks that schedules are stored and armed
// again when boxd starts on the same data directory.
func TestScheduleSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hooks := newHookReceiver(t)
	var boxID, activeID, pausedID string
	t.Run("first", func(t *testing.T) {
		srv, clock := newScheduleServer(t, scheduleStart, boxtest.WithDataDir(dir))
		b := newBox(t, srv, nil)
		boxID = b.ID()
		ctx := t.Context()
		active, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: "*/5 * * * *", Command: []string{"sh", "-c", "echo tick >> ticks"}, WebhookURL: hooks.URL})
		if err != nil {
			t.Fatal(err)
		}
		paused, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: "* * * * *", Command: []string{"true"}, WebhookURL: hooks.URL})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Schedule.Pause(ctx, paused.ID); err != nil {
			t.Fatal(err)
		}
		activeID, pausedID = active.ID, paused.ID
		clock.Advance(5 * time.Minute)
		hooks.wait(t, activeID, 1)
	})

	// A new boxd, with its own clock, an hour later.
	srv, clock := newScheduleServer(t, scheduleStart.Add(time.Hour), boxtest.WithDataDir(dir))
	ctx := t.Context()
	b, err := srv.Client().Get(ctx, boxID, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.Schedule.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != activeID || list[0].TotalRuns != 1 || list[1].Status != box.SchedulePaused {
		t.Fatalf("schedules after restart = %+v, %v", list, err)
	}
	clock.Advance(5 * time.Minute) // 01:05:30: one activation, at 01:05
	h := hooks.wait(t, activeID, 2)
	if h.ScheduledAt != time.Date(2030, 1, 1, 1, 5, 0, 0, time.UTC).Unix() {
		t.Errorf("activation after restart at %d", h.ScheduledAt)
	}
	if got, err := b.Files.ReadText(ctx, "ticks"); err != nil || got != "tick\ntick\n" {
		t.Errorf("ticks = %q, %v", got, err)
	}
	if n := hooks.count(pausedID); n != 0 {
		t.Errorf("the paused schedule fired %d times", n)
	}

	// Deleting the box deletes its schedules.
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Minute)
	time.Sleep(100 * time.Millisecond)
	if n := hooks.count(activeID); n != 2 {
		t.Errorf("a deleted box's schedule fired: %d webhooks", n)
	}
}
