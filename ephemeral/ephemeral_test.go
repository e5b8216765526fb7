package ephemeral_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/ephemeral"
)

// standIn answers every request with an ephemeral box and records the
// paths and bodies it was sent.
func standIn(t *testing.T) (*box.Client, func() []map[string]any) {
	t.Helper()
	var mu sync.Mutex
	var bodies []map[string]any
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		if body == nil {
			body = map[string]any{}
		}
		body["(path)"] = r.Method + " " + r.URL.Path
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "box-e", "status": "idle", "ephemeral": true, "expires_at": 1773745700, "created_at": 1, "updated_at": 1,
			"network_policy": map[string]any{"mode": "deny-all"},
		})
	}))
	t.Cleanup(ts.Close)
	c, err := box.NewClient(box.WithAPIKey("k"), box.WithBaseURL(ts.URL), box.WithTelemetry(false), box.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

func TestCreateSendsOnlyEphemeralFields(t *testing.T) {
	t.Parallel()
	c, sent := standIn(t)
	ctx := t.Context()
	p := &ephemeral.CreateParams{
		Name: "scratch", Labels: []string{"scratch"}, Size: box.SizeSmall, Runtime: box.RuntimePython,
		TTL: time.Hour, Env: map[string]string{"K": "v"},
		AttachHeaders: map[string]map[string]string{"api.stripe.com": {"Authorization": "Bearer sk"}},
		NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkDenyAll},
	}
	eb, err := ephemeral.Create(ctx, c, p)
	if err != nil {
		t.Fatal(err)
	}
	if eb.ID() != "box-e" || !eb.ExpiresAt().Equal(time.Unix(1773745700, 0)) || eb.NetworkPolicy().Mode != box.NetworkDenyAll || eb.Cwd() != box.WorkspaceHome {
		t.Errorf("box = %s, expires %v, policy %+v, cwd %s", eb.ID(), eb.ExpiresAt(), eb.NetworkPolicy(), eb.Cwd())
	}
	if _, err := ephemeral.FromSnapshot(ctx, c, "snap-1", &ephemeral.CreateParams{TTL: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := ephemeral.Create(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{
			"(path)": "POST /v2/box", "ephemeral": true, "ttl": 3600.0, "name": "scratch", "labels": []any{"scratch"},
			"size": "small", "runtime": "python", "env_vars": map[string]any{"K": "v"},
			"attach_headers": map[string]any{"api.stripe.com": map[string]any{"Authorization": "Bearer sk"}},
			"network_policy": map[string]any{"mode": "deny-all"},
		},
		// Whole seconds, rounded up.
		{"(path)": "POST /v2/box/from-snapshot", "ephemeral": true, "ttl": 2.0, "snapshot_id": "snap-1"},
		// No TTL: the server's default (three days).
		{"(path)": "POST /v2/box", "ephemeral": true},
	}
	if diff := cmp.Diff(want, sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestCreateRefusesBeforeSending(t *testing.T) {
	t.Parallel()
	c, sent := standIn(t)
	ctx := t.Context()
	for _, ttl := range []time.Duration{ephemeral.MaxTTL + time.Second, -time.Second, 500 * time.Millisecond} {
		if _, err := ephemeral.Create(ctx, c, &ephemeral.CreateParams{TTL: ttl}); err == nil {
			t.Errorf("TTL %v accepted", ttl)
		}
		if _, err := ephemeral.FromSnapshot(ctx, c, "snap-1", &ephemeral.CreateParams{TTL: ttl}); err == nil {
			t.Errorf("FromSnapshot with TTL %v accepted", ttl)
		}
	}
	if _, err := ephemeral.Create(ctx, c, &ephemeral.CreateParams{Labels: []string{"has space"}}); err == nil {
		t.Error("an invalid label was accepted")
	}
	if _, err := ephemeral.FromSnapshot(ctx, c, " ", nil); err == nil {
		t.Error("a blank snapshot id was accepted")
	}
	if _, err := ephemeral.Create(ctx, nil, nil); err == nil {
		t.Error("a nil client was accepted")
	}
	if n := len(sent()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
	// MaxTTL itself is fine.
	if _, err := ephemeral.Create(ctx, c, &ephemeral.CreateParams{TTL: ephemeral.MaxTTL}); err != nil {
		t.Errorf("TTL MaxTTL: %v", err)
	}
	if got := sent(); len(got) != 1 || got[0]["ttl"] != 259200.0 {
		t.Errorf("requests = %v", got)
	}
}

// TestSurface pins what an ephemeral box offers: the namespaces and
// methods of the official EphemeralBox, nothing of a full box's agent,
// git, skills, labels, browser or public URLs.
func TestSurface(t *testing.T) {
	t.Parallel()
	var names []string
	rt := reflect.TypeFor[ephemeral.Box]()
	for i := range rt.NumField() {
		if f := rt.Field(i); f.IsExported() {
			names = append(names, f.Name+" "+f.Type.String())
		}
	}
	pt := reflect.TypeFor[*ephemeral.Box]()
	for i := range pt.NumMethod() {
		names = append(names, pt.Method(i).Name+"()")
	}
	slices.Sort(names)
	want := []string{
		"Cd()", "Cwd()", "Delete()", "DeleteSnapshot()", "Exec *box.Exec", "ExpiresAt()", "Files *box.Files", "ID()",
		"ListSnapshots()", "NetworkPolicy()", "Schedule *box.Schedule", "Snapshot()", "Status()",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("ephemeral.Box surface (-want +got):\n%s", diff)
	}
}
