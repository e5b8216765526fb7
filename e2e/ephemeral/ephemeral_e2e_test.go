package ephemeral_test

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/ephemeral"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestEphemeralBoxOnBoxd(t *testing.T) {
	t.Parallel()
	clock := boxtest.NewFakeClock(t0)
	srv := boxtest.NewServer(t, boxtest.WithClock(clock))
	c := srv.Client()
	ctx := t.Context()

	eb, err := ephemeral.Create(ctx, c, &ephemeral.CreateParams{Name: "scratch", Labels: []string{"tmp"}, TTL: time.Hour, Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if !eb.ExpiresAt().Equal(t0.Add(time.Hour)) {
		t.Errorf("ExpiresAt = %v, want %v", eb.ExpiresAt(), t0.Add(time.Hour))
	}
	if st, err := eb.Status(ctx); err != nil || st != box.StatusIdle {
		t.Errorf("Status = %q, %v", st, err)
	}
	if eb.NetworkPolicy().Mode != box.NetworkAllowAll {
		t.Errorf("NetworkPolicy = %+v", eb.NetworkPolicy())
	}
	run, err := eb.Exec.Command(ctx, "mkdir -p sub && echo $GREETING")
	if err != nil || run.Stdout != "hi\n" {
		t.Fatalf("Exec = %+v, %v", run, err)
	}
	if err := eb.Cd(ctx, "sub"); err != nil || eb.Cwd() != "/workspace/home/sub" {
		t.Fatalf("Cd = %v, cwd %s", err, eb.Cwd())
	}
	if err := eb.Files.WriteText(ctx, "note.txt", "kept"); err != nil {
		t.Fatal(err)
	}
	snap, err := eb.Snapshot(ctx, "cp")
	if err != nil {
		t.Fatal(err)
	}
	if list, err := eb.ListSnapshots(ctx); err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Errorf("ListSnapshots = %+v, %v", list, err)
	}

	// Restored as an ephemeral box, with a TTL of its own.
	clock.Advance(10 * time.Minute)
	eb2, err := ephemeral.FromSnapshot(ctx, c, snap.ID, &ephemeral.CreateParams{TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(10*time.Minute + 2*time.Hour); !eb2.ExpiresAt().Equal(want) {
		t.Errorf("restored ExpiresAt = %v, want %v", eb2.ExpiresAt(), want)
	}
	if got, err := eb2.Files.ReadText(ctx, "sub/note.txt"); err != nil || got != "kept" {
		t.Errorf("restored note = %q, %v", got, err)
	}

	// GetByName gives a full box, as in the official SDKs.
	full, err := ephemeral.GetByName(ctx, c, "scratch")
	if err != nil {
		t.Fatal(err)
	}
	if in := full.Info(); full.ID() != eb.ID() || !in.Ephemeral || !in.ExpiresAt.Equal(eb.ExpiresAt()) || len(in.Labels) != 1 {
		t.Errorf("GetByName = %s %+v", full.ID(), in)
	}
	if list, err := c.List(ctx, &box.ListParams{Label: "tmp"}); err != nil || len(list) != 1 || list[0].ID != eb.ID() {
		t.Errorf("List by label = %+v, %v", list, err)
	}

	if err := eb.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if err := eb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.Status(ctx); !box.IsNotFound(err) {
		t.Errorf("Status after Delete = %v, want 404", err)
	}
}

func TestServerRefusesTTLOutOfRange(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	for _, body := range []string{
		`{"ephemeral":true,"ttl":259201}`,
		`{"ephemeral":true,"ttl":0}`,
		`{"ephemeral":true,"ttl":-5}`,
		`{"ttl":60}`,
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/v2/box", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Box-Api-Key", srv.APIKey())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST /v2/box %s: %d, want 400", body, resp.StatusCode)
		}
	}
	if list, err := srv.Client().List(t.Context(), nil); err != nil || len(list) != 0 {
		t.Errorf("boxes = %+v, %v", list, err)
	}
}

// marker is an argument for sleep that no other process has.
func marker() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("4000.%07d", (int(b[0])<<16|int(b[1])<<8|int(b[2]))%10000000)
}

// procsWith returns the pids of processes whose command line contains s.
func procsWith(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(raw), "\x00", " "), s) {
			out = append(out, pid)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func gone(t *testing.T, srv *boxtest.Server, id string) bool {
	t.Helper()
	_, err := srv.Client().Get(t.Context(), id, nil)
	_, statErr := os.Stat(filepath.Join(srv.DataDir(), "boxes", id))
	return box.IsNotFound(err) && os.IsNotExist(statErr)
}

func TestExpiryDeletesProcessesAndFiles(t *testing.T) {
	t.Parallel()
	clock := boxtest.NewFakeClock(t0)
	srv := boxtest.NewServer(t, boxtest.WithClock(clock))
	ctx := t.Context()
	eb, err := ephemeral.Create(ctx, srv.Client(), &ephemeral.CreateParams{TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := srv.Client().Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := marker()
	if r, err := eb.Exec.Command(ctx, "sleep "+m+" >/dev/null 2>&1 &"); err != nil || r.ExitCode != 0 {
		t.Fatalf("background sleep: %+v, %v", r, err)
	}
	if err := eb.Files.WriteText(ctx, "data.txt", "x"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the background sleep", func() bool { return len(procsWith("sleep "+m)) > 0 })

	clock.Advance(10*time.Minute - time.Second)
	time.Sleep(100 * time.Millisecond)
	if st, err := eb.Status(ctx); err != nil || st != box.StatusIdle {
		t.Fatalf("box before its time: %q, %v", st, err)
	}

	clock.Advance(time.Second)
	waitFor(t, "the expired box to be deleted", func() bool { return gone(t, srv, eb.ID()) })
	waitFor(t, "the expired box's processes to end", func() bool { return len(procsWith("sleep "+m)) == 0 })
	if _, err := keep.Status(ctx); err != nil {
		t.Errorf("a box without a TTL: %v", err)
	}
}

func TestExpiryAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	var short, long string
	t.Run("first", func(t *testing.T) {
		srv := boxtest.NewServer(t, boxtest.WithDataDir(dir), boxtest.WithClock(boxtest.NewFakeClock(t0)))
		for _, ttl := range []time.Duration{time.Hour, 3 * time.Hour} {
			eb, err := ephemeral.Create(ctx, srv.Client(), &ephemeral.CreateParams{TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			if ttl == time.Hour {
				short = eb.ID()
			} else {
				long = eb.ID()
			}
		}
	})
	// boxd comes back two hours later: the one-hour box is deleted at
	// start, the other gets its timer back.
	clock := boxtest.NewFakeClock(t0.Add(2 * time.Hour))
	srv := boxtest.NewServer(t, boxtest.WithDataDir(dir), boxtest.WithClock(clock))
	if !gone(t, srv, short) {
		t.Errorf("box %s outlived its TTL across a restart", short)
	}
	b, err := srv.Client().Get(ctx, long, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Info().ExpiresAt.Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("ExpiresAt = %v", b.Info().ExpiresAt)
	}
	clock.Advance(time.Hour)
	waitFor(t, "the re-armed box to expire", func() bool { return gone(t, srv, long) })
}
