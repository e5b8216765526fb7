//go:build !linux

package local

// freeBytes fails: boxd runs only on Linux (see ErrUnsupportedOS).
func freeBytes(string) (int64, error) { return 0, ErrUnsupportedOS }
