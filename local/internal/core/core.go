// Package core is boxd's box core: the box records and the runtime state
// machine of every box. It owns what a box is between its create and its
// delete: its record's read-modify-write, its log, its host uid, its
// sandbox (start, idle pause, pause, resume, a hold for a snapshot,
// replacement of a dead or hung one, kill), its init command, an
// ephemeral box's expiry, the free-space check of the data directory, and
// the delete that wins over every call racing it.
//
// It may touch the store, the sandbox layer and the in-box agent's client,
// and reaches the images and the network through the small interfaces of
// its Config. It knows no feature: the features (package feature/...) use
// it through their own Host, and learn of a start or a delete through
// OnStarted and OnBoxDeleted. It speaks no HTTP: its errors are errdefs
// kinds, which the API edge turns into statuses.
package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/cgroup"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// Images is what the core needs of boxd's runtime images.
type Images interface {
	// Of returns what sandbox.Spec needs of box b's image: the host
	// directory of its tree, its PATH and its other environment; all
	// empty for a box that runs on the host's /usr.
	Of(b *store.Box) (root, path string, env map[string]string, err error)
}

// BoxNet is what a starting box needs to use the network.
type BoxNet struct {
	// HostSocket is the host path of the box's egress socket, in boxd's
	// private directory of the box; the agent gets it open.
	HostSocket string
	// Agent settings, as the agent sees them.
	ProxyListen, CABundle string
	// HostCABundle is the host path of the box's CA bundle, which the
	// sandbox binds over the box's system bundle.
	HostCABundle string
}

// Network is what the core needs of boxd's networking.
type Network interface {
	// StartBox serves the box's egress proxy and writes its CA bundle.
	StartBox(id string, l sandbox.Layout, mode sandbox.Mode) (BoxNet, error)
	// StopBox closes the box's egress proxy and public URL connections.
	StopBox(id string)
	// ForgetBox stops the box's networking and removes its public URLs:
	// the box is being deleted.
	ForgetBox(id string)
}

// Config configures a Core.
type Config struct {
	// Context is boxd's lifetime: every context the core makes for work of
	// its own derives from it.
	Context context.Context
	Store   *store.Store
	Log     *slog.Logger
	// DataDir holds the boxes' directories, under boxes/.
	DataDir   string
	Isolation sandbox.Mode
	// Limits are the control group limits of a box size.
	Limits func(size string) cgroup.Limits
	// Clock times idle pauses and ephemeral boxes' expiry.
	Clock Clock
	// IdlePause: see local.Config.IdlePause.
	IdlePause time.Duration
	// MinFreeDisk: see local.Config.MinFreeDisk.
	MinFreeDisk int64
	// WarmPool is how many ready sandboxes boxd keeps for each root and
	// size that creates use (pool.go); zero or less keeps none.
	WarmPool int
	// AgentBinary is the binary re-executed as a box's agent.
	AgentBinary string
	Images      Images
	Network     Network
}

// Core holds the runtimes of all boxes.
type Core struct {
	cfg   Config
	ctx   context.Context
	db    *store.Store
	log   *slog.Logger
	inits *inits

	// uids are the locks on the host uids of this boxd's boxes.
	uids uidLocks
	// pool holds the sandboxes started ahead of creates (pool.go).
	pool warmPool

	mu sync.Mutex
	// rt holds the runtime of each box that has been used, and the
	// tombstone of each box being deleted. A tombstone leaves the map
	// once the box's record is gone, when ended counts one more.
	rt      map[string]*runtime
	ended   uint64
	closing bool
	bg      sync.WaitGroup // what Go started

	// started and deleted are the features' hooks (OnStarted,
	// OnBoxDeleted), in the order they were registered.
	onStarted []func(b *store.Box)
	onDeleted []func(id string)

	unenforcedOnce sync.Once
}

// New returns a Core. It starts nothing: Start does.
func New(cfg Config) *Core {
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	c := &Core{cfg: cfg, ctx: cfg.Context, db: cfg.Store, log: cfg.Log, rt: map[string]*runtime{}}
	c.pool.init()
	c.inits = newInits(c)
	return c
}

// Start is the core's part of boxd's start: ephemeral boxes whose time
// ran out while boxd was down go now and the others get their timers
// back (ephemeral.go), and keep-alive boxes with an init command start
// again, and it with them; other boxes start when they are next used.
func (c *Core) Start() {
	c.sweepUnclaimed()
	c.armExpiries()
	if boxes, err := c.db.Boxes(); err == nil {
		for _, b := range boxes {
			if b.KeepAlive && b.InitCommand != "" && b.Status != "paused" {
				c.warm(b)
			}
		}
	}
}

// Close stops every running sandbox (boxd shutting down) and lets go of
// the boxes' host uids. Box files and records stay.
func (c *Core) Close() {
	c.closeAll()
	c.uids.closeAll()
}

