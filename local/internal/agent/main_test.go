package agent

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a
// server's, a client's kept connection, an upload's writer.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
