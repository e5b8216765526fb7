package box_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFileStreams writes a file from a reader of unknown length and reads
// it back whole and in ranges, with progress.
func TestFileStreams(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	data := randomBytes(t, 9<<20+123)
	var last, calls int64
	n, err := b.Files.WriteFrom(ctx, "big/data.bin", io.MultiReader(bytes.NewReader(data[:1000]), bytes.NewReader(data[1000:])), &box.TransferParams{
		Progress: func(done, total int64) {
			if done < last || total != -1 {
				t.Errorf("progress went %d → %d of %d", last, done, total)
			}
			last, calls = done, calls+1
		},
	})
	if err != nil || n != int64(len(data)) || last != n || calls == 0 {
		t.Fatalf("WriteFrom = %d, %v (progress at %d after %d calls)", n, err, last, calls)
	}
	// progress checks what a reader reports: rising, up to the bytes it
	// yielded, against the total it was given.
	type report struct{ done, total, calls int64 }
	progress := func(rp *report) *box.TransferParams {
		return &box.TransferParams{Progress: func(done, total int64) {
			if done <= rp.done {
				t.Errorf("progress went %d → %d", rp.done, done)
			}
			rp.done, rp.total, rp.calls = done, total, rp.calls+1
		}}
	}
	var rp report
	r, err := b.Files.Open(ctx, "big/data.bin", progress(&rp))
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != int64(len(data)) {
		t.Errorf("Size = %d", r.Size())
	}
	var got bytes.Buffer
	if _, err := io.Copy(&got, r); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("Open: %d bytes, %v", got.Len(), err)
	}
	r.Close()
	if rp.done != int64(len(data)) || rp.total != int64(len(data)) || rp.calls < 2 {
		t.Errorf("Open's progress: %+v", rp)
	}
	for _, rg := range [][2]int64{{0, 10}, {5 << 20, 5 << 20}, {int64(len(data)) - 7, 100}, {3, -1}, {int64(len(data)), 5}, {math.MaxInt64 - 9, 1}} {
		var rp report
		r, err := b.Files.OpenRange(ctx, "big/data.bin", rg[0], rg[1], progress(&rp))
		if err != nil {
			t.Fatalf("OpenRange %v: %v", rg, err)
		}
		all, err := io.ReadAll(r)
		r.Close()
		start := min(rg[0], int64(len(data)))
		end := int64(len(data))
		if rg[1] >= 0 {
			end = min(end, start+rg[1])
		}
		if err != nil || !bytes.Equal(all, data[start:end]) {
			t.Errorf("OpenRange %v: %d bytes, %v; want %d", rg, len(all), err, end-start)
		}
		if rp.done != end-start || rp.calls > 0 && rp.total != rg[1] {
			t.Errorf("OpenRange %v's progress: %+v, want %d done of %d", rg, rp, end-start, rg[1])
		}
	}
	var sink bytes.Buffer
	if n, err := b.Files.DownloadTo(ctx, "big/data.bin", &sink, nil); err != nil || n != int64(len(data)) || !bytes.Equal(sink.Bytes(), data) {
		t.Errorf("DownloadTo = %d, %v", n, err)
	}
	// A reader that fails leaves the old content.
	_, err = b.Files.WriteFrom(ctx, "big/data.bin", io.MultiReader(bytes.NewReader(data[:5000]), iotestErr{}), nil)
	if err == nil {
		t.Fatal("WriteFrom from a failing reader succeeded")
	}
	if fi, err := b.Files.Stat(ctx, "big/data.bin", nil); err != nil || fi.Size != int64(len(data)) {
		t.Errorf("after a failed WriteFrom: %+v, %v", fi, err)
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("the source broke") }

