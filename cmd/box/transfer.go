package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/internal/terminal"
	"github.com/upstash/box-go/session"
)

func (a *app) execCmd() *cobra.Command {
	var stdin, tty bool
	var workdir string
	var envs []string
	c := &cobra.Command{
		Use:   "exec [-i] [-t] [-w dir] [-e KEY=VALUE]... <box-id> -- <command> [args...]",
		Short: "Run a command in a box, with its stdout and stderr, and its exit status",
		Long: `Run a program in a box (no shell: write sh -c '...' for one). Its standard
output and standard error stay apart, and box exits with the command's
own status: 127 when the program is not there, 126 when it cannot run,
128+n when a signal n ended it. Standard input reaches the command when
it is not a terminal, or with -i when it is; -t gives the command a
terminal (raw keys, the window's size) and implies -i.

With --json, the output is collected and printed once the command ends,
as {"exit_code", "stdout", "stderr"} (invalid UTF-8 shows as U+FFFD);
box still exits with the command's status.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return usageError{errors.New("expected a box id, then -- and the command")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := parseEnv("-e", envs)
			if err != nil {
				return err
			}
			if tty && !a.interactive() {
				return usageError{errors.New("-t needs a terminal on standard input")}
			}
			if tty && a.json {
				return usageError{errors.New("--json collects the output, and cannot go with -t")}
			}
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			p := terminal.Params{Argv: args[1:], Cwd: workdir, Env: env, Stdout: a.stdout, Stderr: a.stderr, TTY: tty}
			if stdin || tty || !a.interactive() {
				p.Stdin = a.stdin
			}
			if !a.json {
				return a.runIn(cmd.Context(), b, p)
			}
			var out, errb bytes.Buffer
			p.Stdout, p.Stderr = &out, &errb
			code, err := runCode(cmd.Context(), b, p)
			if err != nil {
				return err
			}
			if err := a.printJSON(map[string]any{"exit_code": code, "stdout": out.String(), "stderr": errb.String()}); err != nil {
				return err
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&stdin, "interactive", "i", false, "pass standard input on when it is a terminal too")
	c.Flags().BoolVarP(&tty, "tty", "t", false, "run the command in a terminal (implies -i)")
	c.Flags().StringVarP(&workdir, "workdir", "w", "", "the command's working directory (relative ones from /workspace/home)")
	c.Flags().StringArrayVarP(&envs, "env", "e", nil, "an environment variable for the command, KEY=VALUE (repeatable)")
	return c
}

// parseEnv checks KEY=VALUE entries given with flag.
func parseEnv(flag string, kvs []string) ([]string, error) {
	for _, kv := range kvs {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, usageError{fmt.Errorf("%s %q is not KEY=VALUE", flag, kv)}
		}
	}
	return kvs, nil
}

// runIn runs p in b and ends box with its exit status.
func (a *app) runIn(ctx context.Context, b *box.Box, p terminal.Params) error {
	code, err := runCode(ctx, b, p)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitError{code}
	}
	return nil
}

// runCode runs p in b and returns its exit status. A program that cannot
// start is a status, as a shell gives it: 127 when it is not there, 126
// when it is but cannot run, with the reason on p.Stderr.
func runCode(ctx context.Context, b *box.Box, p terminal.Params) (int, error) {
	code, err := terminal.Run(ctx, b, p)
	var se *session.ServerError
	if errors.As(err, &se) && strings.HasPrefix(se.Message, "cannot start ") {
		code = 126
		if strings.Contains(se.Message, "not found") || strings.Contains(se.Message, "no such file") {
			code = 127
		}
		if p.Stderr != nil {
			fmt.Fprintf(p.Stderr, "box: %s\n", safe(se.Message))
		}
		return code, nil
	}
	return code, err
}

func (a *app) shellCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "shell [box-id] [-- command [args...]]",
		Short: "Open an interactive shell in a box (the newest one when no id is given), or run a command in a terminal",
		Long: `Open a login shell in a box, in a terminal: the newest box when no id is
given. After --, the command given runs instead, in a terminal when
standard input is one. box exits with the shell's or the command's status.`,
		Args: func(cmd *cobra.Command, args []string) error {
			ids := len(args)
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				ids = d
				if d == len(args) {
					return usageError{errors.New("expected a command after --")}
				}
			}
			if ids > 1 {
				return usageError{errors.New("expected at most one box id (and a command after --)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ids, argv := args, []string{"sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l"}
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				ids, argv = args[:d], args[d:]
			}
			b, err := a.boxOrNewest(ctx, ids)
			if err != nil {
				return err
			}
			return a.runIn(ctx, b, terminal.Params{
				Argv:   argv,
				Stdin:  a.stdin,
				Stdout: a.stdout,
				Stderr: a.stderr,
				TTY:    a.interactive(),
			})
		},
	}
}

// boxOrNewest returns the box args name, or the newest box.
func (a *app) boxOrNewest(ctx context.Context, args []string) (*box.Box, error) {
	if len(args) == 1 {
		return a.getBox(ctx, args[0])
	}
	cl, err := a.api()
	if err != nil {
		return nil, err
	}
	list, err := cl.List(ctx, nil)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, errors.New("there is no box: create one with box create")
	}
	return cl.Get(ctx, newest(list).ID, nil)
}

// newest returns the box created last. Creation times are whole seconds,
// so of boxes created in the same second the one listed last wins (boxd
// lists oldest first).
func newest(list []box.Info) box.Info {
	n := list[0]
	for _, in := range list[1:] {
		if !in.CreatedAt.Before(n.CreatedAt) {
			n = in
		}
	}
	return n
}

// remote is one side of a copy: a path in a box when box is set, else a
// local path.
type remote struct {
	box  string
	path string
}

func parseSide(s string) remote {
	if i := strings.IndexByte(s, ':'); i > 0 && !strings.ContainsAny(s[:i], `/\.`) {
		return remote{box: s[:i], path: s[i+1:]}
	}
	return remote{path: s}
}

func (a *app) cpCmd() *cobra.Command {
	var follow bool
	c := &cobra.Command{
		Use:   "cp <source>... <destination>",
		Short: "Copy files and trees between this machine and a box, or two boxes",
		Long: `Copy files and whole directory trees between this machine and a box, or
from one box to another, keeping what cp -a keeps: file modes (set-id and
sticky bits included), symbolic links as links (never followed, on either
side), empty directories and modification times. Owners are not kept: the
box's user owns what lands in a box, and you what lands here. FIFOs,
sockets and devices are skipped with a warning, and so is an entry
that cannot be read; box cp then exits 1 after copying the rest.

A box path is written <box-id>:<path>, relative paths in it from
/workspace/home. As with cp -r, a destination that is a directory (or
ends in /) receives the copy, and one that is not becomes it; several
sources need a directory. A local source may be a glob (quoted, so that
box expands it). The tree travels as one tar stream through tar in the
box; a box without tar gets the file API, which keeps contents and
directories alone, and box cp says so (a tar stream and a copy from box
to box need tar).

- is standard input or output: a file's content, or, to or from a box
directory, a tar stream of it (as docker cp does).

  box cp ./src box-abc:src               # a tree, up
  box cp box-abc:/workspace/home/out .   # a tree or a file, down
  box cp box-abc:out box-def:            # from box to box
  box cp './*.go' box-abc:src/           # a glob, expanded by box
  tar c . | box cp - box-abc:src/        # a tar stream into a directory
  box cp box-abc:src - | tar t           # and out of one`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{errors.New("expected a source and a destination")}
			}
			return nil
		},
		ValidArgsFunction: a.completeCp,
		RunE: func(cmd *cobra.Command, args []string) error {
			dst := parseSide(args[len(args)-1])
			var srcs []remote
			for _, s := range args[:len(args)-1] {
				src := parseSide(s)
				if src.box != "" || src.path == "-" || !hasGlob(src.path) {
					srcs = append(srcs, src)
					continue
				}
				if _, err := os.Lstat(src.path); err == nil {
					srcs = append(srcs, src) // a name that only looks like a glob
					continue
				}
				matches, err := filepath.Glob(src.path)
				if err != nil {
					return usageError{fmt.Errorf("glob %q: %w", src.path, err)}
				}
				if len(matches) == 0 {
					return fmt.Errorf("%s: no such file or directory", src.path)
				}
				for _, m := range matches {
					srcs = append(srcs, remote{path: m})
				}
			}
			if len(srcs) > 1 {
				if slices.ContainsFunc(srcs, func(r remote) bool { return r.path == "-" }) {
					return usageError{errors.New("- must be the only source")}
				}
				// Several sources go into a directory.
				if dst.box != "" && !strings.HasSuffix(dst.path, "/") {
					dst.path += "/"
				}
				if dst.box == "" {
					if fi, err := os.Stat(dst.path); err != nil || !fi.IsDir() {
						return usageError{fmt.Errorf("copying several sources needs a directory as destination, and %s is not one", dst.path)}
					}
				}
			}
			for _, src := range srcs {
				var err error
				switch {
				case src.box != "" && dst.box != "":
					err = a.relay(cmd.Context(), src, dst, follow)
				case src.box != "":
					err = a.download(cmd.Context(), src, dst.path, follow)
				case dst.box != "":
					err = a.upload(cmd.Context(), src.path, dst, follow)
				default:
					return usageError{errors.New("one side of box cp must be <box-id>:<path>")}
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&follow, "follow-link", "L", false, "follow the source if it is a symbolic link (nothing under it is followed)")
	return c
}

// hasGlob reports whether p holds a character filepath.Match treats as
// special.
func hasGlob(p string) bool { return strings.ContainsAny(p, `*?[`) }

// bar returns a progress bar on standard error for total bytes (-1 when
// unknown), or nil when standard error is not a terminal.
func (a *app) bar(what string, total int64) *progressbar.ProgressBar {
	f, ok := a.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || a.json {
		return nil
	}
	bar := progressbar.NewOptions64(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100_000_000)) // 100 ms
	_ = bar.RenderBlank()
	return bar
}

