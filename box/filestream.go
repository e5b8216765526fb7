package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/upstash/box-go/gen"
)

// Files of any size: readers, writers and directory trees that stream in
// constant memory.

// TransferParams configures a streaming transfer.
type TransferParams struct {
	// Progress, when set, is called as bytes move: done so far, and the
	// total when it is known (-1 otherwise). It is called often, never
	// from two goroutines at once: keep it quick.
	Progress func(done, total int64)

	// MaxDepth and MaxEntries bound a tree download (DownloadDir): how
	// many directories deep below the top it goes, and how many entries
	// it lists in all. Zero means DefaultMaxTreeDepth and
	// DefaultMaxTreeEntries. Other calls ignore them.
	MaxDepth   int
	MaxEntries int
}

func (p *TransferParams) bounds() treeBounds {
	if p == nil {
		return boundsOf(0, 0)
	}
	return boundsOf(p.MaxDepth, p.MaxEntries)
}

func (p *TransferParams) progress() func(done, total int64) {
	if p == nil || p.Progress == nil {
		return func(int64, int64) {}
	}
	return p.Progress
}

// FileReader streams the content of a box file. It is an io.ReadCloser
// and an io.WriterTo; Close it when done.
type FileReader struct {
	size     int64
	done     int64
	progress func(done, total int64)

	// A whole file streams from one download response.
	body io.ReadCloser

	// A range is read in chunks of at most rangeChunk through the read
	// endpoint (the download endpoint has no ranges), each decoded from
	// its response as it arrives.
	ctx      context.Context
	f        *Files
	path     string
	off, end int64 // the next byte to fetch, and where the range ends (-1: at EOF)
	chunk    b64Content
	open     bool  // chunk holds a response
	want     int64 // what the open chunk asked for, and
	got      int64 // what it has given so far
	eof      bool
	err      error // the first error of a ranged read, returned from then on
}

// rangeChunk is how much one request of a ranged read fetches, the most
// the server gives at once. It bounds no memory: a chunk streams.
const rangeChunk = MaxReadRange

// Open opens the file at p for reading. Its content streams from the box
// as it is read, in constant memory, whatever its size. params may be nil;
// its Progress is called as the content is read.
func (f *Files) Open(ctx context.Context, p string, params *TransferParams, opts ...Option) (*FileReader, error) {
	ctx = withCallOptions(ctx, opts)
	return f.open(ctx, p, params)
}

func (f *Files) open(ctx context.Context, p string, params *TransferParams) (*FileReader, error) {
	if p == "" {
		return nil, invalidf("box: path is required")
	}
	abs := f.abs(p)
	resp, err := f.b.c.api.DownloadFile(ctx, f.b.id, &gen.DownloadFileParams{Folder: abs})
	if err != nil {
		return nil, fileError("open", abs, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fileError("open", abs, newAPIError(resp))
	}
	return &FileReader{body: resp.Body, size: resp.ContentLength, progress: params.progress()}, nil
}

// OpenRange opens length bytes of the file at p, from offset on, for
// reading; length -1 reads to the end of the file. The range is fetched in
// requests of up to MaxReadRange bytes, each decoded as it arrives, so
// memory stays constant at any length. params may be nil; its Progress
// is called as the range is read.
func (f *Files) OpenRange(ctx context.Context, p string, offset, length int64, params *TransferParams, opts ...Option) (*FileReader, error) {
	ctx = withCallOptions(ctx, opts)
	if p == "" {
		return nil, invalidf("box: path is required")
	}
	if offset < 0 || length < -1 {
		return nil, invalidf("box: OpenRange offset must not be negative, and length must be -1 or more")
	}
	r := &FileReader{ctx: ctx, f: f, path: f.abs(p), off: offset, end: -1, size: -1, progress: params.progress()}
	if length >= 0 {
		r.size = length
		if length <= math.MaxInt64-offset {
			r.end = offset + length
		}
	}
	// The first chunk is asked for now, so that a missing file is an
	// error here.
	if err := r.next(); err != nil {
		return nil, err
	}
	return r, nil
}

// next opens the next chunk of a range.
func (r *FileReader) next() error {
	n := int64(rangeChunk)
	if r.end >= 0 {
		n = min(n, r.end-r.off)
	}
	if n <= 0 {
		r.eof = true
		return nil
	}
	enc := gen.ReadFileParamsEncodingBase64
	params := gen.ReadFileParams{Path: r.path, Encoding: &enc, Offset: &r.off, Length: &n}
	resp, err := r.f.b.c.api.ReadFile(r.ctx, r.f.b.id, &params)
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fileError("read", r.path, newAPIError(resp))
	}
	if err := r.chunk.reset(resp.Body); err != nil {
		r.chunk.Close()
		return fmt.Errorf("box: reading %s: %w", r.path, err)
	}
	r.open, r.want, r.got = true, n, 0
	return nil
}

