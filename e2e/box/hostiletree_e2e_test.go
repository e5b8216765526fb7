package box_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// skipped returns what err, a *box.SkippedError, says was left out, as
// box path → the error's text.
func skipped(t *testing.T, err error) map[string]error {
	t.Helper()
	var se *box.SkippedError
	if !errors.As(err, &se) {
		t.Fatalf("error = %v, want a *box.SkippedError", err)
	}
	out := map[string]error{}
	for _, s := range se.Skipped {
		out[s.Path] = s.Err
	}
	return out
}

// regularFiles returns the regular files below dir, relative, with their
// content.
func regularFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDownloadDirLinkLoops: a tree with two links to "." in each of its
// six levels (2^6 ways down each level, without end) downloads at once:
// links to directories are never followed. The links that stay in the
// tree come back as links; those that leave it are reported, not
// followed. A link to a file brings the file's content, from the box.
func TestDownloadDirLinkLoops(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	mustRun(t, b, `set -e
d=t
for i in 1 2 3 4 5 6; do
  mkdir -p $d; echo "level $i" > $d/f.txt; ln -s . $d/a; ln -s . $d/b; d=$d/l$i
done
ln -s .. t/up; ln -s /etc t/etc; ln -s f.txt t/l1/same.txt; ln -s l1/l2 t/down`)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	dst := filepath.Join(t.TempDir(), "out")
	start := time.Now()
	err := b.Files.DownloadDir(ctx, "t", dst, nil)
	took := time.Since(start)
	t.Logf("DownloadDir took %v", took)
	if ctx.Err() != nil {
		t.Fatalf("DownloadDir of a tree with link loops did not end: %v", err)
	}
	got := skipped(t, err)
	if len(got) != 2 || !errors.Is(got["/workspace/home/t/up"], box.ErrLinkToDir) || !errors.Is(got["/workspace/home/t/etc"], box.ErrLinkToDir) {
		t.Errorf("skipped %v, want t/up and t/etc as links to directories", got)
	}
	want := map[string]string{"l1/same.txt": "level 2\n"}
	d := ""
	for i := range 6 {
		want[d+"f.txt"] = "level " + string(rune('1'+i)) + "\n"
		d += "l" + string(rune('1'+i)) + "/"
	}
	if diff := cmp.Diff(want, regularFiles(t, dst)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	// The links that stay inside come back as they were.
	for _, l := range []struct{ rel, target string }{{"a", "."}, {"b", "."}, {"l1/l2/l3/a", "."}, {"l1/l2/l3/l4/l5/b", "."}, {"down", "l1/l2"}} {
		if got, err := os.Readlink(filepath.Join(dst, l.rel)); err != nil || got != l.target {
			t.Errorf("link %s = %q, %v; want → %s", l.rel, got, err, l.target)
		}
	}
	for _, p := range []string{"up", "etc"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s, a link out of the tree, is in the copy: %v", p, err)
		}
	}
	// Download with Recursive shares the walk.
	written, err := b.Files.Download(ctx, &box.DownloadParams{Folder: "t", Dest: filepath.Join(t.TempDir(), "again"), Recursive: true})
	if len(skipped(t, err)) != 2 || len(written) != len(want) {
		t.Errorf("Download wrote %d files (want %d), %v", len(written), len(want), err)
	}
}

