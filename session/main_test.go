package session_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine (a session's reader,
// a server loop, a connection) outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
