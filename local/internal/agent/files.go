package agent

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/upstash/box-go/local/internal/mountinfo"
)

const (
	// maxRange is the largest byte range one read may ask for.
	maxRange = 8 << 20
	// maxWholeRead bounds a read without a range; larger files are read in
	// ranges or downloaded.
	maxWholeRead = 64 << 20
)

type fileEntry struct {
	Name    string
	Path    string
	Size    int64
	IsDir   bool
	ModTime time.Time
	// Type is what the entry is itself (lstat): file, directory,
	// symlink or other; Target, for a symlink, where it points.
	Type   string
	Target string
}

type fileStat struct {
	Type    string
	Size    int64
	ModTime time.Time
	Inode   uint64
	Version string
}

// fsError turns an error from the os package into an API error.
func fsError(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf(http.StatusNotFound, "no such file or directory: %s", p)
	case errors.Is(err, fs.ErrPermission):
		return errorf(http.StatusForbidden, "permission denied: %s", p)
	case errors.Is(err, syscall.EISDIR):
		return errorf(http.StatusBadRequest, "is a directory: %s", p)
	case errors.Is(err, syscall.ENOTDIR):
		return errorf(http.StatusBadRequest, "not a directory: %s", p)
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		return errorf(http.StatusConflict, "%s: %v", p, unwrapPath(err))
	case errors.Is(err, syscall.ELOOP):
		return errorf(http.StatusBadRequest, "too many levels of symbolic links: %s", p)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return errorf(http.StatusBadRequest, "file name too long: %s", p)
	case errors.Is(err, syscall.EROFS):
		return errorf(http.StatusForbidden, "read-only file system: %s", p)
	case diskFull(err):
		return errorf(http.StatusInsufficientStorage, "%s: %v", p, unwrapPath(err))
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ETXTBSY), errors.Is(err, syscall.EMLINK):
		return errorf(http.StatusConflict, "%s: %v", p, unwrapPath(err))
	case errors.Is(err, syscall.EFBIG):
		return errorf(http.StatusRequestEntityTooLarge, "%s: %v", p, unwrapPath(err))
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		// Whatever else the kernel says about a path the client named
		// (EINVAL, EIO on a /proc file, ENXIO on a device...) is about
		// that path, not a fault of boxd's.
		return errorf(http.StatusBadRequest, "%s: %v", p, errno)
	}
	return fmt.Errorf("%s: %w", p, unwrapPath(err))
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// readFile reads a whole file, or the range [offset, offset+length) when
// length is given. The content is base64 when asked for, otherwise text.
func (a *Agent) readFile(p string, b64 bool, offset int64, length *int64) (string, error) {
	bp, err := boxPath(p)
	if err != nil {
		return "", err
	}
	if offset < 0 {
		return "", errorf(http.StatusBadRequest, "offset must not be negative")
	}
	if length != nil && (*length < 0 || *length > maxRange) {
		return "", errorf(http.StatusBadRequest, "length must be between 0 and %d", maxRange)
	}
	f, fi, err := openRegular(a.fs.real(bp), bp)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var data []byte
	switch {
	case fi.Size() > 0 && offset >= fi.Size():
		// Past the end there is nothing to read, as for read(2). (Files
		// of /proc have size 0 and content: they are read.)
		data = nil
	case length == nil:
		if offset > 0 {
			if _, err := f.Seek(offset, io.SeekStart); err != nil {
				return "", fsError(bp, err)
			}
		}
		data, err = io.ReadAll(io.LimitReader(f, maxWholeRead+1))
		if err != nil {
			return "", fsError(bp, err)
		}
		if len(data) > maxWholeRead {
			return "", errorf(http.StatusRequestEntityTooLarge, "%s is larger than %d bytes: read it in ranges or download it", bp, maxWholeRead)
		}
	default:
		data = make([]byte, *length)
		n, err := f.ReadAt(data, offset)
		switch {
		case errors.Is(err, syscall.EINVAL) && offset > 0:
			n = 0 // an offset too far for the file system: past the end
		case err != nil && !errors.Is(err, io.EOF):
			return "", fsError(bp, err)
		}
		data = data[:n]
	}
	if b64 {
		return base64.StdEncoding.EncodeToString(data), nil
	}
	if !utf8.Valid(data) {
		// JSON strings carry text only; say so instead of mangling bytes.
		return "", errorf(http.StatusUnprocessableEntity, "%s is not valid UTF-8 text: read it with encoding=base64", bp)
	}
	return string(data), nil
}

// writeFile writes content (text, or base64 when b64) to p, creating parent
// directories. The data is on disk when it returns.
func (a *Agent) writeFile(p, content string, b64 bool) error {
	bp, err := boxPath(p)
	if err != nil {
		return err
	}
	data := []byte(content)
	if b64 {
		data, err = base64.StdEncoding.DecodeString(content)
		if err != nil {
			return errorf(http.StatusBadRequest, "content is not valid base64: %v", err)
		}
	}
	return a.writeStream(bp, bytes.NewReader(data))
}

