package box

import (
	"context"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/internal/boxlink"
)

// Ephemeral boxes are created by package ephemeral, through
// internal/boxlink, so that package box has no entry point that returns an
// ephemeral box as a full *Box.
func init() { boxlink.NewEphemeral = newEphemeral }

// newEphemeral sends POST /v2/box, or POST /v2/box/from-snapshot when
// snapshotID is set, with "ephemeral": true, ttl (in seconds, left out
// when 0) and the fields of p that an ephemeral box takes, as the official
// SDKs do. The API answers with a ready box; should it say "creating", the
// box is polled as Create would.
func newEphemeral(ctx context.Context, c *Client, p *CreateParams, ttl int64, snapshotID string, opts []Option) (*Box, error) {
	ctx = withCallOptions(ctx, opts)
	var q CreateParams
	if p != nil {
		q = CreateParams{Name: p.Name, Labels: p.Labels, Size: p.Size, Runtime: p.Runtime, Env: p.Env, AttachHeaders: p.AttachHeaders, NetworkPolicy: p.NetworkPolicy}
	}
	body, err := q.request()
	if err != nil {
		return nil, err
	}
	body.Ephemeral = ptr(true)
	if ttl != 0 {
		body.TTL = &ttl
	}
	var d *gen.BoxData
	if snapshotID == "" {
		d, err = call[gen.BoxData](c.api.CreateBox(ctx, body))
	} else {
		var req gen.CreateBoxFromSnapshotRequest
		if req, err = fromSnapshotRequest(body, snapshotID); err == nil {
			d, err = call[gen.BoxData](c.api.CreateBoxFromSnapshot(ctx, req))
		}
	}
	if err != nil {
		return nil, err
	}
	return c.ready(ctx, d, nil)
}
