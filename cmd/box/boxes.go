package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/upstash/box-go/box"
)

// boxView is a box as the CLI prints it in JSON.
type boxView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Status    string    `json:"status"`
	Size      string    `json:"size,omitempty"`
	Runtime   string    `json:"runtime,omitempty"`
	Labels    []string  `json:"labels,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	Model     string    `json:"model,omitempty"`
	KeepAlive bool      `json:"keep_alive"`
	Ephemeral bool      `json:"ephemeral,omitempty"`
	Network   string    `json:"network_policy,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

func viewOf(in box.Info) boxView {
	return boxView{
		ID: in.ID, Name: in.Name, Status: string(in.Status), Size: string(in.Size), Runtime: string(in.Runtime),
		Labels: in.Labels, Agent: string(in.Harness), Model: string(in.Model), KeepAlive: in.KeepAlive,
		Ephemeral: in.Ephemeral, Network: string(in.NetworkPolicy.Mode), CreatedAt: in.CreatedAt, ExpiresAt: in.ExpiresAt,
	}
}

// snapshotView is a snapshot as the CLI prints it in JSON.
type snapshotView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	BoxID     string    `json:"box_id"`
	SizeBytes int64     `json:"size_bytes"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	Runtime   string    `json:"runtime,omitempty"`
	Size      string    `json:"size,omitempty"`
}

// urlView is a public URL as the CLI prints it in JSON. The credentials
// are there only when the command made the URL: the API tells them once.
type urlView struct {
	URL         string `json:"url"`
	Port        int    `json:"port"`
	BearerToken bool   `json:"bearer_token"`
	BasicAuth   bool   `json:"basic_auth"`
	Token       string `json:"token,omitempty"`
	Username    string `json:"username,omitempty"`
	Password    string `json:"password,omitempty"`
}

// urlInfoView is a listed public URL as the CLI prints it in JSON: the
// API's list item, which has no credentials.
type urlInfoView struct {
	ID          string    `json:"id"`
	Port        int       `json:"port"`
	URL         string    `json:"url"`
	CreatedAt   time.Time `json:"created_at"`
	BasicAuth   bool      `json:"basic_auth"`
	BearerToken bool      `json:"bearer_token"`
}

// logView is a log entry as the CLI prints it in JSON, one per line.
type logView struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Source    string    `json:"source"`
	Message   string    `json:"message"`
}

// createFlags are the flags of create and from-snapshot.
type createFlags struct {
	runtime, size, name     string
	model, agentKey, gitKey string
	env, labels             []string
	keepAlive, noREPL       bool
	browser, desktop        bool
}

func (f *createFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.runtime, "runtime", "", "runtime: node, python, golang, ruby, rust (and -alpine variants)")
	c.Flags().StringVar(&f.size, "size", "", "size: small, medium or large")
	c.Flags().StringVar(&f.name, "name", "", "a name for the box")
	c.Flags().StringVar(&f.model, "agent-model", "", "the coding agent's model, e.g. anthropic/claude-sonnet-4-5")
	c.Flags().StringVar(&f.agentKey, "agent-api-key", "", "the agent's provider key: a key, or \"stored\" (default: the managed key)")
	c.Flags().StringVar(&f.gitKey, "git-token", "", "a GitHub token for git clone, push and pull requests")
	c.Flags().StringArrayVar(&f.env, "env", nil, "an environment variable, KEY=VALUE (repeatable)")
	c.Flags().StringArrayVar(&f.labels, "label", nil, "a label (repeatable)")
	c.Flags().BoolVar(&f.keepAlive, "keep-alive", false, "never pause the box when idle")
	c.Flags().BoolVar(&f.browser, "browser", false, "give the box a headless browser")
	c.Flags().BoolVar(&f.desktop, "desktop", false, "give the box a desktop (box desktop starts it)")
	c.Flags().BoolVar(&f.noREPL, "no-repl", false, "do not start the REPL afterwards")
}

func (f *createFlags) params(a *app) (*box.CreateParams, error) {
	a.secrets = append(a.secrets, f.agentKey, f.gitKey)
	p := &box.CreateParams{Name: f.name, Labels: f.labels, Size: box.Size(f.size), Runtime: box.Runtime(f.runtime), KeepAlive: f.keepAlive, Browser: f.browser, Desktop: f.desktop}
	if len(f.env) > 0 {
		p.Env = map[string]string{}
		for _, kv := range f.env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usageError{fmt.Errorf("--env %q is not KEY=VALUE", kv)}
			}
			p.Env[k] = v
		}
	}
	if f.model != "" {
		key := box.BoxAPIKeyUpstash
		switch f.agentKey {
		case "":
		case "stored":
			key = box.BoxAPIKeyStored
		default:
			key = f.agentKey
		}
		model := box.Model(f.model)
		p.Agent = &box.AgentOptions{Harness: box.InferHarness(model), Model: model, APIKey: key}
	} else if f.agentKey != "" {
		return nil, usageError{errors.New("--agent-api-key needs --agent-model")}
	}
	if f.gitKey != "" {
		p.Git = &box.GitOptions{Token: f.gitKey}
	}
	return p, nil
}

// spin shows a spinner on standard error while fn runs, when that is a
// terminal.
func (a *app) spin(what string, fn func() error) error {
	stop := a.spinner(what)
	defer stop()
	return fn()
}

// spinner shows a spinner on standard error, when that is a terminal,
// until stop is called (stop may be called more than once).
func (a *app) spinner(what string) (stop func()) {
	f, ok := a.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || a.json {
		return func() {}
	}
	bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
		progressbar.OptionSpinnerType(14), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(80*time.Millisecond))
	_ = bar.RenderBlank() // at once, not a tick later
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(80 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = bar.Add(1)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
			_ = bar.Finish()
		})
	}
}

// started prints a box just made or reached, then runs the REPL unless
// told not to.
func (a *app) started(ctx context.Context, b *box.Box, verb string, noREPL bool) error {
	if a.json {
		return a.printJSON(viewOf(b.Info()))
	}
	fmt.Fprintf(a.stdout, "%s %s\n", verb, a.paint("1", b.ID()))
	if noREPL {
		return nil
	}
	return a.repl(ctx, b)
}

func (a *app) createCmd() *cobra.Command {
	return a.makeCmd("create", "Create a box, then open its REPL", exactArgs(0, "no arguments"), "creating box",
		func(ctx context.Context, cl *box.Client, _ []string, p *box.CreateParams) (*box.Box, error) {
			return cl.Create(ctx, p)
		})
}

func (a *app) fromSnapshotCmd() *cobra.Command {
	return a.makeCmd("from-snapshot <snapshot-id>", "Create a box from a snapshot, then open its REPL", exactArgs(1, "a snapshot id"), "restoring snapshot",
		func(ctx context.Context, cl *box.Client, args []string, p *box.CreateParams) (*box.Box, error) {
			return cl.FromSnapshot(ctx, args[0], p)
		})
}

// makeCmd is a command that makes a box with the create flags, under a
// spinner, then opens its REPL.
func (a *app) makeCmd(use, short string, args cobra.PositionalArgs, doing string,
	newBox func(context.Context, *box.Client, []string, *box.CreateParams) (*box.Box, error)) *cobra.Command {
	var f createFlags
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.params(a)
			if err != nil {
				return err
			}
			cl, err := a.api()
			if err != nil {
				return err
			}
			var b *box.Box
			err = a.spin(doing, func() (err error) { b, err = newBox(cmd.Context(), cl, args, p); return err })
			if err != nil {
				return err
			}
			return a.started(cmd.Context(), b, "created box", f.noREPL)
		},
	}
	f.register(c)
	return c
}

func (a *app) connectCmd() *cobra.Command {
	var noREPL bool
	c := &cobra.Command{
		Use:   "connect [box-id]",
		Short: "Open the REPL of a box (the newest one when no id is given)",
		Args:  rangeArgs(0, 1, "at most one box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, err := a.api()
			if err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			} else {
				list, err := cl.List(ctx, nil)
				if err != nil {
					return err
				}
				if len(list) == 0 {
					return errors.New("there is no box to connect to: create one with box create")
				}
				id = newest(list).ID
			}
			b, err := cl.Get(ctx, id, nil)
			if err != nil {
				return err
			}
			return a.started(ctx, b, "connected to", noREPL)
		},
	}
	c.Flags().BoolVar(&noREPL, "no-repl", false, "do not start the REPL")
	return c
}

func (a *app) listCmd() *cobra.Command {
	var label string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the account's boxes",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.api()
			if err != nil {
				return err
			}
			list, err := cl.List(cmd.Context(), &box.ListParams{Label: label})
			if err != nil {
				return err
			}
			slices.SortFunc(list, func(x, y box.Info) int { return y.CreatedAt.Compare(x.CreatedAt) })
			if a.json {
				views := make([]boxView, len(list))
				for i, in := range list {
					views[i] = viewOf(in)
				}
				return a.printJSON(views)
			}
			rows := make([][]string, len(list))
			for i, in := range list {
				rows[i] = []string{in.ID, dash(in.Name), string(in.Status), dash(string(in.Size)), dash(string(in.Runtime)), dash(string(in.Model)), ago(in.CreatedAt)}
			}
			return a.table([]string{"ID", "NAME", "STATUS", "SIZE", "RUNTIME", "MODEL", "CREATED"}, rows, func(r, c int) string {
				if c == 2 {
					return statusColor(list[r].Status)
				}
				return ""
			})
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "only boxes carrying this label")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// status paints a box status.
func (a *app) status(s box.Status) string {
	return a.paint(statusColor(s), string(s))
}

// statusColor is the colour of a box status.
func statusColor(s box.Status) string {
	switch s {
	case box.StatusIdle, box.StatusRunning:
		return "32"
	case box.StatusPaused, box.StatusCreating:
		return "33"
	case box.StatusError:
		return "31"
	}
	return ""
}

// ago says how long ago t was, roughly.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h ago"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d ago"
}

func (a *app) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get <box-id>",
		Short: "Print a box as JSON",
		Args:  exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printJSON(viewOf(b.Info()))
		},
	}
}

func (a *app) rmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <box-id>...",
		Aliases: []string{"delete"},
		Short:   "Delete boxes, their processes and their files",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("expected at least one box id")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.api()
			if err != nil {
				return err
			}
			// Each box is deleted on its own, as docker rm does: one
			// that cannot be deleted (or does not exist) is reported and
			// the others are deleted still.
			type failure struct {
				ID    string `json:"id"`
				Error string `json:"error"`
			}
			deleted, failed := []string{}, []failure{}
			for _, id := range args {
				if err := cl.DeleteBoxes(cmd.Context(), []string{id}); err != nil {
					if cmd.Context().Err() != nil {
						return err
					}
					failed = append(failed, failure{ID: id, Error: a.redact(message(err))})
					if !a.json {
						fmt.Fprintf(a.stderr, "box: rm %s: %s\n", safe(id), safeLines(a.redact(message(err))))
					}
					continue
				}
				deleted = append(deleted, id)
				if !a.json {
					fmt.Fprintf(a.stdout, "deleted %s\n", safe(id))
				}
			}
			if a.json {
				if err := a.printJSON(map[string]any{"deleted": deleted, "failed": failed}); err != nil {
					return err
				}
			}
			if len(failed) > 0 {
				return exitError{1}
			}
			return nil
		},
	}
}

// boxAction is a command that does one thing to one box.
func (a *app) boxAction(use, short, done string, fn func(context.Context, *box.Box) error) *cobra.Command {
	return &cobra.Command{
		Use:   use + " <box-id>",
		Short: short,
		Args:  exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := fn(cmd.Context(), b); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]string{"id": b.ID(), "result": done})
			}
			fmt.Fprintf(a.stdout, "%s %s\n", done, safe(b.ID()))
			return nil
		},
	}
}

func (a *app) pauseCmd() *cobra.Command {
	return a.boxAction("pause", "Freeze every process of a box", "paused", func(ctx context.Context, b *box.Box) error { return b.Pause(ctx) })
}

func (a *app) resumeCmd() *cobra.Command {
	return a.boxAction("resume", "Continue a paused box", "resumed", func(ctx context.Context, b *box.Box) error { return b.Resume(ctx) })
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status <box-id>",
		Short: "Print a box's status",
		Args:  exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			st, err := b.Status(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]string{"id": b.ID(), "status": string(st)})
			}
			fmt.Fprintln(a.stdout, a.status(st))
			return nil
		},
	}
}

func (a *app) snapshotCmd() *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "snapshot <box-id> | snapshot ls <box-id> | snapshot rm <snapshot-id>...",
		Short: "Save a box's files as a snapshot; list and delete snapshots",
		Args:  exactArgs(1, "a box id, or ls or rm"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if name == "" {
				name = b.ID() + "-" + time.Now().UTC().Format("20060102-150405")
			}
			var s *box.Snapshot
			err = a.spin("taking snapshot", func() (err error) { s, err = b.Snapshot(cmd.Context(), name); return err })
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(viewOfSnapshot(*s))
			}
			fmt.Fprintf(a.stdout, "snapshot %s (%s, %d bytes)\n", safe(s.ID), safe(s.Name), s.SizeBytes)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "the snapshot's name (default: the box id and the time)")
	c.AddCommand(a.snapshotLsCmd(), a.snapshotRmCmd())
	return c
}

func (a *app) urlCmd() *cobra.Command {
	var bearer, basic bool
	c := &cobra.Command{
		Use:   "url <box-id> <port> | url ls|create|rm ...",
		Short: "Print the public URL of a port of a box, making it if needed; list, make and remove URLs",
		Long: `Print the public URL of a port of a box, making it if needed.

