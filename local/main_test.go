package local_test

import (
	"fmt"
	"os"
	"runtime"
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
//
// boxd runs only on Linux: elsewhere the tests are skipped, all at once.
func TestMain(m *testing.M) {
	if runtime.GOOS != "linux" {
		fmt.Printf("skipping boxd's tests: %v\n", local.ErrUnsupportedOS)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(local.MountThreadFunction))
}
