package local_test

import (
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// TestIdlePause lets boxes go unused on a fake clock: one that nothing uses
// pauses after the idle time and wakes on the next call; a keep-alive box
// does not pause, and boxes with an exec stream or a session going do not
// while that lasts. An init command that runs on does not keep its box
// awake.
func TestIdlePause(t *testing.T) {
	t.Parallel()
	clock := boxtest.NewFakeClock(time.Now())
	srv := boxtest.NewServer(t, boxtest.WithClock(clock), boxtest.WithConfig(func(c *local.Config) { c.IdlePause = 10 * time.Minute }))
	c := srv.Client()
	ctx := t.Context()
	create := func(p *box.CreateParams) *box.Box {
		t.Helper()
		b, err := c.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Exec.Command(ctx, "true"); err != nil {
			t.Fatal(err)
		}
		return b
	}
	quiet := create(nil)
	kept := create(&box.CreateParams{KeepAlive: true})
	streaming := create(nil)
	sessioned := create(nil)
	initd := create(&box.CreateParams{InitCommand: "echo up; exec sleep 3600"})

	// A stream that runs until told to end, and an open session.
	s, err := streaming.Exec.Stream(ctx, "while [ ! -e /tmp/stop ]; do sleep 0.05; done; echo done")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sess, err := sessioned.Exec.Session(ctx, &box.SessionParams{Cmd: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	status := func(b *box.Box) box.Status {
		t.Helper()
		st, err := b.Status(ctx) // reads the record: no use of the box
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitStatus := func(b *box.Box, want box.Status) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for status(b) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s, want %s", b.ID(), status(b), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	clock.Advance(9 * time.Minute)
	time.Sleep(200 * time.Millisecond)
	for _, b := range []*box.Box{quiet, kept, streaming, sessioned, initd} {
		if st := status(b); st == box.StatusPaused {
			t.Errorf("%s paused after 9 of 10 idle minutes", b.ID())
		}
	}
	clock.Advance(2 * time.Minute)
	waitStatus(quiet, box.StatusPaused)
	waitStatus(initd, box.StatusPaused)
	time.Sleep(200 * time.Millisecond)
	for _, b := range []*box.Box{kept, streaming, sessioned} {
		if st := status(b); st == box.StatusPaused {
			t.Errorf("%s (keep-alive or busy) paused", b.ID())
		}
	}

	// The next call wakes the paused box, and it works.
	if r, err := quiet.Exec.Command(ctx, "echo awake"); err != nil || r.Stdout != "awake\n" {
		t.Fatalf("exec on an idle-paused box = %+v, %v", r, err)
	}
	if st := status(quiet); st == box.StatusPaused {
		t.Errorf("the box is still paused after a call")
	}
	logs := ""
	for e, err := range quiet.AllLogs(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		logs += e.Message + "\n"
	}
	if !strings.Contains(logs, "paused after 10m0s without use") {
		t.Errorf("the log does not say why the box paused:\n%s", logs)
	}

	// Once the stream and the session end, their boxes pause in turn.
	if err := streaming.Files.Write(ctx, "/tmp/stop", nil); err != nil {
		t.Fatal(err)
	}
	for c, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		_ = c
	}
	sess.Close()
	// boxd notices the session's end a moment later: let idle times pass
	// until both boxes pause.
	deadline := time.Now().Add(20 * time.Second)
	for status(streaming) != box.StatusPaused || status(sessioned) != box.StatusPaused {
		if time.Now().After(deadline) {
			t.Fatalf("after their stream and session ended: %s and %s", status(streaming), status(sessioned))
		}
		clock.Advance(11 * time.Minute)
		time.Sleep(100 * time.Millisecond)
	}
	if st := status(kept); st == box.StatusPaused {
		t.Errorf("the keep-alive box paused")
	}
}
