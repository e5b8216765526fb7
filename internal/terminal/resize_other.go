//go:build !unix && !windows

package terminal

// onResize does nothing on systems with neither SIGWINCH nor a console to
// poll (js, wasip1, plan9): the box's terminal keeps the size it started
// with.
func onResize(fn func()) (stop func()) { return func() {} }
