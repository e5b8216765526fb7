package box_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// treeScript prints every entry under the given directories, sorted, as
// "path type mode owner", with link targets and file contents, as the box
// sees them.
const treeScript = `for d in "$@"; do find "$d" -mindepth 1; done | sort | while read -r p; do
  printf '%s %s %s %s' "$p" "$(stat -c %F "$p")" "$(stat -c %a "$p")" "$(stat -c %U "$p")"
  if [ -L "$p" ]; then printf ' -> %s' "$(readlink "$p")"; elif [ -f "$p" ]; then printf ' = %s' "$(cat "$p")"; fi
  echo
done`

func tree(t *testing.T, b *box.Box, dirs ...string) []string {
	t.Helper()
	r := mustRun(t, b, "set -- "+strings.Join(dirs, " ")+"\n"+treeScript)
	if r.ExitCode != 0 {
		t.Fatalf("tree: %+v", r)
	}
	return strings.Split(strings.TrimSpace(r.Stdout), "\n")
}

func TestSnapshotAndRestore(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	orig := newBox(t, srv, nil)
	setup := mustRun(t, orig, `set -e
mkdir -p app/src app/empty secret && chmod 700 secret && chmod 1777 app/empty
printf 'print(42)' > app/src/main.py
printf '#!/bin/sh\necho run' > app/run.sh && chmod 750 app/run.sh
printf 'key' > secret/id && chmod 600 secret/id
printf 'ro' > app/readonly && chmod 444 app/readonly
ln -s src/main.py app/link
ln -s /usr/bin app/bin
ln -s ../nowhere app/dangling
printf 'export SNAP=1' > /home/boxuser/.profile_snap
printf 'scratch' > /tmp/scratch`)
	if setup.ExitCode != 0 {
		t.Fatalf("setup: %+v", setup)
	}
	dirs := []string{"/workspace/home", "/home/boxuser"}
	before := tree(t, orig, dirs...)

	s, err := orig.Snapshot(ctx, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != box.SnapshotReady || s.Name != "checkpoint" || s.BoxID != orig.ID() || s.SizeBytes <= 0 || s.CreatedAt.IsZero() {
		t.Errorf("snapshot = %+v", s)
	}
	// The box runs on after the snapshot.
	if r := mustRun(t, orig, `printf 'later' > app/later.txt && printf 'changed' > app/src/main.py`); r.ExitCode != 0 {
		t.Fatalf("write after snapshot: %+v", r)
	}
	after := tree(t, orig, dirs...)

	restored, err := srv.Client().FromSnapshot(ctx, s.ID, &box.CreateParams{Name: "restored"})
	if err != nil {
		t.Fatal(err)
	}
	if restored.ID() == orig.ID() || restored.Info().Name != "restored" {
		t.Errorf("restored box = %s %+v", restored.ID(), restored.Info())
	}
	if diff := cmp.Diff(before, tree(t, restored, dirs...)); diff != "" {
		t.Errorf("restored box's files differ from the snapshot's (-snapshot +restored):\n%s", diff)
	}
	for _, line := range []string{
		"/workspace/home/app/link symbolic link 777 boxuser -> src/main.py",
		"/workspace/home/app/bin symbolic link 777 boxuser -> /usr/bin",
		"/workspace/home/app/dangling symbolic link 777 boxuser -> ../nowhere",
		"/workspace/home/app/empty directory 1777 boxuser",
		"/workspace/home/app/readonly regular file 444 boxuser = ro",
		"/workspace/home/secret directory 700 boxuser",
		"/workspace/home/secret/id regular file 600 boxuser = key",
		"/home/boxuser/.profile_snap regular file 644 boxuser = export SNAP=1",
	} {
		if !slices.Contains(before, line) {
			t.Errorf("snapshot's box lacks %q:\n%s", line, strings.Join(before, "\n"))
		}
	}
	if r := mustRun(t, restored, `test ! -e /tmp/scratch && ./app/run.sh && cat app/link`); r.Stdout != "run\nprint(42)" {
		t.Errorf("restored box: %+v (want /tmp empty, run.sh runnable, link followed in the box)", r)
	}
	// The original is untouched by the restore.
	if diff := cmp.Diff(after, tree(t, orig, dirs...)); diff != "" {
		t.Errorf("original box changed (-before restore +after):\n%s", diff)
	}

	// Files written to the restored box stay there.
	if r := mustRun(t, restored, "printf x > only-here"); r.ExitCode != 0 {
		t.Fatal(r)
	}
	if r := mustRun(t, orig, "test -e only-here"); r.ExitCode == 0 {
		t.Error("a file written in the restored box shows up in the original")
	}
}

func TestSnapshotListDelete(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, nil)
	s1, err := b.Snapshot(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.Snapshot(ctx, "two")
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.ListSnapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]box.Snapshot{*s1, *s2}, list); diff != "" {
		t.Errorf("ListSnapshots (-want +got):\n%s", diff)
	}
	if err := b.DeleteSnapshot(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := b.ListSnapshots(ctx); err != nil || len(list) != 1 || list[0].ID != s2.ID {
		t.Errorf("after delete: %+v, %v", list, err)
	}
	if err := b.DeleteSnapshot(ctx, s1.ID); !box.IsNotFound(err) {
		t.Errorf("deleting a deleted snapshot: %v, want 404", err)
	}
	// A snapshot of another box is not this box's to delete.
	other := newBox(t, srv, nil)
	if err := other.DeleteSnapshot(ctx, s2.ID); !box.IsNotFound(err) {
		t.Errorf("deleting another box's snapshot: %v, want 404", err)
	}
	if list, err := other.ListSnapshots(ctx); err != nil || len(list) != 0 {
		t.Errorf("other box's snapshots = %+v, %v", list, err)
	}
}

