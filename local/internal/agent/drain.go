package agent

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// After a process exits, its output is read to the last byte it wrote,
// then on until it has been quiet for drainQuiet, for at most drainMax
// after the exit: a background job that keeps the output open (and
// writing) cannot hold the call open, and is all that can be cut.
const (
	drainQuiet = 100 * time.Millisecond
	drainMax   = 2 * time.Second
)

// drainReader reads a process's output (a pipe, or a PTY's master side):
// without limit while the process runs, and after it exited as described
// above. What the process itself wrote is never lost, however late the
// reader runs: at the exit it notes how many bytes wait in the pipe, and
// reads all of them before it applies any time limit.
type drainReader struct {
	f      *os.File
	exited <-chan struct{}

	// State of the draining, touched only by Read.
	after     bool
	owed      int // bytes in the pipe at the exit, not yet read
	until     time.Time
	lastInput time.Time

	wakeOnce sync.Once
}

func newDrainReader(f *os.File, exited <-chan struct{}) *drainReader {
	return &drainReader{f: f, exited: exited}
}

// wake ends a read that blocks while the process runs, once it has
// exited (exited is closed), so that the reader starts draining.
func (d *drainReader) wake() {
	d.wakeOnce.Do(func() { _ = d.f.SetReadDeadline(time.Now()) })
}

func (d *drainReader) Read(b []byte) (int, error) {
	for {
		if !d.after {
			select {
			case <-d.exited:
				d.after = true
				d.owed = pending(d.f)
				now := time.Now()
				d.until, d.lastInput = now.Add(drainMax), now
			default:
			}
		}
		limit := b
		switch {
		case !d.after:
			// Blocks until output, EOF, or wake.
		case d.owed > 0:
			_ = d.f.SetReadDeadline(time.Time{})
			if len(limit) > d.owed {
				limit = limit[:d.owed]
			}
		default:
			now := time.Now()
			quietUntil := d.lastInput.Add(drainQuiet)
			if !now.Before(d.until) || !now.Before(quietUntil) {
				return 0, io.EOF
			}
			if quietUntil.After(d.until) {
				quietUntil = d.until
			}
			_ = d.f.SetReadDeadline(quietUntil)
		}
		n, err := d.f.Read(limit)
		if n > 0 {
			if d.after {
				d.owed = max(d.owed-n, 0)
				d.lastInput = time.Now()
			}
			return n, nil
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Woken at the exit, or a quiet period's end: go round.
		case errors.Is(err, syscall.EIO):
			return 0, io.EOF // a PTY whose last user has gone
		default:
			return 0, err
		}
	}
}
