package local_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

var schedStart = time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)

// jsonObject decodes a response body into a map, failing the test if it
// is not one.
func jsonObject(t *testing.T, r response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	return m
}

// TestScheduleWire checks the schedule endpoints' JSON as the official
// clients see it: the Schedule object, the bare array of the list, the
// PATCH semantics and the errors.
func TestScheduleWire(t *testing.T) {
	t.Parallel()
	clock := boxtest.NewFakeClock(schedStart)
	srv := boxtest.NewServer(t, boxtest.WithClock(clock))
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	base := "/v2/box/" + b.ID() + "/schedules"

	r := c.do("GET", base, nil, nil)
	wantOK(t, "empty list", r)
	if string(r.body) != "[]\n" {
		t.Errorf("empty list = %q, want a bare empty array", r.body)
	}

	r = c.do("POST", base, map[string]any{
		"type": "exec", "cron": "*/10 * * * *", "command": []string{"bash", "-c", "date"}, "folder": "/workspace/home/./app/..",
		"webhook_url": "https://example.com/hook", "webhook_headers": map[string]string{"X-Token": "t"},
	}, nil)
	wantOK(t, "create", r)
	created := jsonObject(t, r)
	id, _ := created["id"].(string)
	want := map[string]any{
		"id": id, "box_id": b.ID(), "customer_id": "local", "type": "exec", "cron": "*/10 * * * *",
		"command": []any{"bash", "-c", "date"}, "folder": "/workspace/home", "status": "active",
		"webhook_url": "https://example.com/hook", "webhook_headers": map[string]any{"X-Token": "t"},
		"total_runs": float64(0), "total_failures": float64(0),
		"created_at": float64(schedStart.Unix()), "updated_at": float64(schedStart.Unix()),
	}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	r = c.do("GET", base, nil, nil)
	wantOK(t, "list", r)
	var list []map[string]any
	if err := json.Unmarshal(r.body, &list); err != nil || len(list) != 1 || list[0]["id"] != id {
		t.Errorf("list = %s, %v", r.body, err)
	}
	r = c.do("GET", base+"/"+id, nil, nil)
	wantOK(t, "get", r)
	if diff := cmp.Diff(want, jsonObject(t, r)); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}

	// PATCH: absent keys stay, "" and {} clear.
	clock.Advance(time.Minute)
	r = c.do("PATCH", base+"/"+id, `{"webhook_url": "", "webhook_headers": {}, "folder": "app"}`, nil)
	wantOK(t, "patch", r)
	got := jsonObject(t, r)
	if _, ok := got["webhook_url"]; ok || got["webhook_headers"] != nil || got["folder"] != "/workspace/home/app" || got["cron"] != "*/10 * * * *" || got["updated_at"] != float64(schedStart.Add(time.Minute).Unix()) {
		t.Errorf("after patch: %v", got)
	}
	r = c.do("PATCH", base+"/"+id, `{"folder": ""}`, nil)
	wantOK(t, "reset folder", r)
	if got := jsonObject(t, r); got["folder"] != "/workspace/home" {
		t.Errorf("reset folder = %v", got["folder"])
	}

	// A prompt schedule on a box with an agent; agent_options absent,
	// null and {}.
	ab := newBox(t, srv, &box.CreateParams{Agent: &box.AgentOptions{Harness: box.HarnessCustom, CustomHarness: &box.CustomHarness{Command: "true"}}})
	abase := "/v2/box/" + ab.ID() + "/schedules"
	r = c.do("POST", abase, `{"type": "prompt", "cron": "@hourly", "prompt": "hi", "folder": "/workspace/home", "agent_options": {"maxTurns": 2}, "timeout": 60000, "model": "custom/x"}`, nil)
	wantOK(t, "create prompt", r)
	p := jsonObject(t, r)
	pid, _ := p["id"].(string)
	if p["type"] != "prompt" || p["prompt"] != "hi" || p["timeout"] != float64(60000) || p["model"] != "custom/x" || p["command"] != nil || !cmp.Equal(p["agent_options"], map[string]any{"maxTurns": float64(2)}) {
		t.Errorf("prompt schedule = %v", p)
	}
	r = c.do("PATCH", abase+"/"+pid, `{"prompt": "hello"}`, nil)
	wantOK(t, "patch prompt", r)
	if p := jsonObject(t, r); p["prompt"] != "hello" || p["agent_options"] == nil || p["model"] != "custom/x" {
		t.Errorf("options or model changed by a patch without them: %v", p)
	}
	r = c.do("PATCH", abase+"/"+pid, `{"agent_options": null, "model": "", "timeout": 0}`, nil)
	wantOK(t, "clear options", r)
	if p := jsonObject(t, r); p["agent_options"] != nil || p["model"] != nil || p["timeout"] != nil {
		t.Errorf("after clearing: %v", p)
	}
	r = c.do("PATCH", abase+"/"+pid, `{"agent_options": {"effort": "low"}}`, nil)
	wantOK(t, "set options", r)
	r = c.do("PATCH", abase+"/"+pid, `{"agent_options": {}}`, nil)
	wantOK(t, "empty options", r)
	if p := jsonObject(t, r); p["agent_options"] != nil {
		t.Errorf("{} did not clear the options: %v", p)
	}

	for _, tc := range []struct {
		what, method, path string
		body               any
		status             int
		parts              []string
	}{
		{"no body", "POST", base, nil, 400, nil},
		{"no type", "POST", base, `{"cron": "* * * * *", "command": ["true"], "folder": "/"}`, 400, []string{"type must be exec or prompt"}},
		{"bad cron", "POST", base, `{"type": "exec", "cron": "* * *", "command": ["true"], "folder": "/"}`, 400, []string{"invalid cron", "5 fields"}},
		{"no command", "POST", base, `{"type": "exec", "cron": "* * * * *", "command": [], "folder": "/"}`, 400, []string{"command is required"}},
		{"exec with prompt", "POST", base, `{"type": "exec", "cron": "* * * * *", "command": ["true"], "prompt": "hi", "folder": "/"}`, 400, []string{"prompt schedules"}},
		{"prompt without agent", "POST", base, `{"type": "prompt", "cron": "* * * * *", "prompt": "hi", "folder": "/"}`, 400, []string{"no agent"}},
		{"prompt without prompt", "POST", abase, `{"type": "prompt", "cron": "* * * * *", "folder": "/"}`, 400, []string{"prompt is required"}},
		{"prompt with command", "POST", abase, `{"type": "prompt", "cron": "* * * * *", "prompt": "hi", "command": ["true"], "folder": "/"}`, 400, []string{"exec schedules"}},
		{"negative timeout", "POST", abase, `{"type": "prompt", "cron": "* * * * *", "prompt": "hi", "timeout": -1, "folder": "/"}`, 400, []string{"timeout"}},
		{"bad webhook", "POST", base, `{"type": "exec", "cron": "* * * * *", "command": ["true"], "folder": "/", "webhook_url": "ftp://x"}`, 400, []string{"webhook_url"}},
		{"bad header", "POST", base, `{"type": "exec", "cron": "* * * * *", "command": ["true"], "folder": "/", "webhook_url": "http://x", "webhook_headers": {"Bad Name": "v"}}`, 400, []string{"webhook_headers"}},
		{"unknown box", "POST", "/v2/box/box-nope/schedules", `{"type": "exec", "cron": "* * * * *", "command": ["true"], "folder": "/"}`, 404, []string{"box not found"}},
		{"unknown schedule", "GET", base + "/sched-nope", nil, 404, []string{"schedule not found"}},
		{"other box's schedule", "GET", abase + "/" + id, nil, 404, []string{"schedule not found"}},
		{"patch unknown", "PATCH", base + "/sched-nope", `{"cron": "@daily"}`, 404, nil},
		{"patch prompt on exec", "PATCH", base + "/" + id, `{"prompt": "hi"}`, 400, []string{"type cannot change"}},
		{"patch options on exec", "PATCH", base + "/" + id, `{"agent_options": {"a": 1}}`, 400, []string{"type cannot change"}},
		{"patch command on prompt", "PATCH", abase + "/" + pid, `{"command": ["true"]}`, 400, []string{"type cannot change"}},
		{"patch empty command", "PATCH", base + "/" + id, `{"command": []}`, 400, []string{"command cannot be empty"}},
		{"patch empty prompt", "PATCH", abase + "/" + pid, `{"prompt": ""}`, 400, []string{"prompt cannot be empty"}},
		{"patch empty cron", "PATCH", base + "/" + id, `{"cron": ""}`, 400, []string{"cron is required"}},
		{"patch bad options", "PATCH", abase + "/" + pid, `{"agent_options": [1]}`, 400, []string{"agent_options"}},
		{"pause unknown", "POST", base + "/sched-nope/pause", nil, 404, nil},
		{"delete unknown", "DELETE", base + "/sched-nope", nil, 404, nil},
	} {
		wantError(t, tc.what, c.do(tc.method, tc.path, tc.body, nil), tc.status, tc.parts...)
	}
	// Clearing prompt-only fields of an exec schedule is harmless.
	wantOK(t, "clear model of exec", c.do("PATCH", base+"/"+id, `{"model": "", "agent_options": null}`, nil))

	for _, tc := range []struct{ path, msg string }{{"/pause", "Schedule paused"}, {"/resume", "Schedule resumed"}, {"", "Schedule deleted"}} {
		method := "POST"
		if tc.path == "" {
			method = "DELETE"
		}
		r := c.do(method, base+"/"+id+tc.path, nil, nil)
		wantOK(t, tc.msg, r)
		if got := jsonObject(t, r); got["message"] != tc.msg {
			t.Errorf("%s %s = %s", method, tc.path, r.body)
		}
	}
}

