package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/upstash/box-go/box"
)

// The resources a box has besides its files: snapshots, public URLs,
// schedules and runs, each with ls, rm and the rest, and --json.

func viewOfSnapshot(s box.Snapshot) snapshotView {
	return snapshotView{ID: s.ID, Name: s.Name, BoxID: s.BoxID, SizeBytes: s.SizeBytes, Status: string(s.Status), CreatedAt: s.CreatedAt, Runtime: string(s.Runtime), Size: string(s.Size)}
}

// eachID runs fn for every id as box rm does: a failure is reported and
// the others go on; the command then exits 1. done is the past tense
// printed for each success ("deleted").
func (a *app) eachID(ctx context.Context, ids []string, done string, fn func(context.Context, string) error) error {
	type failure struct {
		ID    string `json:"id"`
		Error string `json:"error"`
	}
	ok, failed := []string{}, []failure{}
	for _, id := range ids {
		if err := fn(ctx, id); err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed = append(failed, failure{ID: id, Error: a.redact(message(err))})
			if !a.json {
				fmt.Fprintf(a.stderr, "box: %s: %s\n", safe(id), safeLines(a.redact(message(err))))
			}
			continue
		}
		ok = append(ok, id)
		if !a.json {
			fmt.Fprintf(a.stdout, "%s %s\n", done, safe(id))
		}
	}
	if a.json {
		if err := a.printJSON(map[string]any{done: ok, "failed": failed}); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return exitError{1}
	}
	return nil
}

// atLeast checks that a command has at least n arguments.
func atLeast(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError{fmt.Errorf("expected %s", what)}
		}
		return nil
	}
}

// --- snapshots

func (a *app) snapshotLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls <box-id>",
		Aliases: []string{"list"},
		Short:   "List the snapshots taken of a box",
		Args:    exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			list, err := b.ListSnapshots(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				views := make([]snapshotView, len(list))
				for i, s := range list {
					views[i] = viewOfSnapshot(s)
				}
				return a.printJSON(views)
			}
			rows := make([][]string, len(list))
			for i, s := range list {
				rows[i] = []string{s.ID, s.Name, string(s.Status), strconv.FormatInt(s.SizeBytes, 10), dash(string(s.Runtime)), ago(s.CreatedAt)}
			}
			return a.table([]string{"ID", "NAME", "STATUS", "BYTES", "RUNTIME", "CREATED"}, rows, nil)
		},
	}
}

func (a *app) snapshotRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <snapshot-id>...",
		Aliases: []string{"delete"},
		Short:   "Delete snapshots, of any box",
		Args:    atLeast(1, "at least one snapshot id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.api()
			if err != nil {
				return err
			}
			return a.eachID(cmd.Context(), args, "deleted", func(ctx context.Context, id string) error {
				n, err := cl.DeleteSnapshots(ctx, []string{id})
				if err == nil && n == 0 {
					err = errors.New("snapshot not found")
				}
				return err
			})
		},
	}
}

// --- public URLs

func (a *app) urlLsCmd() *cobra.Command {
	c := a.urlsCmd()
	c.Use, c.Aliases = "ls <box-id>", []string{"list"}
	return c
}

func (a *app) urlCreateCmd() *cobra.Command {
	var bearer, basic bool
	c := &cobra.Command{
		Use:   "create <box-id> <port>",
		Short: "Make a public URL for a port of a box (again, with new credentials, when it has one)",
		Args:  exactArgs(2, "a box id and a port"),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePort(args[1])
			if err != nil {
				return err
			}
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			u, err := b.GetPublicURL(cmd.Context(), port, &box.PublicURLParams{BearerToken: bearer, BasicAuth: basic})
			if err != nil {
				return err
			}
			return a.printURL(u)
		},
	}
	c.Flags().BoolVar(&bearer, "bearer", false, "protect the URL with a bearer token")
	c.Flags().BoolVar(&basic, "basic", false, "protect the URL with a basic-auth user and password")
	return c
}

// printURL prints a URL just made, and its credentials, which the API
// tells only now.
func (a *app) printURL(u *box.PublicURL) error {
	if a.json {
		return a.printJSON(urlView{u.URL, u.Port, u.Token != "", u.Username != "", u.Token, u.Username, u.Password})
	}
	fmt.Fprintln(a.stdout, safe(u.URL))
	if u.Token != "" {
		fmt.Fprintln(a.stdout, "token:", safe(u.Token))
	}
	if u.Username != "" {
		fmt.Fprintln(a.stdout, "username:", safe(u.Username))
		fmt.Fprintln(a.stdout, "password:", safe(u.Password))
	}
	return nil
}

