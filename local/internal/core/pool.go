package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// The warm pool: sandboxes that boxd starts ahead of any create, so that a
// create only has to claim one.
//
// A pooled sandbox is started as the box it will become: it already has
// the box id that the create will give out, its own directories and its
// own host uid (reserved under that id, like any box's), its egress proxy
// and its cgroup. Nothing is recorded of it in the store but that uid, so
// it is no box: the API does not know it, and its egress proxy refuses
// every connection (a box's policy is read from its record). A create
// takes one whose start matches its own (poolKey), gives it the
// environment of the new box's record, records the box under the pooled
// id and adopts the sandbox as the box's. A claimed sandbox is the box's
// for good: it never returns to the pool, and a deleted box's sandbox,
// files and uid go as any box's do.
//
// What a sandbox is started with and cannot change later is the key of
// the pool, or keeps a create away from it: the root (host /usr or a
// runtime image) and the size's limits are the key; a create that names
// a git identity (written into the box's /etc at start), has a name that
// is a host name (a box's host name is set at start), or fills the box
// before it starts (a restore from a snapshot) starts a sandbox of its
// own, as without a pool.
//
// Each key keeps up to Config.WarmPool sandboxes, refilled one at a time
// behind the claims by one goroutine per key, so that a refill takes at
// most one processor from the creates it follows, and only once creates
// pause (poolQuiet). A key is kept once a create has used it (and from
// the start for the host root, see Prewarm). A refill waits while the data directory's file system has
// less than MinFreeDisk free or the machine has less memory available
// than the size's limit. Pooled sandboxes die with boxd: Close kills them
// and removes their files and uids, a killed boxd's sandboxes die with it
// (sandbox.Spec: die with parent), and what such a boxd left behind is
// removed at the next start (sweepUnclaimed).

// poolKey is what a sandbox is started with that a create must match.
type poolKey struct {
	image string // the runtime image's id; empty is the host's /usr
	size  string
}

// pooled is a ready sandbox in the pool.
type pooled struct {
	id string
	sb *sandbox.Sandbox
}

// warmPool holds the pooled sandboxes of a Core.
type warmPool struct {
	mu      sync.Mutex
	ready   map[poolKey][]*pooled
	filling map[poolKey]bool
	changed chan struct{} // closed and replaced when ready or filling changes
	closed  bool
	// lastClaim is when a create last took a sandbox.
	lastClaim time.Time
}

// A refill waits until no create has claimed a sandbox for poolQuiet,
// so that it does not take processor time from the creates of a burst
// and the first calls to their boxes, but never more than poolMaxDefer
// in all, so that a steady stream of creates still finds a pool.
const (
	poolQuiet    = 50 * time.Millisecond
	poolMaxDefer = time.Second
)

