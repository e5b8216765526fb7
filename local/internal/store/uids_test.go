package store

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestReserveUID(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reserve := func(id string) uint32 {
		t.Helper()
		uid, err := s.ReserveUID(id, 100, 3)
		if err != nil {
			t.Fatalf("ReserveUID(%s): %v", id, err)
		}
		return uid
	}
	a, b, c := reserve("a"), reserve("b"), reserve("c")
	if a != 100 || b != 101 || c != 102 || reserve("b") != 101 {
		t.Fatalf("uids %d %d %d, b again %d", a, b, c, reserve("b"))
	}
	if _, err := s.ReserveUID("d", 100, 3); !errors.Is(err, ErrNoUID) {
		t.Fatalf("a fourth box in a range of 3: %v", err)
	}
	if err := s.ReleaseUID("b"); err != nil {
		t.Fatal(err)
	}
	if got := reserve("d"); got != 101 {
		t.Errorf("after b's release d got %d, want 101", got)
	}
	// A box's record going takes its uid with it.
	if err := s.PutBox(&Box{ID: "c", Status: "idle"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBox("c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UID("c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("uid of a deleted box: %v", err)
	}
}
