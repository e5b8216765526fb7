// Package snapshots is the snapshots feature: a box's /workspace and
// /home/boxuser archived while the box is held still, listed and deleted
// by the account, and restored into a new box. It owns the snapshot
// records and the archives in its directory. It reaches boxes only
// through its Host, makes the box of a restore only through
// Config.CreateBox, and speaks no HTTP: its errors are errdefs kinds.
package snapshots

import (
	"context"
	"log/slog"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// Host is what snapshots need of boxd's core.
type Host interface {
	// Box returns the record of a box, or an error of kind not found.
	Box(idOrName string) (*store.Box, error)
	// Layout is where a box's files are.
	Layout(id string) sandbox.Layout
	// Hold keeps a box still until release is called.
	Hold(ctx context.Context, id string) (release func(), err error)
	// Deleted reports whether a box is being deleted, or has been.
	Deleted(id string) bool
	// NeedDisk refuses what would grow the data directory when it is
	// short of space.
	NeedDisk(what string) error
	// Logf appends an entry to a box's log.
	Logf(boxID, level, source, msg string)
	Logger() *slog.Logger
}

// Records is the store of snapshot records, the records the feature owns
// (boxd's *store.Store).
type Records interface {
	PutSnapshot(sn *store.Snapshot) error
	Snapshot(id string) (*store.Snapshot, error)
	Snapshots(boxID string) ([]*store.Snapshot, error)
	DeleteSnapshot(id string) error
}

// Config configures the feature.
type Config struct {
	Host Host
	// Records keeps the snapshots' records.
	Records Records
	// Dir holds the archives.
	Dir string
	// ValidateCreate checks a create request as POST /v2/box does.
	ValidateCreate func(body *gen.CreateBoxRequest) error
	// CreateBox validates body and makes a box as POST /v2/box does,
	// calling fill to put its files in before anything runs in it.
	CreateBox func(ctx context.Context, body *gen.CreateBoxRequest, fill func(*store.Box) error) (*store.Box, error)
}

// Snapshots is the snapshots feature; its methods serve its operations.
type Snapshots struct {
	host Host
	db   Records
	cfg  Config
}

// New returns the snapshots feature.
func New(cfg Config) *Snapshots {
	return &Snapshots{host: cfg.Host, db: cfg.Records, cfg: cfg}
}
