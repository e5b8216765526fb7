package box

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
)

// FS is a read-only io/fs view of a box's files below one directory, so
// that fs.WalkDir, http.FileServerFS, template.ParseFS and fs.Glob work on
// a box. It implements fs.FS, fs.ReadDirFS, fs.StatFS and fs.ReadFileFS.
//
// Every call is a request made with the context FS was made with.
// Open and Stat follow symbolic links. ReadDir reports a link as a link
// (fs.ModeSymlink), as os.DirFS does, when the server says what each
// entry is (boxd does; otherwise as what it leads to): so fs.WalkDir
// never goes into a link to a directory, and a box whose directories
// link to themselves cannot make a walk endless. Files report mode 0644,
// directories 0755 and links 0777 (the API does not say more), and
// modification times to the second. File contents stream as they are
// read.
type FS struct {
	f    *Files
	ctx  context.Context
	root string
}

// FS returns a view of the files below dir (relative to the working
// directory; "" is the working directory itself, "/" the whole box).
// Every request it makes uses ctx.
func (f *Files) FS(ctx context.Context, dir string, opts ...Option) *FS {
	ctx = withCallOptions(ctx, opts)
	return &FS{f: f, ctx: ctx, root: f.abs(dir)}
}

var (
	_ fs.ReadDirFS  = (*FS)(nil)
	_ fs.StatFS     = (*FS)(nil)
	_ fs.ReadFileFS = (*FS)(nil)
	_ fs.ReadLinkFS = (*FS)(nil)
)

// full returns the box path of name, or an error for a name that io/fs
// does not allow.
func (x *FS) full(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return path.Join(x.root, name), nil
}

