package store

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestNothingWritesADeletedBoxBack: once a box's record is gone, an update
// that read it before fails instead of writing it back, and its runs and
// log take no new entries.
func TestNothingWritesADeletedBoxBack(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutBox(&Box{ID: "box-a", Name: "alpha", Status: "idle"}); err != nil {
		t.Fatal(err)
	}
	// By name too, and f's changes are written.
	if err := s.UpdateBox("alpha", func(b *Box) error { b.Status = "paused"; return nil }); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Box("box-a"); err != nil || b.Status != "paused" {
		t.Fatalf("after UpdateBox: %+v, %v", b, err)
	}
	// An error from f writes nothing.
	refused := errors.New("refused")
	if err := s.UpdateBox("box-a", func(b *Box) error { b.Status = "idle"; return refused }); !errors.Is(err, refused) {
		t.Fatalf("UpdateBox with a failing f: %v", err)
	}
	if b, _ := s.Box("box-a"); b.Status != "paused" {
		t.Fatalf("a failed update wrote %q", b.Status)
	}

	// An update under way when the delete comes commits first (writes
	// are one at a time); one that starts after the delete finds
	// nothing to write.
	started, release := make(chan struct{}), make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		updated <- s.UpdateBox("box-a", func(b *Box) error {
			close(started)
			<-release
			b.Status = "idle"
			return nil
		})
	}()
	<-started
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteBox("box-a") }()
	close(release)
	if err := <-updated; err != nil {
		t.Fatalf("the update before the delete: %v", err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("DeleteBox: %v", err)
	}
	called := false
	if err := s.UpdateBox("box-a", func(b *Box) error { called = true; return nil }); !errors.Is(err, ErrNotFound) || called {
		t.Errorf("UpdateBox after the delete = %v (f called: %v), want ErrNotFound", err, called)
	}
	if _, err := s.Box("box-a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the box after its delete and a late update: %v", err)
	}
	if _, err := s.Box("alpha"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the name after the delete: %v", err)
	}
	if err := s.AppendLogs("box-a", LogEntry{Message: "late"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AppendLogs after the delete: %v", err)
	}
	if err := s.PutRun(&Run{ID: "run-1", BoxID: "box-a"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("PutRun after the delete: %v", err)
	}
	if logs, _ := s.Logs("box-a", 0, 0); len(logs) != 0 {
		t.Errorf("log of a deleted box: %v", logs)
	}
	if runs, _ := s.Runs("box-a"); len(runs) != 0 {
		t.Errorf("runs of a deleted box: %v", runs)
	}
}

// TestOpenInUse: a database that another Open holds is refused with
// ErrInUse and a message that says what to do, not bbolt's bare timeout.
func TestOpenInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boxd.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Open(path)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "another boxd") {
		t.Fatalf("second Open: %v, want ErrInUse saying another boxd holds it", err)
	}
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("Open after the first closed: %v", err)
	}
	s2.Close()
}
