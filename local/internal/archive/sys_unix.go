//go:build unix

package archive

import (
	"io/fs"
	"syscall"
)

// noFollow makes an open fail on a symbolic link instead of following it.
const noFollow = syscall.O_NOFOLLOW

// supported returns nil: Unix systems have what the package's promises
// rest on.
func supported() error { return nil }

// OwnerOf returns the uid and gid of the file fi describes, or nil when
// fi does not say.
func OwnerOf(fi fs.FileInfo) *Owner {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return &Owner{UID: int(st.Uid), GID: int(st.Gid)}
	}
	return nil
}
