package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/boxtest"
)

// modeTree makes, under dir, a tree of what cp -a keeps: files of
// several modes (an executable script among them), a read-only
// directory, an empty directory, links to a file and a directory inside
// the tree, links that point out of it or nowhere, and an old mtime.
func modeTree(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	files := []struct {
		name string
		mode fs.FileMode
		data string
	}{
		{"run.sh", 0o755, "#!/bin/sh\necho ran\n"},
		{"secret", 0o600, "only me\n"},
		{"group-read", 0o640, "group\n"},
		{"read-only", 0o444, "fixed\n"},
		{"sub/deeper/data.bin", 0o644, "\x00\x01\x02binary\xff"},
		{"sub/tool", 0o750, "#!/bin/sh\necho tool\n"},
		{"a name with spaces ü", 0o644, "spaces\n"},
		{"locked/inside", 0o644, "in a directory no one may write\n"},
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.name))
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(f.data), f.mode))
		must(os.Chmod(p, f.mode))
	}
	must(os.Mkdir(filepath.Join(dir, "empty"), 0o750))
	must(os.Mkdir(filepath.Join(dir, "private"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "private", "x"), []byte("x"), 0o600))
	for _, l := range []struct{ name, target string }{
		{"link-to-file", "run.sh"},
		{"link-to-dir", "sub/deeper"},
		{"sub/up-link", "../secret"},
		{"absolute-out", "/etc/hostname"},
		{"relative-out", "../../outside"},
		{"dangling", "no/such/file"},
	} {
		must(os.Symlink(l.target, filepath.Join(dir, filepath.FromSlash(l.name))))
	}
	old := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	must(os.Chtimes(filepath.Join(dir, "read-only"), old, old))
	must(os.Chtimes(filepath.Join(dir, "sub", "deeper"), old, old))
	must(os.Chmod(filepath.Join(dir, "locked"), 0o555))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "locked"), 0o755) })
}

