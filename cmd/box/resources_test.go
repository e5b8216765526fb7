package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// decode parses out, box's JSON, into v.
func decode(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("JSON %q: %v", out, err)
	}
}

// TestResourceCommands: snapshots, public URLs, schedules and runs can be
// listed, made and removed, with --json. There used to be no such
// commands (box snapshot list took "list" for a box id).
func TestResourceCommands(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	id := created(t, srv)

	// Snapshots.
	var s1, s2 snapshotView
	decode(t, mustCLI(t, srv, "", "snapshot", id, "--name", "one", "--json"), &s1)
	decode(t, mustCLI(t, srv, "", "snapshot", id, "--name", "two", "--json"), &s2)
	var snaps []snapshotView
	decode(t, mustCLI(t, srv, "", "snapshot", "ls", id, "--json"), &snaps)
	if len(snaps) != 2 || snaps[0].BoxID != id || snaps[0].Status != "ready" {
		t.Errorf("snapshot ls --json = %+v", snaps)
	}
	if out := mustCLI(t, srv, "", "snapshot", "ls", id); !strings.Contains(out, "NAME") || !strings.Contains(out, s1.ID) || !strings.Contains(out, "two") {
		t.Errorf("snapshot ls = %q", out)
	}
	r := cli(t, srv, "", "snapshot", "rm", s1.ID, "snap-missing")
	if r.code != 1 || r.stdout != "deleted "+s1.ID+"\n" || !strings.Contains(r.stderr, "snap-missing") {
		t.Errorf("snapshot rm with a missing id = %+v", r)
	}
	var rm struct {
		Deleted []string
		Failed  []struct{ ID string }
	}
	decode(t, mustCLI(t, srv, "", "snapshot", "rm", s2.ID, "--json"), &rm)
	if len(rm.Deleted) != 1 || rm.Deleted[0] != s2.ID || len(rm.Failed) != 0 {
		t.Errorf("snapshot rm --json = %+v", rm)
	}
	if out := mustCLI(t, srv, "", "snapshot", "ls", id, "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("snapshot ls after rm = %q", out)
	}

	// Public URLs.
	var u urlView
	decode(t, mustCLI(t, srv, "", "url", "create", id, "8080", "--basic", "--json"), &u)
	if u.Port != 8080 || !u.BasicAuth || u.Username == "" || u.Password == "" {
		t.Errorf("url create --basic --json = %+v", u)
	}
	if out := mustCLI(t, srv, "", "url", "create", id, "8081", "--bearer"); !strings.Contains(out, "-8081.localhost:") || !strings.Contains(out, "token: ") {
		t.Errorf("url create --bearer = %q", out)
	}
	var urls []urlInfoView
	decode(t, mustCLI(t, srv, "", "url", "ls", id, "--json"), &urls)
	if len(urls) != 2 || urls[0].Port != 8080 || !urls[0].BasicAuth || !urls[1].BearerToken {
		t.Errorf("url ls --json = %+v", urls)
	}
	if out := mustCLI(t, srv, "", "url", "rm", id, "8080"); out != "removed 8080\n" {
		t.Errorf("url rm = %q", out)
	}
	if r := cli(t, srv, "", "url", "rm", id, "8080"); r.code != 1 || !strings.Contains(r.stderr, "8080") {
		t.Errorf("url rm of a port without a URL = %+v", r)
	}
	decode(t, mustCLI(t, srv, "", "url", "ls", id, "--json"), &urls)
	if len(urls) != 1 || urls[0].Port != 8081 {
		t.Errorf("url ls after rm = %+v", urls)
	}

	// Schedules.
	var sc scheduleView
	decode(t, mustCLI(t, srv, "", "schedule", "create", id, "--cron", "*/5 * * * *", "--json", "--", "sh", "-c", "echo scheduled"), &sc)
	if sc.ID == "" || sc.Type != "exec" || sc.Cron != "*/5 * * * *" || len(sc.Command) != 3 || sc.Status != "active" {
		t.Errorf("schedule create --json = %+v", sc)
	}
	if out := mustCLI(t, srv, "", "schedule", "ls", id); !strings.Contains(out, sc.ID) || !strings.Contains(out, "sh -c echo scheduled") {
		t.Errorf("schedule ls = %q", out)
	}
	if out := mustCLI(t, srv, "", "schedule", "pause", id, sc.ID); out != "paused "+sc.ID+"\n" {
		t.Errorf("schedule pause = %q", out)
	}
	var got scheduleView
	decode(t, mustCLI(t, srv, "", "schedule", "get", id, sc.ID), &got)
	if got.Status != "paused" {
		t.Errorf("schedule get after pause = %+v", got)
	}
	mustCLI(t, srv, "", "schedule", "resume", id, sc.ID)
	var scs []scheduleView
	decode(t, mustCLI(t, srv, "", "schedule", "ls", id, "--json"), &scs)
	if len(scs) != 1 || scs[0].Status != "active" {
		t.Errorf("schedule ls --json after resume = %+v", scs)
	}
	for _, args := range [][]string{
		{"schedule", "create", id, "--", "true"},          // no --cron
		{"schedule", "create", id, "--cron", "* * * * *"}, // nothing to run
		{"schedule", "create", id, "--cron", "* * * * *", "--prompt", "x", "--", "true"},
	} {
		if r := cli(t, srv, "", args...); r.code != 2 {
			t.Errorf("box %q = %+v, want exit 2", args, r)
		}
	}
	mustCLI(t, srv, "", "schedule", "rm", id, sc.ID)
	if out := mustCLI(t, srv, "", "schedule", "ls", id, "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("schedule ls after rm = %q", out)
	}
}

// TestRunCommands: box runs lists a box's runs, and box run cancel stops
// one that is going.
func TestRunCommands(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
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
	s, err := b.Agent.Stream(ctx, &box.AgentParams{Prompt: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runID := ""
	for c, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := c.(*box.StartChunk); ok {
			runID = st.RunID
		}
		if runID != "" {
			break
		}
	}
	if runID == "" {
		t.Fatal("no run id")
	}
	var runs []runView
	find := func() runView {
		for _, r := range runs {
			if r.ID == runID {
				return r
			}
		}
		return runView{}
	}
	decode(t, mustCLI(t, srv, "", "runs", b.ID(), "--json"), &runs)
	if r := find(); r.Status != "running" || r.Prompt != "sleep 100" || r.Type != "agent" {
		t.Errorf("runs --json = %+v", runs)
	}
	if out := mustCLI(t, srv, "", "run", "cancel", b.ID(), runID); out != "cancelled "+runID+"\n" {
		t.Errorf("run cancel = %q", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		decode(t, mustCLI(t, srv, "", "runs", b.ID(), "--json"), &runs)
		if find().Status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after run cancel, runs = %+v", runs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := mustCLI(t, srv, "", "runs", b.ID()); !strings.Contains(out, runID) || !strings.Contains(out, "cancelled") {
		t.Errorf("runs = %q", out)
	}
	if r := cli(t, srv, "", "run", "cancel", b.ID(), "run-missing"); r.code != 1 || !strings.Contains(r.stderr, "run-missing") {
		t.Errorf("run cancel of a missing run = %+v", r)
	}
}
