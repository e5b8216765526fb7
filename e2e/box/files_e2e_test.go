package box_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestFilesReadWrite(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	f := b.Files

	if err := f.WriteText(ctx, "notes/hello.txt", "héllo\nworld\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.ReadText(ctx, "/workspace/home/notes/hello.txt"); err != nil || got != "héllo\nworld\n" {
		t.Fatalf("ReadText = %q, %v", got, err)
	}
	if got := mustRun(t, b, "cat notes/hello.txt").Stdout; got != "héllo\nworld\n" {
		t.Errorf("file seen by a command = %q", got)
	}

	bin := allBytes()
	if err := f.Write(ctx, "bin.dat", bin); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Read(ctx, "bin.dat"); err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("Read binary = %v, %v", got, err)
	}
	if _, err := f.ReadText(ctx, "bin.dat"); box.StatusCode(err) != http.StatusUnprocessableEntity {
		t.Errorf("ReadText of binary = %v, want 422", err)
	}

	// Ranges: the presence of a length selects the range; 0 reads nothing.
	for _, c := range []struct {
		off, n int64
		want   []byte
	}{
		{0, 4, bin[:4]}, {250, 100, bin[250:]}, {10, 0, nil}, {300, 5, nil},
	} {
		got, err := f.ReadRange(ctx, "bin.dat", c.off, c.n)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("ReadRange(%d, %d) = %v, %v; want %v", c.off, c.n, got, err, c.want)
		}
	}
	if _, err := f.ReadRange(ctx, "bin.dat", 0, box.MaxReadRange+1); err == nil || box.StatusCode(err) != 0 {
		t.Errorf("oversized range: %v, want a client-side error", err)
	}
	if resp := rawRequest(t, srv, http.MethodGet, "/v2/box/"+b.ID()+"/files/read?path=/workspace/home/bin.dat&length=8388609", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("server range above 8 MiB: %d %s", resp.StatusCode, resp.body)
	}

	if _, err := f.Read(ctx, "missing.txt"); !box.IsNotFound(err) {
		t.Errorf("Read missing = %v, want 404", err)
	}
	if _, err := f.Read(ctx, "notes"); box.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("Read of a directory = %v, want 400", err)
	}
	if err := f.WriteText(ctx, "", "x"); err == nil {
		t.Error("empty path accepted")
	}
}

