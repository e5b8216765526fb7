// Command box is the command-line client of Upstash Box: everything the
// official REPL CLI (@upstash/box-cli) does, plus shell, exec, cp and logs,
// and boxd itself (box serve), in one binary. It is built on the public
// SDK alone.
//
//	go install github.com/upstash/box-go/cmd/box@latest
//
//	box create --runtime node        # a new box, then its REPL
//	box ls                           # the account's boxes
//	box exec <id> -- npm test        # exits with the command's status
//	box cp ./src <id>:/workspace/home/src
//	box shell <id>                   # an interactive shell in the box
//	box ssh <id>                     # ssh into a box of boxd
//	box serve                        # boxd, the local backend
//
// The API key comes from --token or UPSTASH_BOX_API_KEY, the endpoint from
// UPSTASH_BOX_BASE_URL (the cloud by default). Every command that prints
// data takes --json.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/upstash/box-go/box"
)

func main() {
	// box is ssh's SSH_ASKPASS program when box ssh runs ssh.
	if code, ok := askpass(os.Args[1:], os.Stdout); ok {
		os.Exit(code)
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// app is one run of the command.
type app struct {
	stdin          *os.File
	stdout, stderr io.Writer
	token          string
	baseURL        string
	json           bool
	client         *box.Client
	// secrets are values given on the command line that are never
	// printed (provider keys, git tokens).
	secrets []string
	// homes are the home directories of boxes, by id, as the REPL
	// learnt them for ~ and $HOME.
	homes map[string]string
	// noTarSaid are the boxes box cp has said have no tar (it says so
	// once a run, whatever the number of sources).
	noTarSaid map[string]bool
}

// exitError ends the command with a status of its own (box exec returns
// the command's).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func (u usageError) Unwrap() error { return u.error }

// usageError is a command line that could not be understood.
type usageError struct{ error }

func run(ctx context.Context, args []string, stdin *os.File, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	code := statusOf(err)
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
	case code == 2 && !serverRefusal(err):
		fmt.Fprintf(stderr, "box: %s\nRun 'box --help' for usage.\n", safeLines(strings.TrimPrefix(a.redact(message(err)), "box: ")))
	default:
		fmt.Fprintln(stderr, "box: "+safeLines(strings.TrimPrefix(a.redact(message(err)), "box: ")))
	}
	return code
}

// statusOf is the exit status for err: 0 for none, a status box chose
// (exec's, the command's), 2 for every kind of bad input (a command line
// box cannot read, arguments the SDK refuses before sending, and the
// server's 400 and 422), and 1 for any other failure.
func statusOf(err error) int {
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue) || cobraUsage(err) || errors.Is(err, box.ErrInvalid) || serverRefusal(err):
		return 2
	}
	return 1
}

// serverRefusal reports whether err is the server refusing a request as
// malformed or invalid (400, 422).
func serverRefusal(err error) bool {
	var ae *box.Error
	return errors.As(err, &ae) && (ae.StatusCode == 400 || ae.StatusCode == 422)
}

// message is how an error is printed: the API's own message first, then
// its status and request.
func message(err error) string {
	var ae *box.Error
	if errors.As(err, &ae) && err == error(ae) && ae.Message != "" {
		return fmt.Sprintf("%s (HTTP %d, %s %s)", ae.Message, ae.StatusCode, ae.Method, ae.Path)
	}
	return err.Error()
}

// cobraUsage reports whether err is cobra's own complaint about the
// command line (it has no error type for them).
func cobraUsage(err error) bool {
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "required flag", "flag needs an argument", "if any flags in the group"} {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "box",
		Short:         "Work with Upstash Box sandboxes: on the cloud, or on boxd",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().StringVar(&a.token, "token", "", "API key (default $UPSTASH_BOX_API_KEY)")
	root.PersistentFlags().StringVar(&a.baseURL, "base-url", "", "server URL, a boxd's for one (default $UPSTASH_BOX_BASE_URL, else the cloud)")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print data as JSON, for scripts")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		a.createCmd(), a.connectCmd(), a.fromSnapshotCmd(),
		a.listCmd(), a.getCmd(), a.rmCmd(), a.pauseCmd(), a.resumeCmd(), a.statusCmd(),
		a.snapshotCmd(), a.urlCmd(), a.urlsCmd(), a.logsCmd(), a.envCmd(),
		a.scheduleCmd(), a.runsCmd(), a.runCmd(),
		a.execCmd(), a.shellCmd(), a.cpCmd(), a.sshCmd(), a.sshKeyCmd(), a.desktopCmd(),
		a.initDemoCmd(), a.serveCmd(), a.versionCmd(),
	)
	// completion with a shell it does not know is bad input too (cobra
	// prints its help and succeeds).
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil && c.Name() == "completion" {
		c.Args = exactArgs(0, "a shell: bash, zsh, fish or powershell")
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	var walk func(*cobra.Command)
	walk = func(parent *cobra.Command) {
		for _, c := range parent.Commands() {
			if strings.Contains(c.Use, "box-id") && c.ValidArgsFunction == nil {
				c.ValidArgsFunction = a.completeBoxes
			}
			walk(c)
		}
	}
	walk(root)
	return root
}

