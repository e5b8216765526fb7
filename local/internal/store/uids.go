package store

import (
	"encoding/binary"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// bucketUIDs holds the host uid of each box: key big-endian uint32 uid,
// value box id. No two boxes ever have the same uid.
var bucketUIDs = addBucket("box_uids")

// ErrNoUID is returned by ReserveUID when every uid of the range is taken.
var ErrNoUID = errors.New("no host uid left for another box")

// UID returns the host uid of box id, or ErrNotFound.
func (s *Store) UID(id string) (uint32, error) {
	var uid uint32
	err := s.db.View(func(tx *bolt.Tx) error {
		var ok bool
		uid, ok = uidOf(tx.Bucket(bucketUIDs), id)
		if !ok {
			return ErrNotFound
		}
		return nil
	})
	return uid, err
}

// ReserveUID returns box id's host uid: the one it has, or else the lowest
// one of [first, first+count) that no box has and for which taken, when
// not nil, is false, now recorded as its own. Callers pass as taken the
// uids that live processes have, so that a uid is never handed out while
// something still runs as it.
func (s *Store) ReserveUID(id string, first, count uint32, taken func(uid uint32) bool) (uint32, error) {
	if uid, err := s.UID(id); err == nil {
		return uid, nil
	}
	var uid uint32
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUIDs)
		if u, ok := uidOf(b, id); ok {
			uid = u
			return nil
		}
		c := b.Cursor()
		var k [4]byte
		binary.BigEndian.PutUint32(k[:], first)
		key, _ := c.Seek(k[:])
		for next := first; next-first < count; next++ {
			for key != nil && binary.BigEndian.Uint32(key) < next {
				key, _ = c.Next()
			}
			if key != nil && binary.BigEndian.Uint32(key) == next {
				continue // a box's
			}
			if taken != nil && taken(next) {
				continue
			}
			uid = next
			binary.BigEndian.PutUint32(k[:], uid)
			return b.Put(k[:], []byte(id))
		}
		return ErrNoUID
	})
	return uid, err
}

// ReleaseUID forgets box id's host uid, for another box to have.
func (s *Store) ReleaseUID(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return releaseUID(tx, id) })
}

func releaseUID(tx *bolt.Tx, id string) error {
	b := tx.Bucket(bucketUIDs)
	uid, ok := uidOf(b, id)
	if !ok {
		return nil
	}
	return b.Delete(binary.BigEndian.AppendUint32(nil, uid))
}

func uidOf(b *bolt.Bucket, id string) (uint32, bool) {
	var uid uint32
	found := false
	_ = b.ForEach(func(k, v []byte) error {
		if string(v) == id && len(k) == 4 {
			uid, found = binary.BigEndian.Uint32(k), true
			return errStop
		}
		return nil
	})
	return uid, found
}

var errStop = errors.New("stop")

// UIDOwners returns the id of every box that has a host uid.
func (s *Store) UIDOwners() ([]string, error) {
	var ids []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketUIDs).ForEach(func(_, v []byte) error {
			ids = append(ids, string(v))
			return nil
		})
	})
	return ids, err
}