func progress(bar *progressbar.ProgressBar) *box.TransferParams {
	if bar == nil {
		return nil
	}
	return &box.TransferParams{Progress: func(done, total int64) {
		if total > 0 && bar.GetMax64() != total {
			bar.ChangeMax64(total)
		}
		_ = bar.Set64(done)
	}}
}

// noTar warns, once a run, that the box cannot keep what the file API
// does not carry.
func (a *app) noTar(b *box.Box) {
	if a.noTarSaid[b.ID()] {
		return
	}
	if a.noTarSaid == nil {
		a.noTarSaid = map[string]bool{}
	}
	a.noTarSaid[b.ID()] = true
	fmt.Fprintf(a.stderr, "box: warning: %s has no tar: copying with the file API, which keeps contents and directories but not modes, links or times\n", safe(b.ID()))
}

// intoBoxDir reports whether the box path dest is a directory that
// receives a copy: it ends in / or is one.
func intoBoxDir(ctx context.Context, b *box.Box, dest string) bool {
	if dest == "" || strings.HasSuffix(dest, "/") {
		return true
	}
	st, err := b.Files.Stat(ctx, dest, &box.StatParams{Follow: true})
	return err == nil && st.Type == box.FileTypeDirectory
}

func (a *app) upload(ctx context.Context, local string, to remote, follow bool) error {
	b, err := a.getBox(ctx, to.box)
	if err != nil {
		return err
	}
	dest := to.path
	if local == "-" {
		if intoBoxDir(ctx, b, dest) {
			// A tar stream, unpacked into the directory as it is.
			t, err := startTar(ctx, b, tarIn, abs(b, dest))
			if err != nil {
				return err
			}
			bar := a.bar("uploading", -1)
			n, cerr := io.Copy(t.stdin, &countingReader{r: a.stdin, report: barReport(bar)})
			_ = t.stdin.Close()
			go io.Copy(io.Discard, t.stdout)
			err = t.wait()
			finish(bar)
			if errors.Is(err, errNoTar) {
				return fmt.Errorf("%s has no tar to unpack a stream with", b.ID())
			}
			if err == nil {
				err = cerr
			}
			return a.copied(err, copyStats{bytes: n, entries: -1}, "stdin", to.box+":"+dest, nil)
		}
		bar := a.bar("uploading", -1)
		n, err := b.Files.WriteFrom(ctx, dest, a.stdin, progress(bar))
		finish(bar)
		return a.copied(err, copyStats{bytes: n, entries: 1}, "stdin", to.box+":"+dest, nil)
	}
	// As cp -r: into the destination when it is a directory, else the
	// destination becomes the copy.
	if intoBoxDir(ctx, b, dest) {
		dest = path.Join(dest, filepath.Base(filepath.Clean(local)))
	}
	if follow {
		// From here on, what the link names: a walk from the link
		// itself would not enter the directory behind it.
		if local, err = filepath.EvalSymlinks(local); err != nil {
			return err
		}
	}
	fi, err := os.Lstat(local)
	if err != nil {
		return err
	}
	w := &warner{a: a}
	st, err := a.uploadTar(ctx, b, local, abs(b, dest), w)
	if errors.Is(err, errNoTar) {
		a.noTar(b)
		st, err = a.uploadAPI(ctx, b, local, dest, fi)
	}
	return a.copied(err, st, local, to.box+":"+dest, w)
}

