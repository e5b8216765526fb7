package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/boxtest"
)

// writeFiles writes each file of files (a slash path to its content)
// under dir with mode.
func writeFiles(t *testing.T, dir string, mode fs.FileMode, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("content of "+f+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// diffTrees runs diff -r on two local trees, links compared as links.
func diffTrees(t *testing.T, a, b string) {
	t.Helper()
	if out, err := exec.Command("diff", "-r", "--no-dereference", a, b).CombinedOutput(); err != nil {
		t.Errorf("diff -r %s %s: %v\n%s", a, b, err, out)
	}
}

// TestCpGlobsAndSeveralSources: a quoted local glob is expanded by box
// (a name that only looks like a glob is taken as it is), several
// sources land in a directory, into a box, out of it and from box to
// box, each with its mode; and several sources need a directory.
func TestCpGlobsAndSeveralSources(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("modes as Linux has them")
	}
	srv := boxtest.NewServer(t)
	id, id2 := created(t, srv), created(t, srv)
	src := t.TempDir()
	writeFiles(t, src, 0o755, "main.go")
	writeFiles(t, src, 0o600, "util.go", "notes.txt", "odd[1].go", "pkg/inner.go")
	writeFiles(t, src, 0o640, "pkg/data.bin")

	// The glob matches main.go, util.go and odd[1].go (as "[1]" is a
	// class of one), but not notes.txt or what is under pkg.
	mustCLI(t, srv, "", "cp", filepath.Join(src, "*.go"), id+":globbed/")
	want := []string{
		". d 755",
		fileLine("main.go", 0o755),
		fileLine("odd[1].go", 0o600),
		fileLine("util.go", 0o600),
	}
	if diff := cmp.Diff(want, noTimes(boxManifest(t, srv, id, "/workspace/home/globbed"))); diff != "" {
		t.Errorf("the glob copied (-want +got):\n%s", diff)
	}
	// A name that exists is itself, though it looks like a glob.
	mustCLI(t, srv, "", "cp", filepath.Join(src, "odd[1].go"), id+":literal.go")
	if got := mustCLI(t, srv, "", "exec", id, "--", "stat", "-c", "%a %s", "literal.go"); got != "600 21\n" {
		t.Errorf("a name that looks like a glob: %q", got)
	}
	if r := cli(t, srv, "", "cp", filepath.Join(src, "*.none"), id+":"); r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("a glob that matches nothing: %+v", r)
	}

	// Several sources, a file and a tree, into a box directory named
	// without a trailing slash: both go in it.
	mustCLI(t, srv, "", "cp", filepath.Join(src, "main.go"), filepath.Join(src, "pkg"), id+":several")
	want = []string{
		". d 755",
		fileLine("main.go", 0o755),
		"pkg d 755 *",
		fileLine("pkg/data.bin", 0o640),
		fileLine("pkg/inner.go", 0o600),
	}
	if diff := cmp.Diff(want, noTimes(boxManifest(t, srv, id, "/workspace/home/several"))); diff != "" {
		t.Errorf("several sources into a box (-want +got):\n%s", diff)
	}

	// Several out of the box, into a local directory.
	out := t.TempDir()
	mustCLI(t, srv, "", "cp", id+":several/main.go", id+":several/pkg", out)
	diffTrees(t, filepath.Join(src, "pkg"), filepath.Join(out, "pkg"))
	diffTrees(t, filepath.Join(src, "main.go"), filepath.Join(out, "main.go"))
	for name, mode := range map[string]fs.FileMode{"main.go": 0o755, "pkg/inner.go": 0o600, "pkg/data.bin": 0o640} {
		if fi, err := os.Stat(filepath.Join(out, filepath.FromSlash(name))); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s copied out: %v, %v; want mode %o", name, fi, err, mode)
		}
	}

	// Several from box to box.
	mustCLI(t, srv, "", "cp", id+":several/main.go", id+":globbed/util.go", id2+":both/")
	if got := mustCLI(t, srv, "", "exec", id2, "--", "stat", "-c", "%n %a %s", "both/main.go", "both/util.go"); got != "both/main.go 755 19\nboth/util.go 600 19\n" {
		t.Errorf("several from box to box: %q", got)
	}

	// Several sources, and a local destination that is no directory.
	r := cli(t, srv, "", "cp", id+":several/main.go", id+":several/pkg", filepath.Join(out, "main.go"))
	if r.code != 2 || !strings.Contains(r.stderr, "needs a directory") {
		t.Errorf("several sources into a file: %+v", r)
	}
	if r := cli(t, srv, "", "cp", "-", filepath.Join(src, "main.go"), id+":x/"); r.code != 2 || !strings.Contains(r.stderr, "only source") {
		t.Errorf("- among several sources: %+v", r)
	}
}

