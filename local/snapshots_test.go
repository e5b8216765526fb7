package local_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

func snapshotOf(t *testing.T, c *rawClient, boxID, name string) map[string]any {
	t.Helper()
	r := c.do("POST", "/v2/box/"+boxID+"/snapshots", map[string]string{"name": name}, nil)
	wantOK(t, "snapshot", r)
	var s map[string]any
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSnapshotAPI(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)

	r := c.do("GET", "/v2/box/"+b.ID()+"/snapshots", nil, nil)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"snapshots":[]}` {
		t.Errorf("list of a box without snapshots: %s", r)
	}
	s := snapshotOf(t, c, b.ID(), "first")
	// The wire's fields, and the size of the box it was taken of (boxd's
	// own; a box created without a runtime has none to name).
	if diff := cmp.Diff([]string{"box_id", "created_at", "id", "name", "size", "size_bytes", "status"}, slices.Sorted(maps.Keys(s))); diff != "" {
		t.Errorf("snapshot keys (-want +got):\n%s", diff)
	}
	id, _ := s["id"].(string)
	fi, err := os.Stat(filepath.Join(srv.DataDir(), "snapshots", id+".tar.zst"))
	if err != nil {
		t.Fatal(err)
	}
	if s["status"] != "ready" || s["box_id"] != b.ID() || s["size_bytes"] != float64(fi.Size()) {
		t.Errorf("snapshot %v; archive is %d bytes", s, fi.Size())
	}

	wantError(t, "snapshot of an unknown box", c.do("POST", "/v2/box/box-nope/snapshots", map[string]string{"name": "x"}, nil), 404, "box not found")
	wantError(t, "list of an unknown box", c.do("GET", "/v2/box/box-nope/snapshots", nil, nil), 404, "box not found")
	wantError(t, "snapshot without a name", c.do("POST", "/v2/box/"+b.ID()+"/snapshots", map[string]string{"name": " "}, nil), 400, "name")
	wantError(t, "snapshot without a body", c.do("POST", "/v2/box/"+b.ID()+"/snapshots", nil, nil), 400)
	wantError(t, "snapshot with a long name", c.do("POST", "/v2/box/"+b.ID()+"/snapshots", map[string]string{"name": strings.Repeat("n", 257)}, nil), 400, "name")
	wantError(t, "delete of an unknown snapshot", c.do("DELETE", "/v2/box/"+b.ID()+"/snapshots/snap-nope", nil, nil), 404, "snapshot not found")
	wantError(t, "delete in an unknown box", c.do("DELETE", "/v2/box/box-nope/snapshots/"+id, nil, nil), 404, "box not found")

	wantError(t, "from-snapshot without a body", c.do("POST", "/v2/box/from-snapshot", nil, nil), 400)
	wantError(t, "from-snapshot without an id", c.do("POST", "/v2/box/from-snapshot", map[string]any{"name": "x"}, nil), 400, "snapshot_id")
	wantError(t, "from-snapshot of an unknown snapshot", c.do("POST", "/v2/box/from-snapshot", map[string]any{"snapshot_id": "snap-nope"}, nil), 404, "snapshot not found")
	wantError(t, "from-snapshot with a bad runtime", c.do("POST", "/v2/box/from-snapshot", map[string]any{"snapshot_id": id, "runtime": "cobol"}, nil), 400, "runtime")

	// Account-wide deletes: ids and all=true are exclusive; all=false needs
	// ids; empty, blank or null ids are never "all".
	for _, bad := range []struct{ query, body string }{
		{"?all=true", `{"ids":["` + id + `"]}`},
		{"?all=false", `{}`},
		{"", `{"ids":[]}`},
		{"", `{"ids":["", "x"]}`},
		{"", `{"ids":null}`},
		{"?all=true", `{"ids":[]}`},
	} {
		wantError(t, "DELETE snapshots"+bad.query+" "+bad.body, c.do("DELETE", "/v2/box/snapshots"+bad.query, bad.body, nil), 400)
	}
	wantError(t, "DELETE snapshots with a broken body", c.do("DELETE", "/v2/box/snapshots", `{"ids":`, nil), 400)
	if r := c.do("GET", "/v2/box/"+b.ID()+"/snapshots", nil, nil); !strings.Contains(string(r.body), id) {
		t.Fatalf("snapshot gone after refused deletes: %s", r)
	}

	snapshotOf(t, c, b.ID(), "second")
	r = c.do("DELETE", "/v2/box/snapshots?all=true", `{}`, nil)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"deleted":2}` {
		t.Errorf("delete all: %s", r)
	}
	if _, err := os.Stat(fi.Name()); err == nil {
		t.Error("archive left after delete")
	}
	if ents, _ := os.ReadDir(filepath.Join(srv.DataDir(), "snapshots")); len(ents) != 0 {
		t.Errorf("snapshot directory after delete-all: %v", ents)
	}
	// Without ids (the 0.5.5 SDK) and without a body at all.
	for _, body := range []any{`{}`, nil} {
		r = c.do("DELETE", "/v2/box/snapshots", body, nil)
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"deleted":0}` {
			t.Errorf("delete all with body %v: %s", body, r)
		}
	}
}

// TestSnapshotFreezesAndThaws checks that a snapshot leaves a running box
// running and a paused box paused.
func TestSnapshotFreezesAndThaws(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	r, err := b.Exec.Command(ctx, `(n=0; while :; do n=$((n+1)); echo $n > counter; sleep 0.01; done) >/dev/null 2>&1 &`)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("start counter: %+v, %v", r, err)
	}
	counter := func() int {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(srv.DataDir(), "boxes", b.ID(), "fs", "workspace", "home", "counter"))
		if err != nil {
			return -1
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
		return n
	}
	advances := func() bool {
		n := counter()
		return waitFor(10*time.Second, func() bool { return counter() > n+2 })
	}
	if !advances() {
		ps, _ := b.Exec.Command(ctx, "ps -ef; ls -l; cat counter")
		t.Fatalf("counter does not run: %d; %+v", counter(), ps)
	}

	snapshotOf(t, c, b.ID(), "running")
	if !advances() {
		t.Error("the box's processes stay frozen after a snapshot")
	}
	if st, err := b.Status(ctx); err != nil || st != box.StatusIdle {
		t.Errorf("status after snapshot = %q, %v", st, err)
	}

	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	snapshotOf(t, c, b.ID(), "paused")
	n := counter()
	time.Sleep(200 * time.Millisecond)
	if counter() != n {
		t.Error("a paused box was thawed by a snapshot")
	}
	if st, err := b.Status(ctx); err != nil || st != box.StatusPaused {
		t.Errorf("status after snapshot of a paused box = %q, %v", st, err)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if !advances() {
		t.Error("counter does not run after resume")
	}
}

// hostile is a zstd-compressed tar with a link out of the box and a file written
// through it, and a name climbing out of the box's directory.
func hostile(t *testing.T, outside string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for _, h := range []*tar.Header{
		{Name: "workspace/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "workspace/home/ok.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "workspace/home/esc", Typeflag: tar.TypeSymlink, Linkname: outside},
		{Name: "workspace/home/esc/pwned", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "workspace/../../../pwned", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte("hi"))
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

func TestRestoreRefusesDamagedArchives(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	if err := b.Files.WriteText(t.Context(), "data.txt", strings.Repeat("data ", 1000)); err != nil {
		t.Fatal(err)
	}
	id := snapshotOf(t, c, b.ID(), "s")["id"].(string)
	path := filepath.Join(srv.DataDir(), "snapshots", id+".tar.zst")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for name, content := range map[string][]byte{
		"hostile":   hostile(t, outside),
		"truncated": good[:len(good)/2],
		"garbage":   []byte("not an archive"),
	} {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		r := c.do("POST", "/v2/box/from-snapshot", map[string]any{"snapshot_id": id, "name": "r-" + name}, nil)
		wantError(t, "restore of a "+name+" archive", r, http.StatusInternalServerError)
		t.Logf("%s: %s", name, r.body)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("restore wrote outside the box: %v", ents)
	}
	for _, p := range []string{filepath.Join(srv.DataDir(), "pwned"), filepath.Join(filepath.Dir(srv.DataDir()), "pwned")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	// Failed restores leave no box behind, in the records or on disk.
	boxes, err := srv.Client().List(t.Context(), nil)
	if err != nil || len(boxes) != 1 {
		t.Errorf("boxes after failed restores: %+v, %v", boxes, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(srv.DataDir(), "boxes")); len(ents) != 1 {
		t.Errorf("box directories after failed restores: %v", ents)
	}

	// The real archive still restores.
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := srv.Client().FromSnapshot(t.Context(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Files.ReadText(t.Context(), "data.txt"); err != nil || len(got) != 5000 {
		t.Errorf("restored data.txt: %d bytes, %v", len(got), err)
	}
	// Its files belong to the new box's own host uid (when boxd can
	// give them away), the one its tree has, not root's or the source
	// box's.
	if os.Geteuid() == 0 && isolation(t) == "bwrap" {
		owner := func(box, rel string) (uid, gid uint32) {
			t.Helper()
			fi, err := os.Lstat(filepath.Join(srv.DataDir(), "boxes", box, "fs", rel))
			if err != nil {
				t.Fatal(err)
			}
			return fileOwner(fi)
		}
		fu, fg := owner(r.ID(), "workspace/home/data.txt")
		tu, tg := owner(r.ID(), "workspace")
		su, _ := owner(b.ID(), "workspace")
		if fu != tu || fg != tg || fu == 0 || fu == su {
			t.Errorf("restored file's owner %d:%d; the box's tree is %d:%d, the source box's %d", fu, fg, tu, tg, su)
		}
	}
}

// TestSnapshotConcurrency takes snapshots while exec calls, pauses and a
// delete come in: every call ends, and nothing is left behind.
func TestSnapshotConcurrency(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	if err := b.Files.WriteText(t.Context(), "big.txt", strings.Repeat("0123456789", 1<<18)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			r := c.do("POST", "/v2/box/"+b.ID()+"/snapshots", map[string]string{"name": "c" + strconv.Itoa(i)}, nil)
			wantOK(t, "concurrent snapshot", r)
		})
		wg.Go(func() {
			res := decodeExec(t, "exec during snapshots", c.do("POST", "/v2/box/"+b.ID()+"/exec", execBody("echo "+strconv.Itoa(i)+" >> log.txt"), nil))
			if *res.ExitCode != 0 {
				t.Errorf("exec during snapshots: %+v", res)
			}
		})
	}
	wg.Go(func() {
		wantOK(t, "pause during snapshots", c.do("POST", "/v2/box/"+b.ID()+"/pause", nil, nil))
		wantOK(t, "resume during snapshots", c.do("POST", "/v2/box/"+b.ID()+"/resume", nil, nil))
	})
	wg.Wait()
	if r := c.do("GET", "/v2/box/"+b.ID()+"/snapshots", nil, nil); strings.Count(string(r.body), `"ready"`) != 4 {
		t.Errorf("snapshots: %s", r)
	}
	res := decodeExec(t, "exec after snapshots", c.do("POST", "/v2/box/"+b.ID()+"/exec", execBody("wc -l < log.txt"), nil))
	if strings.TrimSpace(res.Output) != "4" {
		t.Errorf("log.txt has %q lines", res.Output)
	}

	// A delete while a snapshot is being taken: the snapshot fails with 404
	// or completes; the box is gone either way, its files too.
	done := make(chan response, 1)
	go func() {
		done <- c.do("POST", "/v2/box/"+b.ID()+"/snapshots", map[string]string{"name": "racing"}, nil)
	}()
	time.Sleep(5 * time.Millisecond)
	wantOK(t, "delete during a snapshot", c.do("DELETE", "/v2/box/"+b.ID(), nil, nil))
	if r := <-done; r.status != http.StatusOK {
		wantError(t, "snapshot of a box deleted meanwhile", r, http.StatusNotFound, "box not found")
	}
	if _, err := os.Stat(filepath.Join(srv.DataDir(), "boxes", b.ID())); !os.IsNotExist(err) {
		t.Errorf("box directory after delete: %v", err)
	}
}
