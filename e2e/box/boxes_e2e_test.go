package box_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

func newBox(t *testing.T, srv *boxtest.Server, p *box.CreateParams) *box.Box {
	t.Helper()
	b, err := srv.Client().Create(t.Context(), p)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return b
}

func mustRun(t *testing.T, b *box.Box, cmd string) *box.Run {
	t.Helper()
	r, err := b.Exec.Command(t.Context(), cmd)
	if err != nil {
		t.Fatalf("Exec.Command(%q): %v", cmd, err)
	}
	return r
}

func TestBoxLifecycle(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := srv.Client()
	ctx := t.Context()

	b := newBox(t, srv, &box.CreateParams{Name: "life", Labels: []string{"env:test", "team.a"}, Size: box.SizeMedium, Runtime: box.RuntimePython, Env: map[string]string{"GREETING": "hi"}})
	in := b.Info()
	if in.Status != box.StatusIdle || in.Name != "life" || in.Size != box.SizeMedium || in.Runtime != box.RuntimePython || in.NetworkPolicy.Mode != box.NetworkAllowAll {
		t.Fatalf("Info after create = %+v", in)
	}
	if diff := cmp.Diff([]string{"env:test", "team.a"}, in.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if time.Since(in.CreatedAt) > time.Minute {
		t.Errorf("CreatedAt = %v", in.CreatedAt)
	}
	if got := mustRun(t, b, "echo $GREETING").Stdout; got != "hi\n" {
		t.Errorf("env var in box: %q", got)
	}

	for _, idOrName := range []string{b.ID(), "life"} {
		g, err := c.Get(ctx, idOrName, nil)
		if err != nil || g.ID() != b.ID() {
			t.Fatalf("Get(%q) = %v, %v", idOrName, g, err)
		}
	}
	if g, err := c.GetByName(ctx, "life", nil); err != nil || g.ID() != b.ID() {
		t.Fatalf("GetByName = %v, %v", g, err)
	}
	other := newBox(t, srv, nil)

	all, err := c.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(infos []box.Info) []string {
		var out []string
		for _, i := range infos {
			out = append(out, i.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{b.ID(), other.ID()}, ids(all)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	tagged, err := c.List(ctx, &box.ListParams{Label: "env:test"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{b.ID()}, ids(tagged)); diff != "" {
		t.Errorf("List by label (-want +got):\n%s", diff)
	}

	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Status(ctx); err != nil || st != box.StatusPaused {
		t.Fatalf("Status after pause = %v, %v", st, err)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Status(ctx); err != nil || st != box.StatusIdle {
		t.Fatalf("Status after resume = %v, %v", st, err)
	}
	logs, err := b.Logs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, l := range logs {
		msgs = append(msgs, l.Message)
	}
	for _, want := range []string{"box created", "box paused", "box resumed"} {
		if !slices.Contains(msgs, want) {
			t.Errorf("logs %q lack %q", msgs, want)
		}
	}
	page, err := b.Logs(ctx, &box.LogsParams{Offset: 1, Limit: 1})
	if err != nil || len(page) != 1 || page[0].Message != logs[1].Message {
		t.Errorf("Logs page = %+v, %v; want [%+v]", page, err, logs[1])
	}

	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, b.ID(), nil); !box.IsNotFound(err) {
		t.Fatalf("Get after Delete: %v, want 404", err)
	}
	if _, err := os.Stat(filepath.Join(srv.DataDir(), "boxes", b.ID())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("box files remain after delete: %v", err)
	}
	if err := b.Delete(ctx); !box.IsNotFound(err) {
		t.Errorf("second Delete: %v, want 404", err)
	}
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := srv.Client()
	ctx := t.Context()
	for name, p := range map[string]*box.CreateParams{
		"too many labels":   {Labels: []string{"a", "b", "c", "d", "e", "f"}},
		"label with space":  {Labels: []string{"has space"}},
		"long label":        {Labels: []string{strings.Repeat("x", 21)}},
		"agent no harness":  {Agent: &box.AgentOptions{Model: "anthropic/claude-sonnet-4-5"}},
		"agent no model":    {Agent: &box.AgentOptions{Harness: box.HarnessClaudeCode}},
		"custom no command": {Agent: &box.AgentOptions{Harness: box.HarnessCustom}},
		"mcp both":          {MCPServers: []box.MCPServer{{Name: "x", Package: "p", URL: "http://u"}}},
	} {
		if _, err := c.Create(ctx, p); err == nil || box.StatusCode(err) != 0 {
			t.Errorf("%s: Create error = %v, want a client-side error", name, err)
		}
	}
	all, err := c.List(ctx, nil)
	if err != nil || len(all) != 0 {
		t.Fatalf("List = %v, %v; want no boxes", all, err)
	}

	// The server checks what the client may not: a raw request with a bad
	// label is a 400 with the reason.
	resp := rawRequest(t, srv, http.MethodPost, "/v2/box", `{"labels":["has space"]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.body, `label \"has space\" contains invalid characters`) {
		t.Errorf("raw bad label: %d %s", resp.StatusCode, resp.body)
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box", `{"size":"huge"}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("raw bad size: %d %s", resp.StatusCode, resp.body)
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box", `{"name":`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("raw bad JSON: %d %s", resp.StatusCode, resp.body)
	}

	newBox(t, srv, &box.CreateParams{Name: "dup"})
	var apiErr *box.Error
	if _, err := c.Create(ctx, &box.CreateParams{Name: "dup"}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Errorf("duplicate name: %v, want 409", err)
	}
}

func TestDeleteBoxes(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := srv.Client()
	ctx := t.Context()
	a, b, keep := newBox(t, srv, nil), newBox(t, srv, nil), newBox(t, srv, nil)

	for _, ids := range [][]string{nil, {}, {""}, {a.ID(), "  "}} {
		if err := c.DeleteBoxes(ctx, ids); err == nil || box.StatusCode(err) != 0 {
			t.Errorf("DeleteBoxes(%q) = %v, want a client-side error", ids, err)
		}
	}
	// Old clients send an empty list; the server must not read it as "all".
	if resp := rawRequest(t, srv, http.MethodDelete, "/v2/box", `{"ids":[]}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("raw empty ids: %d %s", resp.StatusCode, resp.body)
	}
	if err := c.DeleteBoxes(ctx, []string{a.ID(), "box-nosuchbox0"}); !box.IsNotFound(err) {
		t.Errorf("DeleteBoxes with unknown id = %v, want 404", err)
	}
	if err := c.DeleteBoxes(ctx, []string{a.ID(), b.ID()}); err != nil {
		t.Fatal(err)
	}
	all, err := c.List(ctx, nil)
	if err != nil || len(all) != 1 || all[0].ID != keep.ID() {
		t.Fatalf("List after DeleteBoxes = %+v, %v", all, err)
	}
}

func TestAuthAndUnknownBox(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	bad, err := box.NewClient(box.WithAPIKey("wrong"), box.WithBaseURL(srv.URL()), box.WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.List(ctx, nil)
	var apiErr *box.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Message != "unauthorized" {
		t.Fatalf("wrong key: %v", err)
	}
	if strings.Contains(err.Error(), srv.APIKey()) || strings.Contains(err.Error(), "wrong") {
		t.Errorf("error text shows a key: %v", err)
	}
	if _, err := srv.Client().Get(ctx, "box-nosuchbox0", nil); !box.IsNotFound(err) || !strings.Contains(err.Error(), "box not found") {
		t.Errorf("unknown box: %v", err)
	}
	if _, err := srv.Client().Get(ctx, "", nil); err == nil || box.StatusCode(err) != 0 {
		t.Errorf("empty id: %v, want a client-side error", err)
	}
	// Data-plane routes check the key and the box too.
	if resp := rawRequestKey(t, srv, "nope", http.MethodPost, "/v2/box/box-nosuchbox0/exec", `{"command":["true"]}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("exec with wrong key: %d", resp.StatusCode)
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/box-nosuchbox0/exec", `{"command":["true"]}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("exec on unknown box: %d %s", resp.StatusCode, resp.body)
	}
}

func TestPauseStopsProcesses(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, nil)
	// A background job that appends a line every 20 ms, started by one
	// exec and still running for the next ones.
	mustRun(t, b, "nohup sh -c 'while true; do echo x >> /workspace/home/ticks; sleep 0.02; done' >/dev/null 2>&1 &")
	ticks := filepath.Join(srv.DataDir(), "boxes", b.ID(), "fs", "workspace", "home", "ticks")
	size := func() int64 {
		fi, err := os.Stat(ticks)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	waitFor(t, "the background job to write", func() bool { return size() > 10 })
	if got := mustRun(t, b, "pgrep -c -f 'echo [x]'; true").Stdout; strings.TrimSpace(got) == "0" {
		t.Fatalf("background job not visible from the next exec: %q", got)
	}

	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	frozen := size()
	time.Sleep(300 * time.Millisecond)
	if got := size(); got != frozen {
		t.Fatalf("paused box kept writing: %d -> %d bytes", frozen, got)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed job to write", func() bool { return size() > frozen })
}

func TestKeepAliveRefusesPause(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, &box.CreateParams{KeepAlive: true})
	if err := b.Pause(t.Context()); !errors.Is(err, box.ErrKeepAlive) {
		t.Fatalf("Pause = %v, want ErrKeepAlive", err)
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+b.ID()+"/pause", ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("raw pause of keep-alive box: %d %s", resp.StatusCode, resp.body)
	}
}

func TestRestartKeepsBoxes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	var id string
	t.Run("first", func(t *testing.T) {
		srv := boxtest.NewServer(t, boxtest.WithDataDir(dir))
		b := newBox(t, srv, &box.CreateParams{Name: "persist"})
		id = b.ID()
		if err := b.Files.WriteText(ctx, "kept.txt", "still here"); err != nil {
			t.Fatal(err)
		}
	})
	srv := boxtest.NewServer(t, boxtest.WithDataDir(dir))
	b, err := srv.Client().GetByName(ctx, "persist", nil)
	if err != nil || b.ID() != id {
		t.Fatalf("after restart: %v, %v", b, err)
	}
	if got, err := b.Files.ReadText(ctx, "kept.txt"); err != nil || got != "still here" {
		t.Fatalf("file after restart = %q, %v", got, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type rawResponse struct {
	StatusCode int
	body       string
}

func rawRequest(t *testing.T, srv *boxtest.Server, method, path, body string) rawResponse {
	return rawRequestKey(t, srv, srv.APIKey(), method, path, body)
}

func rawRequestKey(t *testing.T, srv *boxtest.Server, key, method, path, body string) rawResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, srv.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Box-Api-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return rawResponse{StatusCode: resp.StatusCode, body: sb.String()}
}