// readRange reads the next bytes of a range.
func (r *FileReader) readRange(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.readChunks(p)
	if err != nil && err != io.EOF {
		// The chunk may be cut anywhere: nothing after it is read.
		r.err = err
		if r.open {
			r.chunk.Close()
			r.open = false
		}
	}
	return n, err
}

// readChunks reads the range on from the open chunk, fetching the next
// when it ends.
func (r *FileReader) readChunks(p []byte) (int, error) {
	for {
		if !r.open {
			if r.eof {
				return 0, io.EOF
			}
			if err := r.next(); err != nil {
				return 0, err
			}
			continue
		}
		n, err := r.chunk.Read(p)
		r.off += int64(n)
		r.got += int64(n)
		r.count(n)
		if r.got > r.want {
			return n, fmt.Errorf("box: reading %s: the server sent more than the %d bytes asked for", r.path, r.want)
		}
		if err == io.EOF {
			r.chunk.Close()
			r.open = false
			if r.got < r.want {
				r.eof = true // the file ends inside the chunk
			}
			err = nil
		}
		if err != nil {
			return n, fmt.Errorf("box: reading %s: %w", r.path, err)
		}
		if n > 0 || len(p) == 0 {
			return n, nil
		}
	}
}

// Read reads the next bytes of the file.
func (r *FileReader) Read(p []byte) (int, error) {
	if r.body != nil {
		n, err := r.body.Read(p)
		r.count(n)
		if err == io.EOF && r.size >= 0 && r.done != r.size {
			err = fmt.Errorf("box: the file's content ended after %d of %d bytes: %w", r.done, r.size, io.ErrUnexpectedEOF)
		}
		return n, err
	}
	return r.readRange(p)
}

func (r *FileReader) count(n int) {
	if n > 0 {
		r.done += int64(n)
		r.progress(r.done, r.size)
	}
}

// copyBufs holds the buffers of WriteTo and the upload writers.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// WriteTo writes the rest of the file to w.
func (r *FileReader) WriteTo(w io.Writer) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(w, onlyReader{r}, *bp)
}

// onlyReader hides WriteTo, so that io.CopyBuffer does not call it again.
type onlyReader struct{ io.Reader }

// Size is how many bytes the reader yields in all: the file's size for
// Open, and for OpenRange with a length that length, or less if the file
// ends first; -1 when unknown.
func (r *FileReader) Size() int64 { return r.size }

// Close releases the reader. Closing before the end stops the transfer.
func (r *FileReader) Close() error {
	if r.body != nil {
		return r.body.Close()
	}
	if r.open {
		r.chunk.Close()
		r.open = false
	}
	r.eof = true
	return nil
}

// DownloadTo copies the file at p into w, streaming, and returns the
// number of bytes copied.
func (f *Files) DownloadTo(ctx context.Context, p string, w io.Writer, params *TransferParams, opts ...Option) (int64, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := f.open(ctx, p, params)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return r.WriteTo(w)
}

// WriteFrom replaces the file at p with what r holds, read to its end: any
// length, streamed in constant memory. The file is replaced only once all
// of it has arrived; an error from r leaves the old content. It returns
// the number of bytes it took from r, and once it returns it reads r no
// more, also when the box refused the write before it had all of it. A
// request whose body is a plain io.Reader cannot be sent again, so it is
// never retried.
func (f *Files) WriteFrom(ctx context.Context, p string, r io.Reader, params *TransferParams, opts ...Option) (int64, error) {
	ctx = withCallOptions(ctx, opts)
	if p == "" {
		return 0, invalidf("box: path is required")
	}
	if r == nil {
		return 0, invalidf("box: WriteFrom needs a reader")
	}
	total := int64(-1)
	if s, ok := r.(interface{ Len() int }); ok {
		total = int64(s.Len())
	}
	progress := params.progress()
	cr := &countReader{rc: io.NopCloser(r), report: func(n int64) { progress(n, total) }}
	part := uploadPart{dest: f.abs(p), open: func() (io.ReadCloser, error) { return cr, nil }}
	if err := f.uploadOnce(ctx, []uploadPart{part}); err != nil {
		return cr.n, fileError("write", part.dest, err)
	}
	return cr.n, nil
}

// Bounds of one upload request of a tree: files are sent in batches.
const (
	batchFiles = 256
	batchBytes = 64 << 20
)

