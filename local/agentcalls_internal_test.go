package local

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upstash/box-go/local/internal/agent"
)

// fakeAgent serves h on a unix socket, as a box's agent would be, and
// returns a client of it for box id.
func fakeAgent(t *testing.T, id string, h http.HandlerFunc) *agent.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	c := agent.NewClient(agent.ClientConfig{BoxID: id, Dial: agent.UnixDialer(sock)})
	t.Cleanup(func() {
		c.CloseIdleConnections()
		srv.Close()
		<-done
	})
	return c
}

// answer is a handler that answers every request with status and body.
func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// TestRunAgentErrorNotEmpty: a run whose harness the box's agent refused
// to start, with an answer that has no message of its own, fails with a
// message that says so, not an empty one.
func TestRunAgentErrorNotEmpty(t *testing.T) {
	s, _ := internalServer(t)
	do := func(method, path, body string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("X-Box-Api-Key", "k")
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		return w
	}
	var created struct{ ID string }
	_ = json.Unmarshal(do("POST", "/v2/box", `{"agent": "custom", "custom_runner": {"command": "harness"}}`).Body.Bytes(), &created)
	b, err := s.db.Box(created.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The box runs; its agent is then one that answers 502 and nothing
	// more to every request.
	rt, err := s.core.EnsureRunning(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	rt.CloseIdleConnections()
	s.core.ReplaceAgent(b.ID, fakeAgent(t, b.ID, answer(http.StatusBadGateway, "")))

	events := do("POST", "/v2/box/"+b.ID+"/run/stream", `{"prompt": "hi"}`).Body.String()
	_, data, ok := strings.Cut(events, "event: error\ndata: ")
	data, _, _ = strings.Cut(data, "\n")
	var e struct{ Error string }
	if !ok || json.Unmarshal([]byte(data), &e) != nil || !strings.Contains(e.Error, "502") {
		t.Errorf("the run's error event is %q, want one that names the agent's answer; events:\n%s", data, events)
	}
	runs, err := s.db.Runs(b.ID)
	if err != nil || len(runs) != 1 || runs[0].Status != "failed" || runs[0].ErrorMessage == "" {
		t.Errorf("runs = %+v, %v", runs, err)
	}
}
