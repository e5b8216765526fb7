package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chzyer/readline"

	"github.com/upstash/box-go/box"
)

// replCommands are the REPL's commands, each also written with a leading
// '/'. Plain text is a prompt for the box's agent.
var replCommands = []string{"run", "exec", "files", "git", "cd", "snapshot", "pause", "delete", "help", "exit"}

var replSub = map[string][]string{
	"files": {"read", "write", "list", "upload", "download"},
	"git":   {"status", "diff", "log", "commit", "push", "checkout", "clone", "create-pr"},
}

const replHelp = `Plain text runs the box's agent. Commands (also with a leading /):
  run <prompt>                     run the agent
  exec <command>                   run a shell command
  files read <path>                print a file
  files write <path> <text>        write a file
  files list [path]                list a directory
  files upload <local> [path]      copy a local file or tree into the box
  files download <path> [local]    copy a file or tree out of the box
  git status                       the working tree's state
  git diff                         the working tree's changes
  git log [n]                      the last n commits (20)
  git commit <message>             commit every change
  git push [branch]                push the branch (the current one)
  git checkout <branch>            switch branches
  git clone <repo> [dir]           clone a repository
  git create-pr <title>            open a pull request from the current branch
  cd <path>                        change the working directory
  snapshot [name]                  save the box's files
  pause                            freeze the box and leave
  delete                           delete the box and leave
  exit                             leave (the box keeps running)

Words are split as a shell splits them: quote a name with spaces ('a b' or
"a b", or a\ b). An unquoted ~ and $HOME are the box's home (on this
machine for the local path of files upload and download). exec and run take
the rest of the line as it is: exec's goes to a shell in the box.
`

// lineReader reads the REPL's input: a line editor on a terminal, plain
// lines otherwise.
type lineReader interface {
	readLine(prompt string) (string, error)
	close()
}

// delKey is what keyReader makes of the Delete key: Ctrl-_, which the
// line editor does not otherwise use.
const delKey = 0x1f

// deleteSeq is what a terminal sends for the Delete key.
var deleteSeq = []byte("\x1b[3~")

// keyReader is a terminal's input with the Delete key's sequence turned
// into delKey. A terminal sends a key's sequence in one write, which one
// read returns whole. It reads on a goroutine of its own, so that stop
// ends a read the line editor is blocked in: the editor may be reading
// ahead when the REPL ends, and waits for that read when it closes.
type keyReader struct {
	r    io.Reader
	once sync.Once
	data chan []byte
	errc chan error
	done chan struct{}
	buf  []byte // read and not yet returned
}

func newKeyReader(r io.Reader) *keyReader {
	return &keyReader{r: r, data: make(chan []byte), errc: make(chan error, 1), done: make(chan struct{})}
}

func (k *keyReader) Read(p []byte) (int, error) {
	k.once.Do(func() {
		go func() {
			for {
				b := make([]byte, 4096)
				n, err := k.r.Read(b)
				if n > 0 {
					select {
					case k.data <- bytes.ReplaceAll(b[:n], deleteSeq, []byte{delKey}):
					case <-k.done:
						return
					}
				}
				if err != nil {
					k.errc <- err
					return
				}
			}
		}()
	})
	if len(k.buf) == 0 {
		select {
		case k.buf = <-k.data:
		case err := <-k.errc:
			return 0, err
		case <-k.done:
			return 0, io.EOF
		}
	}
	n := copy(p, k.buf)
	k.buf = k.buf[n:]
	return n, nil
}

// Close ends the read in progress, and any after, with io.EOF.
func (k *keyReader) Close() error {
	select {
	case <-k.done:
	default:
		close(k.done)
	}
	return nil
}

type editor struct {
	rl   *readline.Instance
	keys *keyReader
}

func (e *editor) readLine(prompt string) (string, error) {
	e.rl.SetPrompt(prompt)
	line, err := e.rl.Readline()
	if errors.Is(err, readline.ErrInterrupt) {
		return "", nil // Ctrl-C drops the line
	}
	return line, err
}

func (e *editor) close() {
	_ = e.keys.Close()
	_ = e.rl.Close()
}