// TestScheduleRunWire checks a scheduled run's record and webhook as JSON.
func TestScheduleRunWire(t *testing.T) {
	t.Parallel()
	hooks := make(chan map[string]any, 4)
	var header atomic.Value
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var p map[string]any
		_ = json.Unmarshal(raw, &p)
		header.Store(r.Header.Clone())
		hooks <- p
	}))
	defer hook.Close()
	clock := boxtest.NewFakeClock(schedStart)
	srv := boxtest.NewServer(t, boxtest.WithClock(clock))
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	base := "/v2/box/" + b.ID()

	r := c.do("POST", base+"/schedules", map[string]any{
		"type": "exec", "cron": "* * * * *", "command": []string{"sh", "-c", "echo out; echo err >&2"}, "folder": "/tmp",
		"webhook_url": hook.URL, "webhook_headers": map[string]string{"X-Token": "secret", "Authorization": "Bearer b"},
	}, nil)
	wantOK(t, "create", r)
	id, _ := jsonObject(t, r)["id"].(string)
	clock.Advance(30 * time.Second)
	var p map[string]any
	select {
	case p = <-hooks:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook")
	}
	runID, _ := p["run_id"].(string)
	want := map[string]any{
		"box_id": b.ID(), "schedule_id": id, "run_id": runID, "type": "exec", "status": "completed", "output": "out\n",
		"exit_code": float64(0), "scheduled_at": float64(schedStart.Add(30 * time.Second).Unix()), "duration_ms": p["duration_ms"],
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("webhook payload (-want +got):\n%s", diff)
	}
	h := header.Load().(http.Header)
	if h.Get("X-Token") != "secret" || h.Get("Authorization") != "Bearer b" || h.Get("Content-Type") != "application/json" {
		t.Errorf("webhook headers = %v", h)
	}

	r = c.do("GET", base+"/runs", nil, nil)
	wantOK(t, "runs", r)
	var runs struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(r.body, &runs); err != nil || len(runs.Runs) == 0 {
		t.Fatalf("runs = %s, %v", r.body, err)
	}
	rec := runs.Runs[0]
	if rec["id"] != runID || rec["schedule_id"] != id || rec["status"] != "completed" || rec["type"] != "shell" || rec["prompt"] != "sh -c echo out; echo err >&2" || rec["output"] != "out\n" || rec["completed_at"] == nil {
		t.Errorf("run record = %v", rec)
	}
	r = c.do("GET", base+"/schedules/"+id, nil, nil)
	wantOK(t, "get", r)
	s := jsonObject(t, r)
	if s["last_run_id"] != runID || s["last_run_status"] != "completed" || s["last_run_at"] != float64(schedStart.Add(30*time.Second).Unix()) || s["total_runs"] != float64(1) {
		t.Errorf("schedule after a run = %v", s)
	}
}

