package boxtest

import (
	"sort"
	"sync"
	"time"
)

// FakeClock is a clock for boxd that moves only when told to, so that tests
// of schedules and ephemeral boxes' expiry need not wait. Pass it with
// WithClock.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	seq    int
}

type fakeTimer struct {
	at      time.Time
	seq     int
	f       func()
	stopped bool
}

// NewFakeClock returns a clock that reads start until it is advanced.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f once the clock has been advanced by d or more.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.stopped {
			return false
		}
		t.stopped = true
		return true
	}
}

// Advance moves the clock forward by d and runs, in order of their due
// times, the functions that have become due (those scheduled while
// advancing included). Each runs to completion before the next, in the
// caller's goroutine.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.Slice(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		var next *fakeTimer
		for len(c.timers) > 0 && c.timers[0].stopped {
			c.timers = c.timers[1:]
		}
		if len(c.timers) > 0 && !c.timers[0].at.After(end) {
			next = c.timers[0]
			c.timers = c.timers[1:]
			next.stopped = true
			if next.at.After(c.now) {
				c.now = next.at
			}
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		next.f()
	}
}
