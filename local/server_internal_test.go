package local

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/store"
)

// manualClock is a clock whose timers fire only when the test says so.
type manualClock struct {
	mu     sync.Mutex
	timers int
}

func (c *manualClock) Now() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.timers++
	c.mu.Unlock()
	return func() bool { return true }
}

// internalServer starts a boxd for a test of its internals, with a
// manual clock, and returns it with a function that calls its API and
// fails the test unless the answer is 200.
func internalServer(t *testing.T) (*Server, func(method, path, body string) map[string]any) {
	t.Helper()
	iso := IsolationBwrap
	if CheckIsolation() != nil {
		iso = IsolationNone
	}
	s, err := New(Config{DataDir: t.TempDir(), APIKey: "k", Isolation: iso, Clock: &manualClock{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, func(method, path, body string) map[string]any {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("X-Box-Api-Key", "k")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return m
	}
}

// TestDeleteBoxDeletesSchedules checks that deleting a box removes its
// schedule records and timers.
func TestDeleteBoxDeletesSchedules(t *testing.T) {
	s, do := internalServer(t)
	keep, _ := do("POST", "/v2/box", `{}`)["id"].(string)
	gone, _ := do("POST", "/v2/box", `{}`)["id"].(string)
	sched := `{"type": "exec", "cron": "* * * * *", "command": ["true"], "folder": "/workspace/home"}`
	do("POST", "/v2/box/"+keep+"/schedules", sched)
	do("POST", "/v2/box/"+gone+"/schedules", sched)
	do("POST", "/v2/box/"+gone+"/schedules", sched)
	do("DELETE", "/v2/box/"+gone, "")

	all, err := s.db.AllSchedules()
	if err != nil || len(all) != 1 || all[0].BoxID != keep {
		t.Errorf("schedules after the delete: %v, %v", all, err)
	}
	if armed := s.schedules.Armed(); armed != 1 {
		t.Errorf("%d schedules armed after the delete, want 1", armed)
	}
}

// TestDeleteBoxDeletesRecordings checks that deleting a box deletes its
// browser recordings' records at once, not at the next hourly upkeep.
func TestDeleteBoxDeletesRecordings(t *testing.T) {
	s, do := internalServer(t)
	create := func() string {
		id, _ := do("POST", "/v2/box", `{}`)["id"].(string)
		return id
	}
	keep, gone := create(), create()
	for _, id := range []string{keep, gone, gone} {
		rec := &store.Recording{ID: core.NewID("rec-"), BoxID: id, Status: "completed", StartedAt: 1, EndedAt: 2}
		if err := s.db.PutRecording(rec); err != nil {
			t.Fatal(err)
		}
	}
	do("DELETE", "/v2/box/"+gone, "")
	all, err := s.db.AllRecordings()
	if err != nil || len(all) != 1 || all[0].BoxID != keep {
		t.Errorf("recordings after the delete: %d records, %v; want the other box's one", len(all), err)
	}
}

// TestCloseEndsTheLifetime: the contexts boxd makes for its own work
// derive from the server's, which ends with Close; a second Close is a
// no-op.
func TestCloseEndsTheLifetime(t *testing.T) {
	s, _ := internalServer(t)
	ctx := s.ctx
	if ctx.Err() != nil {
		t.Fatal("the server's context ended before Close")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if ctx.Err() == nil {
		t.Error("the server's context goes on after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
