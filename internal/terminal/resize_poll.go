package terminal

import "time"

// resizePollInterval is how often a terminal without a signal for its
// size (the Windows console) is asked for it: often enough that the box
// follows a drag of the window's edge, seldom enough to cost nothing.
const resizePollInterval = 250 * time.Millisecond

// pollSize calls fn whenever size, read at each tick, differs from the
// size it read before (at first, when pollSize was called), until stop is
// called. A size of 0×0 (the terminal could not be read) is ignored.
// After stop returns, fn is not called again.
func pollSize(ticks <-chan time.Time, size func() (rows, cols int), fn func()) (stop func()) {
	lastRows, lastCols := size()
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-ticks:
				rows, cols := size()
				if rows == 0 && cols == 0 || rows == lastRows && cols == lastCols {
					continue
				}
				lastRows, lastCols = rows, cols
				fn()
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