// UploadDir copies the local directory tree at local into the box
// directory remote (relative to the working directory), creating it:
// every regular file and directory, keeping their relative paths.
// Symbolic links and special files are skipped. Files go in batches of
// multipart requests, streamed from disk (and read again if a request is
// retried). Progress counts bytes of file content, against their total.
func (f *Files) UploadDir(ctx context.Context, local, remote string, params *TransferParams, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if local == "" || remote == "" {
		return invalidf("box: UploadDir needs a local and a remote directory")
	}
	root := f.abs(remote)
	type file struct {
		rel  string
		size int64
	}
	var files []file
	var dirs []string
	var total int64
	err := filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(local, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, filepath.ToSlash(rel))
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			files = append(files, file{rel: filepath.ToSlash(rel), size: fi.Size()})
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("box: UploadDir: %w", err)
	}
	// Directories that will hold no file are made explicitly; the others
	// come with their files.
	holds := map[string]bool{}
	for _, fl := range files {
		for d := path.Dir(fl.rel); d != "." && !holds[d]; d = path.Dir(d) {
			holds[d] = true
		}
	}
	for _, d := range dirs {
		if !holds[d] {
			if err := f.Mkdir(ctx, path.Join(root, d), &MkdirParams{Parents: true}); err != nil {
				return err
			}
		}
	}
	progress := params.progress()
	var mu sync.Mutex // one Progress call at a time
	var offset int64
	var batch []uploadPart
	var batchSize int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := f.upload(ctx, batch)
		batch, batchSize = nil, 0
		return fileError("upload", root, err)
	}
	for _, fl := range files {
		localPath, base := filepath.Join(local, filepath.FromSlash(fl.rel)), offset
		// A file read again (a retried request) counts from where it
		// started: base, the size of the files before it.
		open := counted(func() (io.ReadCloser, error) { return os.Open(localPath) }, func(n int64) {
			mu.Lock()
			defer mu.Unlock()
			progress(base+n, total)
		})
		batch = append(batch, uploadPart{dest: path.Join(root, fl.rel), open: open})
		offset += fl.size
		batchSize += fl.size
		if len(batch) >= batchFiles || batchSize >= batchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// DownloadDir copies the box directory tree at remote (relative to the
// working directory) into the local directory local, creating it: every
// file and directory below, at any depth. Progress counts bytes of file
// content, against the total the listings give.
//
// The box is not trusted. Names from it are used only if they stay
// inside local: nothing is written through a symbolic link or outside
// it. A link to a file brings the file's content, as the box resolves
// it; a link to a directory is never followed, and is made again as a
// link only when it points, relatively, inside the tree (else it is
// skipped). The walk stops with ErrTreeTooDeep or ErrTreeTooLarge, before
// writing anything, past params.MaxDepth directories deep or
// params.MaxEntries entries (DefaultMaxTreeDepth and
// DefaultMaxTreeEntries when zero).
//
// An entry that cannot be copied (a FIFO or a device, a file the box
// may not read, a name that is not UTF-8 or not a plain name) does not
// stop the others: everything else is copied, and the error is a
// *SkippedError that lists what was left out and why.
func (f *Files) DownloadDir(ctx context.Context, remote, local string, params *TransferParams, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if remote == "" || local == "" {
		return invalidf("box: DownloadDir needs a remote and a local directory")
	}
	_, err := f.downloadTree(ctx, "DownloadDir", f.abs(remote), local, true, params.bounds(), params.progress())
	return err
}

// downloadTree copies the files of the box directory top into local,
// and with recursive the directories below at any depth, for the call
// named what. It returns the local paths of the files it wrote, in the
// order of the listings, and a *SkippedError when it left entries out.
func (f *Files) downloadTree(ctx context.Context, what, top, local string, recursive bool, bounds treeBounds, progress func(done, total int64)) ([]string, error) {
	t, err := f.walkTree(ctx, what, top, recursive, bounds)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(local, 0o755); err != nil {
		return nil, fmt.Errorf("box: %s: %w", what, err)
	}
	root, err := os.OpenRoot(local)
	if err != nil {
		return nil, fmt.Errorf("box: %s: %w", what, err)
	}
	defer root.Close()
	for _, d := range t.dirs {
		if err := root.MkdirAll(filepath.FromSlash(d), 0o755); err != nil {
			return nil, fmt.Errorf("box: %s: %w", what, err)
		}
	}
	var mu sync.Mutex
	var done int64
	// The files come in on several goroutines; Progress is called from
	// one at a time, and skips are noted under the same lock.
	report := func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		done += n
		progress(done, t.total)
	}
	// A few files at a time: many small files are bound by round trips.
	work := make(chan int)
	wrote := make([]bool, len(t.files))
	errs := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range min(8, len(t.files)) {
		wg.Go(func() {
			for i := range work {
				fl := t.files[i]
				remote := path.Join(top, fl.rel)
				err := f.downloadInto(ctx, what, root, remote, filepath.FromSlash(fl.rel), report)
				var one *entryFailure
				switch {
				case err == nil:
					wrote[i] = true
				case errors.As(err, &one):
					// Noted, unless the copy is ending anyway: then
					// its error is the first failure's, or ctx's.
					if ctx.Err() == nil {
						mu.Lock()
						t.skip(remote, entryError(path.Base(fl.rel), one.err))
						mu.Unlock()
					}
				default:
					select {
					case errs <- err:
					default:
					}
					cancel()
				}
			}
		})
	}
feed:
	for i := range t.files {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	var written []string
	for i, fl := range t.files {
		if wrote[i] {
			written = append(written, filepath.Join(local, filepath.FromSlash(fl.rel)))
		}
	}
	select {
	case err := <-errs:
		return written, err
	default:
	}
	if err := ctx.Err(); err != nil {
		return written, err
	}
	// Links last: no file is ever written through one.
	for _, l := range t.links {
		if err := makeLink(root, l); err != nil {
			t.skip(path.Join(top, l.rel), fmt.Errorf("%w: %w", ErrLinkToDir, err))
		}
	}
	if len(t.skipped) > 0 {
		sortSkipped(t.skipped)
		return written, &SkippedError{Op: what, Dir: top, Skipped: t.skipped}
	}
	return written, nil
}

// makeLink makes the link l under root, replacing a link already there
// but nothing else.
func makeLink(root *os.Root, l treeLink) error {
	rel, target := filepath.FromSlash(l.rel), filepath.FromSlash(l.target)
	if fi, err := root.Lstat(rel); err == nil {
		if fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("making it again: %s is already there and is not a link", filepath.Join(root.Name(), rel))
		}
		if old, err := root.Readlink(rel); err == nil && old == target {
			return nil
		}
		if err := root.Remove(rel); err != nil {
			return fmt.Errorf("making it again: %w", err)
		}
	}
	if err := root.Symlink(target, rel); err != nil {
		return fmt.Errorf("making it again: %w", err)
	}
	return nil
}

