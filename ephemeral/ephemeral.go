// Package ephemeral creates ephemeral boxes: short-lived boxes that the
// service deletes, with their processes and files, when their time to
// live runs out (three days at most).
//
// An ephemeral box runs commands and code, reads and writes files, has
// cron schedules, a working directory, snapshots and a network policy, as
// a full box does, through the same namespace types ([box.Exec],
// [box.Files], [box.Schedule]). It has no coding agent, git, skills,
// labels namespace, browser or public URLs, and [Box] has no field or
// method for them, so code that tries to use one does not compile.
//
//	eb, err := ephemeral.Create(ctx, client, &ephemeral.CreateParams{TTL: time.Hour})
//	if err != nil { ... }
//	defer eb.Delete(ctx)
//	run, err := eb.Exec.Command(ctx, "echo hello")
//
// Account-wide calls (listing boxes, bulk deletes, snapshot deletes) are
// those of [box.Client].
package ephemeral

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/internal/boxlink"
)

// MaxTTL is the longest an ephemeral box may live, and how long it lives
// when CreateParams.TTL is zero.
const MaxTTL = 72 * time.Hour

// CreateParams configures a new ephemeral box. The zero value (or nil)
// creates a small box that lives MaxTTL.
type CreateParams struct {
	Name string
	// Labels are set at creation only (an ephemeral box has no labels
	// namespace); box.Client.List filters on them. At most 5, each at most
	// 20 characters from letters, digits and . _ - :
	Labels  []string
	Size    box.Size
	Runtime box.Runtime
	// TTL is how long the box lives: zero for MaxTTL, otherwise from one
	// second up to MaxTTL. It is sent in whole seconds, rounded up.
	TTL time.Duration
	// Env is set in every process of the box.
	Env map[string]string
	// AttachHeaders adds headers to the box's outbound HTTPS requests to
	// matching hosts ("api.example.com" or "*.example.com"). Write-only.
	AttachHeaders map[string]map[string]string
	// NetworkPolicy is fixed at creation: an ephemeral box cannot change
	// it.
	NetworkPolicy *box.NetworkPolicy
}

// ttlSeconds checks the TTL and converts it for the wire; 0 leaves the
// default to the server.
func (p *CreateParams) ttlSeconds() (int64, error) {
	if p == nil || p.TTL == 0 {
		return 0, nil
	}
	if p.TTL < time.Second || p.TTL > MaxTTL {
		return 0, invalidf("ephemeral: TTL %v is out of range: use 0 for the default, or 1s to %v", p.TTL, MaxTTL)
	}
	return int64((p.TTL + time.Second - 1) / time.Second), nil
}

func (p *CreateParams) boxParams() *box.CreateParams {
	if p == nil {
		return nil
	}
	return &box.CreateParams{Name: p.Name, Labels: p.Labels, Size: p.Size, Runtime: p.Runtime, Env: p.Env, AttachHeaders: p.AttachHeaders, NetworkPolicy: p.NetworkPolicy}
}

// newEphemeral is package box's constructor of ephemeral boxes (see
// internal/boxlink). Package box is initialised before this package, so
// the link is in place.
var newEphemeral = boxlink.NewEphemeral.(func(context.Context, *box.Client, *box.CreateParams, int64, string, []box.Option) (*box.Box, error))

// Create creates an ephemeral box (POST /v2/box with "ephemeral": true)
// and returns it ready. A TTL out of range is refused before any request.
func Create(ctx context.Context, c *box.Client, params *CreateParams, opts ...box.Option) (*Box, error) {
	return create(ctx, c, "", params, opts)
}

// FromSnapshot creates an ephemeral box whose filesystem is the
// snapshot's (POST /v2/box/from-snapshot with "ephemeral": true). The box
// the snapshot was taken of is not changed.
func FromSnapshot(ctx context.Context, c *box.Client, snapshotID string, params *CreateParams, opts ...box.Option) (*Box, error) {
	if strings.TrimSpace(snapshotID) == "" {
		return nil, invalidf("ephemeral: snapshot id is required")
	}
	return create(ctx, c, snapshotID, params, opts)
}

