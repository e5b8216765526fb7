package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/upstash/box-go/box"
)

// box cp moves files and trees as tar streams through an exec session:
// tar in the box writes or reads the stream, and this side makes or
// unpacks it itself. That keeps what the file API cannot carry (modes,
// symbolic links, empty directories, modification times), and a tree of
// any number of files is one stream rather than a request per file.
//
// A box without tar falls back to the file API, which keeps contents and
// directories only: box cp says so once.

// Scripts run in the box with sh -c. $1 and $2 are their arguments; a
// missing tar exits errNoTar's status.
const (
	// tarIn unpacks standard input into the directory $1, made if
	// missing. umask 0 keeps the archive's modes as they are.
	tarIn = `command -v tar >/dev/null 2>&1 || { echo "box cp: no tar in this box" >&2; exit 127; }
mkdir -p -- "$1" || exit 1
umask 0
exec tar -x -o -f - -C "$1"`
	// tarOut writes the entry $2 of the directory $1, and everything
	// under it, to standard output; $3, when "h", follows $2 itself if it
	// is a link. tar's -h would follow every link under it too, so a
	// directory is named "$2/.", which tar enters whatever $2 is (a link
	// included) and archives as $2's entries; -h is kept for a file,
	// which has nothing under it.
	tarOut = `command -v tar >/dev/null 2>&1 || { echo "box cp: no tar in this box" >&2; exit 127; }
cd -- "$1" || exit 1
if [ "$3" = h ] && [ -d "$2" ]; then exec tar -c -f - "$2/."; fi
if [ "$3" = h ]; then exec tar -c -h -f - "$2"; fi
exec tar -c -f - "$2"`
	noTarStatus = 127
)

// errNoTar is the failure of a box that has no tar.
var errNoTar = errors.New("no tar in the box")

// maxTarStderr bounds what is kept of tar's standard error in the box.
const maxTarStderr = 64 << 10

// boxTar is tar running in a box, with the other end of its stream.
type boxTar struct {
	wait   func() error
	stdin  io.WriteCloser // tarIn's archive
	stdout io.Reader      // tarOut's archive
}

// startTar runs script in b with args. Its standard error is kept, and a
// failure of the script (tar's, or no tar: errNoTar) is the error of
// wait, with what tar printed.
func startTar(ctx context.Context, b *box.Box, script string, args ...string) (*boxTar, error) {
	s, err := b.Exec.Session(ctx, &box.SessionParams{Argv: append([]string{"sh", "-c", script, "sh"}, args...)})
	if err != nil {
		return nil, err
	}
	var stderr limitedBuffer
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(&stderr, s.Stderr)
		close(done)
	}()
	t := &boxTar{stdin: s.Stdin, stdout: s.Stdout}
	t.wait = func() error {
		defer s.Close()
		<-done
		code, err := s.Wait(ctx)
		switch {
		case err != nil:
			return err
		case code == noTarStatus && strings.Contains(stderr.String(), "no tar in this box"):
			return errNoTar
		case code != 0:
			return &tarError{code: code, stderr: strings.TrimSpace(stderr.String())}
		}
		return nil
	}
	return t, nil
}

// tarError is tar in a box exiting with a failure: code, and what it
// printed.
type tarError struct {
	code   int
	stderr string
}

func (e *tarError) Error() string {
	return fmt.Sprintf("tar in the box exited %d: %s", e.code, e.stderr)
}

// warnings prints what tar said, one warning a line: tar skips what it
// cannot read, says so, and exits with a failure when it is done.
func (e *tarError) warnings(w *warner, where string) {
	for _, l := range strings.Split(e.stderr, "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.Contains(l, "Exiting with failure status") {
			continue
		}
		w.add(fmt.Sprintf("box: warning: skipped in %s: %s\n", safe(where), safe(l)))
	}
}

// limitedBuffer keeps the first maxTarStderr bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := maxTarStderr - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// abs is p in b, absolute: relative paths are from b's working directory.
func abs(b *box.Box, p string) string {
	if p == "" {
		return b.Cwd()
	}
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(b.Cwd(), p)
}

// splitBox splits the absolute box path p into the directory tar runs
// in and the name it archives ("." for the root).
func splitBox(p string) (dir, name string) {
	if p == "/" {
		return "/", "."
	}
	return path.Dir(p), "./" + path.Base(p)
}