// entryFailure is a failure of one file of a tree download that leaves
// the others to go on: the box refused that file, or the destination
// has a link where it goes.
type entryFailure struct{ err error }

func (e *entryFailure) Error() string { return e.err.Error() }
func (e *entryFailure) Unwrap() error { return e.err }

// downloadInto streams the box file remote into rel under root. The file
// is written under a temporary name beside rel and renamed into place when
// it is whole: a download that fails, or is cancelled because another
// failed, leaves no part of a file behind, nor a cut one in place of a
// file that was there before. A symbolic link at rel is refused. A
// failure of this file alone is an *entryFailure.
func (f *Files) downloadInto(ctx context.Context, what string, root *os.Root, remote, rel string, report func(int64)) error {
	// A link in the destination is neither written through nor replaced.
	if fi, err := root.Lstat(rel); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return &entryFailure{fmt.Errorf("box: %s %s: %s is a symbolic link: refusing to write through it or replace it", what, remote, filepath.Join(root.Name(), rel))}
	}
	r, err := f.open(ctx, remote, nil)
	if err != nil {
		if entryFault(err) {
			return &entryFailure{err}
		}
		return err
	}
	defer r.Close()
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".box-download-"+strconv.FormatUint(rand.Uint64(), 36))
	out, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("box: %s %s: %w", what, remote, err)
	}
	fail := func(err error) error {
		out.Close()
		_ = root.Remove(tmp)
		return fmt.Errorf("box: %s %s: %w", what, remote, err)
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	for {
		n, rerr := r.Read(*bp)
		if n > 0 {
			if _, err := out.Write((*bp)[:n]); err != nil {
				return fail(err)
			}
			report(int64(n))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
	}
	if err := out.Close(); err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("box: %s %s: %w", what, remote, err)
	}
	if err := root.Rename(tmp, rel); err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("box: %s %s: %w", what, remote, err)
	}
	return nil
}

// uploadOnce is upload for parts that can be read only once: the request
// is never retried.
func (f *Files) uploadOnce(ctx context.Context, parts []uploadPart) error {
	return f.uploadWith(ctx, parts, false)
}

// fileError puts err, an error of a file call on box path p, in an
// *fs.PathError that names the call and the path. What an *Error means
// for io/fs (fs.ErrNotExist and the others) is its own Is method's to
// say, so that it holds whichever way the error comes: this only adds
// the operation and the path.
func fileError(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	var ae *Error
	if errors.As(err, &ae) {
		return &fs.PathError{Op: op, Path: p, Err: err}
	}
	return err
}
