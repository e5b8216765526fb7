package box

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine (a retry timer, an
// attempt watchdog, a connection) outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