// TestFileErrorsFollowIOFS: every file call fails with the io/fs error
// that what happened means, and stays a *box.Error with the server's
// status: a missing path, an existing target and a refused one.
func TestFileErrorsFollowIOFS(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	local := filepath.Join(t.TempDir(), "f.txt")
	if err := os.WriteFile(local, []byte("local"), 0o644); err != nil {
		t.Fatal(err)
	}
	localDir := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(localDir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(localDir, "sub", "f.txt"), []byte("tree"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := randomBytes(t, 200<<10) // above Write's small size: sent raw
	small := []byte("small")
	// Calls that write where they cannot, given a directory to put the
	// file under: /proc takes no new files (404), /usr is read-only (403).
	writes := func(dir string) map[string]func() error {
		return map[string]func() error{
			"Write small": func() error { return b.Files.Write(ctx, dir+"/x", small) },
			"Write large": func() error { return b.Files.Write(ctx, dir+"/x", big) },
			"WriteText":   func() error { return b.Files.WriteText(ctx, dir+"/x", "text") },
			"WriteFrom": func() error {
				_, err := b.Files.WriteFrom(ctx, dir+"/x", strings.NewReader("from"), nil)
				return err
			},
			"Upload LocalPath": func() error {
				return b.Files.Upload(ctx, []box.UploadFile{{LocalPath: local, Destination: dir + "/x"}})
			},
			"Upload Reader": func() error {
				return b.Files.Upload(ctx, []box.UploadFile{{Reader: bytes.NewReader(big), Destination: dir + "/x"}})
			},
			// dir itself exists: the files' upload fails, not a mkdir.
			"UploadDir": func() error { return b.Files.UploadDir(ctx, localDir, dir, nil) },
			"Mkdir":     func() error { return b.Files.Mkdir(ctx, dir+"/x", nil) },
			"Mkdir -p":  func() error { return b.Files.Mkdir(ctx, dir+"/x/y", &box.MkdirParams{Parents: true}) },
			"Rename to": func() error { return b.Files.Rename(ctx, "here.txt", dir+"/x") },
		}
	}
	// Calls that read from where they cannot.
	reads := func(p string) map[string]func() error {
		return map[string]func() error{
			"Read":       func() error { _, err := b.Files.Read(ctx, p); return err },
			"ReadText":   func() error { _, err := b.Files.ReadText(ctx, p); return err },
			"ReadRange":  func() error { _, err := b.Files.ReadRange(ctx, p, 0, 1); return err },
			"Open":       func() error { _, err := b.Files.Open(ctx, p, nil); return err },
			"OpenRange":  func() error { _, err := b.Files.OpenRange(ctx, p, 0, 1, nil); return err },
			"DownloadTo": func() error { _, err := b.Files.DownloadTo(ctx, p, io.Discard, nil); return err },
			"FS ReadFile": func() error {
				_, err := b.Files.FS(ctx, "/").ReadFile(strings.TrimPrefix(b.Cwd()+"/"+p, "/"))
				return err
			},
		}
	}
	// Calls on directories that cannot be listed.
	lists := func(p string) map[string]func() error {
		return map[string]func() error{
			"List": func() error { _, err := b.Files.List(ctx, p); return err },
			"Download": func() error {
				_, err := b.Files.Download(ctx, &box.DownloadParams{Folder: p, Dest: t.TempDir()})
				return err
			},
			"Download -r": func() error {
				_, err := b.Files.Download(ctx, &box.DownloadParams{Folder: p, Dest: t.TempDir(), Recursive: true})
				return err
			},
			"DownloadDir": func() error { return b.Files.DownloadDir(ctx, p, t.TempDir(), nil) },
			"FS ReadDir": func() error {
				_, err := b.Files.FS(ctx, "/").ReadDir(strings.TrimPrefix(b.Cwd()+"/"+p, "/"))
				return err
			},
		}
	}
	type check struct {
		status int
		want   error
	}
	cases := map[string]check{}
	calls := map[string]func() error{}
	add := func(what string, c check, fns map[string]func() error) {
		for name, fn := range fns {
			calls[name+" "+what] = fn
			cases[name+" "+what] = c
		}
	}
	notExist := check{http.StatusNotFound, fs.ErrNotExist}
	exist := check{http.StatusConflict, fs.ErrExist}
	permission := check{http.StatusForbidden, fs.ErrPermission}
	missing := "no/such/file"
	add("of a missing file", notExist, reads(missing))
	add("of a missing directory", notExist, lists(missing))
	add("into /proc", notExist, writes("/proc"))
	add("of a missing file", notExist, map[string]func() error{
		"Stat":         func() error { _, err := b.Files.Stat(ctx, missing, nil); return err },
		"Stat -L":      func() error { _, err := b.Files.Stat(ctx, missing, &box.StatParams{Follow: true}); return err },
		"Remove":       func() error { return b.Files.Remove(ctx, missing, nil) },
		"Remove -r":    func() error { return b.Files.Remove(ctx, missing, &box.RemoveParams{Recursive: true}) },
		"Rename":       func() error { return b.Files.Rename(ctx, missing, "elsewhere") },
		"Mkdir":        func() error { return b.Files.Mkdir(ctx, missing, nil) },
		"Cd":           func() error { return b.Cd(ctx, missing) },
		"FS Stat":      func() error { _, err := b.Files.FS(ctx, "").Stat(missing); return err },
		"FS Open":      func() error { _, err := b.Files.FS(ctx, "").Open(missing); return err },
		"FS Open file": func() error { _, err := b.Files.FS(ctx, "no").Open("such/file"); return err },
	})
	mustRun(t, b, "echo here > here.txt && mkdir -p empty full/sub && echo > full/sub/f && echo secret > secret && chmod 000 secret && mkdir locked && chmod 000 locked")
	add("of an existing target", exist, map[string]func() error{
		"Mkdir":                 func() error { return b.Files.Mkdir(ctx, "empty", nil) },
		"Rename onto non-empty": func() error { return b.Files.Rename(ctx, "empty", "full") },
		"Remove non-empty":      func() error { return b.Files.Remove(ctx, "full", nil) },
	})
	add("into /usr", permission, writes("/usr"))
	add("of /etc", permission, map[string]func() error{
		"Remove": func() error { return b.Files.Remove(ctx, "/etc", &box.RemoveParams{Recursive: true}) },
	})
	// A box user cannot read a file or list a directory of mode 000 (root,
	// in a box without isolation, can).
	if mustRun(t, b, "id -u").Stdout != "0\n" {
		add("of an unreadable file", permission, reads("secret"))
		add("of an unreadable directory", permission, lists("locked"))
		add("in an unreadable directory", permission, map[string]func() error{
			"Stat": func() error { _, err := b.Files.Stat(ctx, "locked/x", nil); return err },
			"Cd":   func() error { return b.Cd(ctx, "locked/x") },
		})
	} else {
		t.Log("the box runs as root: no unreadable files")
	}
	for name, fn := range calls {
		c := cases[name]
		err := fn()
		var apiErr *box.Error
		if !errors.Is(err, c.want) || !errors.As(err, &apiErr) || apiErr.StatusCode != c.status {
			t.Errorf("%s = %v, want %v and a %d *box.Error", name, err, c.want, c.status)
		}
	}
	if b.Cwd() != box.WorkspaceHome {
		t.Errorf("a failed Cd moved to %s", b.Cwd())
	}
	// An answer about the box rather than the path is no io/fs error: a
	// deleted box's files are not missing files.
	gone := newBox(t, srv, nil)
	if err := gone.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]func() error{
		"Read":   func() error { _, err := gone.Files.Read(ctx, "here.txt"); return err },
		"Write":  func() error { return gone.Files.Write(ctx, "x", big) },
		"Remove": func() error { return gone.Files.Remove(ctx, "x", nil) },
	} {
		err := fn()
		var apiErr *box.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s in a deleted box = %v, want a 404 *box.Error that is not fs.ErrNotExist", name, err)
		}
	}
	for name, err := range map[string]error{
		"Open":      func() error { _, err := b.Files.Open(ctx, "", nil); return err }(),
		"OpenRange": func() error { _, err := b.Files.OpenRange(ctx, "x", -1, 1, nil); return err }(),
		"WriteFrom": func() error { _, err := b.Files.WriteFrom(ctx, "x", nil, nil); return err }(),
		"UploadDir": b.Files.UploadDir(ctx, "", "x", nil),
	} {
		if !errors.Is(err, box.ErrInvalid) {
			t.Errorf("%s with a bad argument = %v, want box.ErrInvalid", name, err)
		}
	}
}

