//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"syscall"
)

// Boxes are Linux processes: bubblewrap, namespaces, seccomp, pidfds and
// bind mounts have no counterpart elsewhere. On other systems the package
// builds, so that what imports it does, and every call that would start
// or reach a sandbox fails with errNotLinux (Start fails at its first
// step). boxd refuses to start there before it gets this far (package
// local).

var errNotLinux = errors.New("sandbox: boxes run only on Linux")

func openPath(string) (*os.File, error)         { return nil, errNotLinux }
func launcherAttr(bool) *syscall.SysProcAttr    { return nil }
func hostPID(int, int) (int, error)             { return 0, errNotLinux }
func pidfdOpen(int) (*os.File, error)           { return nil, errNotLinux }
func pidfdKill(*os.File)                        {}
func pidfdReaped(*os.File) bool                 { return true }
func ownedBy(string, int) (bool, error)         { return false, errNotLinux }
func setNoFile(uint64, uint64) error            { return errNotLinux }
func noFileHard() (uint64, error)               { return 0, errNotLinux }
func seccompFile() (*os.File, error)            { return nil, errNotLinux }
func dataFile(string, []byte) (*os.File, error) { return nil, errNotLinux }
func newUserns(int) (*os.File, error)           { return nil, errNotLinux }

// signalFreezer is never made: no sandbox starts.
type signalFreezer struct{ pid int }

func (*signalFreezer) stop() {}
func (*signalFreezer) cont() {}
func (*signalFreezer) kill() {}

// stage is boxd's mount namespace, which only Linux has (see stage.go).
type stage struct{}

func theStage() (*stage, error) { return nil, errNotLinux }

func (*stage) mountTree(string) (string, func(), error) { return "", nil, errNotLinux }
func (*stage) agent(string) (string, error)             { return "", errNotLinux }
func (*stage) start(interface{ Start() error }) error   { return errNotLinux }