// uploadAPI copies with the file API alone: contents and directories.
func (a *app) uploadAPI(ctx context.Context, b *box.Box, local, dest string, fi os.FileInfo) (copyStats, error) {
	if fi.IsDir() {
		bar := a.bar("uploading", -1)
		err := b.Files.UploadDir(ctx, local, dest, progress(bar))
		finish(bar)
		return copyStats{entries: -1, bytes: -1}, err
	}
	f, err := os.Open(local)
	if err != nil {
		return copyStats{}, err
	}
	defer f.Close()
	bar := a.bar("uploading", fi.Size())
	n, err := b.Files.WriteFrom(ctx, dest, sized{f, fi.Size()}, progress(bar))
	finish(bar)
	return copyStats{entries: 1, bytes: n}, err
}

// barReport is a report of bytes moved for bar, which may be nil.
func barReport(bar *progressbar.ProgressBar) func(int64) {
	if bar == nil {
		return nil
	}
	var done int64
	return func(n int64) {
		done += n
		_ = bar.Set64(done)
	}
}

// sized is a reader of a known length (WriteFrom reports progress
// against it).
type sized struct {
	io.Reader
	n int64
}

func (s sized) Len() int { return int(s.n) }

func (a *app) download(ctx context.Context, from remote, local string, follow bool) error {
	b, err := a.getBox(ctx, from.box)
	if err != nil {
		return err
	}
	src := abs(b, from.path)
	st, err := b.Files.Stat(ctx, src, &box.StatParams{Follow: true})
	if err != nil {
		return err
	}
	if local == "-" {
		if st.Type != box.FileTypeDirectory {
			_, err := b.Files.DownloadTo(ctx, src, a.stdout, nil)
			return err
		}
		// A directory goes out as a tar stream, as tar in the box
		// writes it.
		dir, name := splitBox(src)
		h := ""
		if follow {
			h = "h"
		}
		t, err := startTar(ctx, b, tarOut, dir, name, h)
		if err != nil {
			return err
		}
		_ = t.stdin.Close()
		_, cerr := io.Copy(a.stdout, t.stdout)
		if err := t.wait(); err != nil {
			return err
		}
		return cerr
	}
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		local = filepath.Join(local, path.Base(src))
	}
	w := &warner{a: a}
	cs, err := a.downloadTar(ctx, b, src, local, follow, w)
	if errors.Is(err, errNoTar) {
		a.noTar(b)
		cs, err = a.downloadAPI(ctx, b, src, local, st)
	}
	return a.copied(err, cs, from.box+":"+src, local, w)
}

