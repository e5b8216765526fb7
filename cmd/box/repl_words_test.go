package main

import (
	"strings"
	"testing"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// harnessBox makes a box of srv whose agent is the test harness.
func harnessBox(t *testing.T, srv *boxtest.Server) *box.Box {
	t.Helper()
	ctx := t.Context()
	b, err := srv.Client().Create(ctx, &box.CreateParams{Agent: &box.AgentOptions{
		Harness: box.HarnessCustom, Model: "custom/demo",
		CustomHarness: &box.CustomHarness{Command: "/home/boxuser/bin/testharness"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Files.Upload(ctx, []box.UploadFile{{LocalPath: harnessBin, Destination: "/home/boxuser/bin/testharness"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec.Command(ctx, "chmod +x /home/boxuser/bin/testharness"); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestREPLShellWords: in a real terminal, the REPL splits words as a
// shell does (quotes, backslashes, ~ and $HOME as the box's home), has
// git status, log, commit, push and checkout, takes the Delete key on an
// empty line for nothing (it used to leave the REPL), and shows a
// spinner while the agent has said nothing yet.
func TestREPLShellWords(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := harnessBox(t, srv)
	id := b.ID()
	tm := inTerminal(t, srv, "connect", id)
	prompt := id + ":/workspace/home> "
	m := tm.expect(0, prompt)
	line := func(s string) {
		t.Helper()
		tm.typeText(s + "\r")
	}

	line(`files write "a b.txt" hello   'quoted  words'`)
	m = tm.expect(m, prompt)
	line(`exec cat 'a b.txt' | tr a-z A-Z`)
	m = tm.expect(m, "HELLO QUOTED  WORDS\n")
	line(`files write a\ c.txt '$HOME stays' "but $HOME goes"`)
	m = tm.expect(m, prompt)
	line(`files read "a c.txt"`)
	m = tm.expect(m, "$HOME stays but /home/boxuser goes\n")
	line(`files write "unclosed`)
	m = tm.expect(m, `a " is not closed`)

	// Delete on an empty line does nothing; on a line, it deletes.
	tm.typeText("\x1b[3~")
	tm.typeText("exec echo del-$((6*7))X\x1b[D\x1b[3~\r")
	m = tm.expect(m, "del-42\n")

	line("cd ~")
	home := id + ":/home/boxuser> "
	m = tm.expect(m, home)
	line("cd $HOME/..")
	m = tm.expect(m, id+":/home> ")
	line("cd")
	m = tm.expect(m, prompt)

	// git, on a repository with a remote in the box.
	line(`exec git init -q -b main repo && git -C repo config user.email t@example.com && git -C repo config user.name T && git init -q --bare /tmp/remote.git && git -C repo remote add origin /tmp/remote.git && echo made`)
	m = tm.expect(m, "made\n")
	line("cd repo")
	repo := id + ":/workspace/home/repo> "
	m = tm.expect(m, repo)
	line(`files write "new file.txt" one`)
	m = tm.expect(m, repo)
	line("git status")
	m = tm.expect(m, "new file.txt")
	m = tm.expect(m, repo)
	line(`git commit the first "commit"`)
	m = tm.expect(m, "committed ")
	m = tm.expect(m, "the first commit\n")
	line("git log")
	m = tm.expect(m, "the first commit")
	m = tm.expect(m, repo)
	line("exec git branch feature")
	m = tm.expect(m, repo)
	line("git checkout feature")
	m = tm.expect(m, "on feature\n")
	line("git push")
	m = tm.expect(m, "pushed\n")
	line("exec git --git-dir=/tmp/remote.git log --format=%s feature")
	m = tm.expect(m, "the first commit\n")

	// A spinner, then the agent's text.
	line("run sleep 1")
	m = tm.expect(m, "agent working")
	m = tm.expect(m, repo)
	tm.typeText("\x04") // Ctrl-D leaves, as in a shell
	if code := tm.wait(); code != 0 {
		t.Errorf("Ctrl-D: exit %d\n%s", code, tm.screen())
	}
	_ = m
}

// TestSplitLine: the REPL's words, as sh would split them.
func TestSplitLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`a  b	c`, []string{"a", "b", "c"}},
		{`"a b" 'c d' e\ f`, []string{"a b", "c d", "e f"}},
		{`"x\"y" 'it''s' "\$HOME" '$HOME' $HOME ${HOME}/x $HOMEX`, []string{`x"y`, "its", "$HOME", "$HOME", homeMark, homeMark + "/x", "$HOMEX"}},
		{`~ ~/a a~ "~" x/~`, []string{homeMark, homeMark + "/a", "a~", "~", "x/~"}},
		{`"" ''`, []string{"", ""}},
	} {
		got, err := splitLine(tc.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("splitLine(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`"open`, `'open`, `end\`} {
		if _, err := splitLine(in); err == nil {
			t.Errorf("splitLine(%q) succeeded", in)
		}
	}
}