func create(ctx context.Context, c *box.Client, snapshotID string, params *CreateParams, opts []box.Option) (*Box, error) {
	if c == nil {
		return nil, invalidf("ephemeral: a *box.Client is required")
	}
	ttl, err := params.ttlSeconds()
	if err != nil {
		return nil, err
	}
	b, err := newEphemeral(ctx, c, params.boxParams(), ttl, snapshotID, opts)
	if err != nil {
		return nil, err
	}
	return wrap(b), nil
}

// GetByName returns the box with the given name as a full *box.Box, not
// an ephemeral *Box: the official SDKs do the same, because a lookup by
// name is the general box lookup. Its Info().Ephemeral and
// Info().ExpiresAt tell an ephemeral box apart; the agent, git, skills and
// other calls an ephemeral box does not support fail on the server.
func GetByName(ctx context.Context, c *box.Client, name string, opts ...box.Option) (*box.Box, error) {
	if c == nil {
		return nil, invalidf("ephemeral: a *box.Client is required")
	}
	return c.GetByName(ctx, name, nil, opts...)
}

// invalidError is an error of a call's arguments: it matches box.ErrInvalid.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == box.ErrInvalid }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// Box is a handle to an ephemeral box. Its methods are safe for concurrent
// use.
//
// Like a full box it tracks a working directory on the client (see
// [Box.Cd]); exec, code and files calls are resolved against it.
type Box struct {
	b *box.Box

	// Exec runs commands and code snippets.
	Exec *box.Exec
	// Files reads and writes the box's files.
	Files *box.Files
	// Schedule manages the box's cron schedules.
	Schedule *box.Schedule
}

func wrap(b *box.Box) *Box {
	return &Box{b: b, Exec: b.Exec, Files: b.Files, Schedule: b.Schedule}
}

// ID returns the box's id.
func (e *Box) ID() string { return e.b.ID() }

// ExpiresAt returns when the service deletes the box, as reported at
// creation.
func (e *Box) ExpiresAt() time.Time { return e.b.Info().ExpiresAt }

// NetworkPolicy returns the box's outbound network policy, as reported at
// creation.
func (e *Box) NetworkPolicy() box.NetworkPolicy { return e.b.Info().NetworkPolicy }

// Cwd returns the working directory the box tracks on the client. It
// starts at /workspace/home.
func (e *Box) Cwd() string { return e.b.Cwd() }

// Cd changes the tracked working directory, as [box.Box.Cd] does.
func (e *Box) Cd(ctx context.Context, path string, opts ...box.Option) error {
	return e.b.Cd(ctx, path, opts...)
}

// Status returns the box's current status.
func (e *Box) Status(ctx context.Context, opts ...box.Option) (box.Status, error) {
	return e.b.Status(ctx, opts...)
}

// Delete deletes the box, its processes and its files now.
func (e *Box) Delete(ctx context.Context, opts ...box.Option) error { return e.b.Delete(ctx, opts...) }

// Snapshot saves the box's filesystem under name, as [box.Box.Snapshot]
// does.
func (e *Box) Snapshot(ctx context.Context, name string, opts ...box.Option) (*box.Snapshot, error) {
	return e.b.Snapshot(ctx, name, opts...)
}

// ListSnapshots returns the box's snapshots.
func (e *Box) ListSnapshots(ctx context.Context, opts ...box.Option) ([]box.Snapshot, error) {
	return e.b.ListSnapshots(ctx, opts...)
}

// DeleteSnapshot deletes one of the box's snapshots.
func (e *Box) DeleteSnapshot(ctx context.Context, snapshotID string, opts ...box.Option) error {
	return e.b.DeleteSnapshot(ctx, snapshotID, opts...)
}