// writeStream copies r into the file at box path bp. The data goes to a
// temporary file in the same directory that replaces the target only once
// it is complete and synced, so a failed or interrupted write leaves the old
// content (or nothing) rather than a truncated file.
func (a *Agent) writeStream(bp string, r io.Reader) (err error) {
	real := a.fs.real(bp)
	dir := filepath.Dir(real)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fsError(path.Dir(bp), err)
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(real); err == nil {
		if fi.IsDir() {
			return errorf(http.StatusBadRequest, "is a directory: %s", bp)
		}
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(real)+".boxd-*")
	if err != nil {
		return fsError(bp, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == f.Name() {
			// The file's own write failed (a full disk, a quota), not
			// the reading of what was sent.
			return fsError(bp, pe.Err)
		}
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return fsError(bp, err)
	}
	if err := f.Sync(); err != nil {
		return fsError(bp, err)
	}
	if err := f.Close(); err != nil {
		return fsError(bp, err)
	}
	if err := os.Rename(f.Name(), real); err != nil {
		return fsError(bp, err)
	}
	return syncDir(dir)
}

// syncDir syncs the directory dir. A box may have put a FIFO there by
// now: it is opened without waiting for a writer.
func syncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}

// listFiles lists a directory (not recursively), sorted by name.
func (a *Agent) listFiles(folder string) ([]fileEntry, error) {
	bp, err := folderPath(folder)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(a.fs.real(bp))
	if err != nil {
		return nil, fsError(bp, err)
	}
	out := make([]fileEntry, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		// A symbolic link is listed as what it leads to, when it leads
		// somewhere (as ls -L does), and its type says it is a link, so
		// that a client walking the tree need not follow it.
		typ, target := fileType(fi.Mode()), ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			real := filepath.Join(a.fs.real(bp), e.Name())
			target, _ = os.Readlink(real)
			if t, err := os.Stat(real); err == nil {
				fi = t
			}
		}
		out = append(out, fileEntry{Name: e.Name(), Path: path.Join(bp, e.Name()), Size: fi.Size(), IsDir: fi.IsDir(), ModTime: fi.ModTime(), Type: typ, Target: target})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// statFile describes p without following a final symlink unless follow.
func (a *Agent) statFile(p string, follow bool) (fileStat, error) {
	bp, err := boxPath(p)
	if err != nil {
		return fileStat{}, err
	}
	var fi os.FileInfo
	if follow {
		fi, err = os.Stat(a.fs.real(bp))
	} else {
		fi, err = os.Lstat(a.fs.real(bp))
	}
	if err != nil {
		return fileStat{}, fsError(bp, err)
	}
	st := fileStat{Type: fileType(fi.Mode()), Size: fi.Size(), ModTime: fi.ModTime()}
	st.Inode = inode(fi)
	// An opaque token that changes when the file is replaced, modified or
	// resized.
	st.Version = strconv.FormatUint(st.Inode, 36) + "-" + strconv.FormatInt(fi.ModTime().UnixNano(), 36) + "-" + strconv.FormatInt(fi.Size(), 36)
	return st, nil
}

// fileType names the kind of a file of mode m as the API does.
func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func (a *Agent) mkdir(p string, parents bool) error {
	bp, err := boxPath(p)
	if err != nil {
		return err
	}
	if parents {
		err = os.MkdirAll(a.fs.real(bp), 0o755)
	} else {
		err = os.Mkdir(a.fs.real(bp), 0o755)
	}
	if err != nil {
		return fsError(bp, err)
	}
	return nil
}

// rename moves from to to, as mv does: within a file system by
// rename(2), and from one mount of the box to another (/workspace to
// /tmp, say) by copying, then removing the original. An original that
// cannot be removed (in a directory the box user may not change, or a
// mount point) is refused before anything is copied, and a copy that
// fails leaves the original and removes what it made: a refused move
// changes nothing.
func (a *Agent) rename(from, to string) error {
	f, err := boxPath(from)
	if err != nil {
		return err
	}
	t, err := boxPath(to)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(a.fs.real(f)); err != nil {
		return fsError(f, err)
	}
	if err := os.MkdirAll(filepath.Dir(a.fs.real(t)), 0o755); err != nil {
		return fsError(path.Dir(t), err)
	}
	err = os.Rename(a.fs.real(f), a.fs.real(t))
	if errors.Is(err, syscall.EXDEV) {
		return a.moveAcross(f, t)
	}
	if err != nil {
		return fsError(f, err)
	}
	return nil
}

// moveAcross moves box path from to box path to on another file system.
func (a *Agent) moveAcross(from, to string) error {
	src, dst := a.fs.real(from), a.fs.real(to)
	// What cannot be removed is not copied either: a move refused at the
	// end would have left a copy, or replaced the target.
	if err := a.removable(from, src); err != nil {
		return err
	}
	// The copy is made beside the target, then renamed over it: the
	// target is replaced whole or not at all, as rename(2) would.
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".boxd-move-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := copyTree(src, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fsError(to, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return fsError(to, err)
	}
	if err := os.RemoveAll(src); err != nil {
		return fsError(from, err)
	}
	return nil
}