Without --bearer or --basic, a URL the port already has is printed as it is:
its credentials were told when it was made and are not told again. With
either flag, or when the port has no URL, a URL is made with those
credentials, which are printed after it; making it again replaces the old
credentials, which stop working. With both flags, either credential passes.`,
		Args: exactArgs(2, "a box id and a port, or ls, create or rm"),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePort(args[1])
			if err != nil {
				return err
			}
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if !bearer && !basic {
				list, err := b.ListPublicURLs(cmd.Context())
				if err != nil {
					return err
				}
				for _, u := range list {
					if u.Port == port {
						if a.json {
							return a.printJSON(urlView{URL: u.URL, Port: u.Port, BearerToken: u.BearerToken, BasicAuth: u.BasicAuth})
						}
						fmt.Fprintln(a.stdout, safe(u.URL))
						return nil
					}
				}
			}
			u, err := b.GetPublicURL(cmd.Context(), port, &box.PublicURLParams{BearerToken: bearer, BasicAuth: basic})
			if err != nil {
				return err
			}
			return a.printURL(u)
		},
	}
	c.Flags().BoolVar(&bearer, "bearer", false, "protect the URL with a new bearer token")
	c.Flags().BoolVar(&basic, "basic", false, "protect the URL with a new basic-auth user and password")
	c.AddCommand(a.urlLsCmd(), a.urlCreateCmd(), a.urlRmCmd())
	return c
}

func (a *app) urlsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "urls <box-id>",
		Short: "List the public URLs of a box and the kinds of auth they have",
		Args:  exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			list, err := b.ListPublicURLs(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				views := make([]urlInfoView, len(list))
				for i, u := range list {
					views[i] = urlInfoView{u.ID, u.Port, u.URL, u.CreatedAt, u.BasicAuth, u.BearerToken}
				}
				return a.printJSON(views)
			}
			rows := make([][]string, len(list))
			for i, u := range list {
				var auth []string
				if u.BearerToken {
					auth = append(auth, "bearer")
				}
				if u.BasicAuth {
					auth = append(auth, "basic")
				}
				rows[i] = []string{strconv.Itoa(u.Port), u.URL, dash(strings.Join(auth, ",")), ago(u.CreatedAt)}
			}
			return a.table([]string{"PORT", "URL", "AUTH", "CREATED"}, rows, nil)
		},
	}
}

func (a *app) logsCmd() *cobra.Command {
	var follow bool
	c := &cobra.Command{
		Use:   "logs <box-id>",
		Short: "Print a box's log",
		Args:  exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, err := a.getBox(ctx, args[0])
			if err != nil {
				return err
			}
			seen := 0
			for {
				n, err := a.printLogs(ctx, b, seen)
				if err != nil {
					return err
				}
				seen += n
				if !follow {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new entries")
	return c
}

// printLogs prints b's log entries after the first skip and returns how
// many it printed.
func (a *app) printLogs(ctx context.Context, b *box.Box, skip int) (int, error) {
	n := 0
	next, stop := iter.Pull2(b.AllLogs(ctx))
	defer stop()
	for {
		e, err, ok := next()
		if !ok {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if skip > 0 {
			skip--
			continue
		}
		n++
		if a.json {
			if err := a.printJSONLine(logView{e.Timestamp, e.Level, e.Source, e.Message}); err != nil {
				return n, err
			}
			continue
		}
		level := safe(fmt.Sprintf("%-5s", e.Level))
		switch e.Level {
		case "warn":
			level = a.paint("33", level)
		case "error":
			level = a.paint("31", level)
		}
		fmt.Fprintf(a.stdout, "%s %s %-6s %s\n", e.Timestamp.Local().Format(time.DateTime), level, safe(string(e.Source)), safe(e.Message))
	}
}

// printJSONLine writes v as one line of JSON.
func (a *app) printJSONLine(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.stdout, string(b))
	return err
}

func (a *app) envCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "env",
		Short: "The account's environment variables, given to every new box",
		Args:  exactArgs(0, "no arguments (see box env --help)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.api()
			if err != nil {
				return err
			}
			env, err := cl.ListEnv(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(env)
			}
			keys := make([]string, 0, len(env))
			for k := range env {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			rows := make([][]string, len(keys))
			for i, k := range keys {
				rows[i] = []string{k, env[k]}
			}
			return a.table([]string{"KEY", "VALUE"}, rows, nil)
		},
	}
	c.AddCommand(&cobra.Command{
		Use:   "set KEY=VALUE...",
		Short: "Set account environment variables",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("expected KEY=VALUE")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.api()
			if err != nil {
				return err
			}
			for _, kv := range args {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageError{fmt.Errorf("%q is not KEY=VALUE", kv)}
				}
				if err := cl.SetEnv(cmd.Context(), k, v); err != nil {
					return err
				}
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "unset KEY...",
		Short: "Remove account environment variables",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("expected a KEY")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.api()
			if err != nil {
				return err
			}
			for _, k := range args {
				if err := cl.DeleteEnv(cmd.Context(), k); err != nil {
					return err
				}
			}
			return nil
		},
	})
	return c
}
