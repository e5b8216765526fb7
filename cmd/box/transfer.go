package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/internal/terminal"
)

func (a *app) execCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "exec <box-id> -- <command> [args...]",
		Short: "Run a command in a box, with its stdout and stderr, and its exit status",
		Long: `Run a command in a box. Its standard output and standard error stay apart,
standard input is passed on when it is not a terminal, and box exits with
the command's own status, so that it works in scripts and CI.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return usageError{errors.New("expected a box id, then -- and the command")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			p := terminal.Params{Argv: args[1:], Stdout: a.stdout, Stderr: a.stderr}
			if !a.interactive() {
				p.Stdin = a.stdin
			}
			code, err := terminal.Run(cmd.Context(), b, p)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}

func (a *app) shellCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "shell [box-id]",
		Short: "Open an interactive shell in a box (the newest one when no id is given)",
		Args:  rangeArgs(0, 1, "at most one box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, err := a.boxOrNewest(ctx, args)
			if err != nil {
				return err
			}
			code, err := terminal.Run(ctx, b, terminal.Params{
				Argv:   []string{"sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l"},
				Stdin:  a.stdin,
				Stdout: a.stdout,
				Stderr: a.stderr,
				TTY:    a.interactive(),
			})
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
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
	return &cobra.Command{
		Use:   "cp <source> <destination>",
		Short: "Copy files and trees between this machine and a box",
		Long: `Copy a file or a whole directory tree between this machine and a box.
A box path is written <box-id>:<path>, relative paths in it from
/workspace/home; one side must be a box and the other local, and - is
standard input or output. Transfers stream in constant memory, with a
progress bar on a terminal.

  box cp ./src box-abc:src              # a tree, up
  box cp box-abc:/workspace/home/out .  # a tree or a file, down
  tar cz . | box cp - box-abc:src.tgz`,
		Args: exactArgs(2, "a source and a destination"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := parseSide(args[0]), parseSide(args[1])
			switch {
			case src.box != "" && dst.box == "":
				return a.download(cmd.Context(), src, dst.path)
			case src.box == "" && dst.box != "":
				return a.upload(cmd.Context(), src.path, dst)
			}
			return usageError{errors.New("one side of box cp must be <box-id>:<path>, and the other a local path")}
		},
	}
}

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

func (a *app) upload(ctx context.Context, local string, to remote) error {
	b, err := a.getBox(ctx, to.box)
	if err != nil {
		return err
	}
	dest := to.path
	if local == "-" {
		if dest == "" || strings.HasSuffix(dest, "/") {
			return usageError{errors.New("copying standard input needs a file name in the box")}
		}
		bar := a.bar("uploading", -1)
		n, err := b.Files.WriteFrom(ctx, dest, a.stdin, progress(bar))
		finish(bar)
		return a.copied(err, n, "stdin", to.box+":"+dest)
	}
	fi, err := os.Stat(local)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		// As cp -r: into the destination when it is a directory, else
		// the destination becomes the copy.
		if dest == "" || strings.HasSuffix(dest, "/") {
			dest = path.Join(dest, filepath.Base(filepath.Clean(local)))
		} else if st, err := b.Files.Stat(ctx, dest, &box.StatParams{Follow: true}); err == nil && st.Type == box.FileTypeDirectory {
			dest = path.Join(dest, filepath.Base(filepath.Clean(local)))
		}
		bar := a.bar("uploading", -1)
		err := b.Files.UploadDir(ctx, local, dest, progress(bar))
		finish(bar)
		return a.copied(err, -1, local, to.box+":"+dest)
	}
	if dest == "" || strings.HasSuffix(dest, "/") {
		dest = path.Join(dest, filepath.Base(local))
	} else if st, err := b.Files.Stat(ctx, dest, &box.StatParams{Follow: true}); err == nil && st.Type == box.FileTypeDirectory {
		dest = path.Join(dest, filepath.Base(local))
	}
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	bar := a.bar("uploading", fi.Size())
	n, err := b.Files.WriteFrom(ctx, dest, sized{f, fi.Size()}, progress(bar))
	finish(bar)
	return a.copied(err, n, local, to.box+":"+dest)
}

// sized is a reader of a known length (WriteFrom reports progress
// against it).
type sized struct {
	io.Reader
	n int64
}

func (s sized) Len() int { return int(s.n) }

func (a *app) download(ctx context.Context, from remote, local string) error {
	b, err := a.getBox(ctx, from.box)
	if err != nil {
		return err
	}
	if from.path == "" {
		from.path = box.WorkspaceHome
	}
	st, err := b.Files.Stat(ctx, from.path, &box.StatParams{Follow: true})
	if err != nil {
		return err
	}
	if local == "-" {
		if st.Type == box.FileTypeDirectory {
			return usageError{errors.New("a directory cannot go to standard output")}
		}
		_, err := b.Files.DownloadTo(ctx, from.path, a.stdout, nil)
		return err
	}
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		local = filepath.Join(local, path.Base(from.path))
	}
	if st.Type == box.FileTypeDirectory {
		bar := a.bar("downloading", -1)
		err := b.Files.DownloadDir(ctx, from.path, local, progress(bar))
		finish(bar)
		var se *box.SkippedError
		if errors.As(err, &se) {
			// Everything else was copied: say what was not, one line
			// each, and fail.
			for _, s := range se.Skipped {
				fmt.Fprintf(a.stderr, "box: warning: skipped %s: %s\n", safe(s.Path), safeLines(a.redact(s.Err.Error())))
			}
			return fmt.Errorf("copied %s to %s but for %d %s (see the warnings above)", from.box+":"+from.path, local, len(se.Skipped), plural(len(se.Skipped), "entry", "entries"))
		}
		return a.copied(err, -1, from.box+":"+from.path, local)
	}
	out, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	bar := a.bar("downloading", st.Size)
	n, err := b.Files.DownloadTo(ctx, from.path, out, progress(bar))
	finish(bar)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return a.copied(err, n, from.box+":"+from.path, local)
}

func finish(bar *progressbar.ProgressBar) {
	if bar != nil {
		_ = bar.Finish()
	}
}

// copied reports a finished copy.
func (a *app) copied(err error, n int64, from, to string) error {
	if err != nil {
		return err
	}
	if a.json {
		v := map[string]any{"from": from, "to": to}
		if n >= 0 {
			v["bytes"] = n
		}
		return a.printJSON(v)
	}
	if n >= 0 {
		fmt.Fprintf(a.stderr, "copied %s to %s (%d bytes)\n", safe(from), safe(to), n)
	} else {
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