// fileLine is boxManifest's line, without its time, for a file that
// writeFiles wrote.
func fileLine(name string, mode fs.FileMode) string {
	content := "content of " + name + "\n"
	return fmt.Sprintf("%s - %o %d %q *", name, mode, len(content), content)
}

// noTimes drops the modification times of boxManifest's lines, which a
// test that makes its files now cannot know.
func noTimes(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 3 && (f[1] == "-" || f[1] == "d") {
			l = strings.Join(f[:len(f)-1], " ") + " *"
		}
		out[i] = l
	}
	return out
}

// TestCpFollowLink: with -L, a source that is a link is copied as what
// it points to, and nothing under it is followed: its own links stay
// links. Without -L the link is copied as a link. Into a box, out of it
// and from box to box.
func TestCpFollowLink(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("modes and links as Linux has them")
	}
	srv := boxtest.NewServer(t)
	id, id2 := created(t, srv), created(t, srv)
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	writeFiles(t, real, 0o700, "tool")
	writeFiles(t, real, 0o644, "sub/data")
	for _, l := range []struct{ name, target string }{
		{"real/inner-link", "sub/data"},
		{"real/sub/up", "../tool"},
		{"dir-link", "real"},
		{"file-link", "real/tool"},
	} {
		if err := os.Symlink(l.target, filepath.Join(dir, filepath.FromSlash(l.name))); err != nil {
			t.Fatal(err)
		}
	}
	want := manifest(t, real)

	// Into a box: -L copies the tree the link names, links in it as links.
	mustCLI(t, srv, "", "cp", "-L", filepath.Join(dir, "dir-link"), id+":followed")
	if diff := cmp.Diff(sorted(want), boxManifest(t, srv, id, "/workspace/home/followed")); diff != "" {
		t.Errorf("cp -L of a link to a directory into a box (-want +got):\n%s", diff)
	}
	mustCLI(t, srv, "", "cp", "--follow-link", filepath.Join(dir, "file-link"), id+":tool-copy")
	if got := mustCLI(t, srv, "", "exec", id, "--", "stat", "-c", "%F %a", "tool-copy"); got != "regular file 700\n" {
		t.Errorf("cp -L of a link to a file into a box: %q", got)
	}
	mustCLI(t, srv, "", "cp", filepath.Join(dir, "dir-link"), id+":as-link")
	if got := mustCLI(t, srv, "", "exec", id, "--", "readlink", "as-link"); got != "real\n" {
		t.Errorf("cp without -L of a link into a box: readlink says %q", got)
	}

	// Out of a box: a link there to the tree.
	mustCLI(t, srv, "", "exec", id, "--", "ln", "-s", "followed", "box-link")
	out := t.TempDir()
	mustCLI(t, srv, "", "cp", "-L", id+":box-link", out)
	if diff := cmp.Diff(want, manifest(t, filepath.Join(out, "box-link"))); diff != "" {
		t.Errorf("cp -L of a link to a directory out of a box (-want +got):\n%s", diff)
	}
	diffTrees(t, real, filepath.Join(out, "box-link"))
	mustCLI(t, srv, "", "exec", id, "--", "ln", "-s", "followed/tool", "box-file-link")
	mustCLI(t, srv, "", "cp", "-L", id+":box-file-link", out)
	if fi, err := os.Lstat(filepath.Join(out, "box-file-link")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o700 {
		t.Errorf("cp -L of a link to a file out of a box: %v, %v", fi, err)
	}
	mustCLI(t, srv, "", "cp", id+":box-link", filepath.Join(out, "plain"))
	if target, err := os.Readlink(filepath.Join(out, "plain")); err != nil || target != "followed" {
		t.Errorf("cp without -L of a link out of a box: %q, %v", target, err)
	}

	// From box to box.
	mustCLI(t, srv, "", "cp", "-L", id+":box-link", id2+":relayed")
	if diff := cmp.Diff(sorted(want), boxManifest(t, srv, id2, "/workspace/home/relayed")); diff != "" {
		t.Errorf("cp -L of a link from box to box (-want +got):\n%s", diff)
	}
}

