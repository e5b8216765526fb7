//go:build !linux

package browser

import "os/exec"

// ownGroup leaves cmd as it is: these tests start Chromium only where
// boxd runs it, on Linux.
func ownGroup(cmd *exec.Cmd) {}

// killGroup kills cmd's process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