// copyStats counts what a copy moved.
type copyStats struct {
	entries int64
	bytes   int64
}

// warner gathers a warning for each entry a copy leaves out, printed
// when the copy is done (not across its progress bar).
type warner struct {
	a     *app
	n     int
	lines []string
}

func (w *warner) skip(name, why string) {
	w.add(fmt.Sprintf("box: warning: skipped %s: %s\n", safe(name), safeLines(why)))
}

func (w *warner) add(line string) {
	w.n++
	if len(w.lines) < 1000 {
		w.lines = append(w.lines, line)
	} else if len(w.lines) == 1000 {
		w.lines = append(w.lines, "box: warning: more entries were skipped\n")
	}
}

// flush prints the warnings.
func (w *warner) flush() {
	for _, l := range w.lines {
		fmt.Fprint(w.a.stderr, l)
	}
	w.lines = nil
}

// --- this machine to a box

// tarWriter writes a local tree (or file, or link) as a tar stream whose
// top entry is named top.
type tarWriter struct {
	w      *warner
	report func(n int64)
	stats  copyStats
}

// write archives the local path src, named top, into tw. A link is
// archived as a link: nothing is followed.
func (t *tarWriter) write(tw *tar.Writer, src, top string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return t.entry(tw, src, top, fi)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == src {
				return err
			}
			t.w.skip(p, err.Error())
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := top
		if rel != "." {
			name = path.Join(top, filepath.ToSlash(rel))
		}
		info := fi
		if p != src {
			if info, err = d.Info(); err != nil {
				t.w.skip(p, err.Error())
				return nil
			}
		}
		return t.entry(tw, p, name, info)
	})
}

// entry archives one local file p as name.
func (t *tarWriter) entry(tw *tar.Writer, p, name string, fi fs.FileInfo) error {
	link := ""
	switch m := fi.Mode(); {
	case m.IsDir(), m.IsRegular():
	case m&fs.ModeSymlink != 0:
		var err error
		if link, err = os.Readlink(p); err != nil {
			t.w.skip(p, err.Error())
			return nil
		}
	default:
		t.w.skip(p, "not a file, a directory or a symbolic link ("+m.Type().String()+")")
		return nil
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		t.w.skip(p, err.Error())
		return nil
	}
	// The box's user owns what it unpacks; this machine's names and ids
	// mean nothing there.
	h.Name, h.Uid, h.Gid, h.Uname, h.Gname = name, 0, 0, "", ""
	h.Mode = int64(fi.Mode().Perm()) | setIDBits(fi.Mode())
	// Whole seconds, as tar keeps them (the writer would round up).
	h.ModTime, h.AccessTime, h.ChangeTime = fi.ModTime().Truncate(time.Second), time.Time{}, time.Time{}
	if fi.IsDir() {
		h.Name += "/"
	}
	if !fi.Mode().IsRegular() {
		t.stats.entries++
		return tw.WriteHeader(h)
	}
	f, err := os.Open(p)
	if err != nil {
		t.w.skip(p, err.Error())
		return nil
	}
	defer f.Close()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	// The header promised fi.Size() bytes: a file that shrank since is
	// padded, one that grew is cut, and the archive stays whole.
	n, err := io.Copy(tw, io.LimitReader(&countingReader{r: f, report: t.report}, h.Size))
	if err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	if n < h.Size {
		t.w.skip(p, "it shrank while it was copied")
		if _, err := io.CopyN(tw, zeros{}, h.Size-n); err != nil {
			return err
		}
	}
	t.stats.entries++
	t.stats.bytes += n
	return nil
}

