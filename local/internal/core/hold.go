package core

import (
	"context"
	"fmt"
)

// hold keeps box id still while a snapshot reads its files: a running
// sandbox is frozen (unless the user paused it), and until release is
// called nothing starts, resumes or pauses the box. A start in progress is
// waited for first.
// isDeleted reports whether box id is being deleted, or has been: its
// runtime is marked deleted while the delete runs, and leaves the map
// when it is done (the runtime of a box in use is never taken out
// otherwise).
func (c *Core) isDeleted(id string) bool {
	c.mu.Lock()
	r := c.rt[id]
	c.mu.Unlock()
	return r == nil || r.deleted.Load()
}

func (c *Core) hold(ctx context.Context, id string) (release func(), err error) {
	r, err := c.runtime(id)
	if err != nil {
		return nil, err
	}
	for {
		if err := r.lockUnheld(ctx); err != nil {
			return nil, err
		}
		if r.deleted.Load() {
			r.mu.Unlock()
			return nil, ErrBoxNotFound
		}
		if r.starting == nil {
			break
		}
		ch := r.starting
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer r.mu.Unlock()
	held := make(chan struct{})
	sb := r.sb
	if sb != nil {
		select {
		case <-sb.Done():
			sb = nil
		default:
		}
	}
	froze := false
	if sb != nil && !sb.Paused() {
		if err := sb.Pause(); err != nil {
			return nil, fmt.Errorf("freeze box for a snapshot: %w", err)
		}
		froze = true
	}
	r.held = held
	return func() {
		r.mu.Lock()
		if froze {
			// After a delete or a shutdown the sandbox is gone and this
			// does nothing.
			if err := sb.Resume(); err != nil {
				c.log.Error("cannot thaw box after a snapshot", "box", id, "err", err)
			}
		}
		r.held = nil
		close(held)
		r.mu.Unlock()
		if froze {
			// An init command changed while the snapshot was taken.
			c.inits.resumed(id)
		}
	}, nil
}
