//go:build unix

package ssh

import (
	"io/fs"
	"syscall"
)

// stampOf is the stamp of the file fi describes.
func stampOf(fi fs.FileInfo) fileStamp {
	st := fileStamp{size: fi.Size(), modTime: fi.ModTime(), ok: true}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.inode = uint64(sys.Ino)
	}
	return st
}
