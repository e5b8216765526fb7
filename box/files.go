package box

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/gen"
)

// MaxReadRange is the largest byte range one ReadRange call may ask for.
const MaxReadRange = 8 << 20

// Files reads and writes a box's files. Relative paths are resolved against
// the box's tracked working directory.
type Files struct{ b *Box }

func (f *Files) abs(p string) string { return join(f.b.wd.get(), p) }

// Read returns the whole content of the file at p. The bytes come raw
// (through the download endpoint), not base64 in JSON.
func (f *Files) Read(ctx context.Context, p string, opts ...Option) ([]byte, error) {
	ctx = withCallOptions(ctx, opts)
	if p == "" {
		return nil, invalidf("box: path is required")
	}
	resp, err := f.b.c.api.DownloadFile(ctx, f.b.id, &gen.DownloadFileParams{Folder: f.abs(p)})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fileError("read", f.abs(p), newAPIError(resp))
	}
	defer drainAndClose(resp.Body)
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("box: reading %s: %w", f.abs(p), err)
	}
	return data, nil
}

// ReadRange returns at most length bytes of the file at p, starting at
// offset. length 0 reads nothing; the server refuses more than
// MaxReadRange.
func (f *Files) ReadRange(ctx context.Context, p string, offset, length int64, opts ...Option) ([]byte, error) {
	ctx = withCallOptions(ctx, opts)
	if offset < 0 || length < 0 {
		return nil, invalidf("box: ReadRange offset and length must not be negative")
	}
	if length > MaxReadRange {
		return nil, invalidf("box: ReadRange length %d is above the %d-byte limit", length, MaxReadRange)
	}
	return f.read(ctx, p, &offset, &length)
}

func (f *Files) read(ctx context.Context, p string, offset, length *int64) ([]byte, error) {
	if p == "" {
		return nil, invalidf("box: path is required")
	}
	enc := gen.ReadFileParamsEncodingBase64
	params := gen.ReadFileParams{Path: f.abs(p), Encoding: &enc, Offset: offset, Length: length}
	r, err := call[gen.ReadFileResponse](f.b.c.api.ReadFile(ctx, f.b.id, &params))
	if err != nil {
		return nil, fileError("read", params.Path, err)
	}
	data, err := base64.StdEncoding.DecodeString(r.Content)
	if err != nil {
		return nil, fmt.Errorf("box: reading %s: invalid base64 from server: %w", params.Path, err)
	}
	return data, nil
}

// ReadText returns the content of the text file at p. The server refuses
// content that is not valid UTF-8; use Read for binary files.
func (f *Files) ReadText(ctx context.Context, p string, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	if p == "" {
		return "", invalidf("box: path is required")
	}
	r, err := call[gen.ReadFileResponse](f.b.c.api.ReadFile(ctx, f.b.id, &gen.ReadFileParams{Path: f.abs(p)}))
	if err != nil {
		return "", fileError("read", f.abs(p), err)
	}
	return r.Content, nil
}

// smallWrite is the size up to which Write sends base64 in JSON; larger
// data goes raw through the upload endpoint, which is several times faster.
const smallWrite = 64 << 10

// Write replaces the file at p with data, creating it and its parent
// directories as needed. The file is replaced only once all of data has
// arrived.
func (f *Files) Write(ctx context.Context, p string, data []byte, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if len(data) > smallWrite && p != "" {
		return f.upload(ctx, []uploadPart{{dest: f.abs(p), open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}}})
	}
	enc := gen.WriteFileRequestEncodingBase64
	return f.write(ctx, gen.WriteFileRequest{Path: f.abs(p), Content: base64.StdEncoding.EncodeToString(data), Encoding: &enc}, p)
}

// WriteText replaces the file at p with text.
func (f *Files) WriteText(ctx context.Context, p, text string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	return f.write(ctx, gen.WriteFileRequest{Path: f.abs(p), Content: text}, p)
}