// TestDownloadDirBounds: a tree deeper or larger than the bounds fails
// with a clear error before anything is written.
func TestDownloadDirBounds(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	mustRun(t, b, `mkdir -p deep/1/2/3/4/5/6/7/8 && touch deep/1/2/3/4/5/6/7/8/x && mkdir wide && cd wide && touch $(seq 1 50)`)
	dst := filepath.Join(t.TempDir(), "out")
	err := b.Files.DownloadDir(ctx, "deep", dst, &box.TransferParams{MaxDepth: 5})
	if !errors.Is(err, box.ErrTreeTooDeep) || !strings.Contains(err.Error(), "/workspace/home/deep/1/2/3/4/5/6") {
		t.Errorf("a tree deeper than MaxDepth = %v, want ErrTreeTooDeep naming the directory", err)
	}
	err = b.Files.DownloadDir(ctx, "wide", dst, &box.TransferParams{MaxEntries: 20})
	if !errors.Is(err, box.ErrTreeTooLarge) || !strings.Contains(err.Error(), "20") {
		t.Errorf("a tree larger than MaxEntries = %v, want ErrTreeTooLarge", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused tree made the destination: %v", err)
	}
	if err := b.Files.DownloadDir(ctx, "deep", dst, &box.TransferParams{MaxDepth: 8}); err != nil {
		t.Errorf("a tree as deep as MaxDepth = %v", err)
	}
}

// TestDownloadDirSkipsWhatItCannotRead: a FIFO, a file and a directory no
// one may read, a name that is not UTF-8 and a socket, in the middle of a
// tree, are each reported with their reason, and every other file is
// downloaded. Nothing hangs on the FIFO.
func TestDownloadDirSkipsWhatItCannotRead(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	mustRun(t, b, `set -e
mkdir -p t/sub t/m-lockeddir
for f in a.txt z.txt sub/a.txt sub/z.txt m-lockeddir/in.txt; do echo "content of $f" > t/$f; done
mkfifo t/m-fifo t/sub/m-fifo
echo secret > t/m-locked && chmod 000 t/m-locked && chmod 000 t/m-lockeddir
echo raw > "t/$(printf 'm-bad\377name')"
mkdir "t/$(printf 'm-baddir\376')" && echo x > "t/$(printf 'm-baddir\376')/in.txt"
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("t/m-socket")' 2>/dev/null || mkfifo t/m-socket`)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	dst := filepath.Join(t.TempDir(), "out")
	var done int64
	err := b.Files.DownloadDir(ctx, "t", dst, &box.TransferParams{Progress: func(d, _ int64) { done = d }})
	if ctx.Err() != nil {
		t.Fatalf("DownloadDir hung: %v", err)
	}
	want := map[string]string{}
	for _, f := range []string{"a.txt", "z.txt", "sub/a.txt", "sub/z.txt"} {
		want[f] = "content of " + f + "\n"
	}
	got := regularFiles(t, dst)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	var n int64
	for _, c := range got {
		n += int64(len(c))
	}
	if done != n {
		t.Errorf("progress ended at %d, want %d", done, n)
	}
	sk := skipped(t, err)
	var paths []string
	for p := range sk {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	h := "/workspace/home/t/"
	wantPaths := []string{h + "m-bad\uFFFDname", h + "m-baddir\uFFFD", h + "m-fifo", h + "m-locked", h + "m-lockeddir", h + "m-socket", h + "sub/m-fifo"}
	slices.Sort(wantPaths)
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Fatalf("skipped (-want +got):\n%s\nerror: %v", diff, err)
	}
	for p, why := range map[string]error{"m-fifo": box.ErrNotRegular, "sub/m-fifo": box.ErrNotRegular, "m-socket": box.ErrNotRegular, "m-bad\uFFFDname": box.ErrNameNotUTF8, "m-baddir\uFFFD": box.ErrNameNotUTF8, "m-locked": fs.ErrPermission, "m-lockeddir": fs.ErrPermission} {
		if !errors.Is(sk[h+p], why) {
			t.Errorf("%s skipped for %v, want %v", p, sk[h+p], why)
		}
	}
	// The error says how many and names them, quoted; it is not itself
	// a missing or forbidden tree.
	if msg := err.Error(); !strings.Contains(msg, "7 entries skipped") || !strings.Contains(msg, `"/workspace/home/t/m-fifo"`) || !strings.Contains(msg, "and 2 more") {
		t.Errorf("error = %v", err)
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) || box.IsNotFound(err) {
		t.Errorf("the whole copy reads as forbidden or missing: %v", err)
	}
}

// TestDownloadOfAServerWithoutTypes: against a server whose listings do
// not say what an entry is (the cloud's), links to directories are still
// found (by a stat of each directory) and not followed.
func TestDownloadOfAServerWithoutTypes(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	mustRun(t, b, `mkdir -p t/l1/l2 && ln -s . t/a && ln -s . t/l1/b && ln -s .. t/l1/l2/c && echo one > t/l1/l2/f`)
	// The same box through a proxy that drops type and target from
	// listings.
	c := untypedClient(t, srv)
	ub, err := c.Get(t.Context(), b.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	dst := filepath.Join(t.TempDir(), "out")
	err = ub.Files.DownloadDir(ctx, "t", dst, nil)
	if ctx.Err() != nil {
		t.Fatalf("DownloadDir did not end: %v", err)
	}
	sk := skipped(t, err)
	if len(sk) != 3 {
		t.Errorf("skipped %v, want the three links", sk)
	}
	for _, p := range []string{"t/a", "t/l1/b", "t/l1/l2/c"} {
		if !errors.Is(sk["/workspace/home/"+p], box.ErrLinkToDir) {
			t.Errorf("%s: %v, want ErrLinkToDir", p, sk["/workspace/home/"+p])
		}
	}
	if diff := cmp.Diff(map[string]string{"l1/l2/f": "one\n"}, regularFiles(t, dst)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// untypedClient is a client of srv through a proxy that removes type
// and target from every listing, as a server that does not send them.
func untypedClient(t *testing.T, srv *boxtest.Server) *box.Client {
	t.Helper()
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		if !strings.HasSuffix(r.Request.URL.Path, "/files/list") || r.StatusCode != http.StatusOK {
			return nil
		}
		var list struct {
			Files []map[string]any `json:"files"`
		}
		if err := json.NewDecoder(r.Body).Decode(&list); err != nil {
			return err
		}
		r.Body.Close()
		for _, f := range list.Files {
			delete(f, "type")
			delete(f, "target")
		}
		body, err := json.Marshal(list)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	ts := httptest.NewServer(rp)
	t.Cleanup(ts.Close)
	c, err := box.NewClient(box.WithAPIKey(srv.APIKey()), box.WithBaseURL(ts.URL), box.WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFSViewWalkDoesNotFollowLinkLoops: fs.WalkDir over the io/fs view
// of a tree whose every level links twice to itself ends at once: ReadDir
// reports links as links, as os.DirFS does, while Open and Stat follow
// them. The view still passes fstest.TestFS.
func TestFSViewWalkDoesNotFollowLinkLoops(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	mustRun(t, b, `set -e
d=t
for i in 1 2 3 4 5 6; do mkdir -p $d; echo "level $i" > $d/f.txt; ln -s . $d/a; ln -s . $d/b; d=$d/l$i; done
ln -s f.txt t/link.txt`)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	fsys := b.Files.FS(ctx, "t")
	var files, links, dirs int
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			links++
		case d.IsDir():
			dirs++
		default:
			files++
		}
		return nil
	})
	if err != nil || ctx.Err() != nil {
		t.Fatalf("WalkDir: %v (context: %v)", err, ctx.Err())
	}
	if files != 6 || links != 13 || dirs != 6 {
		t.Errorf("walked %d files, %d links, %d directories; want 6, 13, 6", files, links, dirs)
	}
	if fi, err := fs.Stat(fsys, "l1/a"); err != nil || !fi.IsDir() {
		t.Errorf("Stat follows a link to a directory: %v, %v", fi, err)
	}
	if data, err := fs.ReadFile(fsys, "link.txt"); err != nil || string(data) != "level 1\n" {
		t.Errorf("ReadFile through a link = %q, %v", data, err)
	}
	for name, want := range map[string]string{"a": ".", "l1/l2/b": ".", "link.txt": "f.txt"} {
		if got, err := fs.ReadLink(fsys, name); err != nil || got != want {
			t.Errorf("ReadLink(%s) = %q, %v; want %q", name, got, err, want)
		}
		if fi, err := fs.Lstat(fsys, name); err != nil || fi.Mode().Type() != fs.ModeSymlink {
			t.Errorf("Lstat(%s) = %v, %v; want a link", name, fi, err)
		}
	}
	if _, err := fs.ReadLink(fsys, "f.txt"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ReadLink of a file = %v, want fs.ErrInvalid", err)
	}
	if err := fstest.TestFS(fsys, "f.txt", "a", "link.txt", "l1/l2/f.txt", "l1/l2/b"); err != nil {
		t.Error(err)
	}
}
