//go:build !linux

package core

import "errors"

// freeBytes fails: boxd runs only on Linux (see local.ErrUnsupportedOS).
func freeBytes(string) (int64, error) { return 0, errors.New("boxd runs only on Linux") }

// memAvailable does not know.
func memAvailable() (int64, bool) { return 0, false }