// makeTree writes a local tree of n files in nested directories, with an
// empty directory, and returns its files' contents by slash path.
func makeTree(t testing.TB, dir string, n int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	r := mrand.New(mrand.NewPCG(1, 2))
	for i := range n {
		rel := filepath.Join("d"+strings.Repeat("x", i%3), "sub"+string(rune('a'+i%5)), "f"+itoaTest(i)+".bin")
		data := make([]byte, r.IntN(2000))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
		want[filepath.ToSlash(rel)] = data
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	return want
}

func itoaTest(i int) string { return strconv.Itoa(i) }

// readTree returns the files of a local tree by slash path, and its
// directories.
func readTree(t testing.TB, dir string) (map[string][]byte, []string) {
	t.Helper()
	files := map[string][]byte{}
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			dirs = append(dirs, filepath.ToSlash(rel))
			return nil
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, dirs
}

// TestTreeTransfers copies a tree of files up and back down, and checks
// every byte, the empty directory, and the progress totals.
func TestTreeTransfers(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	src := t.TempDir()
	want := makeTree(t, src, 600)
	var total int64
	for _, d := range want {
		total += int64(len(d))
	}
	var up int64
	if err := b.Files.UploadDir(ctx, src, "tree", &box.TransferParams{Progress: func(done, tot int64) { up = done; total = tot }}); err != nil {
		t.Fatal(err)
	}
	if up != total {
		t.Errorf("upload progress ended at %d of %d", up, total)
	}
	if got := mustRun(t, b, "find tree -type f | wc -l; find tree -type d -empty").Stdout; got != "600\ntree/empty/deeper\n" {
		t.Errorf("in the box: %q", got)
	}
	dst := filepath.Join(t.TempDir(), "back")
	var down int64
	if err := b.Files.DownloadDir(ctx, "tree", dst, &box.TransferParams{Progress: func(done, _ int64) { down = done }}); err != nil {
		t.Fatal(err)
	}
	got, dirs := readTree(t, dst)
	if len(got) != len(want) || down != total {
		t.Errorf("downloaded %d files, %d bytes; want %d, %d", len(got), down, len(want), total)
	}
	for p, d := range want {
		if !bytes.Equal(got[p], d) {
			t.Errorf("%s differs after the round trip", p)
			break
		}
	}
	if !strings.Contains(strings.Join(dirs, " "), "empty/deeper") {
		t.Errorf("the empty directory did not come back: %v", dirs)
	}
}

// TestFSView checks the io/fs view against fstest.TestFS and uses it as
// http.FileServerFS and template.ParseFS do.
func TestFSView(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	mustRun(t, b, `mkdir -p site/css site/empty && printf '<h1>{{.}}</h1>' > site/index.tmpl && printf 'body{}' > site/css/a.css && head -c 100000 /dev/urandom > site/blob.bin && ln -s css/a.css site/link.css`)
	fsys := b.Files.FS(ctx, "site")
	if err := fstest.TestFS(fsys, "index.tmpl", "css/a.css", "blob.bin", "link.css", "empty"); err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.ParseFS(fsys, "*.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tmpl.ExecuteTemplate(&out, "index.tmpl", "hi"); err != nil || out.String() != "<h1>hi</h1>" {
		t.Errorf("template = %q, %v", out.String(), err)
	}
	hs := httptest.NewServer(http.FileServerFS(fsys))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/css/a.css")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "body{}" {
		t.Errorf("FileServerFS = %d %q", resp.StatusCode, body)
	}
	if _, err := fsys.Open("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing name = %v", err)
	}
	if _, err := fsys.Open("../x"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Open of ../x = %v", err)
	}
}

