package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
)

var tops = []string{"workspace", "home"}

func mkfile(t *testing.T, p, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// describe lists a tree as "name type mode [target|content]" lines, with
// lstat (links are never followed).
func describe(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		line := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	outside := t.TempDir()
	mkfile(t, filepath.Join(outside, "secret"), "never archived", 0o644)

	mkfile(t, filepath.Join(src, "workspace/home/app.py"), "print(1)", 0o644)
	mkfile(t, filepath.Join(src, "workspace/home/run.sh"), "#!/bin/sh", 0o750)
	mkfile(t, filepath.Join(src, "workspace/home/private"), "p", 0o600)
	mkfile(t, filepath.Join(src, "workspace/home/setid"), "s", 0o755|fs.ModeSetuid|fs.ModeSetgid)
	mkfile(t, filepath.Join(src, "workspace/home/empty"), "", 0o644)
	mkfile(t, filepath.Join(src, "home/.bashrc"), "export A=1", 0o644)
	mkfile(t, filepath.Join(src, "tmp/scratch"), "not archived", 0o644)
	for _, d := range []struct {
		p    string
		mode fs.FileMode
	}{{"workspace/home/locked", 0o500}, {"workspace/home/shared", 0o777 | fs.ModeSticky}, {"workspace/home/emptydir", 0o700}} {
		if err := os.Mkdir(filepath.Join(src, d.p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(src, d.p), d.mode); err != nil {
			t.Fatal(err)
		}
	}
	// A file in a read-only directory: extraction must still write it.
	if err := os.Chmod(filepath.Join(src, "workspace/home/locked"), 0o755); err != nil {
		t.Fatal(err)
	}
	mkfile(t, filepath.Join(src, "workspace/home/locked/inner"), "in", 0o644)
	if err := os.Chmod(filepath.Join(src, "workspace/home/locked"), 0o500); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"workspace/home/rel":     "app.py",
		"workspace/home/abs":     "/usr/bin/python3",
		"workspace/home/out":     outside, // a link out of the tree: kept as a link, not followed
		"workspace/home/dangle":  "missing",
		"workspace/home/dirlink": "locked",
	} {
		if err := os.Symlink(target, filepath.Join(src, link)); err != nil {
			t.Fatal(err)
		}
	}
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(src, "workspace/home/app.py"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(src, "workspace/home/locked"), 0o755) })

	var buf bytes.Buffer
	st, err := Write(t.Context(), &buf, src, append(tops, "absent"), Limits{Entries: 100, Bytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 18 || st.Bytes != int64(len("print(1)#!/bin/shpsexport A=1in")) {
		t.Errorf("Write stats = %+v", st)
	}

	dst := t.TempDir()
	for _, d := range []string{"workspace/home", "home"} { // as a new box has them
		if err := os.MkdirAll(filepath.Join(dst, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dst, "workspace/home/locked"), 0o755) })
	xst, err := Extract(t.Context(), bytes.NewReader(buf.Bytes()), dst, tops, nil, Limits{Entries: st.Entries, Bytes: st.Bytes})
	if err != nil {
		t.Fatal(err)
	}
	if xst != st {
		t.Errorf("Extract stats = %+v, want %+v", xst, st)
	}
	want := describe(t, filepath.Join(src, "workspace"))
	if diff := cmp.Diff(want, describe(t, filepath.Join(dst, "workspace"))); diff != "" {
		t.Errorf("workspace after a round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(describe(t, filepath.Join(src, "home")), describe(t, filepath.Join(dst, "home"))); diff != "" {
		t.Errorf("home after a round trip (-want +got):\n%s", diff)
	}
	if _, err := os.Lstat(filepath.Join(dst, "tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("tmp was archived: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "workspace/home/app.py")); err != nil || !fi.ModTime().Equal(mtime) {
		t.Errorf("mtime = %v, %v; want %v", fi.ModTime(), err, mtime)
	}
	// Extracting twice into the same tree is refused: files are created
	// exclusively.
	if _, err := Extract(t.Context(), bytes.NewReader(buf.Bytes()), dst, tops, nil, Limits{Entries: st.Entries, Bytes: st.Bytes}); err == nil {
		t.Error("a second extraction over the same files succeeded")
	}
}

func TestWriteLimitsAndCancel(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	for i := range 5 {
		mkfile(t, filepath.Join(src, "workspace", strings.Repeat("f", i+1)), "0123456789", 0o644)
	}
	var buf bytes.Buffer
	if _, err := Write(t.Context(), &buf, src, tops, Limits{Entries: 3, Bytes: 1 << 20}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("entries over the limit: %v", err)
	}
	if _, err := Write(t.Context(), &buf, src, tops, Limits{Entries: 100, Bytes: 25}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("bytes over the limit: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Write(ctx, &buf, src, tops, Limits{Entries: 100, Bytes: 1 << 20}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Write: %v", err)
	}
}

// entry is one header (and content) of a hand-made archive.
type entry struct {
	name, link, body string
	typ              byte
	size             int64 // overrides len(body) in the header when set
}

func handmade(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.size != 0 {
			h.Size = e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Close errors (a header's size not matched by its content) are what
	// some cases are about; the archive is still readable up to there.
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

func TestExtractRefusesHostileArchives(t *testing.T) {
	t.Parallel()
	generous := Limits{Entries: 100, Bytes: 1 << 20}
	cases := []struct {
		name    string
		entries []entry
		lim     Limits
	}{
		{"dot-dot", []entry{{name: "workspace/../../evil", typ: tar.TypeReg, body: "x"}}, generous},
		{"dot-dot inside", []entry{{name: "workspace/a/../../home/x", typ: tar.TypeReg, body: "x"}}, generous},
		{"absolute", []entry{{name: "/etc/evil", typ: tar.TypeReg, body: "x"}}, generous},
		{"outside the tops", []entry{{name: "etc/passwd", typ: tar.TypeReg, body: "x"}}, generous},
		{"a top replaced by a link", []entry{{name: "workspace", typ: tar.TypeSymlink, link: "/"}}, generous},
		{"a top replaced by a file", []entry{{name: "home", typ: tar.TypeReg, body: "x"}}, generous},
		{"write through a link to a directory", []entry{
			{name: "workspace/esc", typ: tar.TypeSymlink, link: "/tmp"},
			{name: "workspace/esc/evil", typ: tar.TypeReg, body: "x"},
		}, generous},
		{"write through a link inside the tree", []entry{
			{name: "workspace/d", typ: tar.TypeDir},
			{name: "workspace/l", typ: tar.TypeSymlink, link: "d"},
			{name: "workspace/l/x", typ: tar.TypeReg, body: "x"},
		}, generous},
		{"a file over a link", []entry{
			{name: "workspace/l", typ: tar.TypeSymlink, link: "/etc/passwd"},
			{name: "workspace/l", typ: tar.TypeReg, body: "x"},
		}, generous},
		{"a directory over a link", []entry{
			{name: "workspace/l", typ: tar.TypeSymlink, link: "/etc"},
			{name: "workspace/l", typ: tar.TypeDir},
		}, generous},
		{"a file given twice", []entry{
			{name: "workspace/f", typ: tar.TypeReg, body: "x"},
			{name: "workspace/f", typ: tar.TypeReg, body: "y"},
		}, generous},
		{"a hard link", []entry{
			{name: "workspace/f", typ: tar.TypeReg, body: "x"},
			{name: "workspace/h", typ: tar.TypeLink, link: "workspace/f"},
		}, generous},
		{"a device", []entry{{name: "workspace/null", typ: tar.TypeChar}}, generous},
		{"an empty link target", []entry{{name: "workspace/l", typ: tar.TypeSymlink}}, generous},
		{"too many entries", []entry{
			{name: "workspace/a", typ: tar.TypeReg}, {name: "workspace/b", typ: tar.TypeReg}, {name: "workspace/c", typ: tar.TypeReg},
		}, Limits{Entries: 2, Bytes: 100}},
		{"too many bytes", []entry{{name: "workspace/a", typ: tar.TypeReg, body: strings.Repeat("x", 101)}}, Limits{Entries: 10, Bytes: 100}},
		{"truncated content", []entry{{name: "workspace/a", typ: tar.TypeReg, body: "short", size: 1000}}, generous},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			root := filepath.Join(dir, "root")
			for _, d := range []string{"workspace", "home"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Extract(t.Context(), bytes.NewReader(handmade(t, c.entries...)), root, tops, nil, c.lim)
			if err == nil {
				t.Fatal("Extract succeeded")
			}
			t.Logf("refused: %v", err)
			// Nothing was written outside root, nor through a link.
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Errorf("entries beside root: %v", ents)
			}
			if _, err := os.Lstat(filepath.Join(root, "workspace/d/x")); err == nil {
				t.Error("a file was written through a link")
			}
			if _, err := os.Lstat("/tmp/evil"); err == nil {
				t.Error("/tmp/evil exists")
			}
		})
	}
}

func TestZeroLimitsAllowNothing(t *testing.T) {
	t.Parallel()
	// A snapshot of empty files records 0 bytes: its archive may then
	// hold no content at all.
	arc := handmade(t, entry{name: "workspace/f", typ: tar.TypeReg, body: "x"})
	if _, err := Extract(t.Context(), bytes.NewReader(arc), t.TempDir(), tops, nil, Limits{Entries: 10}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("content beyond a zero byte limit: %v", err)
	}
	if _, err := Write(t.Context(), new(bytes.Buffer), t.TempDir(), tops, Limits{}); err != nil {
		t.Errorf("Write of nothing with zero limits: %v", err)
	}
}

func TestExtractIsBoundByWhatIsWritten(t *testing.T) {
	t.Parallel()
	// Directories, links and empty files count as entries, not bytes;
	// implicit parents are made as directories.
	root := t.TempDir()
	arc := handmade(t,
		entry{name: "workspace/a/b/c/file", typ: tar.TypeReg, body: "abc"},
		entry{name: "home/link", typ: tar.TypeSymlink, link: "../workspace/a"},
	)
	st, err := Extract(t.Context(), bytes.NewReader(arc), root, tops, nil, Limits{Entries: 2, Bytes: 3})
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stats{Entries: 2, Bytes: 3}) {
		t.Errorf("stats = %+v", st)
	}
	if b, err := os.ReadFile(filepath.Join(root, "workspace/a/b/c/file")); err != nil || string(b) != "abc" {
		t.Errorf("file = %q, %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "workspace/a/b")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Errorf("implicit parent = %v, %v", fi, err)
	}
}