// quiet waits until no claim has been made for poolQuiet, or until
// poolMaxDefer after since, or until ctx ends.
func (p *warmPool) quiet(ctx context.Context, since time.Time) {
	for {
		p.mu.Lock()
		wake := minTime(p.lastClaim.Add(poolQuiet), since.Add(poolMaxDefer))
		closed, changed := p.closed, p.changed
		p.mu.Unlock()
		d := time.Until(wake)
		if d <= 0 || closed {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-changed:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (p *warmPool) init() {
	p.ready = map[poolKey][]*pooled{}
	p.filling = map[poolKey]bool{}
	p.changed = make(chan struct{})
}

// notifyLocked wakes WaitWarmPool.
func (p *warmPool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// poolKeyOf returns the key of box b's sandbox, and whether a create of b
// with fill may claim a pooled one at all.
func (c *Core) poolKeyOf(b *store.Box, fill func(*store.Box) error) (poolKey, bool) {
	ok := c.cfg.WarmPool > 0 && fill == nil &&
		b.GitUserName == "" && b.GitUserEmail == "" && !validHostname(b.Name)
	return poolKey{image: b.Image, size: b.Size}, ok
}

// claim takes a ready sandbox for b from the pool, gives it b's
// environment and b its id, and asks for a refill. It returns nil when
// there is none to take; b is then unchanged.
func (c *Core) claim(b *store.Box, fill func(*store.Box) error) *pooled {
	key, ok := c.poolKeyOf(b, fill)
	if !ok {
		return nil
	}
	defer c.refill(key)
	for {
		c.pool.mu.Lock()
		q := c.pool.ready[key]
		if len(q) == 0 {
			c.pool.mu.Unlock()
			return nil
		}
		p := q[0]
		c.pool.ready[key] = q[1:]
		c.pool.lastClaim = time.Now()
		c.pool.notifyLocked()
		c.pool.mu.Unlock()
		if err := c.ready(p, Env(b)); err != nil {
			c.log.Warn("a pooled sandbox could not be claimed; it is discarded", "box", p.id, "err", err)
			c.discard(p)
			continue
		}
		b.ID = p.id
		return p
	}
}

// ready checks that p's sandbox still runs and gives its agent env.
func (c *Core) ready(p *pooled, env map[string]string) error {
	select {
	case <-p.sb.Done():
		return errors.New("its sandbox ended")
	default:
	}
	if len(env) == 0 {
		return nil
	}
	return c.callPooled(p, func(ctx context.Context, cl *agent.Client) error { return cl.SetEnv(ctx, env) })
}

// callPooled calls p's agent through a client of its own, bounded by
// poolCallTimeout: p has no runtime yet, whose client would start a
// sandbox of its own for an id without a record.
func (c *Core) callPooled(p *pooled, call func(context.Context, *agent.Client) error) error {
	cl := agent.NewClient(agent.ClientConfig{BoxID: p.id, Dial: p.sb.Dial})
	defer cl.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(c.ctx, poolCallTimeout)
	defer cancel()
	return call(ctx, cl)
}

// poolCallTimeout bounds a call to a pooled sandbox's agent.
const poolCallTimeout = 10 * time.Second

// adopt makes p's sandbox the running sandbox of box b, just recorded
// under p's id, as a start of the box would (ensure).
func (c *Core) adopt(b *store.Box, p *pooled) {
	r, err := c.runtime(b.ID)
	if err != nil {
		c.discard(p) // deleted already
		return
	}
	r.mu.Lock()
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing || r.deleted.Load() || r.sb != nil || r.starting != nil {
		r.mu.Unlock()
		// The box is being deleted, or boxd closes: what that does to
		// the box's files and uid, it does; the sandbox is only killed.
		p.sb.Kill()
		return
	}
	r.sb = p.sb
	c.touchLocked(r)
	r.mu.Unlock()
	c.Logf(b.ID, "info", "system", "box started (from the warm pool)")
	c.inits.started(b.ID, p.sb)
	c.runStarted(b)
}

// discard kills a pooled sandbox that no box will have and removes what
// it had: files, egress proxy and host uid.
func (c *Core) discard(p *pooled) {
	p.sb.Kill()
	if err := c.destroy(p.id, nil); err != nil {
		c.log.Warn("cannot remove a pooled sandbox's files", "box", p.id, "err", err)
	}
}

// Prewarm fills the pool of boxes of the given root image (empty: the
// host's /usr) and size, as if a create had used them.
func (c *Core) Prewarm(image, size string) {
	if c.cfg.WarmPool > 0 {
		c.refill(poolKey{image: image, size: size})
	}
}

// refill starts key's refill goroutine unless it runs.
func (c *Core) refill(key poolKey) {
	c.pool.mu.Lock()
	if c.pool.closed || c.pool.filling[key] || len(c.pool.ready[key]) >= c.cfg.WarmPool {
		c.pool.mu.Unlock()
		return
	}
	c.pool.filling[key] = true
	c.pool.notifyLocked()
	c.pool.mu.Unlock()
	if !c.Go(func(ctx context.Context) { c.fill(ctx, key) }) {
		c.pool.mu.Lock()
		c.pool.filling[key] = false
		c.pool.notifyLocked()
		c.pool.mu.Unlock()
	}
}

// fill starts pooled sandboxes of key, one at a time, until the pool has
// Config.WarmPool of them, boxd closes, or a start cannot be made.
func (c *Core) fill(ctx context.Context, key poolKey) {
	began := time.Now()
	defer func() {
		c.pool.mu.Lock()
		c.pool.filling[key] = false
		c.pool.notifyLocked()
		c.pool.mu.Unlock()
	}()
	for {
		c.pool.mu.Lock()
		done := c.pool.closed || len(c.pool.ready[key]) >= c.cfg.WarmPool
		c.pool.mu.Unlock()
		if done {
			return
		}
		c.pool.quiet(ctx, began)
		if err := c.roomForPooled(key); err != nil {
			c.log.Debug("warm pool not refilled", "size", key.size, "err", err)
			return
		}
		p, err := c.startPooled(key)
		if err != nil {
			if !errors.Is(err, ErrClosing) {
				c.log.Warn("warm pool: a sandbox did not start", "err", err)
			}
			return
		}
		c.pool.mu.Lock()
		closed := c.pool.closed
		if !closed {
			c.pool.ready[key] = append(c.pool.ready[key], p)
			c.pool.notifyLocked()
		}
		c.pool.mu.Unlock()
		if closed {
			c.discard(p)
			return
		}
	}
}

// roomForPooled says why another sandbox of key should not be started
// now: the disk's free space or the machine's available memory is below
// what a box of its size may take.
func (c *Core) roomForPooled(key poolKey) error {
	if err := c.NeedDisk("start a pooled sandbox"); err != nil {
		return err
	}
	lim := c.cfg.Limits(key.size)
	if avail, ok := memAvailable(); ok && lim.Memory > 0 && avail < lim.Memory {
		return fmt.Errorf("%d bytes of memory available, less than the %d of a %s box", avail, lim.Memory, key.size)
	}
	return nil
}

// startPooled starts a sandbox for a box that does not exist yet.
func (c *Core) startPooled(key poolKey) (*pooled, error) {
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return nil, ErrClosing
	}
	b := &store.Box{ID: NewID("box-"), Image: key.image, Size: key.size}
	sb, err := c.start(b)
	if err != nil {
		_ = c.destroy(b.ID, nil)
		return nil, err
	}
	p := &pooled{id: b.ID, sb: sb}
	c.warmUp(p)
	return p, nil
}

// warmUp runs a command that does nothing through p's agent, as a box's
// first exec would, so that the first exec of the box that claims it
// finds the agent's paths for it ready (their code paged in, their
// goroutines' stacks grown). It leaves nothing behind: the process ends,
// and no run is recorded. A failure is the claim's to find.
func (c *Core) warmUp(p *pooled) {
	_ = c.callPooled(p, func(ctx context.Context, cl *agent.Client) error {
		_, err := cl.Exec(ctx, []string{"sh", "-c", ":"}, "")
		return err
	})
}

// closePool kills every pooled sandbox and removes what it had. The fill
// goroutines have ended (Close waited for them).
func (c *Core) closePool() {
	c.pool.mu.Lock()
	c.pool.closed = true
	var all []*pooled
	for k, q := range c.pool.ready {
		all = append(all, q...)
		delete(c.pool.ready, k)
	}
	c.pool.notifyLocked()
	c.pool.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(func() { c.discard(p) })
	}
	wg.Wait()
}

// WaitWarmPool waits until no refill of the pool runs and every key it
// keeps holds Config.WarmPool sandboxes, or a refill stopped short (for
// want of disk or memory, or a start that failed), or ctx ends.
func (c *Core) WaitWarmPool(ctx context.Context) error {
	for {
		c.pool.mu.Lock()
		busy := false
		for _, f := range c.pool.filling {
			busy = busy || f
		}
		ch := c.pool.changed
		c.pool.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// PoolSize returns how many pooled sandboxes are ready.
func (c *Core) PoolSize() int {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	n := 0
	for _, q := range c.pool.ready {
		n += len(q)
	}
	return n
}

// sweepUnclaimed removes what a boxd that was killed left of its pooled
// sandboxes, whose processes died with it: control groups, directories
// under boxes/ and host uids of ids that have no box record. Nothing runs
// yet.
func (c *Core) sweepUnclaimed() {
	ids, err := c.db.UIDOwners()
	if err != nil {
		c.log.Warn("cannot list the boxes' host uids", "err", err)
	}
	ids = append(ids, c.boxDirs()...)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, err := c.db.Box(id); !errors.Is(err, store.ErrNotFound) {
			continue
		}
		sandbox.Reap(id)
		if err := c.destroy(id, nil); err != nil {
			c.log.Warn("cannot remove what a box that was never created left", "box", id, "err", err)
		}
	}
}