// TestDownloadLeavesNoPartialFiles: a file of a download that cannot be
// read is reported and the others are all copied; a download cancelled
// in the middle leaves nothing cut behind: each local file is whole or
// untouched, and no temporary file stays.
func TestDownloadLeavesNoPartialFiles(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	if mustRun(t, b, "id -u").Stdout == "0\n" {
		t.Skip("the box runs as root: no unreadable file to fail the download")
	}
	// 12 files of 4 MiB, and one in the middle that cannot be read.
	mustRun(t, b, "mkdir out && for i in $(seq -w 0 11); do head -c 4194304 /dev/urandom > out/f$i; done && echo x > out/f05b && chmod 000 out/f05b")
	for _, cancelled := range []bool{false, true} {
		for _, recursive := range []bool{false, true} {
			dest := t.TempDir()
			// A file that was there before keeps its content unless it is
			// replaced whole.
			if err := os.WriteFile(filepath.Join(dest, "f10"), []byte("before"), 0o644); err != nil {
				t.Fatal(err)
			}
			dctx, cancel := context.WithCancel(ctx)
			progress := func(done, _ int64) {
				if cancelled && done > 10<<20 {
					cancel()
				}
			}
			written, err := b.Files.Download(dctx, &box.DownloadParams{Folder: "out", Dest: dest, Recursive: recursive, Progress: progress})
			cancel()
			if cancelled {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Download (recursive %v) cancelled in the middle = %v, want context.Canceled", recursive, err)
				}
			} else {
				var se *box.SkippedError
				if !errors.As(err, &se) || len(se.Skipped) != 1 || se.Skipped[0].Path != "/workspace/home/out/f05b" || !errors.Is(se.Skipped[0].Err, fs.ErrPermission) {
					t.Fatalf("Download (recursive %v) = %v, want the unreadable file alone skipped, with fs.ErrPermission", recursive, err)
				}
				if len(written) != 12 {
					t.Errorf("Download (recursive %v) wrote %d files, want the 12 readable ones", recursive, len(written))
				}
			}
			checkWholeOrUntouched(t, b, dest)
		}
	}
}

// checkWholeOrUntouched checks that every file in dest is a whole copy of
// the box file out/<name>, or f10 as it was before, and that no
// temporary file is left.
func checkWholeOrUntouched(t *testing.T, b *box.Box, dest string) {
	t.Helper()
	ctx := t.Context()
	entries, err := os.ReadDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got, err := os.ReadFile(filepath.Join(dest, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "f10" && string(got) == "before" {
			continue
		}
		want, err := b.Files.Read(ctx, "out/"+e.Name())
		if err != nil {
			t.Errorf("%s is left locally: %v", e.Name(), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is left with %d of its %d bytes", e.Name(), len(got), len(want))
		}
	}
}
