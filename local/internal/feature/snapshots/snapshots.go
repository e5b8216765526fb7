package snapshots

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/archive"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// Snapshots on boxd.
//
// A snapshot is a zstd-compressed tar archive of a box's /workspace and
// /home/boxuser, in <data>/snapshots/<id>.tar.zst, with a record in the
// store; size_bytes is the archive's size. /tmp is left out on purpose: it
// is scratch space, and a restored box starts with an empty one, as after
// a reboot. Processes are not part of a snapshot either.
//
// A running box is frozen (every process stopped, as by pause) while its
// files are read, so the archive is one consistent moment of the box, and
// is thawed afterwards; a box the user paused stays paused. While a
// snapshot is being taken nothing starts, resumes or pauses the box:
// exec, files and other calls wait until it is done.
//
// boxd takes a snapshot within the POST request and answers "ready" (or an
// error); it never answers "creating", which clients only need to handle
// for the cloud. Snapshots belong to the account: they outlive their box.
//
// POST /v2/box/from-snapshot creates a new box, with the same body and
// validation as POST /v2/box, and unpacks the archive into its directories
// before anything runs in it. Files keep their modes and modification
// times; symbolic links stay links; everything belongs to the box user.

// maxSnapshotName bounds a snapshot's name.
const maxSnapshotName = 256

// snapshotLimits bound what one snapshot may hold. Restores are bounded
// more tightly, by what the snapshot's record says it holds.
var snapshotLimits = archive.Limits{Entries: 10 << 20, Bytes: 100 << 30}

// snapshotTops are the directories of a box's file tree that snapshots
// hold, relative to it: those mounted at /workspace and /home/boxuser.
func snapshotTops(t sandbox.Tree) []string {
	return []string{filepath.Base(t.Workspace()), filepath.Base(t.UserHome())}
}

func (f *Snapshots) snapshotDir() string { return f.cfg.Dir }

func (f *Snapshots) snapshotPath(id string) string {
	return filepath.Join(f.snapshotDir(), id+".tar.zst")
}

func snapshotData(sn *store.Snapshot) gen.Snapshot {
	d := gen.Snapshot{ID: sn.ID, Name: sn.Name, BoxID: sn.BoxID, SizeBytes: sn.SizeBytes, Status: gen.SnapshotStatus(sn.Status), CreatedAt: sn.CreatedAt}
	if sn.Runtime != "" {
		d.Runtime = &sn.Runtime
	}
	if sn.Size != "" {
		size := gen.BoxSize(sn.Size)
		d.Size = &size
	}
	return d
}

func (f *Snapshots) CreateSnapshot(ctx context.Context, req gen.CreateSnapshotRequestObject) (gen.CreateSnapshotResponseObject, error) {
	b, err := f.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	var name string
	if req.Body != nil {
		name = req.Body.Name
	}
	switch {
	case strings.TrimSpace(name) == "":
		return nil, errdefs.Invalid("name is required")
	case len(name) > maxSnapshotName:
		return nil, errdefs.Invalid("name is longer than %d bytes", maxSnapshotName)
	}
	if err := f.host.NeedDisk("take a snapshot"); err != nil {
		return nil, err
	}
	sn, err := f.takeSnapshot(ctx, b, name)
	if err != nil {
		return nil, err
	}
	return gen.CreateSnapshot200JSONResponse(snapshotData(sn)), nil
}