func (a *app) urlRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <box-id> <port>...",
		Aliases: []string{"delete"},
		Short:   "Remove the public URLs of ports of a box",
		Args:    atLeast(2, "a box id and at least one port"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range args[1:] {
				if _, err := parsePort(p); err != nil {
					return err
				}
			}
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.eachID(cmd.Context(), args[1:], "removed", func(ctx context.Context, p string) error {
				port, _ := strconv.Atoi(p)
				return b.DeletePublicURL(ctx, port)
			})
		},
	}
}

// parsePort checks a port given on the command line.
func parsePort(s string) (int, error) {
	port, err := strconv.Atoi(s)
	if err != nil || port < 1 || port > 65535 {
		return 0, usageError{fmt.Errorf("port %q is not a number from 1 to 65535", s)}
	}
	return port, nil
}

// --- schedules

// scheduleView is a schedule as the CLI prints it in JSON.
type scheduleView struct {
	ID            string    `json:"id"`
	BoxID         string    `json:"box_id"`
	Type          string    `json:"type"`
	Cron          string    `json:"cron"`
	Command       []string  `json:"command,omitempty"`
	Prompt        string    `json:"prompt,omitempty"`
	Model         string    `json:"model,omitempty"`
	Folder        string    `json:"folder,omitempty"`
	Status        string    `json:"status"`
	WebhookURL    string    `json:"webhook_url,omitempty"`
	LastRunAt     time.Time `json:"last_run_at,omitzero"`
	LastRunStatus string    `json:"last_run_status,omitempty"`
	LastRunID     string    `json:"last_run_id,omitempty"`
	TotalRuns     int64     `json:"total_runs"`
	TotalFailures int64     `json:"total_failures"`
	CreatedAt     time.Time `json:"created_at"`
}

func viewOfSchedule(s *box.ScheduleInfo) scheduleView {
	return scheduleView{
		ID: s.ID, BoxID: s.BoxID, Type: string(s.Type), Cron: s.Cron, Command: s.Command, Prompt: s.Prompt, Model: string(s.Model),
		Folder: s.Folder, Status: string(s.Status), WebhookURL: s.WebhookURL, LastRunAt: s.LastRunAt, LastRunStatus: string(s.LastRunStatus),
		LastRunID: s.LastRunID, TotalRuns: s.TotalRuns, TotalFailures: s.TotalFailures, CreatedAt: s.CreatedAt,
	}
}

// what is what a schedule does, in a few words.
func what(s *box.ScheduleInfo) string {
	if s.Type == box.SchedulePrompt {
		return "prompt: " + s.Prompt
	}
	return strings.Join(s.Command, " ")
}

func (a *app) scheduleCmd() *cobra.Command {
	c := &cobra.Command{
		Use:     "schedule",
		Aliases: []string{"schedules"},
		Short:   "A box's cron schedules: ls, get, create, pause, resume, rm",
		Args:    exactArgs(0, "a subcommand: ls, get, create, pause, resume or rm"),
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(&cobra.Command{
		Use:     "ls <box-id>",
		Aliases: []string{"list"},
		Short:   "List a box's schedules",
		Args:    exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			list, err := b.Schedule.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				views := make([]scheduleView, len(list))
				for i, s := range list {
					views[i] = viewOfSchedule(s)
				}
				return a.printJSON(views)
			}
			rows := make([][]string, len(list))
			for i, s := range list {
				last := "-"
				if !s.LastRunAt.IsZero() {
					last = string(s.LastRunStatus) + " " + ago(s.LastRunAt)
				}
				rows[i] = []string{s.ID, s.Cron, string(s.Status), what(s), last}
			}
			return a.table([]string{"ID", "CRON", "STATUS", "RUNS", "LAST RUN"}, rows, nil)
		},
	}, &cobra.Command{
		Use:   "get <box-id> <schedule-id>",
		Short: "Print a schedule as JSON",
		Args:  exactArgs(2, "a box id and a schedule id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			s, err := b.Schedule.Get(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			return a.printJSON(viewOfSchedule(s))
		},
	}, a.scheduleCreateCmd(),
		a.scheduleAction("pause", "Pause schedules: they do not run until resumed", "paused", func(ctx context.Context, b *box.Box, id string) error { return b.Schedule.Pause(ctx, id) }),
		a.scheduleAction("resume", "Resume paused schedules", "resumed", func(ctx context.Context, b *box.Box, id string) error { return b.Schedule.Resume(ctx, id) }),
		a.scheduleAction("rm", "Delete schedules", "deleted", func(ctx context.Context, b *box.Box, id string) error { return b.Schedule.Delete(ctx, id) }),
	)
	return c
}

func (a *app) scheduleAction(use, short, done string, fn func(context.Context, *box.Box, string) error) *cobra.Command {
	c := &cobra.Command{
		Use:   use + " <box-id> <schedule-id>...",
		Short: short,
		Args:  atLeast(2, "a box id and at least one schedule id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.eachID(cmd.Context(), args[1:], done, func(ctx context.Context, id string) error { return fn(ctx, b, id) })
		},
	}
	if use == "rm" {
		c.Aliases = []string{"delete"}
	}
	return c
}

