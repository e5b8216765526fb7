package box

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path"
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
		abs := f.abs(p)
		return fileError("write", abs, f.upload(ctx, []uploadPart{{dest: abs, open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}}}))
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
	Name string
	Path string // absolute
	// Size and IsDir describe what a symbolic link leads to, when it
	// leads somewhere.
	Size    int64
	IsDir   bool
	ModTime time.Time
	// Type is what the entry is itself (a symbolic link is
	// FileTypeSymlink), when the server says; empty otherwise (the
	// cloud does not).
	Type FileType
	// Target is where a symbolic link points, when the server says.
	Target string
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
		out[i] = FileEntry{Name: e.Name, Path: e.Path, Size: e.Size, IsDir: e.IsDir, ModTime: t, Type: FileType(deref(e.Type)), Target: deref(e.Target)}
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
	// Progress, when set, is called as the file's content is sent, as
	// TransferParams.Progress is: bytes sent so far, and the file's size
	// (for a Reader, its Len() if it has one, else -1). A retried request
	// sends the file again, counting from 0. The Progress functions of
	// one Upload are never called from two goroutines at once.
	Progress func(done, total int64)
}

// Upload sends local files, or readers, to the box in one multipart
// request, streamed from disk. Each destination is replaced only once its
// file has arrived whole. What the box answers (a missing or refused
// destination...) is an *Error, which matches the io/fs errors as
// described there.
func (f *Files) Upload(ctx context.Context, files []UploadFile, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if len(files) == 0 {
		return invalidf("box: Upload needs at least one file")
	}
	parts := make([]uploadPart, len(files))
	replayable := true
	var mu sync.Mutex // one Progress call at a time
	for i, u := range files {
		if u.Destination == "" || (u.LocalPath == "") == (u.Reader == nil) {
			return invalidf("box: Upload file %d: Destination, and one of LocalPath and Reader, are required", i)
		}
		var open func() (io.ReadCloser, error)
		total := int64(-1)
		if u.Reader != nil {
			r := u.Reader
			if l, ok := r.(interface{ Len() int }); ok {
				total = int64(l.Len())
			}
			open = func() (io.ReadCloser, error) { return io.NopCloser(r), nil }
			replayable = false
		} else {
			fi, err := os.Stat(u.LocalPath)
			if err != nil {
				return fmt.Errorf("box: Upload: %w", err)
			}
			if !fi.Mode().IsRegular() {
				return invalidf("box: Upload: %s is not a regular file", u.LocalPath)
			}
			local := u.LocalPath
			total = fi.Size()
			open = func() (io.ReadCloser, error) { return os.Open(local) }
		}
		if progress := u.Progress; progress != nil {
			open = counted(open, func(n int64) {
				mu.Lock()
				defer mu.Unlock()
				progress(n, total)
			})
		}
		parts[i] = uploadPart{dest: f.abs(u.Destination), open: open}
	}
	return f.uploadWith(ctx, parts, replayable)
}

// counted wraps open so that what its reader yields is counted: report
// gets the bytes read so far from each reader it opens.
func counted(open func() (io.ReadCloser, error), report func(n int64)) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		rc, err := open()
		if err != nil {
			return nil, err
		}
		return &countReader{rc: rc, report: report}, nil
	}
}

// countReader counts what it reads and reports the count.
type countReader struct {
	rc     io.ReadCloser
	n      int64
	report func(n int64)
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	if n > 0 {
		c.n += int64(n)
		c.report(c.n)
	}
	return n, err
}

func (c *countReader) Close() error { return c.rc.Close() }

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
	req, err := f.b.c.newRequest(ctx, http.MethodPost, "/v2/box/"+encodeURIComponent(f.b.id)+"/files/upload", nil)
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
	// Recursive downloads the subdirectories too, at any depth, as
	// DownloadDir does: links to directories are not followed, and the
	// walk is bounded by MaxDepth and MaxEntries (DefaultMaxTreeDepth and
	// DefaultMaxTreeEntries when zero).
	Recursive  bool
	MaxDepth   int
	MaxEntries int
	// Progress, when set, is called as file content arrives, as
	// TransferParams.Progress is: bytes so far, against the total of the
	// sizes the listings give.
	Progress func(done, total int64)
}

// Download copies the files of one box directory (with Recursive, its
// whole tree) into a local directory and returns the local paths of the
// files it wrote, in the order of the box's listings; on an error, those
// it wrote before it. Files that were in the destination before are not
// in the list. File names from the server are used only if they name a
// file directly inside the directory they were listed in: a name such as
// "../x" or one that resolves through a symlink out of the destination
// is skipped. An entry that cannot be copied does not stop the others:
// the error is then a *SkippedError that says what was left out and why
// (see DownloadDir).
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
	progress := p.Progress
	if progress == nil {
		progress = func(int64, int64) {}
	}
	return f.downloadTree(ctx, "Download", remote, dest, p.Recursive, boundsOf(p.MaxDepth, p.MaxEntries), progress)
}