// BenchmarkScheduleFiring measures how long boxd takes to run one
// activation of n exec schedules of `true` spread over 4 boxes: each
// iteration advances a fake clock by a minute and waits until every
// schedule has recorded its run. boxd sustains n schedules firing every
// minute as long as ms/minute stays well under 60000.
func BenchmarkScheduleFiring(b *testing.B) {
	sizes := []int{100, 500, 1000}
	if v := os.Getenv("BOXD_SCHEDULE_BENCH_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		sizes = []int{n}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("schedules=%d", n), func(b *testing.B) {
			clock := boxtest.NewFakeClock(schedStart)
			srv := boxtest.NewServer(b, boxtest.WithClock(clock))
			ctx := b.Context()
			const nboxes = 4
			var boxes []*box.Box
			for range nboxes {
				bx, err := srv.Client().Create(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bx.Exec.Command(ctx, "true"); err != nil {
					b.Fatal(err)
				}
				boxes = append(boxes, bx)
			}
			for i := range n {
				if _, err := boxes[i%nboxes].Schedule.Exec(ctx, &box.ExecScheduleParams{Cron: "* * * * *", Command: []string{"true"}}); err != nil {
					b.Fatal(err)
				}
			}
			totals := func() (runs, skipped, failed int64) {
				for _, bx := range boxes {
					list, err := bx.Schedule.List(ctx)
					if err != nil {
						b.Fatal(err)
					}
					for _, s := range list {
						runs += s.TotalRuns
						failed += s.TotalFailures
						if s.LastRunStatus == box.RunSkipped {
							skipped++
						}
					}
				}
				return runs, skipped, failed
			}
			b.ResetTimer()
			var worst, advancing time.Duration
			for i := range b.N {
				start := time.Now()
				clock.Advance(time.Minute)
				advancing += time.Since(start)
				for {
					runs, skipped, failed := totals()
					if skipped > 0 || failed > 0 {
						b.Fatalf("minute %d: %d skipped, %d failed", i+1, skipped, failed)
					}
					if runs == int64(n*(i+1)) {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				worst = max(worst, time.Since(start))
			}
			b.StopTimer()
			perMinute := float64(b.Elapsed().Milliseconds()) / float64(b.N)
			b.ReportMetric(perMinute, "ms/minute")
			b.ReportMetric(float64(worst.Milliseconds()), "worst-ms/minute")
			// The fake clock's own cost: it sorts its timers at each one it fires.
			b.ReportMetric(float64(advancing.Milliseconds())/float64(b.N), "advance-ms/minute")
			b.ReportMetric(float64(n)/(perMinute/1000), "runs/s")
		})
	}
}
