// Package git is the git and GitHub feature: clone, status, diff, commit,
// push, checkout and plain git commands run by the box's agent in the
// box, the box's git identity and token, and the pull requests and
// issues boxd opens on GitHub with the box's token (attachments
// included). It owns the GitHub client and keeps every token out of what
// it answers and logs. It reaches boxes only through its Host, and
// speaks no HTTP to boxd's callers: its errors are errdefs kinds (an
// answer of the agent or of GitHub becomes one here).
package git

import (
	"context"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/store"
)

// Host is what git needs of boxd's core.
type Host interface {
	// Box returns the record of a box, or an error of kind not found.
	Box(idOrName string) (*store.Box, error)
	// EnsureRunning starts box b if it is not running and returns the
	// client of its agent.
	EnsureRunning(ctx context.Context, b *store.Box) (*agent.Client, error)
	// Busy marks a box in use until done is called.
	Busy(id string) (done func())
	// UpdateBox changes a box's record in one transaction.
	UpdateBox(id string, f func(*store.Box) error) error
	// Logf appends an entry to a box's log.
	Logf(boxID, level, source, msg string)
}

// Config configures the feature.
type Config struct {
	Host Host
	// GitHubURL and GitHubAPIURL: see local.Config.
	GitHubURL, GitHubAPIURL string
}

// Git is the git feature; its methods serve the git operations.
type Git struct {
	host Host
	cfg  Config
}

// New returns the git feature.
func New(cfg Config) *Git { return &Git{host: cfg.Host, cfg: cfg} }
