package session_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/upstash/box-go/local"
)

// TestMain fails the package's benchmarks if a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(local.MountThreadFunction)) // boxd's, for the process
}
