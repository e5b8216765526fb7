//go:build !linux

package image

import "errors"

// freeSpace is not known here: boxd runs on Linux alone, and elsewhere
// an unpack does not look at the free space.
func freeSpace(string) (int64, error) { return 0, errors.ErrUnsupported }