// downloadAPI copies with the file API alone: contents, directories and
// the links the SDK can make again.
func (a *app) downloadAPI(ctx context.Context, b *box.Box, src, local string, st *box.FileInfo) (copyStats, error) {
	if st.Type == box.FileTypeDirectory {
		bar := a.bar("downloading", -1)
		err := b.Files.DownloadDir(ctx, src, local, progress(bar))
		finish(bar)
		var se *box.SkippedError
		if errors.As(err, &se) {
			for _, s := range se.Skipped {
				fmt.Fprintf(a.stderr, "box: warning: skipped %s: %s\n", safe(s.Path), safeLines(a.redact(s.Err.Error())))
			}
			return copyStats{}, fmt.Errorf("copied %s to %s but for %d %s (see the warnings above)", b.ID()+":"+src, local, len(se.Skipped), plural(len(se.Skipped), "entry", "entries"))
		}
		return copyStats{entries: -1, bytes: -1}, err
	}
	out, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return copyStats{}, err
	}
	bar := a.bar("downloading", st.Size)
	n, err := b.Files.DownloadTo(ctx, src, out, progress(bar))
	finish(bar)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return copyStats{entries: 1, bytes: n}, err
}

// relay copies from one box to another.
func (a *app) relay(ctx context.Context, from, to remote, follow bool) error {
	src, err := a.getBox(ctx, from.box)
	if err != nil {
		return err
	}
	dst, err := a.getBox(ctx, to.box)
	if err != nil {
		return err
	}
	p := abs(src, from.path)
	if _, err := src.Files.Stat(ctx, p, &box.StatParams{Follow: true}); err != nil {
		return err
	}
	dest := to.path
	if intoBoxDir(ctx, dst, dest) {
		dest = path.Join(dest, path.Base(p))
	}
	w := &warner{a: a}
	bar := a.bar("copying", -1)
	st, err := a.relayTar(ctx, src, p, dst, abs(dst, dest), follow, w)
	finish(bar)
	return a.copied(err, st, from.box+":"+p, to.box+":"+dest, w)
}

