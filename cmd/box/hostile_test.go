package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/boxtest"
)

// Names a hostile box gives its files: one retitles the terminal's
// window, one writes the clipboard (OSC 52), one clears the screen.
const (
	titleName = "\x1b]0;pwned\x07"
	clipName  = "\x1b]52;c;cHduZWQ=\x07"
	clearName = "\x1b[2J\x1b[Hclear\u009b"
)

// How they must show: escaped.
var escapedNames = []string{`\x1b]0;pwned\x07`, `\x1b]52;c;cHduZWQ=\x07`, `\x1b[2J\x1b[Hclear\u009b`}

// hostileTree makes, in the box id of srv, a tree t whose every level
// links twice to itself, and which holds, between readable files, a FIFO
// and a file no one may read with the names above, and a name that is
// not UTF-8.
func hostileTree(t *testing.T, srv *boxtest.Server, id string) {
	t.Helper()
	b, err := srv.Client().Get(t.Context(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Exec.Command(t.Context(), `set -e
d=t
for i in 1 2 3 4 5; do mkdir -p $d; echo "level $i" > $d/f.txt; ln -s . $d/a; ln -s . $d/b; d=$d/l$i; done
echo first > t/0-first.txt; echo last > t/z-last.txt
mkfifo "t/$(printf '\033]0;pwned\007')"
echo secret > "t/$(printf '\033]52;c;cHduZWQ=\007')" && chmod 000 "t/$(printf '\033]52;c;cHduZWQ=\007')"
echo x > "t/$(printf '\033[2J\033[Hclear\302\233')"
echo raw > "t/$(printf 'bad\377name')"`)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("making the tree: %v %+v", err, r)
	}
}

// cliCmd is box with args against srv, to run with ctx.
func cliCmd(ctx context.Context, t *testing.T, srv *boxtest.Server, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, boxBin, args...)
	cmd.Env = env(t, srv)
	return cmd
}

// noEscapes fails the test if out, printed to a terminal, holds an
// escape sequence or a control character other than a line end, and
// checks that each name shows escaped.
func noEscapes(t *testing.T, what, out string, names ...string) {
	t.Helper()
	if i := strings.IndexAny(out, "\x1b\x07\u009b"); i >= 0 {
		t.Errorf("%s put a raw control character on the terminal at %d: %q", what, i, out)
	}
	for _, n := range names {
		if !strings.Contains(out, n) {
			t.Errorf("%s does not show %s escaped: %q", what, n, out)
		}
	}
}

// TestCpHostileTree: box cp of a tree with link loops, a FIFO, an
// unreadable file and names made of escape sequences ends at once, copies
// every other file, warns of each entry it skipped with the name escaped,
// and exits 1.
func TestCpHostileTree(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)
	hostileTree(t, srv, id)
	dst := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	start := time.Now()
	cmd := cliCmd(ctx, t, srv, "cp", id+":t", dst)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	t.Logf("box cp took %v", time.Since(start))
	if ctx.Err() != nil {
		t.Fatalf("box cp of a tree with link loops did not end:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("box cp exited %d (%v), want 1", code, err)
	}
	out := stderr.String()
	noEscapes(t, "box cp", out, escapedNames[0])
	// The unreadable file is named by tar in the box, which escapes
	// names its own way.
	if !strings.Contains(out, escapedNames[1]) && !strings.Contains(out, `\033]52;c;cHduZWQ=\a`) {
		t.Errorf("box cp does not name the unreadable file escaped: %q", out)
	}
	if n := strings.Count(out, "box: warning: skipped "); n != 3 {
		t.Errorf("%d warnings, want 3 (the FIFO, the unreadable file, the name not UTF-8):\n%s", n, out)
	}
	if !strings.Contains(out, "box: copied box-") || !strings.Contains(out, "but for 3 entries") {
		t.Errorf("no summary of the copy:\n%s", out)
	}
	want := map[string]string{"0-first.txt": "first\n", "z-last.txt": "last\n", clearName: "x\n"}
	d := ""
	for i := range 5 {
		want[d+"f.txt"] = "level " + string(rune('1'+i)) + "\n"
		d += "l" + string(rune('1'+i)) + "/"
	}
	got := map[string]string{}
	err = filepath.WalkDir(dst, func(p string, de os.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dst, p)
		got[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("copied %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q = %q, want %q", k, got[k], v)
		}
	}
	if l, err := os.Readlink(filepath.Join(dst, "l1", "l2", "a")); err != nil || l != "." {
		t.Errorf("the link l1/l2/a came back as %q, %v", l, err)
	}

	// One file: the error names it, escaped. The server refuses to read
	// a FIFO (400): bad input, exit 2.
	r := cli(t, srv, "", "cp", id+":t/"+titleName, "-")
	if r.code != 2 {
		t.Errorf("box cp of a FIFO exited %d", r.code)
	}
	noEscapes(t, "the error of box cp", r.stderr, escapedNames[0])
}

// TestREPLHostileNames: in the REPL, files list shows names made of
// escape sequences escaped, and files download warns of what it skipped
// the same way.
func TestREPLHostileNames(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)
	hostileTree(t, srv, id)
	tm := inTerminal(t, srv, "connect", id)
	prompt := id + ":/workspace/home> "
	m := tm.expect(0, prompt)
	tm.typeText("files list t\r")
	m = tm.expect(m, "z-last.txt")
	m = tm.expect(m, prompt)
	tm.typeText("files download t " + t.TempDir() + "\r")
	m = tm.expect(m, "warning: skipped")
	m = tm.expect(m, prompt)
	tm.typeText("exit\r")
	if code := tm.wait(); code != 0 {
		t.Errorf("exit from the REPL: %d", code)
	}
	tm.drained()
	raw := tm.raw()
	// Line editing moves the cursor with CSI sequences of its own: look
	// for the box's.
	for _, n := range []string{titleName, clipName, clearName, "\x1b]", "\x07", "\u009b", "\x1b[2J"} {
		if strings.Contains(raw, n) {
			t.Errorf("the REPL put %q on the terminal:\n%q", n, raw)
		}
	}
	// All three in the listing; the FIFO and the unreadable file in the
	// warnings of the download too.
	for i, n := range escapedNames {
		got := strings.Count(raw, n)
		if i == 1 {
			got += strings.Count(raw, `\033]52;c;cHduZWQ=\a`) // as tar in the box names it
		}
		if want := min(2, 3-i); got < want {
			t.Errorf("the REPL shows %s escaped fewer than %d times:\n%s", n, want, tm.screen())
		}
	}
	for _, line := range []string{"a -> .", "b -> .", "l1/", "bad\uFFFDname"} {
		if !strings.Contains(raw, line) {
			t.Errorf("files list does not show %q:\n%s", line, tm.screen())
		}
	}
	_ = m
}