// setIDBits are the set-id and sticky bits of m as tar writes them.
func setIDBits(m fs.FileMode) int64 {
	var b int64
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countingReader struct {
	r      io.Reader
	report func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 && c.report != nil {
		c.report(int64(n))
	}
	return n, err
}

// uploadTar copies the local src into the box as the absolute path dest,
// with tar in the box.
func (a *app) uploadTar(ctx context.Context, b *box.Box, src, dest string, w *warner) (copyStats, error) {
	t, err := startTar(ctx, b, tarIn, path.Dir(dest))
	if err != nil {
		return copyStats{}, err
	}
	bar := a.bar("uploading", -1)
	var done int64
	tw := &tarWriter{w: w, report: func(n int64) {
		if bar != nil {
			done += n
			_ = bar.Set64(done)
		}
	}}
	werr := func() error {
		bw := bufio.NewWriterSize(t.stdin, 1<<20)
		tarw := tar.NewWriter(bw)
		if err := tw.write(tarw, src, path.Base(dest)); err != nil {
			return err
		}
		if err := tarw.Close(); err != nil {
			return err
		}
		return bw.Flush()
	}()
	// The stream ends either way: tar in the box then exits, with what
	// it says of a cut archive when werr is set.
	_ = t.stdin.Close()
	go io.Copy(io.Discard, t.stdout)
	err = t.wait()
	finish(bar)
	// A box without tar ends the session before the stream is written:
	// the write fails, but the reason is that there is no tar.
	if werr != nil && !errors.Is(err, errNoTar) {
		return tw.stats, werr
	}
	return tw.stats, err
}

// --- a box to this machine

// unpacker unpacks a tar stream from a box into a local directory. The
// box is not trusted: every name must stay under the top entry, nothing
// is written through a symbolic link (links are made last), and only
// directories, regular files, symbolic links and hard links to files of
// the same stream are made; the rest is skipped with a warning.
type unpacker struct {
	root   *os.Root // the destination's parent
	from   string   // the directory of the box the stream's names are in
	top    string   // the stream's name for the destination
	as     string   // the destination's name in root
	w      *warner
	report func(int64)
	stats  copyStats

	dirs  []dirMeta
	links []*tar.Header
	made  map[string]bool // directories known to be there

	last     *os.Root // the directory files were last written to
	lastName string
}

// dirMeta is what a directory gets once everything in it is written.
type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

// boxName is the path in the box of the stream's name, for warnings.
func (u *unpacker) boxName(name string) string { return path.Join(u.from, name) }

// local maps a name of the stream to a name under root, or reports why
// it cannot be.
func (u *unpacker) local(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", errors.New("the name is not UTF-8")
	}
	n := path.Clean(name)
	var rel string
	switch {
	case n == u.top:
	case u.top == ".":
		rel = n
	case strings.HasPrefix(n, u.top+"/"):
		rel = n[len(u.top)+1:]
	default:
		return "", errors.New("the name is outside the tree copied")
	}
	if rel != "" && (!fs.ValidPath(rel) || strings.ContainsRune(rel, '\\') && filepath.Separator == '\\') {
		return "", errors.New("not a plain name below the tree copied")
	}
	if rel == "" {
		return u.as, nil
	}
	return filepath.Join(u.as, filepath.FromSlash(rel)), nil
}

func (u *unpacker) unpack(r io.Reader) error {
	defer u.closeDir()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the stream from the box: %w", err)
		}
		name, err := u.local(h.Name)
		if err != nil {
			u.w.skip(u.boxName(h.Name), err.Error())
			continue
		}
		mode := h.FileInfo().Mode()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := u.mkdirAll(name); err != nil {
				u.w.skip(u.boxName(h.Name), err.Error())
				continue
			}
			// Written into first, given its mode last (a read-only
			// directory is filled before it becomes one).
			if err := u.root.Chmod(name, 0o700); err != nil {
				u.w.skip(u.boxName(h.Name), err.Error())
				continue
			}
			u.dirs = append(u.dirs, dirMeta{name, mode, h.ModTime})
			u.stats.entries++
		case tar.TypeReg, tar.TypeRegA:
			if err := u.file(tr, name, mode, h.ModTime); err != nil {
				var fe *fatalError
				if errors.As(err, &fe) {
					return fe.err
				}
				u.w.skip(u.boxName(h.Name), err.Error())
				continue
			}
			u.stats.entries++
			u.stats.bytes += h.Size
		case tar.TypeSymlink, tar.TypeLink:
			u.links = append(u.links, h)
		default:
			u.w.skip(u.boxName(h.Name), kind(h.Typeflag)+": only files, directories and links are copied")
		}
	}
	// Links last: no file of the stream is written through one.
	for _, h := range u.links {
		name, _ := u.local(h.Name)
		var err error
		if h.Typeflag == tar.TypeSymlink {
			err = u.symlink(name, h.Linkname)
		} else {
			err = u.hardlink(name, h.Linkname)
		}
		if err != nil {
			u.w.skip(u.boxName(h.Name), err.Error())
			continue
		}
		u.stats.entries++
	}
	// Deepest first, so that a directory's time is set after its
	// children are.
	slices.SortStableFunc(u.dirs, func(x, y dirMeta) int { return len(y.name) - len(x.name) })
	for _, d := range u.dirs {
		if err := u.root.Chmod(d.name, d.mode); err != nil {
			u.w.skip(d.name, err.Error())
		}
		_ = u.root.Chtimes(d.name, d.mtime, d.mtime)
	}
	return nil
}

