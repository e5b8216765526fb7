package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// warmServer is a boxd with a warm pool of n, full.
func warmServer(t *testing.T, n int, opts ...boxtest.Option) *boxtest.Server {
	t.Helper()
	opts = append(opts, boxtest.WithConfig(func(c *local.Config) { c.WarmPool = n }))
	srv := boxtest.NewServer(t, opts...)
	waitPool(t, srv, n)
	return srv
}

// waitPool waits until srv's pool is done filling, and checks it holds n.
func waitPool(t *testing.T, srv *boxtest.Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := srv.Backend().WaitWarmPool(ctx); err != nil {
		t.Fatalf("WaitWarmPool: %v", err)
	}
	if got := srv.Backend().WarmPoolSize(); got != n {
		t.Fatalf("the warm pool holds %d sandboxes, want %d", got, n)
	}
}

// fromPool reports whether box b's sandbox was claimed from the pool, by
// its log.
func fromPool(t *testing.T, b *box.Box) bool {
	t.Helper()
	logs, err := b.Logs(t.Context(), nil)
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	for _, e := range logs {
		if e.Message == "box started (from the warm pool)" {
			return true
		}
	}
	return false
}

// TestWarmPoolClaimGivesTheBoxItsIdentity: a box created while the pool
// is full runs in a pooled sandbox, which carries the box's own id (as
// BOX_ID, host name and in its files' path), the environment of its
// create, the default git identity, a host uid no other box has, and
// nothing of another box; the pool refills behind it. Creates the pool
// cannot serve (a git identity, a name that is a host name) start
// sandboxes of their own that are what they asked for.
func TestWarmPoolClaimGivesTheBoxItsIdentity(t *testing.T) {
	t.Parallel()
	srv := warmServer(t, 2)
	dir := srv.DataDir()
	ctx := t.Context()

	a, err := srv.Client().Create(ctx, &box.CreateParams{Env: map[string]string{"WHO": "a"}, Labels: []string{"first"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := srv.Client().Create(ctx, &box.CreateParams{Env: map[string]string{"WHO": "b", "ONLY_B": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*box.Box{a, b} {
		if !fromPool(t, x) {
			t.Errorf("box %s did not start from the warm pool", x.ID())
		}
	}
	mustExec(t, a, "echo secret-of-a > /tmp/a.txt && echo mine > ~/a.txt && echo ws > /workspace/home/a.txt")
	script := `echo "$BOX_ID $(hostname) $WHO ${ONLY_B:-none} $(git config user.name)|$(git config user.email) $(id -u)"; ls /tmp ~ /workspace/home | grep -c a.txt || true`
	for _, c := range []struct {
		b        *box.Box
		who, onl string
		files    string
	}{{a, "a", "none", "3"}, {b, "b", "yes", "0"}} {
		want := fmt.Sprintf("%s %s %s %s Upstash Box|box@upstash.com 1000\n%s\n", c.b.ID(), c.b.ID(), c.who, c.onl, c.files)
		if got := mustExec(t, c.b, script); got != want {
			t.Errorf("box %s:\n got %q\nwant %q", c.b.ID(), got, want)
		}
	}
	if isolation(t) == local.IsolationBwrap && os.Geteuid() == 0 {
		ua, ub := ownerOf(t, filepath.Join(dir, "boxes", a.ID(), "fs")), ownerOf(t, filepath.Join(dir, "boxes", b.ID(), "fs"))
		if ua == ub {
			t.Errorf("boxes %s and %s have the same host uid %d", a.ID(), b.ID(), ua)
		}
	}
	waitPool(t, srv, 2)

	// What the pool cannot give: a sandbox of its own.
	named, err := srv.Client().Create(ctx, &box.CreateParams{Name: "named-host", Git: &box.GitOptions{UserName: "Ada", UserEmail: "ada@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if fromPool(t, named) {
		t.Errorf("a box with a git identity and a host name started from the pool")
	}
	if got := mustExec(t, named, `echo "$(hostname) $(git config user.name) $(git config user.email)"`); got != "named-host Ada ada@example.com\n" {
		t.Errorf("the named box: %q", got)
	}
	waitPool(t, srv, 2)

	// The claimed sandboxes are the boxes' for good: deleted, they are
	// gone with their files, and the pool is what it was.
	for _, x := range []*box.Box{a, b, named} {
		if err := x.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "boxes", x.ID())); !os.IsNotExist(err) {
			t.Errorf("box %s's files after its delete: %v", x.ID(), err)
		}
	}
	if got := srv.Backend().WarmPoolSize(); got != 2 {
		t.Errorf("after the deletes the pool holds %d, want 2", got)
	}
}

// TestWarmPoolBurst: more creates at once than the pool holds all
// succeed, each box distinct (its id, its files, its host uid), some from
// the pool and the rest started, and every one runs commands.
func TestWarmPoolBurst(t *testing.T) {
	t.Parallel()
	const n = 12
	srv := warmServer(t, 4)
	ctx := t.Context()
	boxes := make([]*box.Box, n)
	var wg sync.WaitGroup
	for i := range boxes {
		wg.Go(func() {
			b, err := srv.Client().Create(ctx, &box.CreateParams{Env: map[string]string{"N": fmt.Sprint(i)}})
			if err != nil {
				t.Errorf("Create %d: %v", i, err)
				return
			}
			if got := mustExecErr(ctx, b, `echo "$N $BOX_ID" > mine && cat mine`); got != fmt.Sprintf("%d %s\n", i, b.ID()) {
				t.Errorf("box %d: %q", i, got)
			}
			boxes[i] = b
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ids, uids := map[string]bool{}, map[uint32]string{}
	pooled := 0
	for _, b := range boxes {
		if ids[b.ID()] {
			t.Errorf("box id %s given twice", b.ID())
		}
		ids[b.ID()] = true
		if fromPool(t, b) {
			pooled++
		}
		if isolation(t) == local.IsolationBwrap && os.Geteuid() == 0 {
			u := ownerOf(t, filepath.Join(srv.DataDir(), "boxes", b.ID(), "fs"))
			if other, ok := uids[u]; ok {
				t.Errorf("boxes %s and %s have host uid %d", other, b.ID(), u)
			}
			uids[u] = b.ID()
		}
	}
	if pooled < 4 || pooled == n {
		t.Errorf("%d of %d boxes came from a pool of 4", pooled, n)
	}
}

// mustExecErr runs script in b from any goroutine: a failure is its
// output.
func mustExecErr(ctx context.Context, b *box.Box, script string) string {
	r, err := b.Exec.Command(ctx, script)
	if err != nil {
		return err.Error()
	}
	return r.Stdout + r.Stderr
}

// TestWarmPoolDiesWithBoxd: closing boxd kills its pooled sandboxes and
// removes their files, and a boxd started on the same data finds nothing
// of them but starts a pool of its own.
func TestWarmPoolDiesWithBoxd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := warmServer(t, 3, boxtest.WithDataDir(dir))
	kept := newBox(t, srv, &box.CreateParams{Name: "kept-box"})
	mustExec(t, kept, "echo here > f")
	pooledIDs := func() []string {
		ents, _ := os.ReadDir(filepath.Join(dir, "boxes"))
		var ids []string
		for _, e := range ents {
			if e.Name() != kept.ID() {
				ids = append(ids, e.Name())
			}
		}
		slices.Sort(ids)
		return ids
	}
	before := pooledIDs()
	if len(before) != 3 {
		t.Fatalf("the pool's directories: %v, want 3", before)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if ids := pooledIDs(); len(ids) != 0 {
		t.Errorf("after boxd closed, pooled sandboxes' directories are left: %v", ids)
	}
	for _, p := range liveProcs() {
		if slices.Contains(before, p.box) {
			t.Errorf("a process of a pooled sandbox outlived boxd: %s", p)
		}
	}
	again := warmServer(t, 3, boxtest.WithDataDir(dir))
	if ids := pooledIDs(); len(ids) != 3 || slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(before, id) }) {
		t.Errorf("the new pool's directories %v, the old one's %v", ids, before)
	}
	b, err := again.Client().Get(t.Context(), "kept-box", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, b, "cat f"); strings.TrimSpace(got) != "here" {
		t.Errorf("the kept box's file: %q", got)
	}
}