// CloseInits stops every init command. boxd calls it before it closes the
// features that work in boxes, as it started it after them.
func (c *Core) CloseInits() { c.inits.closeAll() }

// Go runs f in a goroutine of its own, with boxd's lifetime as its
// context, and reports whether it did: once Close has begun it does not,
// and Close waits for what it started.
func (c *Core) Go(f func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f(c.ctx)
	}()
	return true
}

// FeatureHost is the core as one feature is given it: every method of
// Core, with a Go and a Wait of the feature's own. The goroutines of its
// Go are boxd's tracker's (Core.Go) too, so that boxd waits for every one
// of them; Wait lets the feature's Close wait for its own, at the point of
// its close where they must have ended.
type FeatureHost struct {
	*Core
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// NewFeatureHost returns a host for one feature.
func (c *Core) NewFeatureHost() *FeatureHost { return &FeatureHost{Core: c} }

// Go runs f in a goroutine of boxd's tracker, with boxd's lifetime as its
// context, and reports whether it did: once Wait or boxd's close has
// begun, it does not.
func (h *FeatureHost) Go(f func(ctx context.Context)) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	if !h.Core.Go(func(ctx context.Context) {
		defer h.wg.Done()
		f(ctx)
	}) {
		h.wg.Done()
		return false
	}
	return true
}

// Wait refuses new goroutines (Go) and waits for those Go started.
func (h *FeatureHost) Wait() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.wg.Wait()
}

// Context is boxd's lifetime.
func (c *Core) Context() context.Context { return c.ctx }

// Logger is boxd's own log.
func (c *Core) Logger() *slog.Logger { return c.log }

// Clock is boxd's clock.
func (c *Core) Clock() Clock { return c.cfg.Clock }

// Store is boxd's store of records.
func (c *Core) Store() *store.Store { return c.db }

// OnStarted registers fn to run, after those registered before it, each
// time a box's sandbox has started.
func (c *Core) OnStarted(fn func(b *store.Box)) { c.onStarted = append(c.onStarted, fn) }

// OnBoxDeleted registers fn to run, after those registered before it, each
// time a box is deleted, once its sandbox, files and record are gone.
func (c *Core) OnBoxDeleted(fn func(id string)) { c.onDeleted = append(c.onDeleted, fn) }

func (c *Core) runStarted(b *store.Box) {
	for _, fn := range c.onStarted {
		fn(b)
	}
}

// ErrBoxNotFound is a box that does not exist, or is being deleted.
var ErrBoxNotFound = errdefs.NotFound("box not found")

// NotFoundAsBox turns the store's not-found into ErrBoxNotFound.
func NotFoundAsBox(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return ErrBoxNotFound
	}
	return err
}

// Box returns the record of box idOrName, or ErrBoxNotFound.
func (c *Core) Box(idOrName string) (*store.Box, error) {
	b, err := c.db.Box(idOrName)
	return b, NotFoundAsBox(err)
}

// Layout is where box id's files are.
func (c *Core) Layout(id string) sandbox.Layout {
	return sandbox.Layout{Root: filepath.Join(c.cfg.DataDir, "boxes", id)}
}

// Env is the environment overlay of a box's processes.
func Env(b *store.Box) map[string]string {
	env := map[string]string{}
	for k, v := range b.EnvVars {
		env[k] = v
	}
	return env
}

// Logf appends an entry to a box's log. A deleted box has no log to
// append to: what is said of it after its delete goes nowhere.
func (c *Core) Logf(boxID, level, source, msg string) {
	err := c.db.AppendLogs(boxID, store.LogEntry{Timestamp: time.Now().Unix(), Level: level, Source: source, Message: msg})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		c.log.Warn("cannot write box log", "box", boxID, "err", err)
	}
}

// LogLines appends lines to a box's log as info entries from source, in
// one write.
func (c *Core) LogLines(boxID, source string, lines []string) {
	now := time.Now().Unix()
	entries := make([]store.LogEntry, len(lines))
	for i, l := range lines {
		entries[i] = store.LogEntry{Timestamp: now, Level: "info", Source: source, Message: l}
	}
	if err := c.db.AppendLogs(boxID, entries...); err != nil {
		c.log.Warn("cannot write box log", "box", boxID, "err", err)
	}
}

// SetStatus changes a box's status, or fails with ErrBoxNotFound when the
// box is gone (a delete won the race).
func (c *Core) SetStatus(id, status string) error {
	return NotFoundAsBox(c.UpdateBox(id, func(b *store.Box) error {
		b.Status = status
		return nil
	}))
}

