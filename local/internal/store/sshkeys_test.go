package store

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestSSHKeys: a key is found by its wire form until it is deleted, the
// same key is not added twice, the bound holds, and keys list in the
// order they were added, also after a reopen.
func TestSSHKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	add := func(id, wire string) error {
		_, err := s.AddSSHKey(&SSHKey{ID: id, Wire: []byte(wire), CreatedAt: 100}, 3)
		return err
	}
	for _, k := range []struct{ id, wire string }{{"k-z", "wire-1"}, {"k-a", "wire-2"}, {"k-m", "wire-3"}} {
		if err := add(k.id, k.wire); err != nil {
			t.Fatal(err)
		}
	}
	if existing, err := s.AddSSHKey(&SSHKey{ID: "k-b", Wire: []byte("wire-2")}, 10); !errors.Is(err, ErrSSHKeyExists) || existing != "k-a" {
		t.Errorf("adding a key twice: %q, %v", existing, err)
	}
	if err := add("k-c", "wire-4"); !errors.Is(err, ErrTooManySSHKeys) {
		t.Errorf("adding past the bound: %v", err)
	}
	if k, err := s.SSHKeyByWire([]byte("wire-2")); err != nil || k.ID != "k-a" {
		t.Errorf("SSHKeyByWire = %+v, %v", k, err)
	}
	if err := s.DeleteSSHKey("k-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SSHKeyByWire([]byte("wire-2")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted key is found by its wire form: %v", err)
	}
	if err := s.DeleteSSHKey("k-a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a key twice: %v", err)
	}
	if err := add("k-b", "wire-2"); err != nil {
		t.Errorf("adding a deleted key again: %v", err)
	}
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys, err := s.SSHKeys()
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	if err != nil || len(ids) != 3 || ids[0] != "k-z" || ids[1] != "k-m" || ids[2] != "k-b" {
		t.Errorf("SSHKeys = %v, %v; want k-z, k-m, k-b (the order they were added)", ids, err)
	}
}
