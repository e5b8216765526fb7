// Package browsers is the browser feature: the Chromium of a browser box,
// started in the box with it (or, on a desktop box, the desktop's
// Chromium, which it attaches to), driven through tabs, content, screenshots,
// screencasts and the AI operations (extract, observe, act), reached by
// CDP and live view URLs that carry a token of their own, and recorded as
// HLS (recordings.go). It owns the box's Chromium process, the URL
// tokens, and the recording records and files. It reaches boxes only
// through its Host; its raw HTTP handlers (CDP, live view, segments)
// answer through the API edge (package api), and its operations return
// errdefs kinds.
package browsers

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// Host is what the browsers need of boxd's core.
type Host interface {
	// Box returns the record of a box, or an error of kind not found.
	Box(idOrName string) (*store.Box, error)
	// EnsureRunning starts box b if it is not running and returns the
	// client of its agent.
	EnsureRunning(ctx context.Context, b *store.Box) (*agent.Client, error)
	// Running returns the client of a box's agent when the box runs now.
	Running(id string) (*agent.Client, bool)
	// Agent returns the client of the agent of a box that has run.
	Agent(id string) (*agent.Client, error)
	// Busy marks a box in use until done is called.
	Busy(id string) (done func())
	// Layout is where a box's files are (recordings live there).
	Layout(id string) sandbox.Layout
	// Logf appends an entry to a box's log.
	Logf(boxID, level, source, msg string)
	Logger() *slog.Logger
	// Clock times the URL tokens.
	Clock() core.Clock
	// Context is boxd's lifetime; live views and proxies end with it.
	Context() context.Context
	// Go runs f in a goroutine that boxd tracks, and reports whether it
	// did: not once Wait has begun. Wait refuses new goroutines and waits
	// for those Go started.
	Go(f func(ctx context.Context)) bool
	Wait()
	// OnStarted registers fn to run each time a box's sandbox has
	// started.
	OnStarted(fn func(b *store.Box))
	// OnBoxDeleted registers fn to run each time a box is deleted, once
	// its sandbox, files and record are gone.
	OnBoxDeleted(fn func(id string))
}

// Recordings is the store of recording records, the records the feature
// owns (boxd's *store.Store).
type Recordings interface {
	PutRecording(r *store.Recording) error
	Recording(boxID, id string) (*store.Recording, error)
	// Recordings returns a box's recordings, newest first, and
	// AllRecordings every box's.
	Recordings(boxID string) ([]*store.Recording, error)
	AllRecordings() ([]*store.Recording, error)
	DeleteRecording(boxID, id string) error
	DeleteRecordings(boxID string) error
}

// Config configures the feature.
type Config struct {
	Host Host
	// Recordings keeps the recordings' records.
	Recordings Recordings
	// ChromiumPath: see local.Config.ChromiumPath.
	ChromiumPath string
	Isolation    sandbox.Mode
	// ProviderURLs are the operator's model provider URLs, for the AI
	// operations.
	ProviderURLs map[string]string
	// Desktop reports whether the desktop of box id runs; nil means no
	// desktop ever does. The browser of a desktop box is the desktop's
	// Chromium, whose DevTools listen on DesktopDevtoolsPort.
	Desktop             func(id string) (running bool)
	DesktopDevtoolsPort int
}

// Chromium returns the Chromium that boxes run, or why there is none.
func (bs *Browsers) Chromium() (string, error) { return bs.chromium, bs.chromiumErr }

// forgetBox ends the active recording of a deleted box and deletes its
// recording records.
func (bs *Browsers) forgetBox(id string) { bs.recs.forgetBox(id) }

// ServeSegment serves one HLS segment of a recording.
func (bs *Browsers) ServeSegment(w http.ResponseWriter, r *http.Request) { bs.recs.serveSegment(w, r) }

// CheckProviderURLs checks the operator's model provider URLs (see
// local.Config.ModelProviderURLs).
func CheckProviderURLs(urls map[string]string) error { return checkProviderURLs(urls) }
