package box

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
)

// Errors of snapshot creation. The server's own refusals are *Error.
var (
	// ErrSnapshotFailed is returned when a snapshot ends in the error
	// state (or disappears) while it is being taken.
	ErrSnapshotFailed = errors.New("box: snapshot creation failed")
	// ErrSnapshotTimeout is returned when a snapshot is still being taken
	// after the five minutes the API allows.
	ErrSnapshotTimeout = errors.New("box: snapshot creation timed out")
)

// snapshotTimeout bounds the wait for a snapshot in the creating state.
const snapshotTimeout = 5 * time.Minute

// SnapshotStatus is the state of a snapshot.
type SnapshotStatus string

// Snapshot statuses.
const (
	SnapshotCreating SnapshotStatus = "creating"
	SnapshotReady    SnapshotStatus = "ready"
	SnapshotError    SnapshotStatus = "error"
	SnapshotDeleted  SnapshotStatus = "deleted"
)

// Snapshot is a saved copy of a box's filesystem, from which new boxes can
// be created with [Client.FromSnapshot]. Snapshots belong to the account:
// they outlive the box they were taken of.
type Snapshot struct {
	ID    string
	Name  string
	BoxID string
	// SizeBytes is the stored size of the snapshot.
	SizeBytes int64
	Status    SnapshotStatus
	CreatedAt time.Time
	// Runtime and Size are those of the box the snapshot was taken of; a
	// box created from it without its own gets them. Empty where the
	// server does not say (the cloud's snapshot records do not, so far).
	Runtime Runtime
	Size    Size
}

func snapshotFrom(s *gen.Snapshot) Snapshot {
	sn := Snapshot{ID: s.ID, Name: s.Name, BoxID: s.BoxID, SizeBytes: s.SizeBytes, Status: SnapshotStatus(s.Status), CreatedAt: unixTime(s.CreatedAt)}
	if s.Runtime != nil {
		sn.Runtime = Runtime(*s.Runtime)
	}
	if s.Size != nil {
		sn.Size = Size(*s.Size)
	}
	return sn
}

// Snapshot saves the box's filesystem under name (POST
// /v2/box/{id}/snapshots) and returns the snapshot once it is ready. While
// the server reports it as being created, Snapshot polls the box's
// snapshot list at the client's poll interval (two seconds by default)
// until it is ready, ctx ends, or five minutes pass (ErrSnapshotTimeout).
// A snapshot that fails gives ErrSnapshotFailed.
func (b *Box) Snapshot(ctx context.Context, name string, opts ...Option) (*Snapshot, error) {
	ctx = withCallOptions(ctx, opts)
	if strings.TrimSpace(name) == "" {
		return nil, invalidf("box: snapshot name is required")
	}
	s, err := call[gen.Snapshot](b.c.api.CreateSnapshot(ctx, b.id, gen.CreateSnapshotRequest{Name: name}))
	if err != nil {
		return nil, err
	}
	snap := snapshotFrom(s)
	if err := b.waitSnapshot(ctx, &snap); err != nil {
		return nil, err
	}
	return &snap, nil
}

// waitSnapshot polls while s is being created. Unlike box creation, a
// failed poll is an error, as in the official SDKs.
func (b *Box) waitSnapshot(ctx context.Context, s *Snapshot) error {
	start := time.Now()
	for s.Status == SnapshotCreating {
		if time.Since(start) > snapshotTimeout {
			return ErrSnapshotTimeout
		}
		if err := sleepCtx(ctx, b.c.cfg.pollInterval); err != nil {
			return err
		}
		list, err := b.ListSnapshots(ctx)
		if err != nil {
			return err
		}
		found := false
		for _, x := range list {
			if x.ID == s.ID {
				*s, found = x, true
				break
			}
		}
		if !found {
			return fmt.Errorf("%w: snapshot %s is no longer listed", ErrSnapshotFailed, s.ID)
		}
	}
	switch s.Status {
	case SnapshotReady:
		return nil
	case SnapshotError:
		return ErrSnapshotFailed
	case SnapshotDeleted:
		return fmt.Errorf("%w: snapshot %s was deleted", ErrSnapshotFailed, s.ID)
	default:
		return fmt.Errorf("box: snapshot %s has an unknown status %q", s.ID, s.Status)
	}
}

