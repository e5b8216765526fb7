package store

import (
	"encoding/json"
	"errors"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// bucketSchedules holds schedule records; key: box id + 0 + schedule id.
var bucketSchedules = addBucket("schedules")

// Schedule is a cron schedule of a box: a command (Type "exec") or an
// agent prompt (Type "prompt") that boxd runs at the times Cron names.
type Schedule struct {
	ID     string `json:"id"`
	BoxID  string `json:"box_id"`
	Type   string `json:"type"` // exec | prompt
	Cron   string `json:"cron"`
	Status string `json:"status"` // active | paused

	Command      []string       `json:"command,omitempty"`
	Prompt       string         `json:"prompt,omitempty"`
	Folder       string         `json:"folder,omitempty"`
	Model        string         `json:"model,omitempty"`
	AgentOptions map[string]any `json:"agent_options,omitempty"`
	TimeoutMs    int64          `json:"timeout_ms,omitempty"`

	WebhookURL     string            `json:"webhook_url,omitempty"`
	WebhookHeaders map[string]string `json:"webhook_headers,omitempty"`

	LastRunAt     int64  `json:"last_run_at,omitempty"`
	LastRunStatus string `json:"last_run_status,omitempty"`
	LastRunID     string `json:"last_run_id,omitempty"`
	TotalRuns     int64  `json:"total_runs"`
	TotalFailures int64  `json:"total_failures"`

	CreatedAt int64 `json:"created_at"`
	UpdatedAt int64 `json:"updated_at"`
	// Seq orders schedules created in the same second.
	Seq int64 `json:"seq"`
}

// PutSchedule creates or replaces a schedule record.
func (s *Store) PutSchedule(sc *Schedule) error {
	return s.put(bucketSchedules, key(sc.BoxID, sc.ID), sc)
}

// Schedule returns one schedule of a box.
func (s *Store) Schedule(boxID, id string) (*Schedule, error) {
	var sc Schedule
	if err := s.get(bucketSchedules, key(boxID, id), &sc); err != nil {
		return nil, err
	}
	return &sc, nil
}

// Schedules returns a box's schedules, oldest first.
func (s *Store) Schedules(boxID string) ([]*Schedule, error) {
	out, err := list[Schedule](s, bucketSchedules, boxPrefix(boxID))
	sortSchedules(out)
	return out, err
}

// AllSchedules returns the schedules of every box, oldest first.
func (s *Store) AllSchedules() ([]*Schedule, error) {
	var out []*Schedule
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSchedules).ForEach(func(_, v []byte) error {
			sc := new(Schedule)
			if err := json.Unmarshal(v, sc); err != nil {
				return err
			}
			out = append(out, sc)
			return nil
		})
	})
	sortSchedules(out)
	return out, err
}

// UpdateSchedule changes a schedule record with f in one transaction; an
// error from f aborts the change and is returned.
func (s *Store) UpdateSchedule(boxID, id string, f func(*Schedule) error) (*Schedule, error) {
	var sc Schedule
	err := s.db.Update(func(tx *bolt.Tx) error {
		return updateSchedule(tx, boxID, id, &sc, f)
	})
	if err != nil {
		return nil, err
	}
	return &sc, nil
}

// FinishScheduleRun stores a scheduled run's record and changes its
// schedule with f, in one transaction. Concurrent calls share commits
// (bbolt's Batch), so many schedules ending at once cost few disk syncs.
// The schedule may be gone (deleted while the run went on): the run is
// still stored and f is not called. If the box is gone, nothing is stored
// and stored is false.
func (s *Store) FinishScheduleRun(r *Run, f func(*Schedule)) (stored bool, err error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return false, err
	}
	err = s.db.Batch(func(tx *bolt.Tx) error {
		stored = false
		if tx.Bucket(bucketBoxes).Get([]byte(r.BoxID)) == nil {
			return nil
		}
		if err := tx.Bucket(bucketRuns).Put(key(r.BoxID, r.ID), raw); err != nil {
			return err
		}
		var sc Schedule
		err := updateSchedule(tx, r.BoxID, r.ScheduleID, &sc, func(sc *Schedule) error { f(sc); return nil })
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		stored = true
		return nil
	})
	return stored && err == nil, err
}

// StartScheduleRun stores the record of a scheduled run that has begun,
// unless its box is gone. Like FinishScheduleRun it shares commits with
// concurrent calls.
func (s *Store) StartScheduleRun(r *Run) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Batch(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketBoxes).Get([]byte(r.BoxID)) == nil {
			return nil
		}
		return tx.Bucket(bucketRuns).Put(key(r.BoxID, r.ID), raw)
	})
}

// DeleteSchedule removes one schedule of a box, or returns ErrNotFound.
func (s *Store) DeleteSchedule(boxID, id string) error {
	return s.del(bucketSchedules, key(boxID, id))
}

// DeleteSchedules removes every schedule of a box.
func (s *Store) DeleteSchedules(boxID string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return deletePrefix(tx.Bucket(bucketSchedules), boxPrefix(boxID))
	})
}

func updateSchedule(tx *bolt.Tx, boxID, id string, sc *Schedule, f func(*Schedule) error) error {
	b := tx.Bucket(bucketSchedules)
	k := key(boxID, id)
	old := b.Get(k)
	if old == nil {
		return ErrNotFound
	}
	if err := json.Unmarshal(old, sc); err != nil {
		return err
	}
	if err := f(sc); err != nil {
		return err
	}
	raw, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

func sortSchedules(s []*Schedule) {
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].CreatedAt != s[j].CreatedAt {
			return s[i].CreatedAt < s[j].CreatedAt
		}
		return s[i].Seq < s[j].Seq
	})
}
