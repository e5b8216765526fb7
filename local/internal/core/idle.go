package core

import (
	"context"
	"time"
)

// DefaultIdlePause is how long a box that is not keep-alive may go unused
// before boxd pauses it, when Config.IdlePause is zero.
const DefaultIdlePause = 15 * time.Minute

// Idle pause: a box that is not keep-alive is paused once nothing has used
// it for the server's idle time, as on the cloud, and the next call wakes
// it (ensureRunning resumes a paused box). Every call that reaches a box
// counts as use at its start (touch); exec, code, streams, sessions, agent
// and schedule runs, git and browser recordings count for as long as they
// run (busy). Background processes alone do not, and neither does the
// init command: a box whose init command serves forever still pauses.
//
// The state lives in the box's runtime, under its mutex. A pause decided
// by the timer is undone at once when a call touched the box between the
// decision and the freeze: that call may have found the box running, and
// must not wait on a frozen agent.

// idleTime is the server's idle time; 0 means boxes never idle-pause.
func (c *Core) idleTime() time.Duration {
	switch d := c.cfg.IdlePause; {
	case d < 0:
		return 0
	case d == 0:
		return DefaultIdlePause
	default:
		return d
	}
}

// touch records a use of box id now, and arms its idle timer.
func (c *Core) touch(id string) {
	r, err := c.runtime(id)
	if err != nil {
		return // deleted
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c.touchLocked(r)
}

func (c *Core) touchLocked(r *runtime) {
	r.lastUse = c.cfg.Clock.Now()
	r.useGen++
	c.armLocked(r, c.idleTime())
}

// armLocked starts r's idle timer to fire in d, unless it is armed.
func (c *Core) armLocked(r *runtime, d time.Duration) {
	if d <= 0 || r.idleStop != nil || r.deleted.Load() {
		return
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return
	}
	r.idleStop = c.cfg.Clock.AfterFunc(d, func() { go c.idleCheck(r) })
}

// busy marks box id in use until the returned func is called.
func (c *Core) busy(id string) (done func()) {
	r, err := c.runtime(id)
	if err != nil {
		return func() {} // deleted: nothing to keep awake
	}
	r.mu.Lock()
	r.busyOps++
	c.touchLocked(r)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.busyOps--
		c.touchLocked(r)
		r.mu.Unlock()
	}
}

// idleCheck runs when r's idle timer fires: it pauses the box if nothing
// used it for the idle time, or arms the timer for when that may be.
func (c *Core) idleCheck(r *runtime) {
	idle := c.idleTime()
	r.mu.Lock()
	r.idleStop = nil
	if r.deleted.Load() || idle <= 0 {
		r.mu.Unlock()
		return
	}
	if r.busyOps > 0 {
		c.armLocked(r, idle)
		r.mu.Unlock()
		return
	}
	if left := idle - c.cfg.Clock.Now().Sub(r.lastUse); left > 0 {
		c.armLocked(r, left)
		r.mu.Unlock()
		return
	}
	gen := r.useGen
	r.mu.Unlock()

	b, err := c.db.Box(r.id)
	if err != nil || b.KeepAlive || b.Status == "paused" {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	if err := c.pause(ctx, r.id); err != nil {
		c.log.Warn("idle pause failed", "box", r.id, "err", err)
		return
	}
	c.Logf(r.id, "info", "system", "box paused after "+idle.String()+" without use")
	r.mu.Lock()
	raced := r.useGen != gen || r.busyOps > 0
	r.mu.Unlock()
	if raced {
		if err := c.resume(ctx, r.id); err != nil {
			c.log.Warn("resume after an idle pause failed", "box", r.id, "err", err)
		}
	}
}
