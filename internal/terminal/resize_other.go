//go:build !unix

package terminal

// onResize does nothing where there is no SIGWINCH: the box's terminal
// keeps the size it started with.
func onResize(fn func()) (stop func()) { return func() {} }
