package core

import (
	"errors"
	"time"

	"github.com/upstash/box-go/local/internal/store"
)

// Ephemeral boxes on boxd.
//
// An ephemeral box is created like any other (it is ready, "idle", when
// the create call returns) with a lifetime: ttl seconds, 259200 (three
// days) by default and at most. Its expires_at is reckoned on the server's
// Clock, which also times its deletion: when the time is up, boxd deletes
// it as DELETE /v2/box/{id} would (processes, files, records). Timers live
// in memory; at start boxd deletes the ephemeral boxes whose time ran out
// while it was down and sets timers for the others.
//
// A box deleted before its time leaves a timer that finds nothing to do
// when it fires.

// expireLater arms the timer that deletes ephemeral box b when its time is
// up.
func (c *Core) expireLater(b *store.Box) {
	clock := c.cfg.Clock
	id := b.ID
	d := time.Unix(b.ExpiresAt, 0).Sub(clock.Now())
	clock.AfterFunc(d, func() { c.expire(id) })
}

// expire deletes ephemeral box id if its time is up. It returns at once:
// a clock may call it from any goroutine (a fake one from the goroutine
// that advances it), so the work is done in the background, where Close
// waits for it.
func (c *Core) expire(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		b, err := c.db.Box(id)
		if errors.Is(err, store.ErrNotFound) {
			return // deleted already
		}
		if err != nil {
			c.log.Error("ephemeral box expiry", "box", id, "err", err)
			return
		}
		if !b.Ephemeral {
			return
		}
		if c.cfg.Clock.Now().Unix() < b.ExpiresAt {
			c.expireLater(b) // not yet: the record says later
			return
		}
		c.log.Info("ephemeral box expired", "box", id)
		if err := c.Delete(id); err != nil {
			c.log.Error("cannot delete expired ephemeral box", "box", id, "err", err)
		}
	}()
}

// armExpiries runs when boxd starts: stored ephemeral boxes whose time ran
// out while boxd was down are deleted now, and the others get their
// timers back.
func (c *Core) armExpiries() {
	all, err := c.db.Boxes()
	if err != nil {
		c.log.Error("cannot list boxes to arm ephemeral expiry", "err", err)
		return
	}
	now := c.cfg.Clock.Now().Unix()
	for _, b := range all {
		switch {
		case !b.Ephemeral:
		case b.ExpiresAt <= now:
			c.log.Info("ephemeral box expired while boxd was down", "box", b.ID)
			if err := c.Delete(b.ID); err != nil {
				c.log.Error("cannot delete expired ephemeral box", "box", b.ID, "err", err)
			}
		default:
			c.expireLater(b)
		}
	}
}