func finish(bar *progressbar.ProgressBar) {
	if bar != nil {
		_ = bar.Finish()
	}
}

// copied reports a finished copy: an error when it failed, or when w
// warned of entries left out (after everything else was copied).
func (a *app) copied(err error, st copyStats, from, to string, w *warner) error {
	if err != nil {
		if w != nil {
			w.flush()
		}
		return err
	}
	if w != nil {
		w.flush()
	}
	if w != nil && w.n > 0 {
		return fmt.Errorf("copied %s to %s but for %d %s (see the warnings above)", from, to, w.n, plural(w.n, "entry", "entries"))
	}
	if a.json {
		v := map[string]any{"from": from, "to": to}
		if st.bytes >= 0 {
			v["bytes"] = st.bytes
		}
		if st.entries >= 0 {
			v["entries"] = st.entries
		}
		return a.printJSON(v)
	}
	switch {
	case st.entries > 1:
		fmt.Fprintf(a.stderr, "copied %s to %s (%d entries, %d bytes)\n", safe(from), safe(to), st.entries, st.bytes)
	case st.bytes >= 0:
		fmt.Fprintf(a.stderr, "copied %s to %s (%d bytes)\n", safe(from), safe(to), st.bytes)
	default:
		fmt.Fprintf(a.stderr, "copied %s to %s\n", safe(from), safe(to))
	}
	return nil
}

// plural is one or many, as n says.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