// kind names a tar entry type that is not copied.
func kind(t byte) string {
	switch t {
	case tar.TypeFifo:
		return "a FIFO"
	case tar.TypeChar, tar.TypeBlock:
		return "a device"
	}
	return "an entry of type " + strconv.QuoteRune(rune(t))
}

// fatalError is a failure that ends a copy: the stream broke, or the
// disk would not take it.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

// file writes the content of r as name: under a temporary name beside it,
// renamed into place when whole. A failure that ends the copy is a
// *fatalError; any other concerns this file alone.
func (u *unpacker) file(r io.Reader, name string, mode fs.FileMode, mtime time.Time) error {
	d, err := u.dir(filepath.Dir(name))
	if err != nil {
		return err
	}
	base := filepath.Base(name)
	tmp := ".box-cp-" + strconv.FormatUint(rand.Uint64(), 36)
	out, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, &countingReader{r: r, report: u.report}); err != nil {
		out.Close()
		_ = d.Remove(tmp)
		return &fatalError{fmt.Errorf("copying %s: %w", name, err)}
	}
	if err := out.Chmod(mode); err != nil {
		out.Close()
		_ = d.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		_ = d.Remove(tmp)
		return &fatalError{err}
	}
	_ = d.Chtimes(tmp, mtime, mtime)
	if err := d.Rename(tmp, base); err != nil {
		_ = d.Remove(tmp)
		return err // a directory there, for one
	}
	return nil
}

// dir returns the directory name under root, made if missing, opened as
// a root of its own: the files of one directory come one after another,
// and each is then one step from it rather than a walk from the top.
func (u *unpacker) dir(name string) (*os.Root, error) {
	if u.last != nil && u.lastName == name {
		return u.last, nil
	}
	if err := u.mkdirAll(name); err != nil {
		return nil, err
	}
	d, err := u.root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	u.closeDir()
	u.last, u.lastName = d, name
	return d, nil
}

func (u *unpacker) closeDir() {
	if u.last != nil {
		u.last.Close()
		u.last = nil
	}
}

// mkdirAll makes the directory name and its parents, once.
func (u *unpacker) mkdirAll(name string) error {
	if u.made[name] {
		return nil
	}
	if err := u.root.MkdirAll(name, 0o755); err != nil {
		return err
	}
	if u.made == nil {
		u.made = map[string]bool{}
	}
	u.made[name] = true
	return nil
}

// symlink makes name a link to target, as it is: it is never followed.
// It replaces a link already there, but nothing else.
func (u *unpacker) symlink(name, target string) error {
	if fi, err := u.root.Lstat(name); err == nil {
		if fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("%s is already there and is not a link", filepath.Join(u.root.Name(), name))
		}
		if err := u.root.Remove(name); err != nil {
			return err
		}
	}
	if err := u.root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return u.root.Symlink(filepath.FromSlash(target), name)
}

// hardlink links name to the file the stream named target, which the
// copy wrote.
func (u *unpacker) hardlink(name, target string) error {
	old, err := u.local(target)
	if err != nil {
		return fmt.Errorf("a hard link to %s: %w", target, err)
	}
	if fi, err := u.root.Lstat(old); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("a hard link to %s, which was not copied as a file", target)
	}
	_ = u.root.Remove(name)
	return u.root.Link(old, name)
}

