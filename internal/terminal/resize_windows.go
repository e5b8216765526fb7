//go:build windows

package terminal

import (
	"os"
	"time"
)

// onResize calls fn whenever the console window changes size until the
// returned function is called. Windows sends no signal for it, so the size
// of the console (standard output's screen buffer window, as Size reads
// it) is polled every resizePollInterval.
func onResize(fn func()) (stop func()) {
	t := time.NewTicker(resizePollInterval)
	stopPoll := pollSize(t.C, func() (int, int) { return Size(os.Stdout) }, fn)
	return func() {
		t.Stop()
		stopPoll()
	}
}