func (f *Files) write(ctx context.Context, body gen.WriteFileRequest, p string) error {
	if p == "" {
		return invalidf("box: path is required")
	}
	return fileError("write", body.Path, none(f.b.c.api.WriteFile(withIdempotent(ctx), f.b.id, body)))
}

// FileEntry is one entry of a directory listing.
type FileEntry struct {
	Name    string
	Path    string // absolute
	Size    int64
	IsDir   bool
	ModTime time.Time
}

// List lists the directory at p (not recursively). An empty p lists the
// working directory.
func (f *Files) List(ctx context.Context, p string, opts ...Option) ([]FileEntry, error) {
	ctx = withCallOptions(ctx, opts)
	var params gen.ListFilesParams
	if p == "" {
		params.Folder = f.b.folder()
	} else {
		params.Folder = ptr(f.abs(p))
	}
	r, err := call[gen.ListFilesResponse](f.b.c.api.ListFiles(ctx, f.b.id, &params))
	if err != nil {
		return nil, fileError("readdir", deref(params.Folder), err)
	}
	out := make([]FileEntry, len(r.Files))
	for i, e := range r.Files {
		t, _ := time.Parse(time.RFC3339Nano, e.ModTime)
		out[i] = FileEntry{Name: e.Name, Path: e.Path, Size: e.Size, IsDir: e.IsDir, ModTime: t}
	}
	return out, nil
}

// FileType is the kind of a file.
type FileType string

// File types.
const (
	FileTypeFile      FileType = "file"
	FileTypeDirectory FileType = "directory"
	FileTypeSymlink   FileType = "symlink"
	FileTypeOther     FileType = "other"
)

// FileInfo describes a file.
type FileInfo struct {
	Type    FileType
	Size    int64
	ModTime time.Time
	Inode   int64
	// Version changes whenever the file is replaced, modified or resized.
	// Compare it for equality; do not parse it.
	Version string
}

// StatParams configures Stat.
type StatParams struct {
	// Follow describes the target of a final symlink instead of the link.
	Follow bool
}

// Stat describes the file at p. Like lstat, it describes a symlink itself
// unless params.Follow is set.
func (f *Files) Stat(ctx context.Context, p string, params *StatParams, opts ...Option) (*FileInfo, error) {
	ctx = withCallOptions(ctx, opts)
	if p == "" {
		return nil, invalidf("box: path is required")
	}
	q := gen.StatFileParams{Path: f.abs(p)}
	if params != nil && params.Follow {
		q.Follow = ptr(true)
	}
	r, err := call[gen.FileStat](f.b.c.api.StatFile(ctx, f.b.id, &q))
	if err != nil {
		return nil, fileError("stat", q.Path, err)
	}
	return &FileInfo{Type: FileType(r.Type), Size: r.Size, ModTime: r.ModTime, Inode: r.Inode, Version: r.Version}, nil
}

// MkdirParams configures Mkdir.
type MkdirParams struct {
	// Parents creates missing parents and succeeds if the directory
	// exists, like mkdir -p.
	Parents bool
}

// Mkdir creates the directory p.
func (f *Files) Mkdir(ctx context.Context, p string, params *MkdirParams, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if p == "" {
		return invalidf("box: path is required")
	}
	body := gen.MakeDirectoryRequest{Path: f.abs(p)}
	if params != nil && params.Parents {
		body.Parents = ptr(true)
		ctx = withIdempotent(ctx)
	}
	return fileError("mkdir", body.Path, none(f.b.c.api.MakeDirectory(ctx, f.b.id, body)))
}

// Rename moves from to to, creating to's parent directories.
func (f *Files) Rename(ctx context.Context, from, to string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if from == "" || to == "" {
		return invalidf("box: both paths are required")
	}
	return fileError("rename", f.abs(from), none(f.b.c.api.RenameFile(ctx, f.b.id, gen.RenameFileRequest{From: f.abs(from), To: f.abs(to)})))
}

