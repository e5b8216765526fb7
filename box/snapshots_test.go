package box

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/gen"
)

// recorded is one request a stand-in server saw.
type recorded struct {
	Method, Path, Query string
	Body                map[string]any
	RawBody             string
}

// standIn serves handle and records every request.
func standIn(t *testing.T, handle func(w http.ResponseWriter, r recorded, n int)) (*Client, func() []recorded) {
	t.Helper()
	var mu sync.Mutex
	var reqs []recorded
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, RawBody: string(raw)}
		if len(raw) > 0 {
			_ = json.Unmarshal(raw, &rec.Body)
		}
		mu.Lock()
		reqs = append(reqs, rec)
		n := len(reqs)
		mu.Unlock()
		handle(w, rec, n)
	}))
	t.Cleanup(ts.Close)
	return pollClient(t, ts.URL), func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), reqs...)
	}
}

func writeJSON(w http.ResponseWriter, v any) { _ = json.NewEncoder(w).Encode(v) }

func snap(status string) map[string]any {
	return map[string]any{"id": "snap-1", "name": "n", "box_id": "box-1", "size_bytes": 42, "status": status, "created_at": 1735689600}
}

func TestSnapshotPollsWhileCreating(t *testing.T) {
	t.Parallel()
	statuses := []string{"creating", "creating", "ready"}
	c, reqs := standIn(t, func(w http.ResponseWriter, r recorded, n int) {
		switch {
		case r.Method == http.MethodPost && r.Path == "/v2/box/box-1/snapshots":
			writeJSON(w, snap("creating"))
		case r.Method == http.MethodGet && r.Path == "/v2/box/box-1/snapshots":
			other := snap("creating")
			other["id"] = "snap-0"
			writeJSON(w, map[string]any{"snapshots": []any{other, snap(statuses[min(n-2, len(statuses)-1)])}})
		default:
			http.NotFound(w, nil)
		}
	})
	b := c.newBox(&gen.BoxData{ID: "box-1", Status: gen.BoxStatusIdle})
	s, err := b.Snapshot(t.Context(), "n")
	if err != nil {
		t.Fatal(err)
	}
	want := Snapshot{ID: "snap-1", Name: "n", BoxID: "box-1", SizeBytes: 42, Status: SnapshotReady, CreatedAt: time.Unix(1735689600, 0)}
	if diff := cmp.Diff(want, *s); diff != "" {
		t.Errorf("Snapshot (-want +got):\n%s", diff)
	}
	got := reqs()
	if len(got) != 4 {
		t.Fatalf("requests = %+v, want a POST and three polls", got)
	}
	if diff := cmp.Diff(map[string]any{"name": "n"}, got[0].Body); diff != "" {
		t.Errorf("snapshot body (-want +got):\n%s", diff)
	}
}

