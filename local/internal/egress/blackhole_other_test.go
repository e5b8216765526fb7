//go:build !linux

package egress

import "testing"

// blackhole skips the test: its listener that never accepts, with a full
// queue of no connection, is Linux's.
func blackhole(t *testing.T) int {
	t.Helper()
	t.Skip("a listener whose full queue leaves connections in SYN_SENT is made the Linux way")
	return 0
}
