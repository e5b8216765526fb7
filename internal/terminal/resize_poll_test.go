package terminal

import (
	"sync"
	"testing"
	"time"
)

// TestPollSize drives the poll that follows the Windows console's size
// with ticks of its own. A tick's channel is unbuffered, so a second send
// returns only once the first tick has been handled: nothing here waits
// for time to pass.
func TestPollSize(t *testing.T) {
	var mu sync.Mutex
	rows, cols := 24, 80
	setSize := func(r, c int) {
		mu.Lock()
		rows, cols = r, c
		mu.Unlock()
	}
	size := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return rows, cols
	}
	ticks := make(chan time.Time)
	called := make(chan [2]int, 10)
	stop := pollSize(ticks, size, func() { r, c := size(); called <- [2]int{r, c} })

	// tick sends n ticks, and one more that is received only once they
	// have been handled, and returns the sizes fn was called with
	// meanwhile. That last tick may be handled after tick returns: if the
	// test has changed the size by then, fn's call for it is counted by
	// the next call of tick, the step it belongs to.
	tick := func(n int) [][2]int {
		for range n + 1 {
			ticks <- time.Time{}
		}
		var got [][2]int
		for {
			select {
			case c := <-called:
				got = append(got, c)
			default:
				return got
			}
		}
	}
	expect := func(step string, got [][2]int, want ...[2]int) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: fn called with %v, want %v", step, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: fn called with %v, want %v", step, got, want)
			}
		}
	}

	expect("size as at the start", tick(3))
	setSize(30, 100)
	expect("resized", tick(1), [2]int{30, 100})
	expect("no change since", tick(3))
	setSize(0, 0)
	expect("terminal not readable", tick(2))
	setSize(30, 100)
	expect("readable again, same size", tick(2))
	setSize(40, 120)
	expect("resized again", tick(1), [2]int{40, 120})
	setSize(50, 150)
	setSize(40, 120)
	expect("resized and back between two ticks", tick(2))

	stop()
	select {
	case ticks <- time.Time{}:
		t.Error("a tick was received after stop returned")
	default:
	}
}