// copyTree copies src (a file, a symbolic link or a directory tree) to
// dst, which must not exist, keeping modes and modification times.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case m.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
	case m.IsRegular():
		// The box may have made it a FIFO since: it is opened without
		// waiting, and copied only if it is still a regular file.
		in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer in.Close()
		if fi, err := in.Stat(); err != nil {
			return err
		} else if !fi.Mode().IsRegular() {
			return errorf(http.StatusConflict, "a file changed into something else while it was moved")
		}
		if err := setBlocking(in); err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	default:
		return errorf(http.StatusBadRequest, "%s is not a file, a directory or a link: it cannot be moved to another file system", src)
	}
	if err := os.Chmod(dst, fi.Mode().Perm()|fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

// remove deletes a file, an empty directory, or with recursive a whole
// tree. A tree is checked first, all of it: every directory in it must be
// one the box user may change, and no mount point may lie in it. If any
// part could not be removed, nothing is, and the error says which part.
func (a *Agent) remove(p string, recursive bool) error {
	bp, err := boxPath(p)
	if err != nil {
		return err
	}
	switch bp {
	case "/", "/workspace", "/workspace/home", "/home/boxuser", "/tmp":
		return errorf(http.StatusBadRequest, "refusing to remove %s", bp)
	}
	real := a.fs.real(bp)
	fi, err := os.Lstat(real)
	if err != nil {
		return fsError(bp, err)
	}
	if !fi.IsDir() || !recursive {
		if err := os.Remove(real); err != nil {
			if fi.IsDir() && (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)) {
				return errorf(http.StatusConflict, "%s is a non-empty directory: remove it with recursive", bp)
			}
			return fsError(bp, err)
		}
		return nil
	}
	if err := a.removable(bp, real); err != nil {
		return err
	}
	if err := os.RemoveAll(real); err != nil {
		return fsError(bp, err)
	}
	return nil
}

// removable checks that the tree at real (box path bp) can be removed
// whole: its parent and every directory in it writable and searchable by
// the box user, and no mount point at or below it.
func (a *Agent) removable(bp, real string) error {
	if err := writableDir(filepath.Dir(real)); err != nil {
		return errorf(http.StatusForbidden, "permission denied: %s cannot be removed from %s (nothing was removed)", bp, path.Dir(bp))
	}
	mounts := mountPoints()
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		rel := bp + strings.TrimPrefix(p, real)
		if err != nil {
			return fsError(rel, err)
		}
		if mounts[p] {
			return errorf(http.StatusForbidden, "%s is a mount point and cannot be removed (nothing was removed)", rel)
		}
		if d.IsDir() {
			if err := writableDir(p); err != nil {
				return errorf(http.StatusForbidden, "permission denied: %s cannot be emptied (nothing was removed)", rel)
			}
		}
		return nil
	})
}

// mountPoints returns the mount points the agent sees (in a sandbox, the
// box's own mount table), by path.
func mountPoints() map[string]bool {
	out := map[string]bool{}
	ms, _ := mountinfo.Self()
	for _, m := range ms {
		out[m.Point] = true
	}
	return out
}

// openDownload opens a regular file for download.
func (a *Agent) openDownload(p string) (*os.File, int64, error) {
	bp, err := boxPath(p)
	if err != nil {
		return nil, 0, err
	}
	f, fi, err := openRegular(a.fs.real(bp), bp)
	if err != nil {
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// openRegular opens the regular file at real (box path bp) for reading.
// Anything else is refused without waiting: opening a FIFO would block
// until someone writes to it.
func openRegular(real, bp string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fsError(bp, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fsError(bp, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		if fi.IsDir() {
			return nil, nil, errorf(http.StatusBadRequest, "is a directory: %s", bp)
		}
		return nil, nil, errorf(http.StatusBadRequest, "not a regular file: %s", bp)
	}
	// Reads of a regular file do not block; clearing the flag keeps it
	// that way for the few file systems that would honour it.
	if err := setBlocking(f); err != nil {
		f.Close()
		return nil, nil, fsError(bp, err)
	}
	return f, fi, nil
}

// diskFull reports whether err says the box's disk, or its quota, is full:
// the box's fault and its own to mend, answered 507.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
