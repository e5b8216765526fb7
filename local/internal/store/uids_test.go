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
		uid, err := s.ReserveUID(id, 100, 3, nil)
		if err != nil {
			t.Fatalf("ReserveUID(%s): %v", id, err)
		}
		return uid
	}
	a, b, c := reserve("a"), reserve("b"), reserve("c")
	if a != 100 || b != 101 || c != 102 || reserve("b") != 101 {
		t.Fatalf("uids %d %d %d, b again %d", a, b, c, reserve("b"))
	}
	if _, err := s.ReserveUID("d", 100, 3, nil); !errors.Is(err, ErrNoUID) {
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

// TestReserveUIDSkipsTaken passes over uids that are taken (a process
// still runs as them), whether or not a box has them.
func TestReserveUIDSkipsTaken(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	live := map[uint32]bool{100: true, 102: true, 103: true}
	taken := func(uid uint32) bool { return live[uid] }
	want := map[string]uint32{"a": 101, "b": 104, "c": 105}
	for _, id := range []string{"a", "b", "c"} {
		uid, err := s.ReserveUID(id, 100, 6, taken)
		if err != nil || uid != want[id] {
			t.Errorf("ReserveUID(%s) = %d, %v; want %d", id, uid, err, want[id])
		}
	}
	// A box keeps the uid it has, taken or not: its own processes are
	// what takes it.
	live[101] = true
	if uid, err := s.ReserveUID("a", 100, 6, taken); err != nil || uid != 101 {
		t.Errorf("ReserveUID(a) again = %d, %v; want 101", uid, err)
	}
	if _, err := s.ReserveUID("d", 100, 6, taken); !errors.Is(err, ErrNoUID) {
		t.Errorf("with every free uid taken: %v, want ErrNoUID", err)
	}
	live = map[uint32]bool{}
	if uid, err := s.ReserveUID("d", 100, 6, taken); err != nil || uid != 100 {
		t.Errorf("once nothing runs as 100: %d, %v", uid, err)
	}
}
