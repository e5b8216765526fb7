package local

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
func (m *boxes) expireLater(b *store.Box) {
	clock := m.srv.cfg.Clock
	id := b.ID
	d := time.Unix(b.ExpiresAt, 0).Sub(clock.Now())
	clock.AfterFunc(d, func() { m.expire(id) })
}

// expire deletes ephemeral box id if its time is up. It returns at once:
// a clock may call it from any goroutine (a fake one from the goroutine
// that advances it), so the work is done in the background, where Close
// waits for it.
func (m *boxes) expire(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		b, err := m.srv.db.Box(id)
		if errors.Is(err, store.ErrNotFound) {
			return // deleted already
		}
		if err != nil {
			m.srv.log.Error("ephemeral box expiry", "box", id, "err", err)
			return
		}
		if !b.Ephemeral {
			return
		}
		if m.srv.cfg.Clock.Now().Unix() < b.ExpiresAt {
			m.expireLater(b) // not yet: the record says later
			return
		}
		m.srv.log.Info("ephemeral box expired", "box", id)
		if err := (&controlPlane{s: m.srv}).deleteBox(id); err != nil {
			m.srv.log.Error("cannot delete expired ephemeral box", "box", id, "err", err)
		}
	}()
}

// armExpiries runs when boxd starts: stored ephemeral boxes whose time ran
// out while boxd was down are deleted now, and the others get their
// timers back.
func (m *boxes) armExpiries() {
	all, err := m.srv.db.Boxes()
	if err != nil {
		m.srv.log.Error("cannot list boxes to arm ephemeral expiry", "err", err)
		return
	}
	now := m.srv.cfg.Clock.Now().Unix()
	for _, b := range all {
		switch {
		case !b.Ephemeral:
		case b.ExpiresAt <= now:
			m.srv.log.Info("ephemeral box expired while boxd was down", "box", b.ID)
			if err := (&controlPlane{s: m.srv}).deleteBox(b.ID); err != nil {
				m.srv.log.Error("cannot delete expired ephemeral box", "box", b.ID, "err", err)
			}
		default:
			m.expireLater(b)
		}
	}
}
