//go:build !unix

package archive

import (
	"errors"
	"io/fs"
)

// noFollow is not known here; supported refuses to work without it.
const noFollow = 0

// errUnsupported is what Write and Extract return on a system that cannot
// open a file without following a symbolic link: there the package could
// not keep its promises. (boxd, its one user, runs only on Linux.)
var errUnsupported = errors.New("archive: snapshot archives need a Unix system (opening files without following links)")

func supported() error { return errUnsupported }

// OwnerOf returns nil: files here have no uid and gid.
func OwnerOf(fi fs.FileInfo) *Owner { return nil }