type plainLines struct{ sc *bufio.Scanner }

func (p *plainLines) readLine(string) (string, error) {
	if !p.sc.Scan() {
		if err := p.sc.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return p.sc.Text(), nil
}

func (p *plainLines) close() {}

// historyFile is where the REPL keeps its history.
func historyFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "box")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return filepath.Join(dir, "history")
}

func (a *app) repl(ctx context.Context, b *box.Box) error {
	var in lineReader
	if a.interactive() {
		// The line editor takes the Delete key for Ctrl-D, which leaves
		// the REPL on an empty line: the key comes to it as delKey
		// instead, a delete on a line that has text and nothing on an
		// empty one. Ctrl-D still leaves, as in a shell.
		var lineLen atomic.Int64
		keys := newKeyReader(a.stdin)
		rl, err := readline.NewEx(&readline.Config{
			HistoryFile:     historyFile(),
			AutoComplete:    &completer{ctx: ctx, b: b},
			InterruptPrompt: "^C",
			EOFPrompt:       "exit",
			Stdin:           io.NopCloser(keys),
			FuncFilterInputRune: func(r rune) (rune, bool) {
				if r != delKey {
					return r, true
				}
				return readline.CharDelete, lineLen.Load() > 0
			},
			Listener: readline.FuncListener(func(line []rune, _ int, _ rune) ([]rune, int, bool) {
				lineLen.Store(int64(len(line)))
				return nil, 0, false
			}),
			Stdout: a.stdout,
			Stderr: a.stderr,
		})
		if err != nil {
			return err
		}
		in = &editor{rl, keys}
		fmt.Fprintln(a.stdout, a.paint("2", "Type help for the commands; plain text goes to the agent."))
	} else {
		sc := bufio.NewScanner(a.stdin)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		in = &plainLines{sc}
	}
	defer in.close()
	// Piped, the REPL is a script: it ends with the status of its first
	// failure, as sh -e would tell it.
	piped, first := !a.interactive(), 0
	status := func() error {
		if first != 0 {
			return exitError{first}
		}
		return nil
	}
	for {
		line, err := in.readLine(a.paint("36", b.ID()+":"+b.Cwd()) + "> ")
		if err == io.EOF || errors.Is(err, readline.ErrInterrupt) {
			return status()
		}
		if err != nil {
			return err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// Ctrl-C while a line runs stops that line, not the REPL.
		lineCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
		leave, err := a.replLine(lineCtx, b, line)
		interrupted := lineCtx.Err() != nil && ctx.Err() == nil
		stop()
		var ee exitError
		switch {
		case interrupted:
			fmt.Fprintln(a.stderr, a.paint("33", "interrupted"))
		case errors.As(err, &ee):
			// A command's status: already shown.
		case err != nil:
			fmt.Fprintf(a.stderr, "%s %s\n", a.paint("31", "error:"), safeLines(a.redact(message(err))))
		}
		if piped && first == 0 && (err != nil || interrupted) {
			first = max(1, statusOf(err))
		}
		if leave {
			return status()
		}
	}
}

// replLine runs one line of the REPL and reports whether to leave it.
func (a *app) replLine(ctx context.Context, b *box.Box, line string) (leave bool, err error) {
	word, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	cmd := strings.TrimPrefix(word, "/")
	if !slices.Contains(replCommands, cmd) && !strings.HasPrefix(word, "/") {
		return false, a.runAgent(ctx, b, line)
	}
	switch cmd {
	case "pause", "delete", "exit":
		// "delete the build directory" is a prompt, not a request to
		// delete the box.
		if rest != "" {
			return false, badLine("%s takes no arguments; to ask the agent, write: run %s", cmd, line)
		}
	}
	switch cmd {
	case "help":
		fmt.Fprint(a.stdout, replHelp)
	case "exit":
		return true, nil
	case "run":
		if rest == "" {
			return false, badLine("run needs a prompt")
		}
		return false, a.runAgent(ctx, b, rest)
	case "exec":
		if rest == "" {
			return false, badLine("exec needs a command")
		}
		return false, a.replExec(ctx, b, rest)
	case "cd", "files", "git", "snapshot":
		words, err := splitLine(rest)
		if err != nil {
			return false, err
		}
		w := &replWords{a: a, ctx: ctx, b: b, words: words}
		switch cmd {
		case "cd":
			if len(words) > 1 {
				return false, badLine("cd takes one directory")
			}
			dir := w.box(0)
			if dir == "" {
				dir = box.WorkspaceHome
			}
			if w.err != nil {
				return false, w.err
			}
			return false, b.Cd(ctx, dir)
		case "files":
			return false, a.replFiles(ctx, b, w)
		case "git":
			return false, a.replGit(ctx, b, w)
		}
		name := w.rest(0)
		if w.err != nil {
			return false, w.err
		}
		if name == "" {
			name = b.ID() + "-snapshot"
		}
		var s *box.Snapshot
		err = a.spin("taking snapshot", func() (err error) { s, err = b.Snapshot(ctx, name); return err })
		if err == nil {
			fmt.Fprintf(a.stdout, "snapshot %s (%d bytes)\n", safe(s.ID), s.SizeBytes)
		}
		return false, err
	case "pause":
		if err := b.Pause(ctx); err != nil {
			return false, err
		}
		fmt.Fprintf(a.stdout, "paused %s\n", safe(b.ID()))
		return true, nil
	case "delete":
		if err := b.Delete(ctx); err != nil {
			return false, err
		}
		fmt.Fprintf(a.stdout, "deleted %s\n", safe(b.ID()))
		return true, nil
	default:
		return false, badLine("unknown command /%s: type help", cmd)
	}
	return false, nil
}

func (a *app) replExec(ctx context.Context, b *box.Box, command string) error {
	s, err := b.Exec.Stream(ctx, command)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := io.Copy(a.stdout, s); err != nil {
		return err
	}
	if code := s.Run().ExitCode; code != 0 {
		fmt.Fprintln(a.stdout, a.paint("33", fmt.Sprintf("exit %d", code)))
		return exitError{code}
	}
	return nil
}

// runAgent streams an agent run of prompt.
func (a *app) runAgent(ctx context.Context, b *box.Box, prompt string) error {
	if b.Info().Harness == "" {
		return errors.New("this box has no agent: create one with --agent-model, or type help for the commands")
	}
	// The agent may think a while before it says anything: a spinner
	// shows until it does.
	stop := a.spinner("agent working")
	defer stop()
	s, err := b.Agent.Stream(ctx, &box.AgentParams{Prompt: prompt})
	if err != nil {
		return err
	}
	defer s.Close()
	wrote := false
	for c, err := range s.All() {
		switch c.(type) {
		case *box.TextDeltaChunk, *box.ToolCallChunk, *box.FinishChunk:
			stop()
		}
		if err != nil {
			stop()
			if ctx.Err() != nil && s.Run().ID != "" {
				// Interrupted: the run stops on the box too.
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				_ = s.Run().Cancel(cctx)
				cancel()
			}
			return err
		}
		switch c := c.(type) {
		case *box.TextDeltaChunk:
			fmt.Fprint(a.stdout, c.Text)
			wrote = true
		case *box.ToolCallChunk:
			in, _ := json.Marshal(c.Input)
			fmt.Fprintln(a.stdout, a.paint("2", "› "+c.ToolName+" "+string(in)))
		case *box.FinishChunk:
			if !wrote && c.Output != "" {
				fmt.Fprint(a.stdout, c.Output)
			}
			fmt.Fprintln(a.stdout)
			fmt.Fprintln(a.stdout, a.paint("2", fmt.Sprintf("%d input / %d output tokens", c.Usage.InputTokens, c.Usage.OutputTokens)))
		}
	}
	return nil
}

func (a *app) replFiles(ctx context.Context, b *box.Box, w *replWords) error {
	sub := w.word(0)
	switch sub {
	case "read":
		p := w.box(1)
		if p == "" || len(w.words) > 2 {
			return badLine("files read needs a path")
		}
		if w.err != nil {
			return w.err
		}
		_, err := b.Files.DownloadTo(ctx, p, a.stdout, nil)
		return err
	case "write":
		p, text := w.box(1), w.rest(2)
		if p == "" || len(w.words) < 3 {
			return badLine("files write needs a path and text")
		}
		if w.err != nil {
			return w.err
		}
		return b.Files.WriteText(ctx, p, text+"\n")
	case "list":
		p := w.box(1)
		if w.err != nil {
			return w.err
		}
		entries, err := b.Files.List(ctx, p)
		if err != nil {
			return err
		}
		// Names come from the box: table escapes them.
		rows := make([][]string, len(entries))
		for i, e := range entries {
			name := e.Name
			switch {
			case e.Type == box.FileTypeSymlink:
				name += " -> " + e.Target
			case e.IsDir:
				name += "/"
			}
			rows[i] = []string{name, fmt.Sprint(e.Size), e.ModTime.Local().Format("Jan _2 15:04")}
		}
		return a.table([]string{"NAME", "SIZE", "MODIFIED"}, rows, func(r, c int) string {
			switch {
			case c != 0:
				return ""
			case entries[r].Type == box.FileTypeSymlink:
				return "36"
			case entries[r].IsDir:
				return "34"
			}
			return ""
		})
	case "upload":
		local, dest := w.local(1), w.box(2)
		if local == "" || len(w.words) > 3 {
			return badLine("files upload needs a local path, and at most a box path")
		}
		if w.err != nil {
			return w.err
		}
		return a.upload(ctx, local, remote{box: b.ID(), path: join(b, dest)}, false)
	case "download":
		p, local := w.box(1), w.local(2)
		if p == "" || len(w.words) > 3 {
			return badLine("files download needs a box path, and at most a local path")
		}
		if w.err != nil {
			return w.err
		}
		if local == "" {
			local = "."
		}
		return a.download(ctx, remote{box: b.ID(), path: join(b, p)}, local, false)
	}
	return badLine("files %q: use read, write, list, upload or download", sub)
}

// join resolves p against b's working directory ("" stays "").
func join(b *box.Box, p string) string {
	if p == "" || strings.HasPrefix(p, "/") {
		return p
	}
	return path.Join(b.Cwd(), p)
}

func (a *app) replGit(ctx context.Context, b *box.Box, w *replWords) error {
	sub := w.word(0)
	switch sub {
	case "clone":
		repo, dir := w.word(1), w.box(2)
		if repo == "" || len(w.words) > 3 {
			return badLine("git clone needs a repository, and at most a directory")
		}
		if w.err != nil {
			return w.err
		}
		err := a.spin("cloning", func() error {
			return b.Git.Clone(ctx, &box.CloneParams{Repo: repo, Folder: dir})
		})
		if err == nil {
			fmt.Fprintf(a.stdout, "cloned %s\n", safe(repo))
		}
		return err
	case "status", "diff", "log":
		var out string
		var err error
		switch sub {
		case "status":
			out, err = b.Git.Status(ctx)
		case "diff":
			out, err = b.Git.Diff(ctx)
		case "log":
			args := []string{"log", "--oneline", "--decorate", "-n", "20"}
			if n := w.word(1); n != "" {
				if _, perr := strconv.Atoi(n); perr != nil || len(w.words) > 2 {
					return badLine("git log takes at most a number of commits")
				}
				args[4] = n
			}
			var r box.GitExecResult
			r, err = b.Git.Exec(ctx, args)
			out = r.Output
		}
		if err == nil {
			fmt.Fprint(a.stdout, out)
		}
		return err
	case "commit":
		msg := w.rest(1)
		if msg == "" {
			return badLine("git commit needs a message")
		}
		r, err := b.Git.Commit(ctx, &box.CommitParams{Message: msg})
		if err == nil {
			fmt.Fprintf(a.stdout, "committed %s %s\n", safe(shortSHA(r.SHA)), safe(r.Message))
		}
		return err
	case "push":
		branch := w.word(1)
		if len(w.words) > 2 {
			return badLine("git push takes at most a branch")
		}
		err := a.spin("pushing", func() error { return b.Git.Push(ctx, &box.PushParams{Branch: branch}) })
		if err == nil {
			fmt.Fprintln(a.stdout, "pushed")
		}
		return err
	case "checkout":
		branch := w.word(1)
		if branch == "" || len(w.words) > 2 {
			return badLine("git checkout needs a branch")
		}
		if err := b.Git.Checkout(ctx, branch); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "on %s\n", safe(branch))
		return nil
	case "create-pr":
		title := w.rest(1)
		if title == "" {
			return badLine("git create-pr needs a title")
		}
		pr, err := b.Git.CreatePR(ctx, &box.PRParams{Title: title})
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, safe(pr.URL))
		if pr.Warning != "" {
			fmt.Fprintln(a.stderr, a.paint("33", "warning: "+safe(pr.Warning)))
		}
		return nil
	}
	return badLine("git %q: use status, diff, log, commit, push, checkout, clone or create-pr", sub)
}

