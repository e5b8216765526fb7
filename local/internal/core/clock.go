package core

import "time"

// Clock is boxd's source of time for what it schedules itself: cron
// schedules and ephemeral boxes' expiry. Tests inject a fake one (see
// boxtest.FakeClock) so that nothing waits for real minutes.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has passed, unless stop is called first;
	// stop reports whether it prevented the call. f may run in any
	// goroutine (a fake clock runs it in the one that advances it), so it
	// must return quickly and start longer work in a goroutine of its own.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the real time.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

func (SystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
