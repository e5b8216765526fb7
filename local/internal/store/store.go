// Package store keeps boxd's records (boxes, runs, logs, and later
// snapshots and schedules) in an embedded transactional database (bbolt).
// Every write is committed and synced to disk before it returns, so a
// killed boxd restarts with everything it acknowledged.
//
// Run records, written for every exec, are the exception that keeps a
// synced commit off the exec's round trip: PutRun appends the record to a
// write-ahead journal beside the database with one write(2) and returns,
// and a background folder commits the journal into the database in
// batches (one synced commit for many runs). A record PutRun returned for
// is in the kernel's page cache, so it survives boxd being killed, even
// with SIGKILL: the next Open replays the journal. A power loss or kernel
// crash can lose the journal's unsynced tail, the runs of the last moments
// (Open ignores a torn frame and reports it in Recovered), but never
// corrupts the database, which is only ever changed by synced commits.
package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("not found")

var (
	bucketBoxes = []byte("boxes")
	bucketNames = []byte("box_names")
	bucketRuns  = []byte("runs") // key: box id + 0 + run id
	bucketLogs  = []byte("logs") // key: box id + 0 + big-endian sequence
)

// buckets lists every bucket Open creates. Feature files add their own
// with addBucket from a package-level variable initialiser.
var buckets = [][]byte{bucketBoxes, bucketNames, bucketRuns, bucketLogs}

func addBucket(name string) []byte {
	b := []byte(name)
	buckets = append(buckets, b)
	return b
}

// Store is the database.
type Store struct {
	db       *bolt.DB
	j        *journal
	recovery Recovery

	closeOnce sync.Once
	closeErr  error
}

// ErrInUse is returned by Open when another process holds the database.
var ErrInUse = errors.New("the database is in use")

// Open opens (creating if needed) the database file at path, and the run
// journal beside it (path+".journal.0" and ".journal.1"): the run records
// an earlier process left there are committed before Open returns
// (Recovered says what it found).
func Open(path string) (*Store, error) { return open(path, defaultJournalLimits) }

func open(path string, limits journalLimits) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("store: %s: %w: another boxd (or box serve) uses this data directory; stop it, or give this one a -data of its own", path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db}
	if err := s.openJournal(path, limits); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close commits the run journal, stops its folder and closes the
// database. Calls after the first return its result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = errors.Join(s.closeJournal(), s.db.Close()) })
	return s.closeErr
}

// PutBox creates or replaces a box record and its name index entry. It
// fails with ErrNameTaken when another box already has the name.
func (s *Store) PutBox(b *Box) error {
	return s.db.Update(func(tx *bolt.Tx) error { return putBox(tx, b) })
}

// UpdateBox reads the box with the given id or name, lets f change it and
// writes it back, in one transaction: it fails with ErrNotFound when the
// box is gone, so a box deleted meanwhile is never written back. An error
// from f is returned and nothing is written. f must not use the Store.
func (s *Store) UpdateBox(idOrName string, f func(*Box) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		raw := boxRecord(tx, idOrName)
		if raw == nil {
			return ErrNotFound
		}
		var b Box
		if err := json.Unmarshal(raw, &b); err != nil {
			return err
		}
		id := b.ID
		if err := f(&b); err != nil {
			return err
		}
		if b.ID != id {
			return fmt.Errorf("store: a box's id cannot change (%s to %s)", id, b.ID)
		}
		return putBox(tx, &b)
	})
}

func putBox(tx *bolt.Tx, b *Box) error {
	raw, err := json.Marshal(b)
	if err != nil {
		return err
	}
	boxes, names := tx.Bucket(bucketBoxes), tx.Bucket(bucketNames)
	if b.Name != "" {
		if owner := names.Get([]byte(b.Name)); owner != nil && string(owner) != b.ID {
			return ErrNameTaken
		}
	}
	if old := boxes.Get([]byte(b.ID)); old != nil {
		var prev Box
		if json.Unmarshal(old, &prev) == nil && prev.Name != "" && prev.Name != b.Name {
			if err := names.Delete([]byte(prev.Name)); err != nil {
				return err
			}
		}
	}
	if b.Name != "" {
		if err := names.Put([]byte(b.Name), []byte(b.ID)); err != nil {
			return err
		}
	}
	return boxes.Put([]byte(b.ID), raw)
}

// boxRecord returns the raw record of the box with the given id or name,
// or nil.
func boxRecord(tx *bolt.Tx, idOrName string) []byte {
	raw := tx.Bucket(bucketBoxes).Get([]byte(idOrName))
	if raw == nil {
		if id := tx.Bucket(bucketNames).Get([]byte(idOrName)); id != nil {
			raw = tx.Bucket(bucketBoxes).Get(id)
		}
	}
	return raw
}

// ErrNameTaken is returned by PutBox when the name belongs to another box.
var ErrNameTaken = errors.New("a box with this name already exists")

// Box returns the box with the given id or name.
func (s *Store) Box(idOrName string) (*Box, error) {
	var b Box
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := boxRecord(tx, idOrName)
		if raw == nil {
			return ErrNotFound
		}
		return json.Unmarshal(raw, &b)
	})
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// Boxes returns every box, oldest first.
func (s *Store) Boxes() ([]*Box, error) {
	var out []*Box
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBoxes).ForEach(func(_, v []byte) error {
			var b Box
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			out = append(out, &b)
			return nil
		})
	})
	sortBoxes(out)
	return out, err
}

