package box

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/upstash/box-go/gen"
)

// Walking a box's tree to download it. Everything in a listing comes from
// the box, which may be hostile: a link to "." in every directory, a
// million names, a FIFO, a name the API cannot carry. The walk never
// follows a link to a directory, stops at bounds, and sets aside what it
// cannot copy instead of failing the whole tree for it.

// Bounds of a tree download when TransferParams (or DownloadParams) set
// none.
const (
	// DefaultMaxTreeDepth is how many directories deep below the top a
	// tree download goes.
	DefaultMaxTreeDepth = 256
	// DefaultMaxTreeEntries is how many entries (files, directories,
	// links, and those skipped) a tree download lists at most.
	DefaultMaxTreeEntries = 1_000_000
)

var (
	// ErrTreeTooDeep is the error of a tree download, before it writes
	// anything, when the tree holds a directory deeper than its bound.
	ErrTreeTooDeep = errors.New("box: the tree is deeper than the bound of the download")
	// ErrTreeTooLarge is the error of a tree download, before it writes
	// anything, when the tree holds more entries than its bound.
	ErrTreeTooLarge = errors.New("box: the tree holds more entries than the bound of the download")

	// ErrLinkToDir is why a tree download skipped a symbolic link to a
	// directory: such links are never followed, and one is made again
	// as a link only when it points, relatively, to somewhere inside the
	// tree.
	ErrLinkToDir = errors.New("a symbolic link to a directory, not followed")
	// ErrNotRegular is why a tree download skipped a FIFO, a socket or a
	// device: only regular files are read.
	ErrNotRegular = errors.New("not a regular file (a FIFO, a socket or a device)")
	// ErrNameNotUTF8 is why a tree download skipped an entry whose name
	// is not UTF-8: names travel as JSON text, which replaces such bytes
	// with U+FFFD, so the entry cannot be asked for by its name.
	ErrNameNotUTF8 = errors.New("its name is not UTF-8, so it cannot be fetched by name")
	// ErrUnsafeName is why a tree download skipped a name that is not a
	// plain file name here: "", "." or "..", one with a slash or a
	// backslash, one a listing repeats, or one this system reserves.
	ErrUnsafeName = errors.New("not a plain file name")
)

// SkippedEntry is an entry of a box tree that a download left out, and
// why.
type SkippedEntry struct {
	// Path is the entry's path in the box, as the listing gave it (bytes
	// that are not UTF-8 show as U+FFFD). It comes from the box: escape
	// it before printing it to a terminal.
	Path string
	// Err says why: one of ErrLinkToDir, ErrNotRegular, ErrNameNotUTF8
	// or ErrUnsafeName (with errors.Is), or the error of the request
	// that failed for this entry alone, such as an *fs.PathError for
	// which errors.Is(err, fs.ErrPermission) holds.
	Err error
}

// SkippedError is the error of DownloadDir, and of Download, when every
// entry of the tree was copied but some: the files that could be copied
// are all there, and Skipped says, sorted by path, what is not and why.
// Failures that concern the whole copy (the box, the network, the local
// disk, a cancelled context, a bound) are returned as themselves instead.
//
// It does not unwrap to the entries' errors: a tree copied but for a few
// entries is not a tree that does not exist, so errors.Is(err,
// fs.ErrNotExist) stays false. Look at Skipped for the reasons.
type SkippedError struct {
	// Op is the call: "DownloadDir" or "Download".
	Op string
	// Dir is the box directory that was copied.
	Dir     string
	Skipped []SkippedEntry
}

// Error names the first few entries skipped, quoted, and how many there
// are.
func (e *SkippedError) Error() string {
	var b strings.Builder
	n := len(e.Skipped)
	fmt.Fprintf(&b, "box: %s %s: %d ", e.Op, strconv.Quote(e.Dir), n)
	if n == 1 {
		b.WriteString("entry skipped")
	} else {
		b.WriteString("entries skipped")
	}
	const shown = 5
	for i, s := range e.Skipped[:min(n, shown)] {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", strconv.Quote(s.Path), s.Err)
	}
	if n > shown {
		fmt.Fprintf(&b, "; and %d more", n-shown)
	}
	return b.String()
}

// treeBounds are the bounds of one tree download.
type treeBounds struct{ depth, entries int }

func boundsOf(depth, entries int) treeBounds {
	if depth <= 0 {
		depth = DefaultMaxTreeDepth
	}
	if entries <= 0 {
		entries = DefaultMaxTreeEntries
	}
	return treeBounds{depth, entries}
}

// treeFile is a file to download: rel, slash-separated, below the top.
type treeFile struct {
	rel  string
	size int64
}

// treeLink is a link to a directory to make again: at rel, pointing to
// target.
type treeLink struct{ rel, target string }

// tree is what a walk found.
type tree struct {
	files   []treeFile
	dirs    []string // below the top, parents before children
	links   []treeLink
	skipped []SkippedEntry
	total   int64 // bytes of the files, as listed
}

func (t *tree) skip(p string, err error) {
	t.skipped = append(t.skipped, SkippedEntry{Path: p, Err: err})
}