// shortSHA is the first 7 characters of a commit's sha.
func shortSHA(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// completer completes the REPL's commands, and box paths after the
// commands that take one.
type completer struct {
	ctx context.Context
	b   *box.Box
}

func (c *completer) Do(line []rune, pos int) ([][]rune, int) {
	text := string(line[:pos])
	words := strings.Fields(text)
	if len(words) == 0 || len(words) == 1 && !strings.HasSuffix(text, " ") {
		prefix := ""
		if len(words) == 1 {
			prefix = words[0]
		}
		prefix = strings.TrimPrefix(prefix, "/")
		return complete(prefix, replCommands), len([]rune(prefix))
	}
	cmd := strings.TrimPrefix(words[0], "/")
	last := ""
	if !strings.HasSuffix(text, " ") {
		last = words[len(words)-1]
	}
	if subs, ok := replSub[cmd]; ok && (len(words) == 1 || len(words) == 2 && last != "") {
		return complete(last, subs), len([]rune(last))
	}
	switch {
	case cmd == "files" && len(words) >= 2 && words[1] == "upload" && (len(words) == 2 || len(words) == 3 && last != ""):
		return localPaths(last) // what to upload is on this machine
	case cmd == "cd" || cmd == "files":
		return c.paths(last)
	}
	return nil, 0
}

// localPaths completes a path on this machine.
func localPaths(p string) ([][]rune, int) {
	dir, base := filepath.Split(p)
	entries, err := os.ReadDir(cmp.Or(dir, "."))
	if err != nil {
		return nil, 0
	}
	names := make([]pathName, len(entries))
	for i, e := range entries {
		names[i] = pathName{e.Name(), e.IsDir()}
	}
	return completeNames(base, names, string(filepath.Separator)), len([]rune(base))
}

// pathName is a directory entry a path completes to.
type pathName struct {
	name string
	dir  bool
}

// completeNames returns the endings of the names that start with base: a
// directory's ends in sep, so that completion goes on inside it.
func completeNames(base string, names []pathName, sep string) [][]rune {
	var out [][]rune
	for _, n := range names {
		if !strings.HasPrefix(n.name, base) {
			continue
		}
		end := n.name[len(base):]
		if n.dir {
			end += sep
		} else {
			end += " "
		}
		out = append(out, []rune(end))
	}
	return out
}

// complete returns the endings of the candidates that start with prefix.
func complete(prefix string, candidates []string) [][]rune {
	var out [][]rune
	for _, cand := range candidates {
		if strings.HasPrefix(cand, prefix) {
			out = append(out, []rune(cand[len(prefix):]+" "))
		}
	}
	return out
}

// paths completes a box path.
func (c *completer) paths(p string) ([][]rune, int) {
	dir, base := path.Split(p)
	list := dir
	if list == "" {
		list = "."
	}
	entries, err := c.b.Files.List(c.ctx, list)
	if err != nil {
		return nil, 0
	}
	names := make([]pathName, 0, len(entries))
	for _, e := range entries {
		// A name that would need escaping is never put on the line.
		if safe(e.Name) == e.Name {
			names = append(names, pathName{e.Name, e.IsDir})
		}
	}
	return completeNames(base, names, "/"), len([]rune(base))
}

// badLine is a REPL line that cannot be understood: bad input, as a
// command line box cannot read is.
func badLine(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}