// pathError is err of op on name, as io/fs reports it.
func pathError(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: op, Path: name, Err: pe.Err}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Stat describes the file name, following a final symbolic link.
func (x *FS) Stat(name string) (fs.FileInfo, error) {
	full, err := x.full("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := x.f.Stat(x.ctx, full, &StatParams{Follow: true})
	if err != nil {
		return nil, pathError("stat", name, err)
	}
	return newFileInfo(path.Base(full), fi.Type == FileTypeDirectory, fi.Size, fi.ModTime), nil
}

// Lstat describes the file name, and a final symbolic link itself rather
// than what it leads to.
func (x *FS) Lstat(name string) (fs.FileInfo, error) {
	full, err := x.full("lstat", name)
	if err != nil {
		return nil, err
	}
	fi, err := x.f.lstatInfo(x.ctx, full)
	if err != nil {
		return nil, pathError("lstat", name, err)
	}
	return fi, nil
}

// ReadLink returns where the symbolic link name points. It needs a server
// that lists link targets (boxd); against one that does not, it fails
// with errors.ErrUnsupported.
func (x *FS) ReadLink(name string) (string, error) {
	full, err := x.full("readlink", name)
	if err != nil {
		return "", err
	}
	dir, base := path.Split(full)
	r, err := call[gen.ListFilesResponse](x.f.b.c.api.ListFiles(x.ctx, x.f.b.id, &gen.ListFilesParams{Folder: &dir}))
	if err != nil {
		return "", pathError("readlink", name, fileError("readdir", dir, err))
	}
	for _, e := range r.Files {
		switch {
		case e.Name != base:
		case e.Type == nil:
			return "", &fs.PathError{Op: "readlink", Path: name, Err: errors.ErrUnsupported}
		case *e.Type != gen.FileEntryTypeSymlink || e.Target == nil:
			return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
		default:
			return *e.Target, nil
		}
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrNotExist}
}

// lstatInfo describes the box file full without following a final link.
func (f *Files) lstatInfo(ctx context.Context, full string) (fs.FileInfo, error) {
	st, err := f.Stat(ctx, full, nil)
	if err != nil {
		return nil, err
	}
	fi := newFileInfo(path.Base(full), st.Type == FileTypeDirectory, st.Size, st.ModTime)
	fi.link = st.Type == FileTypeSymlink
	return fi, nil
}

// Open opens the file or directory name.
func (x *FS) Open(name string) (fs.File, error) {
	info, err := x.Stat(name)
	if err != nil {
		return nil, pathError("open", name, unwrapPathError(err))
	}
	full, _ := x.full("open", name)
	if info.IsDir() {
		return &fsDir{x: x, name: name, full: full, info: info}, nil
	}
	return &fsFile{x: x, name: name, full: full, info: info}, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ReadDir lists the directory name, sorted by name.
func (x *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	full, err := x.full("readdir", name)
	if err != nil {
		return nil, err
	}
	entries, err := x.f.listDir(x.ctx, full)
	if err != nil {
		return nil, pathError("readdir", name, err)
	}
	return entries, nil
}

// ReadFile returns the whole content of the file name.
func (x *FS) ReadFile(name string) ([]byte, error) {
	full, err := x.full("readfile", name)
	if err != nil {
		return nil, err
	}
	r, err := x.f.Open(x.ctx, full, nil)
	if err != nil {
		return nil, pathError("readfile", name, err)
	}
	defer r.Close()
	var buf []byte
	if r.Size() > 0 {
		buf = make([]byte, 0, r.Size())
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, pathError("readfile", name, err)
		}
	}
}

// listDir lists the box directory full as fs.DirEntry values.
func (f *Files) listDir(ctx context.Context, full string) ([]fs.DirEntry, error) {
	r, err := call[gen.ListFilesResponse](f.b.c.api.ListFiles(ctx, f.b.id, &gen.ListFilesParams{Folder: &full}))
	if err != nil {
		return nil, fileError("readdir", full, err)
	}
	out := make([]fs.DirEntry, 0, len(r.Files))
	for _, e := range r.Files {
		t, _ := time.Parse(time.RFC3339Nano, e.ModTime)
		if deref(e.Type) == gen.FileEntryTypeSymlink {
			// The link itself; what Info says of it is asked for, as
			// os.DirFS does with lstat.
			out = append(out, &linkEntry{f: f, ctx: ctx, name: e.Name, full: path.Join(full, e.Name)})
			continue
		}
		out = append(out, fs.FileInfoToDirEntry(newFileInfo(e.Name, e.IsDir, e.Size, t)))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// linkEntry is a symbolic link as a directory entry.
type linkEntry struct {
	f          *Files
	ctx        context.Context
	name, full string
}

func (e *linkEntry) Name() string               { return e.name }
func (e *linkEntry) IsDir() bool                { return false }
func (e *linkEntry) Type() fs.FileMode          { return fs.ModeSymlink }
func (e *linkEntry) Info() (fs.FileInfo, error) { return e.f.lstatInfo(e.ctx, e.full) }
func (e *linkEntry) String() string             { return fs.FormatDirEntry(e) }

// fileInfo is a fs.FileInfo of a box file.
type fileInfo struct {
	name    string
	dir     bool
	link    bool // a symbolic link itself
	size    int64
	modTime time.Time
}

func newFileInfo(name string, dir bool, size int64, mod time.Time) *fileInfo {
	return &fileInfo{name: name, dir: dir, size: size, modTime: mod.Truncate(time.Second)}
}

func (i *fileInfo) Name() string       { return i.name }
func (i *fileInfo) Size() int64        { return i.size }
func (i *fileInfo) ModTime() time.Time { return i.modTime }
func (i *fileInfo) IsDir() bool        { return i.dir }
func (i *fileInfo) Sys() any           { return nil }

func (i *fileInfo) Mode() fs.FileMode {
	switch {
	case i.link:
		return fs.ModeSymlink | 0o777
	case i.dir:
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// fsFile is an open file of an FS; its content is fetched on the first
// Read.
type fsFile struct {
	x          *FS
	name, full string
	info       fs.FileInfo
	r          *FileReader
	closed     bool
}

func (f *fsFile) Stat() (fs.FileInfo, error) { return f.info, nil }

func (f *fsFile) Read(p []byte) (int, error) {
	if f.closed {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrClosed}
	}
	if f.r == nil {
		r, err := f.x.f.Open(f.x.ctx, f.full, nil)
		if err != nil {
			return 0, pathError("read", f.name, err)
		}
		f.r = r
	}
	return f.r.Read(p)
}

func (f *fsFile) Close() error {
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	if f.r != nil {
		return f.r.Close()
	}
	return nil
}

// fsDir is an open directory of an FS; it is listed on the first ReadDir.
type fsDir struct {
	x          *FS
	name, full string
	info       fs.FileInfo
	entries    []fs.DirEntry
	listed     bool
	closed     bool
}

func (d *fsDir) Stat() (fs.FileInfo, error) { return d.info, nil }

func (d *fsDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}

func (d *fsDir) Close() error {
	if d.closed {
		return &fs.PathError{Op: "close", Path: d.name, Err: fs.ErrClosed}
	}
	d.closed = true
	return nil
}

// ReadDir returns the next n entries (all of the rest for n <= 0).
func (d *fsDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if d.closed {
		return nil, &fs.PathError{Op: "readdir", Path: d.name, Err: fs.ErrClosed}
	}
	if !d.listed {
		entries, err := d.x.f.listDir(d.x.ctx, d.full)
		if err != nil {
			return nil, pathError("readdir", d.name, err)
		}
		d.entries, d.listed = entries, true
	}
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.entries))
	out := d.entries[:n:n]
	d.entries = d.entries[n:]
	return out, nil
}
