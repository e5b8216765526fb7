package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var bucketPreviews = addBucket("previews") // key: box id + 0 + port (5 digits)

// Preview is a public URL of a box's port. Token, Username and Password
// are its credentials: none, either kind, or both.
type Preview struct {
	BoxID     string `json:"box_id"`
	Port      int    `json:"port"`
	Token     string `json:"token,omitempty"`
	Username  string `json:"username,omitempty"`
	Password  string `json:"password,omitempty"`
	CreatedAt int64  `json:"created_at"`
}

func previewKey(boxID string, port int) []byte { return key(boxID, fmt.Sprintf("%05d", port)) }

// PutPreview creates or replaces a preview.
func (s *Store) PutPreview(p *Preview) error {
	return s.put(bucketPreviews, previewKey(p.BoxID, p.Port), p)
}

// Preview returns the preview of a box's port, or ErrNotFound.
func (s *Store) Preview(boxID string, port int) (*Preview, error) {
	var p Preview
	if err := s.get(bucketPreviews, previewKey(boxID, port), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Previews returns a box's previews by port.
func (s *Store) Previews(boxID string) ([]*Preview, error) {
	return list[Preview](s, bucketPreviews, boxPrefix(boxID))
}

// DeletePreview removes the preview of a box's port, or returns
// ErrNotFound.
func (s *Store) DeletePreview(boxID string, port int) error {
	return s.del(bucketPreviews, previewKey(boxID, port))
}

// DeletePreviews removes every preview of a box.
func (s *Store) DeletePreviews(boxID string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return deletePrefix(tx.Bucket(bucketPreviews), boxPrefix(boxID))
	})
}
