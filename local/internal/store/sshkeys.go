package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketSSHKeys     = addBucket("ssh_keys")      // key: key id
	bucketSSHKeyIndex = addBucket("ssh_key_index") // key: the key's wire form; value: its id
)

// SSHKey is a public key that logs in to boxd's SSH server.
type SSHKey struct {
	ID string `json:"id"`
	// Wire is the key in the SSH wire format (what
	// golang.org/x/crypto/ssh's Marshal gives).
	Wire      []byte `json:"wire"`
	Comment   string `json:"comment,omitempty"`
	CreatedAt int64  `json:"created_at"`
	// Seq orders keys added in the same second.
	Seq uint64 `json:"seq"`
}

// ErrSSHKeyExists is returned by AddSSHKey for a key the account has.
var ErrSSHKeyExists = errors.New("the account has this SSH key already")

// ErrTooManySSHKeys is returned by AddSSHKey past its bound.
var ErrTooManySSHKeys = errors.New("too many SSH keys")

// AddSSHKey stores k unless the account has its key already
// (ErrSSHKeyExists, wrapped, with the id of the one it has in
// existing) or has max keys (ErrTooManySSHKeys).
func (s *Store) AddSSHKey(k *SSHKey, max int) (existing string, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		keys, index := tx.Bucket(bucketSSHKeys), tx.Bucket(bucketSSHKeyIndex)
		if id := index.Get(k.Wire); id != nil {
			existing = string(id)
			return ErrSSHKeyExists
		}
		if keys.Stats().KeyN >= max {
			return ErrTooManySSHKeys
		}
		if keys.Get([]byte(k.ID)) != nil {
			return errors.New("store: an SSH key with this id exists")
		}
		seq, err := keys.NextSequence()
		if err != nil {
			return err
		}
		k.Seq = seq
		raw, err := json.Marshal(k)
		if err != nil {
			return err
		}
		if err := index.Put(k.Wire, []byte(k.ID)); err != nil {
			return err
		}
		return keys.Put([]byte(k.ID), raw)
	})
	return existing, err
}

// SSHKeys returns the account's SSH keys, oldest first.
func (s *Store) SSHKeys() ([]*SSHKey, error) {
	keys, err := list[SSHKey](s, bucketSSHKeys, nil)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(keys, func(a, b *SSHKey) int { return cmp.Compare(a.Seq, b.Seq) })
	return keys, nil
}

// SSHKeyByWire returns the account's SSH key whose wire form is wire, or
// ErrNotFound.
func (s *Store) SSHKeyByWire(wire []byte) (*SSHKey, error) {
	var k SSHKey
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketSSHKeyIndex).Get(wire)
		if id == nil {
			return ErrNotFound
		}
		raw := tx.Bucket(bucketSSHKeys).Get(id)
		if raw == nil {
			return ErrNotFound
		}
		return json.Unmarshal(raw, &k)
	})
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// DeleteSSHKey removes the SSH key with the given id, or returns
// ErrNotFound.
func (s *Store) DeleteSSHKey(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		keys := tx.Bucket(bucketSSHKeys)
		raw := keys.Get([]byte(id))
		if raw == nil {
			return ErrNotFound
		}
		var k SSHKey
		if err := json.Unmarshal(raw, &k); err != nil {
			return err
		}
		if err := tx.Bucket(bucketSSHKeyIndex).Delete(k.Wire); err != nil {
			return err
		}
		return keys.Delete([]byte(id))
	})
}
