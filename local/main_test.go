package local_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/upstash/box-go/local"
)

// TestMain fails the package's tests if a goroutine outlives them: a
// sandbox's waiter, a proxy connection, a background start or an idle
// keep-alive connection of a client. Nothing is ignored but boxd's mount
// namespace thread, which lives as long as the process.
//
// The package's init hook (local/reexec.go) runs before TestMain, so the
// test binary can serve as the in-box agent that boxd re-executes.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(local.MountThreadFunction))
}
