package box_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

func TestLabels(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Labels: []string{"a"}})
	other := newBox(t, srv, nil)

	labels, err := b.Labels.Add(ctx, "env:prod")
	if err != nil || !cmp.Equal(labels, []string{"a", "env:prod"}) {
		t.Fatalf("Add = %v, %v", labels, err)
	}
	if got, err := b.Labels.List(ctx); err != nil || !cmp.Equal(got, labels) {
		t.Errorf("List = %v, %v", got, err)
	}
	if _, err := b.Labels.Add(ctx, "env:prod"); box.StatusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "Label already added") {
		t.Errorf("duplicate = %v", err)
	}
	for _, bad := range []string{"has space", "", strings.Repeat("x", 21), "emoji😀"} {
		if _, err := b.Labels.Add(ctx, bad); err == nil || box.StatusCode(err) != 0 {
			t.Errorf("Add(%q) = %v, want a client-side error", bad, err)
		}
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+b.ID()+"/config/labels", `{"label":"has space"}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("raw bad label = %d %s", resp.StatusCode, resp.body)
	}
	for _, l := range []string{"c", "d", "e"} {
		if _, err := b.Labels.Add(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Labels.Add(ctx, "f"); box.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("sixth label = %v, want 400", err)
	}
	found, err := srv.Client().List(ctx, &box.ListParams{Label: "env:prod"})
	if err != nil || len(found) != 1 || found[0].ID != b.ID() {
		t.Errorf("List by label = %+v, %v (other box %s)", found, err, other.ID())
	}
	// The official client escapes the label in the path; both forms work.
	if resp := rawRequest(t, srv, http.MethodDelete, "/v2/box/"+b.ID()+"/config/labels/env%3Aprod", ""); resp.StatusCode != http.StatusOK || !strings.Contains(resp.body, `"labels":["a","c","d","e"]`) {
		t.Errorf("escaped remove = %d %s", resp.StatusCode, resp.body)
	}
	if _, err := b.Labels.Remove(ctx, "env:prod"); !box.IsNotFound(err) || !strings.Contains(err.Error(), "Label not found") {
		t.Errorf("remove missing = %v", err)
	}
	if got, err := b.Labels.Remove(ctx, "a"); err != nil || !cmp.Equal(got, []string{"c", "d", "e"}) {
		t.Errorf("Remove = %v, %v", got, err)
	}
}

func TestSkills(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Skills: []string{"upstash/qstash-js/qstash-js"}})
	if err := b.Skills.Add(ctx, "upstash/workflow-js/workflow-js"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Skills.List(ctx); err != nil || !cmp.Equal(got, []string{"upstash/qstash-js/qstash-js", "upstash/workflow-js/workflow-js"}) {
		t.Errorf("List = %v, %v", got, err)
	}
	if err := b.Skills.Add(ctx, "upstash/workflow-js/workflow-js"); box.StatusCode(err) != http.StatusConflict {
		t.Errorf("duplicate = %v", err)
	}
	for _, bad := range []string{"frontend-design", "a/b", "a/b/c/d", "a b/c/d"} {
		if err := b.Skills.Add(ctx, bad); err == nil || box.StatusCode(err) != 0 {
			t.Errorf("Add(%q) = %v, want a client-side error", bad, err)
		}
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/"+b.ID()+"/config/skills", `{"skill_id":"nope"}`); resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.body, "Invalid skill_id format") {
		t.Errorf("raw bad skill = %d %s", resp.StatusCode, resp.body)
	}
	if err := b.Skills.Remove(ctx, "upstash/qstash-js/qstash-js"); err != nil {
		t.Fatal(err)
	}
	if err := b.Skills.Remove(ctx, "upstash/qstash-js/qstash-js"); !box.IsNotFound(err) {
		t.Errorf("remove missing = %v", err)
	}
	if got, _ := b.Skills.List(ctx); !cmp.Equal(got, []string{"upstash/workflow-js/workflow-js"}) {
		t.Errorf("after remove = %v", got)
	}
}

func TestAccountEnv(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := srv.Client()
	ctx := t.Context()
	before := newBox(t, srv, nil)

	if err := c.SetEnv(ctx, "API_TOKEN", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetEnv(ctx, "SHARED", "from-account"); err != nil {
		t.Fatal(err)
	}
	env, err := c.ListEnv(ctx)
	if err != nil || !cmp.Equal(env, map[string]string{"API_TOKEN": "****", "SHARED": "****"}) {
		t.Fatalf("ListEnv = %v, %v", env, err)
	}
	after := newBox(t, srv, &box.CreateParams{Env: map[string]string{"SHARED": "from-box"}})
	if got := mustRun(t, after, `echo "$API_TOKEN $SHARED"`).Stdout; got != "s3cret from-box\n" {
		t.Errorf("box created after = %q", got)
	}
	if got := mustRun(t, before, `echo "[$API_TOKEN]"`).Stdout; got != "[]\n" {
		t.Errorf("box created before = %q", got)
	}

	if err := c.SetAllEnv(ctx, map[string]string{"ONLY": "1"}); err != nil {
		t.Fatal(err)
	}
	if env, _ := c.ListEnv(ctx); !cmp.Equal(env, map[string]string{"ONLY": "****"}) {
		t.Errorf("after SetAllEnv = %v", env)
	}
	if err := c.DeleteEnv(ctx, "ONLY"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteEnv(ctx, "ONLY"); !box.IsNotFound(err) {
		t.Errorf("delete missing = %v", err)
	}
	if err := c.SetEnv(ctx, "BAD KEY", "x"); box.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("bad key = %v", err)
	}
	if err := c.SetAllEnv(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if env, _ := c.ListEnv(ctx); len(env) != 0 {
		t.Errorf("after clearing = %v", env)
	}
}

// TestInitCommandServesPublicURL: a keep-alive box's init command serves a
// port that its public URL reaches; after boxd restarts, the box starts
// again on its own, its init command with it, and the same URL works.
func TestInitCommandServesPublicURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	pc := previewClient(t)
	var id string
	t.Run("first", func(t *testing.T) {
		srv := boxtest.NewServer(t, boxtest.WithDataDir(dir))
		b := newBox(t, srv, &box.CreateParams{KeepAlive: true, InitCommand: "mkdir -p site && echo served-by-init > site/index.html && exec python3 -m http.server 8000 -d site"})
		id = b.ID()
		u, err := b.GetPublicURL(ctx, 8000, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the init command's server", func() bool {
			code, body := fetch(t, pc, u.URL, "")
			return code == http.StatusOK && body == "served-by-init\n"
		})
	})
	srv := boxtest.NewServer(t, boxtest.WithDataDir(dir))
	urls, err := mustGet(t, srv, id).ListPublicURLs(ctx)
	if err != nil || len(urls) != 1 {
		t.Fatalf("public URLs after restart = %+v, %v", urls, err)
	}
	// The URL names boxd's address of the time; send it to the new one.
	u, err := url.Parse(urls[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	api, _ := url.Parse(srv.URL())
	u.Host = u.Hostname() + ":" + api.Port()
	waitFor(t, "the init command to serve again after the restart", func() bool {
		code, body := fetch(t, pc, u.String(), "")
		return code == http.StatusOK && body == "served-by-init\n"
	})
}

func mustGet(t *testing.T, srv *boxtest.Server, id string) *box.Box {
	t.Helper()
	b, err := srv.Client().Get(t.Context(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