func TestDeleteSnapshotsAccountWide(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	c := srv.Client()
	a, b := newBox(t, srv, nil), newBox(t, srv, nil)
	var ids []string
	for _, bx := range []*box.Box{a, a, b} {
		s, err := bx.Snapshot(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}

	// Empty and blank lists are refused by the client, and by the server.
	for _, bad := range [][]string{nil, {""}, {ids[0], " "}} {
		if _, err := c.DeleteSnapshots(ctx, bad); err == nil || box.StatusCode(err) != 0 {
			t.Errorf("DeleteSnapshots(%q) = %v, want a client-side error", bad, err)
		}
	}
	for _, body := range []string{`{"ids":[]}`, `{"ids":[""]}`, `{"ids":["` + ids[0] + `","  "]}`, `{"ids":null}`} {
		if r := rawRequest(t, srv, http.MethodDelete, "/v2/box/snapshots", body); r.StatusCode != http.StatusBadRequest {
			t.Errorf("raw delete %s: %d %s, want 400", body, r.StatusCode, r.body)
		}
	}
	for _, bx := range []*box.Box{a, b} {
		if list, err := bx.ListSnapshots(ctx); err != nil || len(list) == 0 {
			t.Fatalf("snapshots gone after refused deletes: %v, %v", list, err)
		}
	}

	// By id: one from box a, and an unknown one that is not counted.
	if n, err := c.DeleteSnapshots(ctx, []string{ids[0], "snap-unknown"}); err != nil || n != 1 {
		t.Errorf("DeleteSnapshots = %d, %v; want 1", n, err)
	}
	if list, _ := a.ListSnapshots(ctx); len(list) != 1 || list[0].ID != ids[1] {
		t.Errorf("box a's snapshots = %+v", list)
	}
	// Everything else, of both boxes.
	if n, err := c.DeleteAllSnapshots(ctx); err != nil || n != 2 {
		t.Errorf("DeleteAllSnapshots = %d, %v; want 2", n, err)
	}
	for _, bx := range []*box.Box{a, b} {
		if list, err := bx.ListSnapshots(ctx); err != nil || len(list) != 0 {
			t.Errorf("snapshots after DeleteAllSnapshots: %v, %v", list, err)
		}
	}
	// The 0.5.5 SDK's delete-all: a body without ids.
	if _, err := a.Snapshot(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	if r := rawRequest(t, srv, http.MethodDelete, "/v2/box/snapshots", `{}`); r.StatusCode != http.StatusOK || strings.TrimSpace(r.body) != `{"deleted":1}` {
		t.Errorf("delete all with {}: %d %s", r.StatusCode, r.body)
	}
}

func TestSnapshotNotFound(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	c := srv.Client()
	b := newBox(t, srv, nil)
	s, err := b.Snapshot(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	// A snapshot outlives its box, but a deleted box cannot be snapshotted.
	if _, err := b.Snapshot(ctx, "late"); !box.IsNotFound(err) {
		t.Errorf("snapshot of a deleted box: %v, want 404", err)
	}
	restored, err := c.FromSnapshot(ctx, s.ID, nil)
	if err != nil {
		t.Fatalf("restore after the box was deleted: %v", err)
	}
	if _, err := restored.Snapshot(ctx, ""); err == nil {
		t.Error("a snapshot without a name was sent")
	}

	if n, err := c.DeleteSnapshots(ctx, []string{s.ID}); err != nil || n != 1 {
		t.Fatalf("DeleteSnapshots = %d, %v", n, err)
	}
	_, err = c.FromSnapshot(ctx, s.ID, nil)
	var apiErr *box.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Message != "snapshot not found" {
		t.Errorf("restore of a deleted snapshot: %v, want 404 snapshot not found", err)
	}
	if _, err := c.FromSnapshot(ctx, "snap-never", nil); !box.IsNotFound(err) {
		t.Errorf("restore of an unknown snapshot: %v, want 404", err)
	}
	boxes, err := c.List(ctx, nil)
	if err != nil || len(boxes) != 1 {
		t.Errorf("boxes after failed restores = %+v, %v; want only the first restore", boxes, err)
	}
}

func TestSnapshotsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	var want box.Snapshot
	t.Run("first", func(t *testing.T) {
		srv := boxtest.NewServer(t, boxtest.WithDataDir(dir))
		b := newBox(t, srv, &box.CreateParams{Name: "src"})
		if err := b.Files.WriteText(ctx, "state.txt", "from before the restart"); err != nil {
			t.Fatal(err)
		}
		s, err := b.Snapshot(ctx, "persist")
		if err != nil {
			t.Fatal(err)
		}
		want = *s
	})
	srv := boxtest.NewServer(t, boxtest.WithDataDir(dir))
	b, err := srv.Client().GetByName(ctx, "src", nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.ListSnapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]box.Snapshot{want}, list); diff != "" {
		t.Errorf("snapshots after a restart (-before +after):\n%s", diff)
	}
	restored, err := srv.Client().FromSnapshot(ctx, want.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := restored.Files.ReadText(ctx, "state.txt"); err != nil || got != "from before the restart" {
		t.Errorf("restored file = %q, %v", got, err)
	}
}

// TestFromSnapshotFieldsOnBoxd restores a box with every create field and
// checks that boxd took them (the request body itself is checked against a
// stand-in in TestFromSnapshotForwardsEveryField).
func TestFromSnapshotFieldsOnBoxd(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, nil)
	if err := b.Files.WriteText(ctx, "f.txt", "snap"); err != nil {
		t.Fatal(err)
	}
	s, err := b.Snapshot(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	p := &box.CreateParams{
		Name: "full", Labels: []string{"team:a", "x"}, Size: box.SizeLarge, Runtime: box.RuntimeNode,
		KeepAlive: true, InitCommand: "true",
		Agent:         &box.AgentOptions{Harness: box.HarnessCustom, Model: "my-model", CustomHarness: &box.CustomHarness{Command: "python3"}},
		Git:           &box.GitOptions{Token: "ghp_x", UserName: "Bot", UserEmail: "bot@example.com"},
		Env:           map[string]string{"RESTORED": "yes"},
		AttachHeaders: map[string]map[string]string{"api.example.com": {"X-A": "b"}},
		NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkDenyAll},
		Skills:        []string{"upstash/qstash-js/qstash-js"},
		MCPServers:    []box.MCPServer{{Name: "fs", Package: "@x/fs"}},
		Browser:       true,
	}
	r, err := srv.Client().FromSnapshot(ctx, s.ID, p)
	if err != nil {
		t.Fatal(err)
	}
	in, err := r.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{in.Name, in.Labels, in.Size, in.Runtime, in.KeepAlive, in.Harness, in.Model, in.NetworkPolicy.Mode, in.EnabledSkills, in.Browser}
	want := []any{"full", []string{"team:a", "x"}, box.SizeLarge, box.RuntimeNode, true, box.HarnessCustom, box.Model("my-model"), box.NetworkDenyAll, []string{"upstash/qstash-js/qstash-js"}, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restored box (-want +got):\n%s", diff)
	}
	if run := mustRun(t, r, `echo "$RESTORED $(cat f.txt)"`); run.Stdout != "yes snap\n" {
		t.Errorf("env and files of the restored box: %+v", run)
	}
	// The same validation as create.
	if _, err := srv.Client().FromSnapshot(ctx, s.ID, &box.CreateParams{Labels: []string{"has space"}}); err == nil {
		t.Error("an invalid label was accepted")
	}
	for _, body := range []string{
		`{"snapshot_id":"` + s.ID + `","size":"huge"}`,
		`{"snapshot_id":"` + s.ID + `","ttl":60}`,
		`{"snapshot_id":"` + s.ID + `","ephemeral":true,"ttl":259201}`,
		`{"size":"small"}`,
	} {
		if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/from-snapshot", body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("from-snapshot %s: %d %s, want 400", body, resp.StatusCode, resp.body)
		}
	}
	if resp := rawRequest(t, srv, http.MethodPost, "/v2/box/from-snapshot", `{"snapshot_id":"`+s.ID+`","name":"full"}`); resp.StatusCode != http.StatusConflict {
		t.Errorf("from-snapshot with a taken name: %d %s, want 409", resp.StatusCode, resp.body)
	}
	boxes, _ := srv.Client().List(ctx, nil)
	if names := len(boxes); names != 2 {
		t.Errorf("%d boxes after refused restores, want 2", names)
	}
	if !slices.ContainsFunc(boxes, func(i box.Info) bool { return i.Name == "full" }) {
		t.Errorf("boxes = %+v", boxes)
	}
}