func TestSnapshotFailures(t *testing.T) {
	t.Parallel()
	serve := func(final any) *Box {
		c, _ := standIn(t, func(w http.ResponseWriter, r recorded, n int) {
			if r.Method == http.MethodPost {
				writeJSON(w, snap("creating"))
				return
			}
			if code, ok := final.(int); ok {
				w.WriteHeader(code)
				writeJSON(w, map[string]string{"error": "boom"})
				return
			}
			list := []any{}
			if final != nil {
				list = append(list, snap(final.(string)))
			}
			writeJSON(w, map[string]any{"snapshots": list})
		})
		return c.newBox(&gen.BoxData{ID: "box-1"})
	}
	if _, err := serve("error").Snapshot(t.Context(), "n"); !errors.Is(err, ErrSnapshotFailed) {
		t.Errorf("error status: %v, want ErrSnapshotFailed", err)
	}
	if _, err := serve(nil).Snapshot(t.Context(), "n"); !errors.Is(err, ErrSnapshotFailed) {
		t.Errorf("snapshot gone from the list: %v, want ErrSnapshotFailed", err)
	}
	if _, err := serve("weird").Snapshot(t.Context(), "n"); err == nil || !strings.Contains(err.Error(), "unknown status") {
		t.Errorf("unknown status: %v", err)
	}
	// Unlike box creation polls, a failed snapshot poll is an error.
	if _, err := serve(http.StatusInternalServerError).Snapshot(t.Context(), "n"); StatusCode(err) != http.StatusInternalServerError {
		t.Errorf("failed poll: %v, want the 500", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := serve("creating").Snapshot(ctx, "n"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Snapshot with a deadline = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Snapshot returned %v after the deadline", d)
	}

	if _, err := serve("ready").Snapshot(t.Context(), " "); err == nil {
		t.Error("a blank snapshot name was sent")
	}
}

// TestFromSnapshotForwardsEveryField checks that FromSnapshot sends the
// whole create body, which the official JS SDK does not.
func TestFromSnapshotForwardsEveryField(t *testing.T) {
	t.Parallel()
	c, reqs := standIn(t, func(w http.ResponseWriter, r recorded, n int) {
		if r.Method == http.MethodPost {
			writeJSON(w, map[string]any{"id": "box-2", "status": "creating", "created_at": 1, "updated_at": 1})
			return
		}
		writeJSON(w, map[string]any{"id": "box-2", "status": "idle", "created_at": 1, "updated_at": 2, "model": "anthropic/claude-sonnet-4-5"})
	})
	p := &CreateParams{
		Name: "restored", Labels: []string{"env:dev"}, Size: SizeMedium, Runtime: RuntimePython,
		KeepAlive: true, InitCommand: "make serve",
		Agent:         &AgentOptions{Harness: HarnessClaudeCode, Model: "anthropic/claude-sonnet-4-5", APIKey: BoxAPIKeyStored},
		Git:           &GitOptions{Token: "ghp_x", UserName: "Bot", UserEmail: "bot@example.com"},
		Env:           map[string]string{"A": "1"},
		AttachHeaders: map[string]map[string]string{"api.example.com": {"Authorization": "Bearer t"}},
		NetworkPolicy: &NetworkPolicy{Mode: NetworkCustom, AllowedDomains: []string{"example.com"}, DeniedCIDRs: []string{"10.0.0.0/8"}},
		Skills:        []string{"upstash/qstash-js/qstash-js"},
		MCPServers:    []MCPServer{{Name: "fs", Package: "@x/fs", Args: []string{"/"}}},
		Browser:       true,
	}
	b, err := c.FromSnapshot(t.Context(), "snap-1", p)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID() != "box-2" || b.Info().Status != StatusIdle || b.st.gitToken != "ghp_x" {
		t.Errorf("box = %s %+v, token %q", b.ID(), b.Info(), b.st.gitToken)
	}
	got := reqs()
	if len(got) != 2 || got[0].Path != "/v2/box/from-snapshot" || got[1].Path != "/v2/box/box-2" {
		t.Fatalf("requests = %+v, want the POST and one poll", got)
	}
	want := map[string]any{
		"snapshot_id": "snap-1", "name": "restored", "labels": []any{"env:dev"}, "size": "medium", "runtime": "python",
		"keep_alive": true, "init_command": "make serve",
		"agent": "claude-code", "model": "anthropic/claude-sonnet-4-5", "agent_api_key": "STORED_KEY",
		"github_token": "ghp_x", "git_user_name": "Bot", "git_user_email": "bot@example.com",
		"env_vars":       map[string]any{"A": "1"},
		"attach_headers": map[string]any{"api.example.com": map[string]any{"Authorization": "Bearer t"}},
		"network_policy": map[string]any{"mode": "custom", "allowed_domains": []any{"example.com"}, "denied_cidrs": []any{"10.0.0.0/8"}},
		"skills":         []any{"upstash/qstash-js/qstash-js"},
		"mcp_servers":    []any{map[string]any{"name": "fs", "source": "npm", "package_or_url": "@x/fs", "args": []any{"/"}}},
		"browser":        true,
	}
	if diff := cmp.Diff(want, got[0].Body); diff != "" {
		t.Errorf("from-snapshot body (-want +got):\n%s", diff)
	}
	// The same body as Create, plus snapshot_id.
	create, err := p.request()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(create)
	var createBody map[string]any
	_ = json.Unmarshal(raw, &createBody)
	delete(want, "snapshot_id")
	if diff := cmp.Diff(want, createBody); diff != "" {
		t.Errorf("create body differs from the from-snapshot body (-from-snapshot +create):\n%s", diff)
	}

	if _, err := c.FromSnapshot(t.Context(), " ", nil); err == nil {
		t.Error("a blank snapshot id was sent")
	}
	if _, err := c.FromSnapshot(t.Context(), "snap-1", &CreateParams{Labels: []string{"has space"}}); err == nil {
		t.Error("FromSnapshot did not validate its params as Create does")
	}
	if n := len(reqs()); n != 2 {
		t.Errorf("%d requests after refused calls, want 2", n)
	}
}

// TestCreateBodiesMatch guards fromSnapshotRequest: the from-snapshot body
// must have every field of the create body, so that nothing is dropped on
// the way.
func TestCreateBodiesMatch(t *testing.T) {
	t.Parallel()
	fields := func(v any) map[string]string {
		out := map[string]string{}
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out[name] = f.Type.String()
		}
		return out
	}
	create, from := fields(gen.CreateBoxRequest{}), fields(gen.CreateBoxFromSnapshotRequest{})
	delete(from, "snapshot_id")
	if diff := cmp.Diff(create, from); diff != "" {
		t.Errorf("create and from-snapshot bodies differ (-create +from-snapshot):\n%s", diff)
	}
}

func TestDeleteSnapshotsRequests(t *testing.T) {
	t.Parallel()
	c, reqs := standIn(t, func(w http.ResponseWriter, r recorded, n int) {
		writeJSON(w, map[string]any{"deleted": 3})
	})
	ctx := t.Context()
	if n, err := c.DeleteSnapshots(ctx, []string{"snap-1", "snap-2"}); err != nil || n != 3 {
		t.Errorf("DeleteSnapshots = %d, %v", n, err)
	}
	if n, err := c.DeleteAllSnapshots(ctx); err != nil || n != 3 {
		t.Errorf("DeleteAllSnapshots = %d, %v", n, err)
	}
	for _, ids := range [][]string{nil, {}, {""}, {"snap-1", "  "}} {
		if _, err := c.DeleteSnapshots(ctx, ids); err == nil {
			t.Errorf("DeleteSnapshots(%q) was sent", ids)
		}
	}
	got := reqs()
	want := []recorded{
		{Method: "DELETE", Path: "/v2/box/snapshots", RawBody: `{"ids":["snap-1","snap-2"]}`, Body: map[string]any{"ids": []any{"snap-1", "snap-2"}}},
		{Method: "DELETE", Path: "/v2/box/snapshots", Query: "all=true", RawBody: "{}", Body: map[string]any{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}

	b := c.newBox(&gen.BoxData{ID: "box-1"})
	if err := b.DeleteSnapshot(ctx, ""); err == nil {
		t.Error("DeleteSnapshot with an empty id was sent")
	}
}