// takeSnapshot archives box b and records the snapshot. The archive is
// written next to the box's files (so that an interrupted one goes with
// the box) and moved into the snapshot directory once it is complete.
func (f *Snapshots) takeSnapshot(ctx context.Context, b *store.Box, name string) (*store.Snapshot, error) {
	start := time.Now()
	l := f.host.Layout(b.ID)
	if err := os.MkdirAll(f.snapshotDir(), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(l.Root, ".snapshot-*.tmp")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.NotFound("box not found")
	}
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed

	release, err := f.host.Hold(ctx, b.ID)
	held := time.Now()
	if err != nil {
		tmp.Close()
		if errors.Is(err, core.ErrBoxNotFound) {
			return nil, errdefs.NotFound("box not found")
		}
		return nil, err
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	st, err := archive.Write(ctx, w, l.Files().Dir, snapshotTops(l.Files()), snapshotLimits)
	if err == nil {
		err = w.Flush()
	}
	release()
	frozen := time.Since(held)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A delete that ran meanwhile removes the files before the
		// record: the archive fails first.
		if _, gone := f.host.Box(b.ID); errors.Is(gone, errdefs.ErrNotFound) || f.host.Deleted(b.ID) {
			return nil, errdefs.NotFound("box not found")
		}
		if errors.Is(err, archive.ErrTooLarge) {
			return nil, errdefs.TooLarge("box is too large to snapshot: %v", err)
		}
		return nil, fmt.Errorf("snapshot of %s: %w", b.ID, err)
	}

	now := time.Now()
	sn := &store.Snapshot{
		ID: core.NewID("snap-"), Name: name, BoxID: b.ID, Status: "ready", CreatedAt: now.Unix(), Seq: now.UnixNano(),
		Format: archive.Format, Entries: st.Entries, ContentBytes: st.Bytes,
		Runtime: b.Runtime, Size: b.Size,
	}
	path := f.snapshotPath(sn.ID)
	if err := os.Rename(tmp.Name(), path); err != nil {
		if f.host.Deleted(b.ID) {
			return nil, errdefs.NotFound("box not found") // and the archive with it
		}
		return nil, err
	}
	fi, err := os.Stat(path)
	if err == nil {
		sn.SizeBytes = fi.Size()
		err = syncDir(f.snapshotDir())
	}
	if err == nil {
		err = f.db.PutSnapshot(sn)
	}
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	f.host.Logf(b.ID, "info", "system", fmt.Sprintf("snapshot %s taken: %d files and directories, %d bytes in %d archived, in %s (box held still for %s)",
		sn.ID, st.Entries, st.Bytes, sn.SizeBytes, time.Since(start).Round(time.Millisecond), frozen.Round(time.Millisecond)))
	return sn, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (f *Snapshots) ListSnapshots(ctx context.Context, req gen.ListSnapshotsRequestObject) (gen.ListSnapshotsResponseObject, error) {
	b, err := f.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	list, err := f.db.Snapshots(b.ID)
	if err != nil {
		return nil, err
	}
	out := gen.ListSnapshots200JSONResponse{Snapshots: make([]gen.Snapshot, len(list))}
	for i, sn := range list {
		out.Snapshots[i] = snapshotData(sn)
	}
	return out, nil
}

func (f *Snapshots) DeleteSnapshot(ctx context.Context, req gen.DeleteSnapshotRequestObject) (gen.DeleteSnapshotResponseObject, error) {
	b, err := f.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	sn, err := f.db.Snapshot(req.SnapshotID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sn.BoxID != b.ID) {
		return nil, errdefs.NotFound("snapshot not found")
	}
	if err != nil {
		return nil, err
	}
	if err := f.deleteSnapshot(sn.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return gen.DeleteSnapshot200JSONResponse(wire.Message("Snapshot deleted")), nil
}

// deleteSnapshot removes a snapshot's record, then its archive: a failure
// in between leaves a stray file, never a record without its archive.
func (f *Snapshots) deleteSnapshot(id string) error {
	if err := f.db.DeleteSnapshot(id); err != nil {
		return err
	}
	if err := os.Remove(f.snapshotPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.host.Logger().Warn("cannot remove snapshot archive", "snapshot", id, "err", err)
	}
	return nil
}

// DeleteSnapshots deletes snapshots account-wide. A body without "ids"
// (the 0.5.5 SDK's delete-all) or the query all=true deletes every
// snapshot; an "ids" list that is empty or holds a blank id is refused,
// never read as "all". Unknown ids are skipped (a retried request must not
// fail), and "deleted" counts what was removed.
func (f *Snapshots) DeleteSnapshots(ctx context.Context, req gen.DeleteSnapshotsRequestObject) (gen.DeleteSnapshotsResponseObject, error) {
	var ids *[]string
	if req.Body != nil {
		ids = req.Body.IDs
	}
	all := req.Params.All
	switch {
	case ids != nil && all != nil && *all:
		return nil, errdefs.Invalid("give either ids or all=true, not both")
	case ids == nil && all != nil && !*all:
		return nil, errdefs.Invalid("ids is required unless all=true")
	case ids != nil && len(*ids) == 0:
		return nil, errdefs.Invalid("ids must contain at least one non-empty id")
	}
	var targets []string
	if ids == nil {
		list, err := f.db.Snapshots("")
		if err != nil {
			return nil, err
		}
		for _, sn := range list {
			targets = append(targets, sn.ID)
		}
	} else {
		for _, id := range *ids {
			if strings.TrimSpace(id) == "" {
				return nil, errdefs.Invalid("ids must contain at least one non-empty id, and no blank ones")
			}
		}
		targets = *ids
	}
	var n int64
	for _, id := range targets {
		switch err := f.deleteSnapshot(id); {
		case err == nil:
			n++
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
	}
	return gen.DeleteSnapshots200JSONResponse{Deleted: n}, nil
}

func (f *Snapshots) CreateBoxFromSnapshot(ctx context.Context, req gen.CreateBoxFromSnapshotRequestObject) (gen.CreateBoxFromSnapshotResponseObject, error) {
	if req.Body == nil || strings.TrimSpace(req.Body.SnapshotID) == "" {
		return nil, errdefs.Invalid("snapshot_id is required")
	}
	body, err := createRequestOf(req.Body)
	if err != nil {
		return nil, err
	}
	if err := f.cfg.ValidateCreate(body); err != nil {
		return nil, err
	}
	sn, err := f.db.Snapshot(req.Body.SnapshotID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errdefs.NotFound("snapshot not found")
	}
	if err != nil {
		return nil, err
	}
	if sn.Status != "ready" {
		return nil, errdefs.Conflict("snapshot %s is %s, not ready", sn.ID, sn.Status)
	}
	// The box gets the runtime and the size of the box the snapshot was
	// taken of, unless the request names its own.
	if body.Runtime == nil && sn.Runtime != "" {
		body.Runtime = &sn.Runtime
	}
	if body.Size == nil && sn.Size != "" {
		size := gen.BoxSize(sn.Size)
		body.Size = &size
	}
	if body.Name != nil {
		// Checked again, atomically, when the box is stored; this spares
		// unpacking a whole snapshot for nothing.
		if _, err := f.host.Box(*body.Name); err == nil {
			return nil, errdefs.Conflict("a box named %q already exists", *body.Name)
		}
	}
	b, err := f.cfg.CreateBox(ctx, body, func(b *store.Box) error { return f.restoreSnapshot(ctx, sn, b) })
	if err != nil {
		return nil, err
	}
	f.host.Logf(b.ID, "info", "system", "box restored from snapshot "+sn.ID)
	return gen.CreateBoxFromSnapshot200JSONResponse(wire.BoxData(b)), nil
}

// createRequestOf is the box-creation part of a from-snapshot body. The
// two bodies have the same fields but snapshot_id, so every field of one
// is carried over to the other by their shared JSON form.
func createRequestOf(r *gen.CreateBoxFromSnapshotRequest) (*gen.CreateBoxRequest, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var body gen.CreateBoxRequest
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, err
	}
	return &body, nil
}

// restoreSnapshot unpacks snapshot sn into the directories of box b,
// which exist but hold nothing yet and run nothing.
func (f *Snapshots) restoreSnapshot(ctx context.Context, sn *store.Snapshot, b *store.Box) error {
	if sn.Format != archive.Format {
		return fmt.Errorf("snapshot %s has an unknown format %q", sn.ID, sn.Format)
	}
	af, err := os.Open(f.snapshotPath(sn.ID))
	if errors.Is(err, fs.ErrNotExist) {
		// Deleted between the lookup and now.
		return errdefs.NotFound("snapshot not found")
	}
	if err != nil {
		return err
	}
	defer af.Close()
	t := f.host.Layout(b.ID).Files()
	owner, err := boxOwner(t)
	if err != nil {
		return err
	}
	lim := archive.Limits{Entries: sn.Entries, Bytes: sn.ContentBytes}
	if _, err := archive.Extract(ctx, bufio.NewReaderSize(af, 1<<20), t.Dir, snapshotTops(t), owner, lim); err != nil {
		return fmt.Errorf("restore snapshot %s: %w", sn.ID, err)
	}
	return nil
}

// boxOwner is who a box's files belong to: the owner of its prepared
// workspace (the box's own host uid when boxd runs as root), or nil when boxd cannot
// give files away and they stay its own.
func boxOwner(t sandbox.Tree) (*archive.Owner, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	fi, err := os.Lstat(t.Workspace())
	if err != nil {
		return nil, err
	}
	return archive.OwnerOf(fi), nil
}