// RemoveParams configures Remove.
type RemoveParams struct {
	// Recursive is required to remove a non-empty directory.
	Recursive bool
}

// Remove deletes the file or directory at p.
func (f *Files) Remove(ctx context.Context, p string, params *RemoveParams, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if p == "" {
		return invalidf("box: path is required")
	}
	body := gen.RemoveFileRequest{Path: f.abs(p)}
	if params != nil && params.Recursive {
		body.Recursive = ptr(true)
	}
	return fileError("remove", body.Path, none(f.b.c.api.RemoveFile(ctx, f.b.id, body)))
}

// UploadFile pairs a local file, or a reader, with its destination in
// the box.
type UploadFile struct {
	// LocalPath is the file on this machine.
	LocalPath string
	// Reader, when set instead of LocalPath, is read to its end for the
	// file's content. A request with a reader cannot be sent again, so it
	// is never retried.
	Reader io.Reader
	// Destination is the path in the box; relative paths are resolved
	// against the working directory. Parent directories are created.
	Destination string
}

// Upload sends local files to the box in one multipart request, streamed
// from disk. Each destination is replaced only once its file has arrived
// whole.
func (f *Files) Upload(ctx context.Context, files []UploadFile, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if len(files) == 0 {
		return invalidf("box: Upload needs at least one file")
	}
	parts := make([]uploadPart, len(files))
	replayable := true
	for i, u := range files {
		if u.Destination == "" || (u.LocalPath == "") == (u.Reader == nil) {
			return invalidf("box: Upload file %d: Destination, and one of LocalPath and Reader, are required", i)
		}
		if u.Reader != nil {
			r := u.Reader
			parts[i] = uploadPart{dest: f.abs(u.Destination), open: func() (io.ReadCloser, error) { return io.NopCloser(r), nil }}
			replayable = false
			continue
		}
		fi, err := os.Stat(u.LocalPath)
		if err != nil {
			return fmt.Errorf("box: Upload: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return invalidf("box: Upload: %s is not a regular file", u.LocalPath)
		}
		local := u.LocalPath
		parts[i] = uploadPart{dest: f.abs(u.Destination), open: func() (io.ReadCloser, error) { return os.Open(local) }}
	}
	return f.uploadWith(ctx, parts, replayable)
}

// uploadPart is one file of an upload request: its box path and how to
// read its content (again, if the request is retried).
type uploadPart struct {
	dest string
	open func() (io.ReadCloser, error)
}

// upload sends parts in one multipart request streamed through a pipe;
// the parts are opened again if the request is retried.
func (f *Files) upload(ctx context.Context, parts []uploadPart) error {
	return f.uploadWith(ctx, parts, true)
}

func (f *Files) uploadWith(ctx context.Context, parts []uploadPart, replayable bool) error {
	boundary := multipart.NewWriter(io.Discard).Boundary()
	// Each body is written by a goroutine of its own. The call returns
	// only once they have all ended: the parts' readers are not read
	// after it (the transport may stop reading a body early, when the
	// server answers before it is sent).
	var (
		writers sync.WaitGroup
		mu      sync.Mutex
		bodies  []*io.PipeReader
	)
	defer func() {
		mu.Lock()
		for _, pr := range bodies {
			pr.CloseWithError(errUploadAnswered)
		}
		mu.Unlock()
		writers.Wait()
	}()
	body := func() io.ReadCloser {
		pr, pw := io.Pipe()
		mu.Lock()
		bodies = append(bodies, pr)
		mu.Unlock()
		writers.Go(func() { pw.CloseWithError(writeUpload(pw, boundary, parts)) })
		return pr
	}
	// The generated client has no way to pass GetBody, so the request is
	// built here; rebuilding the body from its sources lets the transport
	// retry.
	if replayable {
		ctx = withIdempotent(ctx)
	}
	req, err := f.b.c.newRequest(ctx, http.MethodPost, "/v2/box/"+url.PathEscape(f.b.id)+"/files/upload", nil)
	if err != nil {
		return err
	}
	req.Body = body()
	if replayable {
		req.GetBody = func() (io.ReadCloser, error) { return body(), nil }
	}
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
	return none(f.b.c.send(req))
}

// errUploadAnswered ends the writing of an upload's body once the server
// has answered.
var errUploadAnswered = errors.New("box: the upload was answered")

func writeUpload(w io.Writer, boundary string, parts []uploadPart) error {
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(boundary); err != nil {
		return err
	}
	for _, p := range parts {
		if err := mw.WriteField("paths", p.dest); err != nil {
			return err
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files"; filename=%q`, path.Base(p.dest)))
		h.Set("Content-Type", "application/octet-stream")
		part, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		src, err := p.open()
		if err != nil {
			return err
		}
		_, err = io.Copy(part, src)
		src.Close()
		if err != nil {
			return err
		}
	}
	return mw.Close()
}

// DownloadParams configures Download.
type DownloadParams struct {
	// Folder is the directory in the box to download; empty means the
	// working directory.
	Folder string
	// Dest is the local directory to write into. By default it is
	// ./<last element of Folder>, or ./workspace for /workspace/home.
	Dest string
	// Recursive downloads the subdirectories too, at any depth (see
	// DownloadDir).
	Recursive bool
}

// Download copies the files of one box directory (with Recursive, its
// whole tree) into a local directory and returns the local paths written. File names from the server are used only if they name a file
// directly inside the destination: a name such as "../x" or one that
// resolves through a symlink out of it is refused.
func (f *Files) Download(ctx context.Context, params *DownloadParams, opts ...Option) ([]string, error) {
	ctx = withCallOptions(ctx, opts)
	var p DownloadParams
	if params != nil {
		p = *params
	}
	remote := f.b.wd.get()
	if p.Folder != "" {
		remote = f.abs(p.Folder)
	}
	dest := p.Dest
	if dest == "" {
		dest = path.Base(remote)
		if remote == WorkspaceHome {
			dest = "workspace"
		}
		if dest == "/" || dest == "." || dest == ".." {
			dest = "box"
		}
	}
	if p.Recursive {
		if err := f.DownloadDir(ctx, remote, dest, nil); err != nil {
			return nil, err
		}
		files, _ := filesUnder(dest)
		return files, nil
	}
	entries, err := call[gen.ListFilesResponse](f.b.c.api.ListFiles(ctx, f.b.id, &gen.ListFilesParams{Folder: &remote}))
	if err != nil {
		return nil, fileError("readdir", remote, err)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, fmt.Errorf("box: Download: %w", err)
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return nil, fmt.Errorf("box: Download: %w", err)
	}
	defer root.Close()
	var written []string
	for _, e := range entries.Files {
		if e.IsDir {
			continue
		}
		if !filepath.IsLocal(e.Name) || strings.ContainsAny(e.Name, `/\`) {
			return written, fmt.Errorf("box: Download: refusing file name %q from the server: it is not a plain file name", e.Name)
		}
		if err := f.downloadOne(ctx, root, e); err != nil {
			return written, err
		}
		written = append(written, filepath.Join(dest, e.Name))
	}
	return written, nil
}

// filesUnder lists the regular files below dir.
func filesUnder(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return err
	})
	return out, err
}

func (f *Files) downloadOne(ctx context.Context, root *os.Root, e gen.FileEntry) error {
	resp, err := f.b.c.api.DownloadFile(ctx, f.b.id, &gen.DownloadFileParams{Folder: e.Path})
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fileError("read", e.Path, newAPIError(resp))
	}
	defer drainAndClose(resp.Body)
	out, err := root.OpenFile(e.Name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("box: Download %s: %w", e.Path, err)
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return fmt.Errorf("box: Download %s: %w", e.Path, err)
	}
	return out.Close()
}