// TestCpWithoutTar: in a box where tar is not to be found, box cp falls
// back to the file API, which keeps contents and directories: it says
// so once, whatever the number of sources, and the contents arrive byte
// for byte, into the box and out of it. A tar stream, and a copy from
// box to box, need tar, and say so.
func TestCpWithoutTar(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("a box's PATH as Linux has it")
	}
	srv := boxtest.NewServer(t)
	// The box's PATH is a directory of links to every program of the
	// box but tar: box cp looks tar up with command -v in sh.
	id := created(t, srv, "--env", "PATH=/workspace/notar")
	mustCLI(t, srv, "", "exec", id, "--", "/bin/sh", "-c", `export PATH=/usr/local/bin:/usr/bin:/bin
mkdir -p /workspace/notar || exit 1
for f in /usr/local/bin/* /usr/bin/* /bin/*; do
	n=${f##*/}
	[ "$n" = tar ] || [ -e "/workspace/notar/$n" ] || ln -s "$f" "/workspace/notar/$n" || exit 1
done`)
	if got := mustCLI(t, srv, "", "exec", id, "--", "sh", "-c", "command -v tar || echo none; command -v find"); got != "none\n/workspace/notar/find\n" {
		t.Fatalf("the box's tar and find: %q", got)
	}
	withTar := created(t, srv)

	src := t.TempDir()
	writeFiles(t, src, 0o755, "tree/run.sh")
	writeFiles(t, src, 0o600, "tree/sub/deeper/data", "tree/sub/other", "one.txt", "two.txt")
	if err := os.Mkdir(filepath.Join(src, "tree", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run.sh", filepath.Join(src, "tree", "link")); err != nil {
		t.Fatal(err)
	}
	const warning = "has no tar: copying with the file API"

	// Three sources in, one warning.
	r := cli(t, srv, "", "cp", filepath.Join(src, "tree"), filepath.Join(src, "one.txt"), filepath.Join(src, "two.txt"), id+":in/")
	if r.code != 0 {
		t.Fatalf("cp into a box without tar: %+v", r)
	}
	if n := strings.Count(r.stderr, warning); n != 1 {
		t.Errorf("cp of three sources into a box without tar warned %d times:\n%s", n, r.stderr)
	}
	got := strings.Split(strings.TrimSpace(mustCLI(t, srv, "", "exec", id, "--", "find", "in", "-mindepth", "1", "-printf", `%P %y\n`)), "\n")
	want := []string{"one.txt f", "tree d", "tree/empty d", "tree/run.sh f", "tree/sub d", "tree/sub/deeper d", "tree/sub/deeper/data f", "tree/sub/other f", "two.txt f"}
	if diff := cmp.Diff(want, sorted(got)); diff != "" {
		t.Errorf("what the file API put in the box (-want +got):\n%s", diff)
	}

	// -L: the tree a link names.
	if err := os.Symlink("tree", filepath.Join(src, "tree-link")); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, srv, "", "cp", "-L", filepath.Join(src, "tree-link"), id+":followed")
	if got := mustCLI(t, srv, "", "exec", id, "--", "cat", "followed/sub/deeper/data"); got != "content of tree/sub/deeper/data\n" {
		t.Errorf("cp -L of a link to a tree into a box without tar: %q", got)
	}

	// Out again, two sources, one warning; the contents are the same.
	out := t.TempDir()
	r = cli(t, srv, "", "cp", id+":in/tree", id+":in/one.txt", out)
	if r.code != 0 {
		t.Fatalf("cp out of a box without tar: %+v", r)
	}
	if n := strings.Count(r.stderr, warning); n != 1 {
		t.Errorf("cp of two sources out of a box without tar warned %d times:\n%s", n, r.stderr)
	}
	if err := os.Remove(filepath.Join(src, "tree", "link")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("diff", "-r", filepath.Join(src, "tree"), filepath.Join(out, "tree")).CombinedOutput(); err != nil {
		t.Errorf("diff -r of the tree through the file API: %v\n%s", err, out)
	}
	if out, err := exec.Command("cmp", filepath.Join(src, "one.txt"), filepath.Join(out, "one.txt")).CombinedOutput(); err != nil {
		t.Errorf("cmp of a file through the file API: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(out, "tree", "empty")); err != nil || !fi.IsDir() {
		t.Errorf("the empty directory through the file API: %v, %v", fi, err)
	}

	// What needs tar says so.
	if r := cli(t, srv, "tar stream", "cp", "-", id+":in/"); r.code != 1 || !strings.Contains(r.stderr, "has no tar") {
		t.Errorf("a tar stream into a box without tar: %+v", r)
	}
	if r := cli(t, srv, "", "cp", id+":in/tree", withTar+":copied"); r.code != 1 || !strings.Contains(r.stderr, "no tar") || !strings.Contains(r.stderr, id) {
		t.Errorf("a copy from a box without tar to another box: %+v", r)
	}
}