// manifest describes the tree at dir, one line an entry: its path, type,
// permission bits, and a link's target or a file's size, content and
// modification time (of files and directories, to the second).
func manifest(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		typ := "-"
		switch {
		case fi.IsDir():
			typ = "d"
		case fi.Mode()&fs.ModeSymlink != 0:
			typ = "L"
		}
		line := fmt.Sprintf("%s %s %o", filepath.ToSlash(rel), typ, fi.Mode().Perm())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil && fi.Mode().Perm()&0o400 != 0 {
				return err
			}
			line += fmt.Sprintf(" %d %q %d", fi.Size(), data, fi.ModTime().Unix())
		case rel != ".":
			line += fmt.Sprintf(" %d", fi.ModTime().Unix())
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// boxManifest is the manifest of the box directory dir, as find in the box
// says it, in the form of manifest.
func boxManifest(t *testing.T, srv *boxtest.Server, id, dir string) []string {
	t.Helper()
	// %y is f, d or l; manifest's types are "-", "d" and "L".
	out := mustCLI(t, srv, "", "exec", id, "--", "find", dir, "-printf", `%P\t%y\t%m\t%l\t%s\t%T@\n`)
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.Split(l, "\t")
		rel := f[0]
		if rel == "" {
			rel = "."
		}
		var mode string
		var perm int
		fmt.Sscanf(f[2], "%o", &perm)
		switch f[1] {
		case "f":
			mode = "-"
		case "d":
			mode = "d"
		case "l":
			mode = "L"
			perm = 0o777
		}
		line := fmt.Sprintf("%s %s %o", rel, mode, perm)
		mtime := strings.Split(f[5], ".")[0]
		switch f[1] {
		case "l":
			line += " -> " + f[3]
		case "f":
			data := mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", `cat -- "$1" 2>/dev/null; true`, "sh", dir+"/"+rel)
			line += fmt.Sprintf(" %s %q %s", f[4], data, mtime)
		case "d":
			if rel != "." {
				line += " " + mtime
			}
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return lines
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestCpKeepsModesAndLinks: box cp keeps modes, links (as links, never
// followed), empty directories and mtimes, into a box, out of it and from
// box to box, as diff -r and stat see them. It used to make every file
// 0644 and drop the links, so that a script copied in could not run.
func TestCpKeepsModesAndLinks(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("modes and links as Linux has them")
	}
	srv := boxtest.NewServer(t)
	id, id2 := created(t, srv), created(t, srv)
	src := filepath.Join(t.TempDir(), "tree")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	modeTree(t, src)
	want := manifest(t, src)

	mustCLI(t, srv, "", "cp", src, id+":up")
	if got := mustCLI(t, srv, "", "exec", id, "--", "./up/run.sh"); got != "ran\n" {
		t.Errorf("the script copied in printed %q", got)
	}
	if diff := cmp.Diff(sorted(want), boxManifest(t, srv, id, "/workspace/home/up")); diff != "" {
		t.Errorf("the tree in the box differs (-local +box):\n%s", diff)
	}

	back := t.TempDir()
	mustCLI(t, srv, "", "cp", id+":up", back)
	got := filepath.Join(back, "up")
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(got, "locked"), 0o755) })
	if diff := cmp.Diff(want, manifest(t, got)); diff != "" {
		t.Errorf("the round trip differs (-before +after):\n%s", diff)
	}
	if out, err := exec.Command("diff", "-r", "--no-dereference", src, got).CombinedOutput(); err != nil {
		t.Errorf("diff -r: %v\n%s", err, out)
	}
	statOf := func(dir string) string {
		out, err := exec.Command("sh", "-c", `cd "$1" && find . -print0 | sort -z | xargs -0 stat -c '%n %A %s %N'`, "sh", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("stat: %v\n%s", err, out)
		}
		return string(out)
	}
	if a, b := statOf(src), statOf(got); a != b {
		t.Errorf("stat differs:\n%s", cmp.Diff(a, b))
	}

	// Box to box, and one file each way with its mode.
	mustCLI(t, srv, "", "cp", id+":up", id2+":copied")
	if diff := cmp.Diff(sorted(want), boxManifest(t, srv, id2, "/workspace/home/copied")); diff != "" {
		t.Errorf("the tree copied from box to box differs (-local +box):\n%s", diff)
	}
	mustCLI(t, srv, "", "cp", filepath.Join(src, "sub", "tool"), id+":tool")
	if got := mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", "./tool; stat -c %a tool"); got != "tool\n750\n" {
		t.Errorf("one file copied in: %q", got)
	}
	one := filepath.Join(t.TempDir(), "secret")
	mustCLI(t, srv, "", "cp", id+":up/secret", one)
	if fi, err := os.Stat(one); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("one file copied out: %v, %v", fi, err)
	}

	// A directory as a tar stream, both ways.
	r := cli(t, srv, "", "cp", id+":up", "-")
	if r.code != 0 {
		t.Fatalf("cp to -: %+v", r)
	}
	names := map[string]string{}
	tr := tar.NewReader(strings.NewReader(r.stdout))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[strings.TrimSuffix(h.Name, "/")] = fmt.Sprintf("%c %o %s", h.Typeflag, h.Mode&0o7777, h.Linkname)
	}
	if names["./up/run.sh"] != "0 755 " || names["./up/link-to-dir"] != "2 777 sub/deeper" || names["./up/empty"] != "5 750 " {
		t.Errorf("cp of a directory to - gave the entries %q", names)
	}
	var stream bytes.Buffer
	tw := tar.NewWriter(&stream)
	for _, h := range []*tar.Header{
		{Name: "in/", Typeflag: tar.TypeDir, Mode: 0o711},
		{Name: "in/exe", Typeflag: tar.TypeReg, Mode: 0o700, Size: 3},
		{Name: "in/l", Typeflag: tar.TypeSymlink, Linkname: "exe"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte("abc"))
		}
	}
	_ = tw.Close()
	mustCLI(t, srv, stream.String(), "cp", "-", id+":streamed/")
	if got := mustCLI(t, srv, "", "exec", id, "--", "stat", "-c", "%n %a %N", "streamed/in", "streamed/in/exe", "streamed/in/l"); got != "streamed/in 711 'streamed/in'\nstreamed/in/exe 700 'streamed/in/exe'\nstreamed/in/l 777 'streamed/in/l' -> 'exe'\n" {
		t.Errorf("a tar stream from stdin unpacked as:\n%s", got)
	}
}

// largeTree makes, under dir, n files in nested directories, every
// tenth executable, every hundredth a link, and returns how many bytes
// of content it wrote.
func largeTree(t testing.TB, dir string, n int) int64 {
	t.Helper()
	var total int64
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("e%d", i%7), fmt.Sprintf("f%05d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if err := os.Symlink(fmt.Sprintf("../e%d/f%05d", (i-1)%7, i-1), p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := fs.FileMode(0o644)
		if i%10 == 0 {
			mode = 0o755
		}
		data := bytes.Repeat([]byte{byte(i)}, 100+i%2000)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		total += int64(len(data))
	}
	return total
}

// TestCpLargeTree: a tree of 10,000 files goes into a box and back with
// every mode and link kept.
func TestCpLargeTree(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("modes and links as Linux has them")
	}
	srv := boxtest.NewServer(t)
	id := created(t, srv)
	src := filepath.Join(t.TempDir(), "large")
	size := largeTree(t, src, 10_000)
	start := time.Now()
	mustCLI(t, srv, "", "cp", src, id+":large")
	up := time.Since(start)
	back := t.TempDir()
	start = time.Now()
	mustCLI(t, srv, "", "cp", id+":large", back)
	down := time.Since(start)
	t.Logf("10,000 files (%d bytes): up in %v, down in %v", size, up, down)
	if diff := cmp.Diff(manifest(t, src), manifest(t, filepath.Join(back, "large"))); diff != "" {
		t.Errorf("the round trip of 10,000 files differs (-before +after):\n%s", diff)
	}
}