// ListSnapshots returns the box's snapshots (GET /v2/box/{id}/snapshots).
func (b *Box) ListSnapshots(ctx context.Context, opts ...Option) ([]Snapshot, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.SnapshotsResponse](b.c.api.ListSnapshots(ctx, b.id))
	if err != nil {
		return nil, err
	}
	out := make([]Snapshot, len(r.Snapshots))
	for i := range r.Snapshots {
		out[i] = snapshotFrom(&r.Snapshots[i])
	}
	return out, nil
}

// DeleteSnapshot deletes one of the box's snapshots (DELETE
// /v2/box/{id}/snapshots/{snapshotId}).
func (b *Box) DeleteSnapshot(ctx context.Context, snapshotID string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("snapshot id", snapshotID); err != nil {
		return err
	}
	return none(b.c.api.DeleteSnapshot(ctx, b.id, snapshotID))
}

// FromSnapshot creates a new box whose filesystem is the snapshot's (POST
// /v2/box/from-snapshot) and waits until it is ready, as [Client.Create]
// does (ErrCreateTimeout, ErrCreateFailed). The box the snapshot was taken
// of is not changed. params are those of Create, and every one of them is
// sent: agent, git identity and token, env, skills, MCP servers, browser
// and the rest.
func (c *Client) FromSnapshot(ctx context.Context, snapshotID string, params *CreateParams, opts ...Option) (*Box, error) {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("snapshot id", snapshotID); err != nil {
		return nil, err
	}
	body, err := params.request()
	if err != nil {
		return nil, err
	}
	req, err := fromSnapshotRequest(body, snapshotID)
	if err != nil {
		return nil, err
	}
	d, err := call[gen.BoxData](c.api.CreateBoxFromSnapshot(ctx, req))
	if err != nil {
		return nil, err
	}
	return c.ready(ctx, d, params)
}

// fromSnapshotRequest is the from-snapshot body for create body r. The two
// bodies have the same fields but snapshot_id, so their shared JSON form
// carries every field over, including any the spec adds later.
func fromSnapshotRequest(r gen.CreateBoxRequest, snapshotID string) (gen.CreateBoxFromSnapshotRequest, error) {
	var out gen.CreateBoxFromSnapshotRequest
	raw, err := json.Marshal(r)
	if err != nil {
		return out, fmt.Errorf("box: %w", err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("box: %w", err)
	}
	out.SnapshotID = snapshotID
	return out, nil
}

// DeleteSnapshots deletes the snapshots with the given ids, of any box, in
// one request (DELETE /v2/box/snapshots with {"ids": [...]}), and returns
// how many the server deleted. An empty list, or a blank id, is an error:
// it is never read as "all snapshots" (see [Client.DeleteAllSnapshots]).
func (c *Client) DeleteSnapshots(ctx context.Context, ids []string, opts ...Option) (int, error) {
	ctx = withCallOptions(ctx, opts)
	if len(ids) == 0 {
		return 0, invalidf("box: DeleteSnapshots needs at least one snapshot id")
	}
	for _, id := range ids {
		if strings.TrimSpace(id) == "" {
			return 0, invalidf("box: DeleteSnapshots: blank snapshot id")
		}
	}
	r, err := call[gen.DeleteSnapshotsResponse](c.api.DeleteSnapshots(ctx, nil, gen.DeleteSnapshotsRequest{IDs: &ids}))
	if err != nil {
		return 0, err
	}
	return int(r.Deleted), nil
}

// DeleteAllSnapshots deletes every snapshot of the account (DELETE
// /v2/box/snapshots?all=true) and returns how many the server deleted.
func (c *Client) DeleteAllSnapshots(ctx context.Context, opts ...Option) (int, error) {
	ctx = withCallOptions(ctx, opts)
	all := true
	r, err := call[gen.DeleteSnapshotsResponse](c.api.DeleteSnapshots(ctx, &gen.DeleteSnapshotsParams{All: &all}, gen.DeleteSnapshotsRequest{}))
	if err != nil {
		return 0, err
	}
	return int(r.Deleted), nil
}