// UpdateBox reads, changes and writes the record of box id (or name) in
// one store transaction (store.UpdateBox). It fails with
// store.ErrNotFound when the box is gone: a call that raced a delete
// never writes the record back.
func (c *Core) UpdateBox(id string, f func(*store.Box) error) error {
	return c.db.UpdateBox(id, func(b *store.Box) error {
		if err := f(b); err != nil {
			return err
		}
		b.UpdatedAt = time.Now().Unix()
		return nil
	})
}

// Create makes box b, a record not yet stored: its directories, owned by
// its user; then fill, when not nil, puts files into them before
// anything runs in the box (a restore from a snapshot); then its record,
// and its sandbox, started in the background. A create that fails leaves
// nothing behind: no files, no host uid.
func (c *Core) Create(b *store.Box, fill func(*store.Box) error) error {
	// A sandbox from the warm pool (pool.go) gives b its id.
	p := c.claim(b, fill)
	if p == nil {
		if err := c.prepare(b); err != nil {
			_ = c.destroy(b.ID, nil)
			return fmt.Errorf("prepare box: %w", err)
		}
		if fill != nil {
			if err := fill(b); err != nil {
				_ = c.destroy(b.ID, nil)
				return err
			}
		}
	}
	if err := c.db.PutBox(b); err != nil {
		if p != nil {
			p.sb.Kill()
		}
		_ = c.destroy(b.ID, nil)
		if errors.Is(err, store.ErrNameTaken) {
			return errdefs.Conflict("a box named %q already exists", b.Name)
		}
		return err
	}
	c.Logf(b.ID, "info", "system", "box created")
	if p != nil {
		c.adopt(b, p)
	} else {
		c.warm(b)
	}
	if b.Ephemeral {
		c.expireLater(b)
	}
	return nil
}

// Delete deletes box id: its processes, files and records, and then
// what the features keep of it (OnBoxDeleted). Calls that race it lose
// (see destroy): once it returns, nothing of the box runs or comes back.
func (c *Core) Delete(id string) error {
	c.inits.stop(id)
	err := c.destroy(id, func() error {
		if err := c.db.DeleteBox(id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.inits.stop(id) // one that a racing start began
	for _, fn := range c.onDeleted {
		fn(id)
	}
	return nil
}

// EnsureRunning starts box b's sandbox if it is not running (a paused
// box is resumed) and returns the client of its agent, which is ready.
func (c *Core) EnsureRunning(ctx context.Context, b *store.Box) (*agent.Client, error) {
	r, err := c.ensureRunning(ctx, b)
	if err != nil {
		return nil, err
	}
	return r.agent, nil
}

// Running returns the client of box id's agent when its sandbox runs and
// is not paused, without starting or resuming it.
func (c *Core) Running(id string) (*agent.Client, bool) {
	r := c.existing(id)
	if r == nil || !c.runningNow(id) {
		return nil, false
	}
	return r.agent, true
}

// Agent returns the client of box id's agent, which starts the box when
// a call needs it, or ErrBoxNotFound for a box that has not been used
// since boxd started (callers start the box first).
func (c *Core) Agent(id string) (*agent.Client, error) {
	r := c.existing(id)
	if r == nil {
		return nil, ErrBoxNotFound
	}
	return r.agent, nil
}

// ReplaceAgent makes ac the client of box id's agent, in place of the one
// that reaches its sandbox: tests stand a failing agent in with it.
func (c *Core) ReplaceAgent(id string, ac *agent.Client) {
	if r := c.existing(id); r != nil {
		r.agent = ac
	}
}

// Pause freezes a running box; one whose sandbox is not running is only
// marked paused.
func (c *Core) Pause(ctx context.Context, id string) error { return c.pause(ctx, id) }

// Resume thaws a paused box.
func (c *Core) Resume(ctx context.Context, id string) error { return c.resume(ctx, id) }

// Busy marks box id in use until the returned func is called.
func (c *Core) Busy(id string) (done func()) { return c.busy(id) }

// Touch records a use of box id now.
func (c *Core) Touch(id string) { c.touch(id) }

// Hold keeps box id still while a snapshot reads its files (see hold).
func (c *Core) Hold(ctx context.Context, id string) (release func(), err error) {
	return c.hold(ctx, id)
}

// Deleted reports whether box id is being deleted, or has been.
func (c *Core) Deleted(id string) bool { return c.isDeleted(id) }

// InitChanged applies a new init command of box id, stored already.
func (c *Core) InitChanged(id string) { c.inits.changed(id) }

// warnUnenforced says, once, which box limits this machine cannot apply.
func (c *Core) warnUnenforced(limits []string) {
	c.unenforcedOnce.Do(func() {
		why := "they need control groups, which only root can make"
		if os.Geteuid() == 0 {
			why = "no cgroup hierarchy here has their controllers"
		}
		c.log.Warn("box sizes are not enforced on this machine: "+strings.Join(limits, ", ")+" unlimited", "why", why)
	})
}
