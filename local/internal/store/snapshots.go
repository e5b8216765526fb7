package store

import "sort"

// bucketSnapshots holds snapshot records, keyed by snapshot id. Snapshots
// belong to the account, not to their box: they outlive it.
var bucketSnapshots = addBucket("snapshots")

// Snapshot is a snapshot record. Its archive is a file named after the id
// in boxd's snapshot directory.
type Snapshot struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	BoxID     string `json:"box_id"`
	Status    string `json:"status"`
	SizeBytes int64  `json:"size_bytes"` // of the archive file
	CreatedAt int64  `json:"created_at"`
	// Format names the archive's encoding, e.g. "tar+zstd".
	Format string `json:"format"`
	// Entries and ContentBytes are what the archive holds (entries, and
	// bytes of regular files); extraction refuses to write more.
	Entries      int64 `json:"entries"`
	ContentBytes int64 `json:"content_bytes"`
	// Seq orders snapshots taken in the same second.
	Seq int64 `json:"seq"`
	// Runtime and Size are those of the box the snapshot was taken of,
	// which a box created from it gets unless it asks for others.
	Runtime string `json:"runtime,omitempty"`
	Size    string `json:"size,omitempty"`
}

// PutSnapshot creates or replaces a snapshot record.
func (s *Store) PutSnapshot(sn *Snapshot) error {
	return s.put(bucketSnapshots, []byte(sn.ID), sn)
}

// Snapshot returns the snapshot with the given id, or ErrNotFound.
func (s *Store) Snapshot(id string) (*Snapshot, error) {
	var sn Snapshot
	if err := s.get(bucketSnapshots, []byte(id), &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// Snapshots returns the snapshots of the box boxID, or of every box when
// boxID is empty, oldest first.
func (s *Store) Snapshots(boxID string) ([]*Snapshot, error) {
	all, err := list[Snapshot](s, bucketSnapshots, nil)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, sn := range all {
		if boxID == "" || sn.BoxID == boxID {
			out = append(out, sn)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].Seq < out[j].Seq
	})
	return out, nil
}

// DeleteSnapshot removes a snapshot record, or returns ErrNotFound.
func (s *Store) DeleteSnapshot(id string) error {
	return s.del(bucketSnapshots, []byte(id))
}
