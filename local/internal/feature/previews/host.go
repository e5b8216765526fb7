// Package previews is the public URLs feature: a box's port served at
// http://{box-id}-{port}.{domain}, with the bearer or basic credentials
// it was made with, the request held while the box wakes and its port
// comes up, and every connection closed when the URL or the box goes. It
// owns the public URL records' credentials and the bridged connections.
// It reaches boxes only through its Host and their ports only through
// their agents; its proxy answers through the API edge (package api), and
// its operations return errdefs kinds.
package previews

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/store"
)

// Host is what public URLs need of boxd's core.
type Host interface {
	// Box returns the record of a box, or an error of kind not found.
	Box(idOrName string) (*store.Box, error)
	// EnsureRunning starts box b if it is not running and returns the
	// client of its agent.
	EnsureRunning(ctx context.Context, b *store.Box) (*agent.Client, error)
	// Agent returns the client of the agent of a box that has run.
	Agent(id string) (*agent.Client, error)
	// Busy marks a box in use until done is called.
	Busy(id string) (done func())
	// Logf appends an entry to a box's log.
	Logf(boxID, level, source, msg string)
	Logger() *slog.Logger
}

// Records is the store of public URL records, the records the feature
// owns (boxd's *store.Store).
type Records interface {
	PutPreview(p *store.Preview) error
	Preview(boxID string, port int) (*store.Preview, error)
	Previews(boxID string) ([]*store.Preview, error)
	DeletePreview(boxID string, port int) error
}

// Config configures the feature.
type Config struct {
	Host Host
	// Records keeps the public URLs' records.
	Records Records
	// BaseURL is local.Config.PublicURLBase.
	BaseURL string
	// Hold is local.Config.PublicURLHold.
	Hold time.Duration
	// IsAPICredential reports whether r's Authorization header carries
	// boxd's API key, which never goes on to a box's app.
	IsAPICredential func(r *http.Request) bool
	// APIKeyHeader is the header of boxd's API key, which never goes on
	// to a box's app either.
	APIKeyHeader string
}

// DefaultHold is how long a public URL request waits for its port to
// listen when Config.Hold is zero.
const DefaultHold = 30 * time.Second