func (a *app) scheduleCreateCmd() *cobra.Command {
	var cron, prompt, folder, model, webhook string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "create <box-id> --cron EXPR (--prompt TEXT | -- command [args...])",
		Short: "Schedule a command, or a prompt for the box's agent, on a cron expression in UTC",
		Long: `Schedule a command (after --, run without a shell: write sh -c '...' for
one) or, with --prompt, a run of the box's agent, on a cron expression
in UTC such as "*/5 * * * *".`,
		Args: func(cmd *cobra.Command, args []string) error {
			d := cmd.ArgsLenAtDash()
			switch {
			case len(args) == 0 || d == 0:
				return usageError{errors.New("expected a box id")}
			case d < 0 && len(args) > 1 || d > 1:
				return usageError{errors.New("expected a box id, then -- and the command")}
			case prompt == "" && (d < 0 || d == len(args)):
				return usageError{errors.New("expected --prompt, or -- and a command")}
			case prompt != "" && d >= 0:
				return usageError{errors.New("--prompt and a command do not go together")}
			case cron == "":
				return usageError{errors.New("--cron is required")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var s *box.ScheduleInfo
			if prompt != "" {
				s, err = b.Schedule.Agent(cmd.Context(), &box.AgentScheduleParams{Cron: cron, Prompt: prompt, Folder: folder, Model: box.Model(model), Timeout: timeout, WebhookURL: webhook})
			} else {
				if model != "" || timeout != 0 {
					return usageError{errors.New("--model and --timeout are for --prompt schedules")}
				}
				s, err = b.Schedule.Exec(cmd.Context(), &box.ExecScheduleParams{Cron: cron, Command: args[1:], Folder: folder, WebhookURL: webhook})
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(viewOfSchedule(s))
			}
			fmt.Fprintf(a.stdout, "schedule %s (%s, %s)\n", safe(s.ID), safe(s.Cron), safe(what(s)))
			return nil
		},
	}
	c.Flags().StringVar(&cron, "cron", "", "when, as a cron expression in UTC (required)")
	c.Flags().StringVar(&prompt, "prompt", "", "schedule the agent with this prompt instead of a command")
	c.Flags().StringVar(&folder, "folder", "", "the directory it runs in (default /workspace/home)")
	c.Flags().StringVar(&model, "model", "", "the agent's model for these runs (default the box's)")
	c.Flags().DurationVar(&timeout, "timeout", 0, "end an agent run that takes longer (e.g. 10m)")
	c.Flags().StringVar(&webhook, "webhook-url", "", "a URL that receives a POST after each run")
	return c
}

// --- runs

// runView is a run as the CLI prints it in JSON.
type runView struct {
	ID           string    `json:"id"`
	BoxID        string    `json:"box_id"`
	Type         string    `json:"type"`
	Status       string    `json:"status"`
	ScheduleID   string    `json:"schedule_id,omitempty"`
	Prompt       string    `json:"prompt,omitempty"`
	Model        string    `json:"model,omitempty"`
	Error        string    `json:"error,omitempty"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	CostUSD      float64   `json:"cost_usd"`
	DurationMS   int64     `json:"duration_ms"`
	CreatedAt    time.Time `json:"created_at"`
	CompletedAt  time.Time `json:"completed_at,omitzero"`
}

func (a *app) runsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "runs <box-id>",
		Short: "List a box's runs (agent runs and commands), newest first",
		Args:  exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			list, err := b.Runs(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				views := make([]runView, len(list))
				for i, r := range list {
					views[i] = runView{r.ID, r.BoxID, r.Type, string(r.Status), r.ScheduleID, r.Prompt, r.Model, r.ErrorMessage,
						r.InputTokens, r.OutputTokens, r.CostUSD, r.Duration.Milliseconds(), r.CreatedAt, r.CompletedAt}
				}
				return a.printJSON(views)
			}
			rows := make([][]string, len(list))
			for i, r := range list {
				text := r.Prompt
				if len(text) > 50 {
					text = text[:47] + "..."
				}
				rows[i] = []string{r.ID, r.Type, string(r.Status), dash(text), r.Duration.Round(time.Millisecond).String(), ago(r.CreatedAt)}
			}
			return a.table([]string{"ID", "TYPE", "STATUS", "PROMPT", "TOOK", "CREATED"}, rows, nil)
		},
	}
}

func (a *app) runCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "run",
		Short: "A box's runs: cancel (box runs lists them)",
		Args:  exactArgs(0, "a subcommand: cancel"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(&cobra.Command{
		Use:   "cancel <box-id> <run-id>...",
		Short: "Cancel agent runs that are still going",
		Args:  atLeast(2, "a box id and at least one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.getBox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.eachID(cmd.Context(), args[1:], "cancelled", func(ctx context.Context, id string) error { return b.CancelRun(ctx, id) })
		},
	})
	return c
}