func TestFilesListStatMkdirRenameRemove(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	f := b.Files
	mustRun(t, b, "mkdir -p d/sub && printf 12345 > d/a.txt && ln -s a.txt d/link && ln -s /etc/hostname d/out")

	entries, err := f.List(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name, Path string
		IsDir      bool
		Size       int64
	}
	var got []row
	for _, e := range entries {
		if e.ModTime.IsZero() {
			t.Errorf("%s has no mod time", e.Name)
		}
		r := row{e.Name, e.Path, e.IsDir, e.Size}
		if e.Name != "a.txt" {
			r.Size = 0
		}
		got = append(got, r)
	}
	want := []row{{"a.txt", "/workspace/home/d/a.txt", false, 5}, {"link", "/workspace/home/d/link", false, 0}, {"out", "/workspace/home/d/out", false, 0}, {"sub", "/workspace/home/d/sub", true, 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if err := b.Cd(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if cwdList, err := f.List(ctx, ""); err != nil || len(cwdList) != 4 {
		t.Errorf("List of cwd = %v, %v", cwdList, err)
	}
	if err := b.Cd(ctx, ".."); err != nil {
		t.Fatal(err)
	}

	st, err := f.Stat(ctx, "d/link", nil)
	if err != nil || st.Type != box.FileTypeSymlink {
		t.Fatalf("Stat(link) = %+v, %v", st, err)
	}
	st, err = f.Stat(ctx, "d/link", &box.StatParams{Follow: true})
	if err != nil || st.Type != box.FileTypeFile || st.Size != 5 || st.Inode == 0 || st.Version == "" {
		t.Fatalf("Stat(link, follow) = %+v, %v", st, err)
	}
	v1 := st.Version
	mustRun(t, b, "printf 123456 > d/a.txt")
	if st, err := f.Stat(ctx, "d/a.txt", nil); err != nil || st.Version == v1 {
		t.Errorf("version did not change after a write: %+v, %v", st, err)
	}
	if st, err := f.Stat(ctx, "d", nil); err != nil || st.Type != box.FileTypeDirectory {
		t.Errorf("Stat(dir) = %+v, %v", st, err)
	}
	if _, err := f.Stat(ctx, "nope", nil); !box.IsNotFound(err) {
		t.Errorf("Stat missing = %v", err)
	}

	if err := f.Mkdir(ctx, "x/y/z", nil); !box.IsNotFound(err) {
		t.Errorf("Mkdir without parents = %v, want 404", err)
	}
	if err := f.Mkdir(ctx, "x/y/z", &box.MkdirParams{Parents: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.Mkdir(ctx, "x/y/z", &box.MkdirParams{Parents: true}); err != nil {
		t.Errorf("Mkdir -p of an existing dir = %v", err)
	}
	if err := f.Mkdir(ctx, "x/y/z", nil); box.StatusCode(err) != http.StatusConflict {
		t.Errorf("Mkdir of an existing dir = %v, want 409", err)
	}

	if err := f.Rename(ctx, "d/a.txt", "moved/a.txt"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.ReadText(ctx, "moved/a.txt"); err != nil || got != "123456" {
		t.Errorf("after rename = %q, %v", got, err)
	}
	if err := f.Rename(ctx, "d/a.txt", "elsewhere"); !box.IsNotFound(err) {
		t.Errorf("Rename of a missing file = %v", err)
	}

	if err := f.Remove(ctx, "x", nil); box.StatusCode(err) != http.StatusConflict {
		t.Errorf("Remove of a non-empty dir = %v, want 409", err)
	}
	if err := f.Remove(ctx, "x", &box.RemoveParams{Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, "d/link", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(ctx, "x", nil); !box.IsNotFound(err) {
		t.Errorf("x still there: %v", err)
	}
	if err := f.Remove(ctx, "/workspace/home", &box.RemoveParams{Recursive: true}); box.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("Remove of the workspace = %v, want 400", err)
	}
}

func TestFilesStayInTheBox(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	hostSecret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(hostSecret, []byte("host-only"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "ln -s /etc/shadow shadow && ln -s ../../.. up && ln -s "+hostSecret+" secret")

	for _, p := range []string{"shadow", "/etc/shadow", "secret", hostSecret, "up/etc/shadow", "../../../etc/shadow"} {
		if _, err := b.Files.Read(ctx, p); !box.IsNotFound(err) {
			t.Errorf("Read(%q) = %v, want 404 (not the host's file)", p, err)
		}
	}
	// A path that climbs resolves inside the box: this is the box's own
	// passwd, not the host's.
	if got, err := b.Files.ReadText(ctx, "../../../../etc/passwd"); err != nil || !strings.Contains(got, "boxuser") {
		t.Errorf("climbing read = %q, %v", got, err)
	}
	if err := b.Files.WriteText(ctx, "/usr/evil", "x"); box.StatusCode(err) != http.StatusForbidden {
		t.Errorf("write to /usr = %v, want 403", err)
	}
	if err := b.Files.WriteText(ctx, "up/etc/passwd", "x"); box.StatusCode(err) < 400 {
		t.Errorf("write through a symlink to / = %v, want a refusal", err)
	}
	if _, err := os.Stat("/usr/evil"); err == nil {
		t.Fatal("a box wrote to the host's /usr")
	}
}

func TestUploadDownload(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t, boxtest.WithMaxUploadBytes(2<<20))
	b := newBox(t, srv, nil)
	ctx := t.Context()
	local := t.TempDir()
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	files := map[string][]byte{"a.txt": []byte("alpha\n"), "b.bin": allBytes(), "big.bin": big}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(local, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := b.Files.Upload(ctx, []box.UploadFile{
		{LocalPath: filepath.Join(local, "a.txt"), Destination: "up/a.txt"},
		{LocalPath: filepath.Join(local, "b.bin"), Destination: "/workspace/home/up/b.bin"},
		{LocalPath: filepath.Join(local, "big.bin"), Destination: "up/big.bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		got, err := b.Files.Read(ctx, "up/"+name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("uploaded %s: %d bytes, %v", name, len(got), err)
		}
	}
	mustRun(t, b, "mkdir up/nested")

	dest := filepath.Join(t.TempDir(), "out")
	written, err := b.Files.Download(ctx, &box.DownloadParams{Folder: "up", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 3 {
		t.Errorf("Download wrote %q", written)
	}
	for name, data := range files {
		got, err := os.ReadFile(filepath.Join(dest, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("downloaded %s: %d bytes, %v", name, len(got), err)
		}
	}
	if _, err := os.Stat(filepath.Join(dest, "nested")); err == nil {
		t.Error("Download created a directory entry")
	}

	// Past the server's upload limit: 413, and nothing half-written.
	huge := filepath.Join(local, "huge.bin")
	if err := os.WriteFile(huge, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	err = b.Files.Upload(ctx, []box.UploadFile{{LocalPath: huge, Destination: "huge.bin"}})
	if box.StatusCode(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized upload = %v, want 413", err)
	}
	// The box sees the cut-off request a moment after the client gets its
	// answer; then the partial file is gone and no huge.bin was made.
	waitFor(t, "the partial upload to be removed", func() bool {
		return !strings.Contains(mustRun(t, b, "ls -A").Stdout, "huge")
	})

	for _, bad := range [][]box.UploadFile{nil, {{LocalPath: "", Destination: "x"}}, {{LocalPath: filepath.Join(local, "nope"), Destination: "x"}}, {{LocalPath: local, Destination: "x"}}} {
		if err := b.Files.Upload(ctx, bad); err == nil || box.StatusCode(err) != 0 {
			t.Errorf("Upload(%v) = %v, want a client-side error", bad, err)
		}
	}
}

// TestDownloadRefusesHostileNames serves a listing whose names try to
// leave the destination directory.
func TestDownloadRefusesHostileNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"../../escape", "..", "/etc/escape", `..\escape`, "sub/escape", "link"} {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/files/list"):
					_ = json.NewEncoder(w).Encode(map[string]any{"files": []map[string]any{{"name": name, "path": "/workspace/home/x/" + name, "size": 4, "is_dir": false, "mod_time": "2026-01-01T00:00:00Z"}}})
				case strings.HasSuffix(r.URL.Path, "/files/download"):
					_, _ = w.Write([]byte("evil"))
				default:
					_ = json.NewEncoder(w).Encode(map[string]any{"id": "box-1", "status": "idle", "created_at": 1, "updated_at": 1})
				}
			}))
			defer ts.Close()
			c, err := box.NewClient(box.WithAPIKey("k"), box.WithBaseURL(ts.URL), box.WithTelemetry(false))
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Get(t.Context(), "box-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			top := t.TempDir()
			dest := filepath.Join(top, "a", "dest")
			outside := filepath.Join(top, "outside")
			if err := os.MkdirAll(dest, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			// A symlink already in the destination must not be followed.
			if err := os.Symlink(filepath.Join(outside, "target"), filepath.Join(dest, "link")); err != nil {
				t.Fatal(err)
			}
			_, err = b.Files.Download(t.Context(), &box.DownloadParams{Folder: "x", Dest: dest})
			if err == nil {
				t.Fatalf("Download accepted the name %q", name)
			}
			var found []string
			_ = filepath.Walk(top, func(p string, info os.FileInfo, err error) error {
				if err == nil && info.Mode().IsRegular() {
					found = append(found, p)
				}
				return nil
			})
			if len(found) != 0 {
				t.Fatalf("Download wrote %q", found)
			}
			if errors.Is(err, os.ErrNotExist) {
				t.Logf("error: %v", err)
			}
		})
	}
}

// TestUploadProgressAndRecursiveDownload uploads local files and readers
// with progress, and downloads the tree back with Recursive into a
// directory that already holds files, which are not reported as written.
func TestUploadProgressAndRecursiveDownload(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	contents := map[string][]byte{
		"local.bin":              randomBytes(t, 300<<10),
		"sub/sized.bin":          randomBytes(t, 200<<10),
		"sub/deeper/unsized.bin": randomBytes(t, 100<<10),
	}
	localFile := filepath.Join(t.TempDir(), "local.bin")
	if err := os.WriteFile(localFile, contents["local.bin"], 0o644); err != nil {
		t.Fatal(err)
	}
	type report struct {
		done, total int64
		calls       int
	}
	reports := map[string]*report{}
	track := func(name string) func(done, total int64) {
		rp := &report{}
		reports[name] = rp
		return func(done, total int64) {
			if done <= rp.done {
				t.Errorf("%s: progress went %d → %d", name, rp.done, done)
			}
			rp.done, rp.total, rp.calls = done, total, rp.calls+1
		}
	}
	err := b.Files.Upload(ctx, []box.UploadFile{
		{LocalPath: localFile, Destination: "tree/local.bin", Progress: track("local.bin")},
		{Reader: bytes.NewReader(contents["sub/sized.bin"]), Destination: "tree/sub/sized.bin", Progress: track("sub/sized.bin")},
		// A reader of unknown length.
		{Reader: io.MultiReader(bytes.NewReader(contents["sub/deeper/unsized.bin"])), Destination: "/workspace/home/tree/sub/deeper/unsized.bin", Progress: track("sub/deeper/unsized.bin")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for name, data := range contents {
		total += int64(len(data))
		want := int64(len(data))
		if strings.Contains(name, "unsized") {
			want = -1
		}
		if rp := reports[name]; rp.done != int64(len(data)) || rp.total != want || rp.calls < 2 {
			t.Errorf("%s: progress %+v, want %d of %d", name, *rp, len(data), want)
		}
		got, err := b.Files.Read(ctx, "tree/"+name)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("uploaded %s: %d bytes, %v", name, len(got), err)
		}
	}

	dest := t.TempDir()
	for _, old := range []string{"before.txt", "sub/old.txt"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dest, old)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dest, old), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var done, of int64
	written, err := b.Files.Download(ctx, &box.DownloadParams{Folder: "tree", Dest: dest, Recursive: true, Progress: func(d, tot int64) { done, of = d, tot }})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for name, data := range contents {
		want = append(want, filepath.Join(dest, filepath.FromSlash(name)))
		if got, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(name))); err != nil || !bytes.Equal(got, data) {
			t.Errorf("downloaded %s: %d bytes, %v", name, len(got), err)
		}
	}
	slices.Sort(want)
	slices.Sort(written)
	if diff := cmp.Diff(want, written); diff != "" {
		t.Errorf("Download with Recursive reported (-want +got):\n%s", diff)
	}
	if done != total || of != total {
		t.Errorf("Download's progress ended at %d of %d, want %d", done, of, total)
	}
	if got, err := os.ReadFile(filepath.Join(dest, "sub", "old.txt")); err != nil || string(got) != "old" {
		t.Errorf("a file that was there before: %q, %v", got, err)
	}

	// Without Recursive: the top directory's files only.
	flat := t.TempDir()
	done, of = 0, 0
	written, err = b.Files.Download(ctx, &box.DownloadParams{Folder: "tree", Dest: flat, Progress: func(d, tot int64) { done, of = d, tot }})
	if err != nil || !slices.Equal(written, []string{filepath.Join(flat, "local.bin")}) {
		t.Errorf("Download = %q, %v", written, err)
	}
	if n := int64(len(contents["local.bin"])); done != n || of != n {
		t.Errorf("Download's progress ended at %d of %d, want %d", done, of, n)
	}
	if _, err := os.Stat(filepath.Join(flat, "sub")); err == nil {
		t.Error("Download without Recursive made a subdirectory")
	}

	// A directory below the top that cannot be listed is skipped, with
	// fs.ErrPermission, and the rest of the tree is copied.
	mustRun(t, b, "mkdir tree/sub/locked && chmod 000 tree/sub/locked")
	if mustRun(t, b, "id -u").Stdout != "0\n" {
		written, err := b.Files.Download(ctx, &box.DownloadParams{Folder: "tree", Dest: t.TempDir(), Recursive: true})
		var se *box.SkippedError
		if !errors.As(err, &se) || len(se.Skipped) != 1 || se.Skipped[0].Path != "/workspace/home/tree/sub/locked" || !errors.Is(se.Skipped[0].Err, fs.ErrPermission) {
			t.Errorf("Download of a tree with a locked directory = %v, want it skipped with fs.ErrPermission", err)
		}
		if len(written) != len(contents) {
			t.Errorf("Download of a tree with a locked directory wrote %q, want the %d files", written, len(contents))
		}
	}
}
