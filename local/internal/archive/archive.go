// Package archive writes and extracts boxd's snapshot archives: a tar
// stream, zstd-compressed, of some top-level directories of a box's host
// directory (its workspace and home).
//
// Writing never follows a symbolic link: links are stored as links, and a
// file is opened with O_NOFOLLOW. Directories, regular files and symbolic
// links are kept, with their permission bits (set-id and sticky bits
// included) and modification times; sockets, pipes and devices are left
// out, and a file with several hard links is stored once per name.
//
// Extraction is meant for archives that may have been tampered with on
// disk: every name must lie under one of the expected top-level
// directories, with no "..", no absolute path and no parent that is
// anything but a directory the extraction made or found as a real
// directory; nothing is written through a symbolic link; files are created
// exclusively (a name given twice is an error); and the number of entries
// and the bytes written are bounded. All of it goes through an os.Root, so
// even a mistake here cannot reach outside the target directory.
//
// On a system that cannot open a file without following a link (Windows),
// Write and Extract refuse to work.
package archive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Format names the encoding: a tar stream compressed with zstd.
const Format = "tar+zstd"

// level is the zstd level archives are written with. Speed matters more
// than the last percent of size: a running box stays frozen while it is
// archived. (On source code it still compresses better than gzip's
// default level, several times faster.)
const level = zstd.SpeedFastest

// maxWindow bounds the memory a decoder may be asked to use.
const maxWindow = 64 << 20

// maxName bounds entry names and link targets (Linux's PATH_MAX).
const maxName = 4096

// Stats describes the content of an archive.
type Stats struct {
	// Entries counts directories, files and links.
	Entries int64
	// Bytes is the total size of the regular files.
	Bytes int64
}

// Limits bound what Write accepts and what Extract writes. Both are
// always enforced: a zero field allows nothing.
type Limits struct {
	Entries int64
	Bytes   int64
}

// ErrTooLarge is returned when a tree or an archive exceeds its Limits.
var ErrTooLarge = errors.New("archive: over the size limit")

func (l Limits) check(s Stats) error {
	if s.Entries > l.Entries {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, l.Entries)
	}
	if s.Bytes > l.Bytes {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, l.Bytes)
	}
	return nil
}

// Write archives the directories tops (names relative to root, such as
// "workspace") into w. A top that does not exist is skipped. Entry names
// are relative to root, with forward slashes. Write stops with ctx.
func Write(ctx context.Context, w io.Writer, root string, tops []string, lim Limits) (Stats, error) {
	if err := supported(); err != nil {
		return Stats{}, err
	}
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(level))
	if err != nil {
		return Stats{}, err
	}
	tw := tar.NewWriter(zw)
	var st Stats
	for _, top := range tops {
		if err = walk(ctx, tw, root, top, &st, lim); err != nil {
			break
		}
	}
	if err == nil {
		err = tw.Close()
	}
	// Always closed: it ends the encoder's goroutines.
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	return st, err
}

func walk(ctx context.Context, tw *tar.Writer, root, top string, st *Stats, lim Limits) error {
	base := filepath.Join(root, top)
	return filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == base && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return writeEntry(tw, p, filepath.ToSlash(rel), d, st, lim)
	})
}

func writeEntry(tw *tar.Writer, p, name string, d fs.DirEntry, st *Stats, lim Limits) error {
	fi, err := d.Info() // an lstat: WalkDir does not follow links
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: name, Mode: tarMode(fi.Mode()), ModTime: fi.ModTime()}
	if o := OwnerOf(fi); o != nil {
		hdr.Uid, hdr.Gid = o.UID, o.GID
	}
	var f *os.File
	switch {
	case fi.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case fi.Mode().IsRegular():
		// O_NOFOLLOW and O_NONBLOCK: if the name were swapped for a link
		// or a pipe since the lstat, opening fails or does not hang.
		f, err = os.OpenFile(p, os.O_RDONLY|noFollow|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		ffi, err := f.Stat()
		if err != nil {
			return err
		}
		if !ffi.Mode().IsRegular() {
			return fmt.Errorf("archive: %s changed while it was archived", name)
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, ffi.Size()
		st.Bytes += hdr.Size
	default:
		return nil // sockets, pipes, devices
	}
	st.Entries++
	if err := lim.check(*st); err != nil {
		return err
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if f != nil {
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			return fmt.Errorf("archive: reading %s: %w", name, err)
		}
	}
	return nil
}

// tarMode is the mode field of a header: permission, set-id and sticky
// bits in their Unix positions.
func tarMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

func fileMode(v int64) fs.FileMode {
	m := fs.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// Owner is the uid and gid extracted entries are given.
type Owner struct{ UID, GID int }

// Extract unpacks an archive written by Write into root, accepting only
// names under tops. root and the tops may exist already (as directories);
// any other name must not. Ownership recorded in the archive is ignored:
// with a non-nil owner, every entry is given to it. Extract stops with ctx
// and when the archive holds more than lim allows.
func Extract(ctx context.Context, r io.Reader, root string, tops []string, owner *Owner, lim Limits) (Stats, error) {
	if err := supported(); err != nil {
		return Stats{}, err
	}
	zr, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(maxWindow), zstd.WithDecoderMaxMemory(maxWindow))
	if err != nil {
		return Stats{}, fmt.Errorf("archive: %w", err)
	}
	defer zr.Close()
	rt, err := os.OpenRoot(root)
	if err != nil {
		return Stats{}, err
	}
	defer rt.Close()
	x := &extractor{root: rt, tops: tops, owner: owner, lim: lim, dirs: map[string]bool{}}
	tr := tar.NewReader(zr)
	for {
		if err := ctx.Err(); err != nil {
			return x.st, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.st, fmt.Errorf("archive: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return x.st, err
		}
	}
	// Directory modes and times last, deepest first: a read-only directory
	// must not stop its own content from being written, and writing into a
	// directory changes its modification time.
	for i := len(x.dirMeta) - 1; i >= 0; i-- {
		d := x.dirMeta[i]
		if err := rt.Chmod(d.name, d.mode); err != nil {
			return x.st, err
		}
		if err := rt.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return x.st, err
		}
	}
	return x.st, nil
}

type extractor struct {
	root    *os.Root
	tops    []string
	owner   *Owner
	lim     Limits
	st      Stats
	dirs    map[string]bool // names known to be real directories
	dirMeta []dirMeta
}

type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

// clean checks an entry name and returns it cleaned, without a trailing
// slash.
func (x *extractor) clean(name string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("archive: refusing entry %q: %s", name, why)
	}
	switch {
	case name == "" || len(name) > maxName:
		return bad("bad length")
	case strings.ContainsRune(name, 0):
		return bad("NUL in name")
	case strings.HasPrefix(name, "/"):
		return bad("absolute name")
	}
	for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if part == ".." {
			return bad(`".." in name`)
		}
	}
	c := path.Clean(name)
	top, _, _ := strings.Cut(c, "/")
	if !slices.Contains(x.tops, top) {
		return bad("outside the archived directories")
	}
	return c, nil
}