// completeBoxes completes box ids in the shell, each described by its
// name and status.
func (a *app) completeBoxes(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 && cmd.Name() != "rm" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cl, err := a.api()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	list, err := cl.List(ctx, nil)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	out := make([]cobra.Completion, 0, len(list))
	for _, in := range list {
		// An id that would need escaping is no word a shell could take.
		if slices.Contains(args, in.ID) || safe(in.ID) != in.ID || strings.ContainsAny(in.ID, " \t") {
			continue
		}
		desc := string(in.Status)
		if in.Name != "" {
			desc = in.Name + ", " + desc
		}
		out = append(out, cobra.CompletionWithDesc(in.ID, safe(desc)))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeCp completes the arguments of box cp: box ids (as "id:"),
// then paths in that box; anything that looks like a local path is left
// to the shell.
func (a *app) completeCp(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	side := parseSide(toComplete)
	if side.box == "" {
		if strings.ContainsAny(toComplete, "/.~") {
			return nil, cobra.ShellCompDirectiveDefault
		}
		ids, dir := a.completeBoxes(cmd, nil, toComplete)
		if dir == cobra.ShellCompDirectiveError {
			return nil, cobra.ShellCompDirectiveDefault
		}
		var out []cobra.Completion
		for _, c := range ids {
			id, desc, _ := strings.Cut(c, "\t")
			if strings.HasPrefix(id, toComplete) {
				out = append(out, cobra.CompletionWithDesc(id+":", desc))
			}
		}
		// Local files too: the shell offers both.
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveDefault
	}
	cl, err := a.api()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	b, err := cl.Get(ctx, side.box, nil)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	dir, base := path.Split(side.path)
	entries, err := b.Files.List(ctx, cmp.Or(dir, "."))
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, e := range entries {
		// A name that would need escaping is no word a shell could take.
		if !strings.HasPrefix(e.Name, base) || safe(e.Name) != e.Name || strings.ContainsAny(e.Name, " \t'\"\\$`") {
			continue
		}
		c := side.box + ":" + dir + e.Name
		if e.IsDir {
			c += "/"
		}
		out = append(out, c)
	}
	return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
}

// api returns the client, made on first use.
func (a *app) api() (*box.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	var opts []box.Option
	if a.token != "" {
		opts = append(opts, box.WithAPIKey(a.token))
	}
	if a.baseURL != "" {
		opts = append(opts, box.WithBaseURL(a.baseURL))
	}
	c, err := box.NewClient(opts...)
	if errors.Is(err, box.ErrNoAPIKey) {
		return nil, errors.New("no API key: pass --token or set UPSTASH_BOX_API_KEY")
	}
	if err != nil {
		return nil, err
	}
	a.client = c
	return c, nil
}

// getBox returns the box with the given id or name.
func (a *app) getBox(ctx context.Context, id string) (*box.Box, error) {
	c, err := a.api()
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, id, nil)
}

// redact removes the API key from text that is printed.
func (a *app) redact(s string) string {
	for _, k := range append([]string{a.token, os.Getenv("UPSTASH_BOX_API_KEY")}, a.secrets...) {
		if len(k) >= 4 {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return s
}

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under headers, aligned. Cells are text as it came
// (from a box, often): table escapes them (see safe). style, when not
// nil, gives the colour of a cell (an SGR code such as "34", or "").
func (a *app) table(headers []string, rows [][]string, style func(row, col int) string) error {
	all := append([][]string{headers}, rows...)
	cells := make([][]string, len(all))
	var widths []int
	for r, row := range all {
		cells[r] = make([]string, len(row))
		for i, c := range row {
			c = safe(c)
			cells[r][i] = c
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var line strings.Builder
	for r, row := range cells {
		line.Reset()
		for i, c := range row {
			switch {
			case r == 0:
				line.WriteString(a.paint("1", c))
			case style != nil:
				line.WriteString(a.paint(style(r-1, i), c))
			default:
				line.WriteString(c)
			}
			if i < len(row)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		line.WriteByte('\n')
		if _, err := io.WriteString(a.stdout, line.String()); err != nil {
			return err
		}
	}
	return nil
}

// color reports whether output may be coloured: a terminal, unless
// NO_COLOR is set to a value that is not empty (no-color.org).
func (a *app) color() bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := a.stdout.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// interactive reports whether standard input is a terminal.
func (a *app) interactive() bool {
	return a.stdin != nil && term.IsTerminal(int(a.stdin.Fd()))
}

// paint wraps s in an ANSI colour when output may be coloured and code
// is not empty. s is escaped (see safe) either way.
func (a *app) paint(code, s string) string {
	s = safe(s)
	if code == "" || !a.color() {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// args checks a command's positional arguments.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("expected %s", what)}
		}
		return nil
	}
}

func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageError{fmt.Errorf("expected %s", what)}
		}
		return nil
	}
}
