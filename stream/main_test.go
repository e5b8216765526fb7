package stream

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine (a pipe writer, a
// concurrent Close) outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
