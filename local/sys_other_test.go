//go:build !linux

package local_test

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// boxd runs only on Linux, and TestMain skips this package's tests
// elsewhere; these stand-ins for sys_linux_test.go let them build.

func fileOwner(os.FileInfo) (uid, gid uint32) { return 0, 0 }
func killPid(int) error                       { return errors.New("needs Linux") }
func hostUserAttr() *syscall.SysProcAttr      { return nil }
func cpuTime() time.Duration                  { return 0 }