// parents makes sure every parent of name is a real directory, creating
// missing ones. It never goes through a symbolic link: each component is
// checked with an lstat before anything below it is used.
func (x *extractor) parents(name string) error {
	dir := path.Dir(name)
	if dir == "." || x.dirs[dir] {
		return nil
	}
	if err := x.parents(dir); err != nil {
		return err
	}
	return x.mkdir(dir, 0o755, time.Time{}, false)
}

// mkdir makes name a directory: it creates it, or accepts a real
// directory already there (a top, or an entry given twice). With meta,
// mode and mtime are applied at the end of the extraction.
func (x *extractor) mkdir(name string, mode fs.FileMode, mtime time.Time, meta bool) error {
	if !x.dirs[name] {
		fi, err := x.root.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := x.root.Mkdir(name, 0o700); err != nil {
				return err
			}
			if err := x.chown(name); err != nil {
				return err
			}
			if !meta { // an implicit parent: give it a usual mode
				if err := x.root.Chmod(name, mode); err != nil {
					return err
				}
			}
		case err != nil:
			return err
		case !fi.IsDir(): // a symbolic link or a file: never go through it
			return fmt.Errorf("archive: refusing %q: not a directory", name)
		default:
			if err := x.chown(name); err != nil {
				return err
			}
		}
		x.dirs[name] = true
	}
	if meta {
		x.dirMeta = append(x.dirMeta, dirMeta{name: name, mode: mode, mtime: mtime})
	}
	return nil
}

func (x *extractor) chown(name string) error {
	if x.owner == nil {
		return nil
	}
	return x.root.Lchown(name, x.owner.UID, x.owner.GID)
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	name, err := x.clean(hdr.Name)
	if err != nil {
		return err
	}
	x.st.Entries++
	if hdr.Typeflag == tar.TypeReg {
		if hdr.Size < 0 {
			return fmt.Errorf("archive: %q has a negative size", name)
		}
		x.st.Bytes += hdr.Size
	}
	if err := x.lim.check(x.st); err != nil {
		return err
	}
	mode := fileMode(hdr.Mode)
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := x.parents(name); err != nil {
			return err
		}
		return x.mkdir(name, mode, hdr.ModTime, true)
	case tar.TypeReg:
		if !strings.Contains(name, "/") {
			return fmt.Errorf("archive: refusing %q: a file in place of a top directory", name)
		}
		if err := x.parents(name); err != nil {
			return err
		}
		return x.file(name, mode, hdr, r)
	case tar.TypeSymlink:
		if !strings.Contains(name, "/") {
			return fmt.Errorf("archive: refusing %q: a link in place of a top directory", name)
		}
		if hdr.Linkname == "" || len(hdr.Linkname) > maxName || strings.ContainsRune(hdr.Linkname, 0) {
			return fmt.Errorf("archive: refusing link %q: bad target", name)
		}
		if err := x.parents(name); err != nil {
			return err
		}
		// The target is stored as it is and never followed here; inside
		// the box it resolves in the box's own view.
		if err := x.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		return x.chown(name)
	default:
		return fmt.Errorf("archive: refusing %q: unsupported entry type %q", name, hdr.Typeflag)
	}
}

func (x *extractor) file(name string, mode fs.FileMode, hdr *tar.Header, r io.Reader) error {
	// O_EXCL: a name that exists already (a duplicate entry, or a link
	// made by an earlier entry) is an error, never something to write
	// through.
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, hdr.Size); err != nil {
		f.Close()
		return fmt.Errorf("archive: %s: %w", name, err)
	}
	// chown before chmod: chown clears the set-id bits.
	if x.owner != nil {
		if err := f.Chown(x.owner.UID, x.owner.GID); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
}