// TestFromSnapshotKeepsRuntimeAndSize: a snapshot remembers the runtime
// and the size of its box, and a box created from it gets them unless it
// asks for others. A python box's snapshot used to come back as node.
func TestFromSnapshotKeepsRuntimeAndSize(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Runtime: box.RuntimePython, Size: box.SizeMedium})
	s, err := b.Snapshot(ctx, "py")
	if err != nil {
		t.Fatal(err)
	}
	if s.Runtime != box.RuntimePython || s.Size != box.SizeMedium {
		t.Errorf("snapshot of a python medium box: runtime %q size %q", s.Runtime, s.Size)
	}
	list, err := b.ListSnapshots(ctx)
	if err != nil || len(list) != 1 || list[0].Runtime != box.RuntimePython || list[0].Size != box.SizeMedium {
		t.Errorf("listed snapshots: %+v, %v", list, err)
	}

	inherited, err := srv.Client().FromSnapshot(ctx, s.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in := inherited.Info(); in.Runtime != box.RuntimePython || in.Size != box.SizeMedium {
		t.Errorf("box from the snapshot: runtime %q size %q, want the snapshot's", in.Runtime, in.Size)
	}
	chosen, err := srv.Client().FromSnapshot(ctx, s.ID, &box.CreateParams{Runtime: box.RuntimeNode, Size: box.SizeSmall})
	if err != nil {
		t.Fatal(err)
	}
	if in := chosen.Info(); in.Runtime != box.RuntimeNode || in.Size != box.SizeSmall {
		t.Errorf("box from the snapshot with its own runtime and size: runtime %q size %q", in.Runtime, in.Size)
	}
}