// entryFault reports whether err, from a request about one entry of a
// tree, concerns that entry alone: it is missing, forbidden, or not
// something that can be read. Anything else (the box gone, the network,
// the server, a cancelled context) concerns the whole copy.
func entryFault(err error) bool {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return true
	}
	var ae *Error
	return errors.As(err, &ae) && (ae.StatusCode == http.StatusBadRequest || ae.StatusCode == http.StatusUnprocessableEntity)
}

// entryError is err of the entry named name, an entry fault, with the
// reason when the name could not be carried.
func entryError(name string, err error) error {
	if strings.ContainsRune(name, utf8.RuneError) && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrNameNotUTF8, err)
	}
	return err
}

// walkTree lists the box directory top, and with recursive the
// directories below it, for the call named what. It follows no link to a
// directory, checks every name, and stops at the bounds. A directory
// below top that cannot be listed is skipped; top itself must be.
func (f *Files) walkTree(ctx context.Context, what, top string, recursive bool, bounds treeBounds) (*tree, error) {
	t := &tree{}
	type dir struct {
		rel   string
		depth int
	}
	queue := []dir{{}}
	entries := 0
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		full := path.Join(top, d.rel)
		list, err := call[gen.ListFilesResponse](f.b.c.api.ListFiles(ctx, f.b.id, &gen.ListFilesParams{Folder: &full}))
		if err != nil {
			err = fileError("readdir", full, err)
			if d.rel == "" || !entryFault(err) {
				return nil, err
			}
			t.skip(full, entryError(path.Base(d.rel), err))
			continue
		}
		if d.rel != "" {
			t.dirs = append(t.dirs, d.rel)
		}
		seen := make(map[string]bool, len(list.Files))
		for _, e := range list.Files {
			if entries++; entries > bounds.entries {
				return nil, fmt.Errorf("box: %s %s: more than %d entries (TransferParams.MaxEntries): %w", what, strconv.Quote(top), bounds.entries, ErrTreeTooLarge)
			}
			// The name as listed, unjoined: "../x" is reported as it came.
			p := strings.TrimSuffix(full, "/") + "/" + e.Name
			if !filepath.IsLocal(e.Name) || strings.ContainsAny(e.Name, `/\`) || seen[e.Name] {
				t.skip(p, fmt.Errorf("%w: %s", ErrUnsafeName, strconv.Quote(e.Name)))
				continue
			}
			seen[e.Name] = true
			rel := path.Join(d.rel, e.Name)
			typ := deref(e.Type)
			switch {
			case e.IsDir && !recursive:
				// Download without Recursive copies files alone.
			case e.IsDir && typ == gen.FileEntryTypeSymlink:
				if target, ok := insideLink(rel, deref(e.Target)); ok {
					t.links = append(t.links, treeLink{rel: rel, target: target})
				} else if e.Target != nil {
					t.skip(p, fmt.Errorf("%w: it points to %s, outside the tree", ErrLinkToDir, strconv.Quote(*e.Target)))
				} else {
					t.skip(p, ErrLinkToDir)
				}
			case e.IsDir:
				if typ == "" {
					// The server does not say what the entry is: a
					// link to a directory must not be entered.
					st, err := f.Stat(ctx, p, nil)
					switch {
					case err != nil && entryFault(err):
						t.skip(p, entryError(e.Name, err))
						continue
					case err != nil:
						return nil, err
					case st.Type == FileTypeSymlink:
						t.skip(p, ErrLinkToDir)
						continue
					}
				}
				if d.depth+1 > bounds.depth {
					return nil, fmt.Errorf("box: %s %s: %s is more than %d directories deep (TransferParams.MaxDepth): %w", what, strconv.Quote(top), strconv.Quote(p), bounds.depth, ErrTreeTooDeep)
				}
				queue = append(queue, dir{rel, d.depth + 1})
			case typ == gen.FileEntryTypeOther:
				t.skip(p, ErrNotRegular)
			default:
				// A file, or a link to one (or to nothing): its content
				// is read in the box, where the link resolves.
				t.files = append(t.files, treeFile{rel: rel, size: e.Size})
				t.total += e.Size
			}
		}
	}
	return t, nil
}

// insideLink reports whether a link at rel (slash-separated, below the
// top of a tree) to target stays inside the tree however it is resolved,
// and returns the target to make it with. Only a relative target of the
// form ../../a/b qualifies: it climbs no higher than the top, then only
// descends, and every directory it descends through is either one of the
// tree's or a link that was checked the same way.
func insideLink(rel, target string) (string, bool) {
	if target == "" || path.IsAbs(target) || strings.ContainsAny(target, "\\\x00") || strings.ContainsRune(target, utf8.RuneError) {
		return "", false
	}
	climb := 0
	descending := false
	for _, part := range strings.Split(target, "/") {
		switch part {
		case "..":
			if descending {
				return "", false
			}
			climb++
		case "", ".":
		default:
			if !filepath.IsLocal(part) {
				return "", false
			}
			descending = true
		}
	}
	if climb > strings.Count(rel, "/") {
		return "", false
	}
	return target, true
}

// sortSkipped sorts skipped entries by path.
func sortSkipped(s []SkippedEntry) {
	slices.SortStableFunc(s, func(a, b SkippedEntry) int { return strings.Compare(a.Path, b.Path) })
}
