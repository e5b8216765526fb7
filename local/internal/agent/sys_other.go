//go:build !linux

package agent

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// The in-box agent runs only in a Linux box: boxd starts no box on other
// systems. These stand-ins for sys_linux.go let the package build there;
// what would act fails with errNotLinux.

var errNotLinux = errors.New("agent: the in-box agent runs only on Linux")

func kill(int, syscall.Signal) error                 { return errNotLinux }
func killTree(int)                                   {}
func dupTo(*os.File, int) error                      { return errNotLinux }
func closeOnExec(int)                                {}
func groupAttr() *syscall.SysProcAttr                { return nil }
func sessionLeader(*syscall.SysProcAttr)             {}
func pending(*os.File) int                           { return 0 }
func pollable(f *os.File) (*os.File, error)          { f.Close(); return nil, errNotLinux }
func setWinsize(uintptr, *pty.Winsize) syscall.Errno { return syscall.EINVAL }
func setBlocking(*os.File) error                     { return errNotLinux }
func writableDir(string) error                       { return errNotLinux }
func inode(fs.FileInfo) uint64                       { return 0 }
func memoryPeak(*os.ProcessState) int64              { return 0 }

func notDumpable() error { return errNotLinux }

func peerOpen(net.Conn) bool { return true }

// start fails: the agent starts no process here.
func (a *Agent) start(*exec.Cmd) error { return errNotLinux }

func (a *Agent) runOutput(context.Context, *exec.Cmd, io.Writer, io.Writer, time.Duration, bool) (result, error) {
	return result{}, errNotLinux
}

var sessionSignals = map[string]syscall.Signal{}