// downloadTar copies the absolute box path src into the local path dest,
// with tar in the box.
func (a *app) downloadTar(ctx context.Context, b *box.Box, src, dest string, follow bool, w *warner) (copyStats, error) {
	dir, name := splitBox(src)
	h := ""
	if follow {
		h = "h"
	}
	t, err := startTar(ctx, b, tarOut, dir, name, h)
	if err != nil {
		return copyStats{}, err
	}
	_ = t.stdin.Close()
	parent := filepath.Dir(dest)
	root, err := os.OpenRoot(parent)
	if err != nil {
		return copyStats{}, errors.Join(err, t.wait())
	}
	defer root.Close()
	bar := a.bar("downloading", -1)
	var done int64
	u := &unpacker{root: root, from: dir, top: path.Clean(name), as: filepath.Base(dest), w: w, report: func(n int64) {
		if bar != nil {
			done += n
			_ = bar.Set64(done)
		}
	}}
	uerr := u.unpack(bufio.NewReaderSize(t.stdout, 1<<20))
	if uerr != nil {
		// What is left of the stream is not wanted: tar then stops.
		go io.Copy(io.Discard, t.stdout)
	}
	err = t.wait()
	finish(bar)
	if errors.Is(err, errNoTar) {
		return u.stats, err
	}
	if uerr != nil {
		return u.stats, uerr
	}
	var te *tarError
	if errors.As(err, &te) && u.stats.entries > 0 {
		// The copy of the rest stands.
		te.warnings(w, b.ID())
		err = nil
	}
	if err != nil {
		return u.stats, err
	}
	if u.stats.entries == 0 && w.n == 0 {
		return u.stats, fmt.Errorf("%s: nothing came from the box", src)
	}
	return u.stats, nil
}

// --- a box to a box

// relayTar copies the absolute path src of box from to the absolute path
// dest of box to: one stream, from tar in one box to tar in the other,
// renamed on its way.
func (a *app) relayTar(ctx context.Context, from *box.Box, src string, to *box.Box, dest string, follow bool, w *warner) (copyStats, error) {
	dir, name := splitBox(src)
	h := ""
	if follow {
		h = "h"
	}
	out, err := startTar(ctx, from, tarOut, dir, name, h)
	if err != nil {
		return copyStats{}, err
	}
	_ = out.stdin.Close()
	in, err := startTar(ctx, to, tarIn, path.Dir(dest))
	if err != nil {
		return copyStats{}, errors.Join(err, out.wait())
	}
	var stats copyStats
	top, as := path.Clean(name), path.Base(dest)
	rename := func(n string) (string, bool) {
		n = path.Clean(n)
		switch {
		case n == top:
			return as, true
		case top == ".":
			return path.Join(as, n), fs.ValidPath(n)
		case strings.HasPrefix(n, top+"/") && fs.ValidPath(n[len(top)+1:]):
			return path.Join(as, n[len(top)+1:]), true
		}
		return "", false
	}
	rerr := func() error {
		bw := bufio.NewWriterSize(in.stdin, 1<<20)
		tr, tw := tar.NewReader(bufio.NewReaderSize(out.stdout, 1<<20)), tar.NewWriter(bw)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				if err := tw.Close(); err != nil {
					return err
				}
				return bw.Flush()
			}
			if err != nil {
				return fmt.Errorf("reading the stream from %s: %w", from.ID(), err)
			}
			n, ok := rename(h.Name)
			if !ok {
				w.skip(h.Name, "not a plain name below the tree copied")
				continue
			}
			switch h.Typeflag {
			case tar.TypeDir, tar.TypeReg, tar.TypeRegA, tar.TypeSymlink:
			case tar.TypeLink:
				l, ok := rename(h.Linkname)
				if !ok {
					w.skip(h.Name, "a hard link out of the tree copied")
					continue
				}
				h.Linkname = l
			default:
				w.skip(h.Name, kind(h.Typeflag)+": only files, directories and links are copied")
				continue
			}
			h.Name, h.Uid, h.Gid, h.Uname, h.Gname = n, 0, 0, "", ""
			if h.Typeflag == tar.TypeDir {
				h.Name += "/"
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			n64, err := io.Copy(tw, tr)
			if err != nil {
				return err
			}
			stats.entries++
			stats.bytes += n64
		}
	}()
	_ = in.stdin.Close()
	if rerr != nil {
		go io.Copy(io.Discard, out.stdout)
	}
	go io.Copy(io.Discard, in.stdout)
	oerr, ierr := out.wait(), in.wait()
	switch {
	case errors.Is(oerr, errNoTar):
		return stats, fmt.Errorf("%s: %w", from.ID(), oerr)
	case errors.Is(ierr, errNoTar):
		return stats, fmt.Errorf("%s: %w", to.ID(), ierr)
	case rerr != nil:
		return stats, rerr
	case ierr != nil:
		return stats, ierr
	case oerr != nil:
		var te *tarError
		if !errors.As(oerr, &te) || stats.entries == 0 {
			return stats, oerr
		}
		te.warnings(w, from.ID())
	}
	return stats, nil
}
