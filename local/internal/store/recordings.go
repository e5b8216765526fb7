package store

import (
	"sort"

	bolt "go.etcd.io/bbolt"
)

var bucketRecordings = addBucket("recordings") // key: box id + 0 + recording id

// Recording is a video recording of a box's browser. Times are Unix
// seconds except where the name says otherwise.
type Recording struct {
	ID                 string            `json:"id"`
	BoxID              string            `json:"box_id"`
	Status             string            `json:"status"` // recording, completed, failed or deleted
	StartedAt          int64             `json:"started_at"`
	StartedAtNs        int64             `json:"started_at_ns"`
	EndedAt            int64             `json:"ended_at,omitempty"`
	DurationMs         int64             `json:"duration_ms,omitempty"`
	SizeBytes          int64             `json:"size_bytes,omitempty"`
	SegmentCount       int64             `json:"segment_count,omitempty"`
	MP4SizeBytes       int64             `json:"mp4_size_bytes,omitempty"`
	StoppedReason      string            `json:"stopped_reason,omitempty"`
	MaxDurationSeconds int               `json:"max_duration_seconds,omitempty"`
	ExpiresAt          int64             `json:"expires_at,omitempty"`
	Markers            []RecordingMarker `json:"markers,omitempty"`
	// Error says why a failed recording has no video.
	Error string `json:"error,omitempty"`
	// CPUNs is the CPU time ffmpeg used for it.
	CPUNs int64 `json:"cpu_ns,omitempty"`
}

// RecordingMarker is a chapter of a recording.
type RecordingMarker struct {
	Type  string `json:"type"`
	AtMs  int64  `json:"at_ms"`
	EndMs int64  `json:"end_ms,omitempty"`
	Label string `json:"label,omitempty"`
	TabID string `json:"tab_id,omitempty"`
}

// PutRecording creates or replaces a recording.
func (s *Store) PutRecording(r *Recording) error {
	return s.put(bucketRecordings, key(r.BoxID, r.ID), r)
}

// Recording returns one recording of a box, or ErrNotFound.
func (s *Store) Recording(boxID, id string) (*Recording, error) {
	var r Recording
	if err := s.get(bucketRecordings, key(boxID, id), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Recordings returns a box's recordings, newest first.
func (s *Store) Recordings(boxID string) ([]*Recording, error) {
	out, err := list[Recording](s, bucketRecordings, boxPrefix(boxID))
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAtNs > out[j].StartedAtNs })
	return out, err
}

// AllRecordings returns every box's recordings, for boxd's upkeep.
func (s *Store) AllRecordings() ([]*Recording, error) {
	return list[Recording](s, bucketRecordings, nil)
}

// DeleteRecording removes a recording's record, or returns ErrNotFound.
func (s *Store) DeleteRecording(boxID, id string) error {
	return s.del(bucketRecordings, key(boxID, id))
}

// DeleteRecordings removes every recording record of a box.
func (s *Store) DeleteRecordings(boxID string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return deletePrefix(tx.Bucket(bucketRecordings), boxPrefix(boxID))
	})
}
