package main

import (
	"bufio"
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
	"strings"
	"time"

	"github.com/chzyer/readline"

	"github.com/upstash/box-go/box"
)

// replCommands are the REPL's commands, each also written with a leading
// '/'. Plain text is a prompt for the box's agent.
var replCommands = []string{"run", "exec", "files", "git", "cd", "snapshot", "pause", "delete", "help", "exit"}

var replSub = map[string][]string{
	"files": {"read", "write", "list", "upload", "download"},
	"git":   {"clone", "diff", "create-pr"},
}

const replHelp = `Plain text runs the box's agent. Commands (also with a leading /):
  run <prompt>                     run the agent
  exec <command>                   run a shell command
  files read <path>                print a file
  files write <path> <text>        write a file
  files list [path]                list a directory
  files upload <local> [path]      copy a local file or tree into the box
  files download <path> [local]    copy a file or tree out of the box
  git clone <repo> [dir]           clone a repository
  git diff                         the working tree's changes
  git create-pr <title>            open a pull request from the current branch
  cd <path>                        change the working directory
  snapshot [name]                  save the box's files
  pause                            freeze the box and leave
  delete                           delete the box and leave
  exit                             leave (the box keeps running)
`

// lineReader reads the REPL's input: a line editor on a terminal, plain
// lines otherwise.
type lineReader interface {
	readLine(prompt string) (string, error)
	close()
}

type editor struct{ rl *readline.Instance }

func (e *editor) readLine(prompt string) (string, error) {
	e.rl.SetPrompt(prompt)
	line, err := e.rl.Readline()
	if errors.Is(err, readline.ErrInterrupt) {
		return "", nil // Ctrl-C drops the line
	}
	return line, err
}

func (e *editor) close() { _ = e.rl.Close() }

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
		rl, err := readline.NewEx(&readline.Config{
			HistoryFile:     historyFile(),
			AutoComplete:    &completer{ctx: ctx, b: b},
			InterruptPrompt: "^C",
			EOFPrompt:       "exit",
			Stdin:           a.stdin,
			Stdout:          a.stdout,
			Stderr:          a.stderr,
		})
		if err != nil {
			return err
		}
		in = &editor{rl}
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
	case "cd":
		if rest == "" {
			rest = box.WorkspaceHome
		}
		return false, b.Cd(ctx, rest)
	case "files":
		return false, a.replFiles(ctx, b, rest)
	case "git":
		return false, a.replGit(ctx, b, rest)
	case "snapshot":
		name := rest
		if name == "" {
			name = b.ID() + "-snapshot"
		}
		var s *box.Snapshot
		err := a.spin("taking snapshot", func() (err error) { s, err = b.Snapshot(ctx, name); return err })
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
	s, err := b.Agent.Stream(ctx, &box.AgentParams{Prompt: prompt})
	if err != nil {
		return err
	}
	defer s.Close()
	wrote := false
	for c, err := range s.All() {
		if err != nil {
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

func (a *app) replFiles(ctx context.Context, b *box.Box, rest string) error {
	sub, args, _ := strings.Cut(rest, " ")
	args = strings.TrimSpace(args)
	switch sub {
	case "read":
		if args == "" {
			return badLine("files read needs a path")
		}
		_, err := b.Files.DownloadTo(ctx, args, a.stdout, nil)
		return err
	case "write":
		p, text, ok := strings.Cut(args, " ")
		if !ok || p == "" {
			return badLine("files write needs a path and text")
		}
		return b.Files.WriteText(ctx, p, text+"\n")
	case "list":
		entries, err := b.Files.List(ctx, args)
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
		local, dest, _ := strings.Cut(args, " ")
		if local == "" {
			return badLine("files upload needs a local path")
		}
		return a.upload(ctx, local, remote{box: b.ID(), path: join(b, strings.TrimSpace(dest))}, false)
	case "download":
		p, local, _ := strings.Cut(args, " ")
		if p == "" {
			return badLine("files download needs a path")
		}
		if local = strings.TrimSpace(local); local == "" {
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

func (a *app) replGit(ctx context.Context, b *box.Box, rest string) error {
	sub, args, _ := strings.Cut(rest, " ")
	args = strings.TrimSpace(args)
	switch sub {
	case "clone":
		repo, dir, _ := strings.Cut(args, " ")
		if repo == "" {
			return badLine("git clone needs a repository")
		}
		err := a.spin("cloning", func() error {
			return b.Git.Clone(ctx, &box.CloneParams{Repo: repo, Folder: strings.TrimSpace(dir)})
		})
		if err == nil {
			fmt.Fprintf(a.stdout, "cloned %s\n", repo)
		}
		return err
	case "diff":
		d, err := b.Git.Diff(ctx)
		if err == nil {
			fmt.Fprint(a.stdout, d)
		}
		return err
	case "create-pr":
		if args == "" {
			return badLine("git create-pr needs a title")
		}
		pr, err := b.Git.CreatePR(ctx, &box.PRParams{Title: args})
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, safe(pr.URL))
		if pr.Warning != "" {
			fmt.Fprintln(a.stderr, a.paint("33", "warning: "+pr.Warning))
		}
		return nil
	}
	return badLine("git %q: use clone, diff or create-pr", sub)
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