// DeleteBox removes a box with its runs, logs and host uid. Its runs still
// in the run journal are forgotten; a fold under way when the box goes
// checks, in its own transaction, that the box is there, so no run of a
// deleted box is written back, and neither is one that replay finds.
func (s *Store) DeleteBox(id string) error {
	s.dropPending(id)
	return s.db.Update(func(tx *bolt.Tx) error {
		boxes := tx.Bucket(bucketBoxes)
		raw := boxes.Get([]byte(id))
		if raw == nil {
			return ErrNotFound
		}
		var b Box
		if json.Unmarshal(raw, &b) == nil && b.Name != "" {
			names := tx.Bucket(bucketNames)
			if owner := names.Get([]byte(b.Name)); string(owner) == id {
				if err := names.Delete([]byte(b.Name)); err != nil {
					return err
				}
			}
		}
		if err := boxes.Delete([]byte(id)); err != nil {
			return err
		}
		if err := releaseUID(tx, id); err != nil {
			return err
		}
		for _, bk := range [][]byte{bucketRuns, bucketLogs} {
			if err := deletePrefix(tx.Bucket(bk), boxPrefix(id)); err != nil {
				return err
			}
		}
		return nil
	})
}

func boxPrefix(id string) []byte { return append([]byte(id), 0) }

func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	c := b.Cursor()
	var keys [][]byte
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// PutRun creates or replaces a run record. It fails with ErrNotFound when
// the run's box is gone: a deleted box's runs went with it.
//
// The record goes to the run journal (see the package doc): when PutRun
// returns it is safe from a killed boxd, and in the database a moment
// later. Of two writes of one run, the later wins. r is encoded before
// PutRun returns, so the caller may change it afterwards.
func (s *Store) PutRun(r *Run) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketBoxes).Get([]byte(r.BoxID)) == nil {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return err
	}
	// What a commit would refuse is refused now, not in a batch.
	if len(r.BoxID)+1+len(r.ID) > bolt.MaxKeySize {
		return berrors.ErrKeyTooLarge
	}
	if len(raw) > bolt.MaxValueSize {
		return berrors.ErrValueTooLarge
	}
	return s.journalRun(r.BoxID, r.ID, raw)
}

// Run returns one run of a box.
//
// Run and Runs first commit the run journal (one synced commit, only when
// records wait in it), so that they read every acknowledged run from the
// database alone: reads of runs are rare next to the execs that write
// them, and the database's order and lookups stay the one truth.
func (s *Store) Run(boxID, runID string) (*Run, error) {
	if err := s.fold(); err != nil {
		return nil, err
	}
	var r Run
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketRuns).Get(append(boxPrefix(boxID), runID...))
		if raw == nil {
			return ErrNotFound
		}
		return json.Unmarshal(raw, &r)
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Runs returns a box's runs, newest first.
func (s *Store) Runs(boxID string) ([]*Run, error) {
	if err := s.fold(); err != nil {
		return nil, err
	}
	var out []*Run
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRuns).Cursor()
		p := boxPrefix(boxID)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			out = append(out, &r)
		}
		return nil
	})
	sortRuns(out)
	return out, err
}

// AppendLogs adds entries to a box's log. It fails with ErrNotFound when
// the box is gone: a deleted box's log went with it.
func (s *Store) AppendLogs(boxID string, entries ...LogEntry) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketBoxes).Get([]byte(boxID)) == nil {
			return ErrNotFound
		}
		b := tx.Bucket(bucketLogs)
		for _, e := range entries {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			raw, err := json.Marshal(e)
			if err != nil {
				return err
			}
			key := binary.BigEndian.AppendUint64(boxPrefix(boxID), seq)
			if err := b.Put(key, raw); err != nil {
				return err
			}
		}
		return nil
	})
}

// Logs returns a box's log entries in order, skipping offset entries and
// returning at most limit (all when limit <= 0).
func (s *Store) Logs(boxID string, offset, limit int) ([]LogEntry, error) {
	out := []LogEntry{}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		p := boxPrefix(boxID)
		i := 0
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if i++; i <= offset {
				continue
			}
			var e LogEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// put stores v as JSON under key in bucket.
func (s *Store) put(bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, raw) })
}

// get reads the JSON under key in bucket into v, or returns ErrNotFound.
func (s *Store) get(bucket, key []byte, v any) error {
	return s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucket).Get(key)
		if raw == nil {
			return ErrNotFound
		}
		return json.Unmarshal(raw, v)
	})
}

// del removes key from bucket, or returns ErrNotFound.
func (s *Store) del(bucket, key []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b.Get(key) == nil {
			return ErrNotFound
		}
		return b.Delete(key)
	})
}

// list decodes every value under prefix in bucket, in key order.
func list[T any](s *Store, bucket, prefix []byte) ([]*T, error) {
	var out []*T
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			t := new(T)
			if err := json.Unmarshal(v, t); err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// key joins parts with NUL bytes, for keys under a box id.
func key(parts ...string) []byte {
	var b []byte
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b
}
