//go:build !unix

package ssh

import "io/fs"

// stampOf is the stamp of the file fi describes: its size and time.
func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{size: fi.Size(), modTime: fi.ModTime(), ok: true}
}
