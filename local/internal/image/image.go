// Package image pulls OCI images and keeps them unpacked, for boxes whose
// root is their runtime's image.
//
// A Store lives in a directory of boxd's (under its data directory):
//
//	roots/<id>/rootfs      the image's files, its layers applied in order
//	roots/<id>/image.json  what boxd keeps of the image (Image)
//	refs.json              each reference pulled → the id it gave
//	legacy.json            ids of an older store → the ids they are now
//	format                 the store's layout ("2")
//	tmp/                   pulls in progress
//
// An image's id is the digest of its manifest, which names its
// configuration and each of its layers by their digests: an id is what
// the image is. (It is not the configuration's digest alone: an image's
// configuration is public, and a registry can serve it, byte for byte,
// over layers of its own.) Two references (or two tags) of one image share
// one unpacked tree, and every box that runs the image shares it too,
// read-only. Pulls go through go-containerregistry:
// registry credentials come from the usual docker configuration
// (DOCKER_CONFIG, ~/.docker/config.json and its credential helpers), every
// blob is checked against its digest as it is read, and whiteouts and
// opaque directories are honoured. A tree is moved into roots only once it
// is complete: an interrupted or refused pull leaves nothing behind.
//
// A pull trusts its registry no further than the digests it serves: it
// fails when the registry stops sending (Options.StallTimeout), reads
// manifests and configurations only up to a bound (MaxManifestSize,
// MaxConfigSize), unpacks up to Options.MaxSize and keeps Options.MinFree
// free, and connects to no address of this machine or its networks but
// the registry's own (see Store.transport).
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Image is an unpacked image in a Store.
type Image struct {
	// ID is the hex sha256 digest of the image's manifest.
	ID string `json:"id"`
	// Ref is the reference it was first pulled by, and Digest its
	// manifest's digest ("sha256:" and ID).
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Config is its configuration's digest.
	Config string `json:"config,omitempty"`
	// Env and WorkingDir are the image configuration's.
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	// Size is what its files take on disk, in bytes (as unpacked).
	Size int64 `json:"size"`
	// Pulled is when it was unpacked.
	Pulled time.Time `json:"pulled"`
	// Root is the host directory of its files.
	Root string `json:"-"`
}

// PullError is a pull that failed: the reference, and why.
type PullError struct {
	Ref string
	Err error
}

func (e *PullError) Error() string { return fmt.Sprintf("image %s: %v", e.Ref, e.Err) }

func (e *PullError) Unwrap() error { return e.Err }

// ErrUnknown is returned by Lookup for an id the store does not have.
var ErrUnknown = errors.New("image: not in the store")

// record is an image's image.json.
type record struct {
	Image
	// Key says what the image's id is the digest of: keyManifest. A tree
	// whose record says otherwise, or whose id is not its digest, is not an
	// image of the store.
	Key string `json:"key,omitempty"`
}

// keyManifest is record.Key of a store keyed by manifests.
const keyManifest = "manifest"

// storeFormat is the store's layout: 2 keys images by their manifests'
// digests; 1 (no format file) keyed them by their configurations'.
const storeFormat = "2"

// Options configure a Store.
type Options struct {
	// Keychain gives registry credentials; nil is the docker configuration's
	// (authn.DefaultKeychain).
	Keychain authn.Keychain
	// StallTimeout fails a pull whose registry sends nothing for this long
	// while the pull waits for it (an answer, or more of one), with an
	// error that wraps ErrStalled. Zero is DefaultStallTimeout.
	StallTimeout time.Duration
	// MaxSize bounds what an image unpacks to, in bytes: its layers'
	// archives, uncompressed, added up (every file's bytes, and each
	// entry's header, of every layer, whited out or not). A pull fails
	// with an error that wraps ErrTooLarge as soon as it reads past it.
	// Zero is DefaultMaxSize (16 GiB), a negative value no bound.
	MaxSize int64
	// MinFree is the free space, in bytes, that a pull keeps on the
	// store's file system while it unpacks: it looks at it before it
	// starts and every 4 MiB written, and fails with an error that wraps
	// ErrNoSpace when less is left. Zero is no bound.
	MinFree int64
	// Prepare, when set, is called on an unpacked tree before it joins
	// the store, to make what the tree needs to be a box's root.
	Prepare func(root *os.Root) error
	// Log receives a line per pull.
	Log *slog.Logger
}

// Store is a directory of unpacked images.
type Store struct {
	dir  string
	opts Options

	pullMu sync.Mutex
	pulls  map[string]*pull // reference → the pull of it in flight

	mu     sync.Mutex // refs.json, legacy.json, and moving trees in and out of roots
	refs   map[string]string
	legacy map[string]string // id in a format 1 store → id now
}

// Open opens (making it if needed) the store in dir. Pulls that an earlier
// process left unfinished are removed.
func Open(dir string, opts Options) (*Store, error) {
	for _, d := range []string{dir, filepath.Join(dir, "roots"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "tmp")); err != nil {
		return nil, fmt.Errorf("image store: clear unfinished pulls: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	if opts.Keychain == nil {
		opts.Keychain = authn.DefaultKeychain
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	switch {
	case opts.MaxSize == 0:
		opts.MaxSize = DefaultMaxSize
	case opts.MaxSize < 0:
		opts.MaxSize = 1<<63 - 1
	}
	s := &Store{dir: dir, opts: opts, pulls: map[string]*pull{}, refs: map[string]string{}, legacy: map[string]string{}}
	for name, m := range map[string]map[string]string{"refs.json": s.refs, "legacy.json": s.legacy} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, fmt.Errorf("image store: %s: %w", filepath.Join(dir, name), err)
			}
		}
	}
	if err := s.migrate(); err != nil {
		return nil, fmt.Errorf("image store: move to format %s: %w", storeFormat, err)
	}
	return s, nil
}

// migrate brings a store of format 1, whose images were keyed by their
// configurations' digests, to format 2, keyed by their manifests'. No tree
// of format 1 is ever found by a pull: one may be the work of a registry
// that served a trusted image's configuration over its own layers.
//
// Each tree is re-keyed by the manifest digest its own image.json records.
// That digest is what the tree is: format 1 wrote it, beside the tree,
// from the manifest whose layers it had just unpacked, and a tree reached
// by another image's pull (the poisoning) kept the image.json of the pull
// that made it. So a poisoned tree moves to the hostile manifest's id, and
// the trusted reference no longer finds it. Of refs.json, a reference is
// kept only when it is the one that tree was pulled by (its image.json's
// Ref): another reference that found the tree by its configuration may
// have found the wrong one, and is asked of its registry again at its next
// use, which fetches blobs only if the store has no tree of what it names
// now. A box record keeps the old id of the tree it ran; legacy.json maps
// it to the id now, for Lookup alone.
//
// Each step is atomic and the steps can run again: a boxd killed halfway
// finishes the move at its next start. The format file is written last.
func (s *Store) migrate() error {
	format := filepath.Join(s.dir, "format")
	if b, err := os.ReadFile(format); err == nil && strings.TrimSpace(string(b)) == storeFormat {
		return nil
	}
	roots, legacy := filepath.Join(s.dir, "roots"), filepath.Join(s.dir, "legacy")
	if err := os.MkdirAll(legacy, 0o700); err != nil {
		return err
	}
	// Every tree not keyed by its manifest leaves roots first (those that
	// are were re-keyed by a move that was interrupted).
	ents, err := os.ReadDir(roots)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if _, err := s.lookup(e.Name()); err == nil {
			continue
		}
		if err := os.Rename(filepath.Join(roots, e.Name()), filepath.Join(legacy, e.Name())); err != nil {
			if err := s.trash(filepath.Join(roots, e.Name())); err != nil {
				return err
			}
		}
	}
	// The new id of each, recorded before any tree moves back.
	ents, err = os.ReadDir(legacy)
	if err != nil {
		return err
	}
	recs := map[string]*record{}
	for _, e := range ents {
		old := e.Name()
		rec, err := readRecord(filepath.Join(legacy, old))
		if err != nil || !validID(old) || !strings.HasPrefix(rec.Digest, "sha256:") || !validID(strings.TrimPrefix(rec.Digest, "sha256:")) {
			// No manifest to key it by: it was never a usable image.
			if err := s.trash(filepath.Join(legacy, old)); err != nil {
				return err
			}
			continue
		}
		recs[old] = rec
		s.legacy[old] = strings.TrimPrefix(rec.Digest, "sha256:")
	}
	if len(recs) > 0 {
		if err := saveJSON(filepath.Join(s.dir, "legacy.json"), s.legacy); err != nil {
			return err
		}
	}
	for old, rec := range recs {
		id := s.legacy[old]
		rec.ID, rec.Key, rec.Config = id, keyManifest, "sha256:"+old
		raw, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileSync(filepath.Join(legacy, old, "image.json.tmp"), raw); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(legacy, old, "image.json.tmp"), filepath.Join(legacy, old, "image.json")); err != nil {
			return err
		}
		err = os.Rename(filepath.Join(legacy, old), filepath.Join(roots, id))
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			// roots has that manifest already: this is a copy.
			err = s.trash(filepath.Join(legacy, old))
		}
		if err != nil {
			return err
		}
	}
	refs := map[string]string{}
	for ref, id := range s.refs {
		for _, cand := range []string{s.legacy[id], id} {
			if img, err := s.lookup(cand); err == nil && img.Ref == ref {
				refs[ref] = cand
				break
			}
		}
	}
	if !maps.Equal(refs, s.refs) {
		s.refs = refs
		if err := s.saveRefsLocked(); err != nil {
			return err
		}
	}
	if err := writeFileSync(format, []byte(storeFormat+"\n")); err != nil {
		return err
	}
	return os.Remove(legacy)
}

// trash removes dir, moving it out of where it is first so that a
// half-removed tree is never found.
func (s *Store) trash(dir string) error {
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "removed-")
	if err != nil {
		return err
	}
	if err := os.Rename(dir, filepath.Join(tmp, "tree")); err != nil {
		return err
	}
	return os.RemoveAll(tmp)
}

// Normalize returns ref in its full form (docker.io/library/node:lts for
// node:lts), or an error that says why it is not a reference.
func Normalize(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	repo := r.Context()
	reg := repo.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io" // as people write it
	}
	sep := ":"
	if _, ok := r.(name.Digest); ok {
		sep = "@"
	}
	return reg + "/" + repo.RepositoryStr() + sep + r.Identifier(), nil
}

// Get returns the image that ref names, pulling it if the store has not
// pulled ref before. A reference pulled before is not asked of its
// registry again: Pull does that. Concurrent calls for one reference pull
// once.
func (s *Store) Get(ctx context.Context, ref string) (*Image, error) {
	full, err := Normalize(ref)
	if err != nil {
		return nil, &PullError{Ref: ref, Err: err}
	}
	s.mu.Lock()
	id, ok := s.refs[full]
	s.mu.Unlock()
	if ok {
		if img, err := s.lookup(id); err == nil {
			return img, nil
		}
	}
	return s.Pull(ctx, full)
}

// pull is a pull in flight, which every caller that asks for its
// reference meanwhile waits for.
type pull struct {
	done    chan struct{} // closed once img and err are set
	img     *Image
	err     error
	cancel  context.CancelFunc
	waiting int // callers waiting for it; under Store.pullMu
}

// Pull asks ref's registry what ref names now, and unpacks it unless the
// store has it already. Concurrent pulls of one reference share one: it
// goes on while any of their callers waits for it, and stops once none
// does. A caller whose ctx ends stops waiting at once. A pull that failed,
// or that nobody waits for any more, is not joined: the next call starts
// one afresh.
func (s *Store) Pull(ctx context.Context, ref string) (*Image, error) {
	full, err := Normalize(ref)
	if err != nil {
		return nil, &PullError{Ref: ref, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, &PullError{Ref: full, Err: err}
	}
	s.pullMu.Lock()
	p := s.pulls[full]
	if p == nil {
		// The pull is shared: no one caller's ctx ends it.
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		p = &pull{done: make(chan struct{}), cancel: cancel}
		s.pulls[full] = p
		go func() {
			img, err := s.pull1(pctx, full)
			s.pullMu.Lock()
			if s.pulls[full] == p {
				delete(s.pulls, full)
			}
			s.pullMu.Unlock()
			p.img, p.err = img, err
			cancel()
			close(p.done)
		}()
	}
	p.waiting++
	s.pullMu.Unlock()
	select {
	case <-p.done:
		return p.img, p.err
	case <-ctx.Done():
		s.pullMu.Lock()
		if p.waiting--; p.waiting == 0 {
			p.cancel()
			if s.pulls[full] == p {
				delete(s.pulls, full)
			}
		}
		s.pullMu.Unlock()
		return nil, &PullError{Ref: full, Err: ctx.Err()}
	}
}

func (s *Store) pull1(ctx context.Context, ref string) (*Image, error) {
	fail := func(err error) (*Image, error) { return nil, &PullError{Ref: ref, Err: err} }
	r, err := name.ParseReference(ref)
	if err != nil {
		return fail(err)
	}
	tr := s.transport(r.Context().Registry)
	defer tr.CloseIdleConnections()
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(s.opts.Keychain),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
		remote.WithTransport(tr),
	}
	start := time.Now()
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return fail(err)
	}
	img, err := desc.Image()
	if err != nil {
		return fail(err)
	}
	// The image's id is its manifest's digest, which pins its
	// configuration and every layer: each blob is checked against the
	// manifest's digest of it as it is read. Knowing the image fetches no
	// blob.
	rawManifest, err := img.RawManifest()
	if err != nil {
		return fail(err)
	}
	digest, _, err := v1.SHA256(bytes.NewReader(rawManifest))
	if err != nil {
		return fail(err)
	}
	m, err := img.Manifest()
	if err != nil {
		return fail(err)
	}
	id := digest.Hex
	if have, err := s.lookup(id); err == nil {
		if err := s.setRef(ref, id); err != nil {
			return fail(err)
		}
		return have, nil
	}
	// The configuration is read whole: its size in the manifest, which
	// is all of it that is read, must be small.
	switch n := m.Config.Size; {
	case n < 0:
		return fail(fmt.Errorf("its manifest gives its configuration no size"))
	case n > MaxConfigSize:
		return fail(fmt.Errorf("%w: its manifest says its configuration is %s, more than the %s boxd reads", ErrTooLarge, sizeText(n), sizeText(MaxConfigSize)))
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return fail(fmt.Errorf("configuration: %w", err))
	}
	if cfg.OS != "" && cfg.OS != "linux" {
		return fail(fmt.Errorf("the image is for %s, not linux", cfg.OS))
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), id+"-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return fail(err)
	}
	size, err := unpack(rootfs, mutate.Extract(&sized{Image: img, max: s.opts.MaxSize}), &room{dir: tmp, minFree: s.opts.MinFree, max: s.opts.MaxSize})
	if err != nil {
		return fail(err)
	}
	if s.opts.Prepare != nil {
		root, err := os.OpenRoot(rootfs)
		if err != nil {
			return fail(err)
		}
		err = s.opts.Prepare(root)
		root.Close()
		if err != nil {
			return fail(fmt.Errorf("prepare its root: %w", err))
		}
	}
	out := &record{Key: keyManifest, Image: Image{ID: id, Ref: ref, Digest: digest.String(), Config: m.Config.Digest.String(), Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, Size: size, Pulled: time.Now().UTC()}}
	meta, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := writeFileSync(filepath.Join(tmp, "image.json"), meta); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	err = os.Rename(tmp, filepath.Join(s.dir, "roots", id))
	if err != nil && (errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY)) {
		err = nil // another reference to the same image got here first
	}
	s.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	if err := s.setRef(ref, id); err != nil {
		return fail(err)
	}
	s.opts.Log.Info("image pulled", "ref", ref, "id", id[:12], "config", out.Config, "size", size, "took", time.Since(start).Round(time.Millisecond))
	return s.lookup(id)
}

// Lookup returns the image with id, if the store has it. id may also be
// the id a box was given by a store of format 1 (its configuration's
// digest): Lookup finds the tree that box ran, under its id now.
func (s *Store) Lookup(id string) (*Image, error) {
	img, err := s.lookup(id)
	if errors.Is(err, ErrUnknown) {
		s.mu.Lock()
		now, ok := s.legacy[id]
		s.mu.Unlock()
		if ok {
			return s.lookup(now)
		}
	}
	return img, err
}

// Current returns the id an image has now: id itself, or for an id given
// by a store of format 1, the id of that tree now.
func (s *Store) Current(id string) string {
	s.mu.Lock()
	now, ok := s.legacy[id]
	s.mu.Unlock()
	if !ok {
		return id
	}
	if _, err := s.lookup(id); err == nil {
		return id // as Lookup: an image of that id comes first
	}
	return now
}

// lookup returns the image in roots/id, if it is one: a tree whose record
// says it is keyed by its manifest and whose manifest's digest is id.
func (s *Store) lookup(id string) (*Image, error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w: %q is not an image id", ErrUnknown, id)
	}
	dir := filepath.Join(s.dir, "roots", id)
	rec, err := readRecord(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrUnknown, id)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", id, err)
	}
	if rec.Key != keyManifest || rec.Digest != "sha256:"+id {
		return nil, fmt.Errorf("%w: %s (a tree not keyed by its manifest)", ErrUnknown, id)
	}
	img := rec.Image
	img.ID, img.Root = id, filepath.Join(dir, "rootfs")
	return &img, nil
}

// readRecord reads the image.json in dir.
func readRecord(dir string) (*record, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// List returns the store's images, oldest pull first.
func (s *Store) List() ([]*Image, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "roots"))
	if err != nil {
		return nil, err
	}
	var out []*Image
	for _, e := range ents {
		if img, err := s.lookup(e.Name()); err == nil {
			out = append(out, img)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pulled.Before(out[j].Pulled) })
	return out, nil
}

// Refs returns the references the store has pulled, and their ids.
func (s *Store) Refs() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.refs))
	for k, v := range s.refs {
		out[k] = v
	}
	return out
}

// Remove removes the images for which unused says so, and the references
// to them, and returns what it removed. The caller makes sure that no box
// it may start meanwhile runs one of them.
func (s *Store) Remove(unused func(*Image) bool) ([]*Image, error) {
	imgs, err := s.List()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []*Image
	var errs []error
	legacyGone := false
	for _, img := range imgs {
		if !unused(img) {
			continue
		}
		dir := filepath.Join(s.dir, "roots", img.ID)
		// Out of roots first, so that a half-removed tree is never an image.
		trash := filepath.Join(s.dir, "tmp", "removed-"+img.ID)
		if err := os.Rename(dir, trash); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(trash); err != nil {
			errs = append(errs, err)
		}
		for ref, id := range s.refs {
			if id == img.ID {
				delete(s.refs, ref)
			}
		}
		for old, id := range s.legacy {
			if id == img.ID {
				delete(s.legacy, old)
				legacyGone = true
			}
		}
		gone = append(gone, img)
	}
	if len(gone) > 0 {
		if err := s.saveRefsLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	if legacyGone {
		if err := saveJSON(filepath.Join(s.dir, "legacy.json"), s.legacy); err != nil {
			errs = append(errs, err)
		}
	}
	return gone, errors.Join(errs...)
}

func (s *Store) setRef(ref, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs[ref] == id {
		return nil
	}
	s.refs[ref] = id
	return s.saveRefsLocked()
}

func (s *Store) saveRefsLocked() error {
	return saveJSON(filepath.Join(s.dir, "refs.json"), s.refs)
}

// saveJSON replaces the file p with v, at once.
func saveJSON(p string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileSync(p+".tmp", raw); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

func writeFileSync(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func validID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// unpack writes the flattened image tar in r into dir and returns the bytes
// its files take. Every path is resolved inside dir (os.Root): an entry
// that would reach outside it through a link fails the unpack. Files
// belong to boxd, with the image's permission bits less setuid and setgid;
// devices are left out (a box has its own /dev). What it writes counts in
// space, which stops it when the disk is short.
func unpack(dir string, r io.ReadCloser, space *room) (int64, error) {
	defer r.Close()
	if err := space.check(); err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	var size int64
	type dirMode struct {
		name string
		mode fs.FileMode
	}
	var dirs []dirMode
	var links []*tar.Header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// Extract ends its archive also when it fails: its error
			// comes after the end.
			if _, err := io.Copy(io.Discard, r); err != nil {
				return 0, fmt.Errorf("read its layers: %w", err)
			}
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read its layers: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." {
			if h.Typeflag == tar.TypeDir {
				dirs = append(dirs, dirMode{".", fs.FileMode(h.Mode) & fs.ModePerm})
			}
			continue
		}
		if !fs.ValidPath(name) {
			return 0, fmt.Errorf("layer entry %q is outside the image", h.Name)
		}
		if err := space.wrote(entryCost); err != nil {
			return 0, err
		}
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		if parent := path.Dir(name); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return 0, fmt.Errorf("layer entry %s: %w", name, err)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return 0, fmt.Errorf("layer entry %s: %w", name, err)
			}
			if fi, err := root.Lstat(name); err != nil || !fi.IsDir() {
				return 0, fmt.Errorf("layer entry %s: a directory where the image has something else", name)
			}
			dirs = append(dirs, dirMode{name, mode})
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if errors.Is(err, fs.ErrExist) && isDir(root, name) {
				continue // an upper layer's directory, made for its entries
			}
			if err != nil {
				return 0, fmt.Errorf("layer entry %s: %w", name, err)
			}
			n, err := io.Copy(roomWriter{w: f, room: space}, tr)
			if err == nil {
				err = f.Chmod(mode)
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return 0, fmt.Errorf("layer entry %s: %w", name, err)
			}
			size += n
		case tar.TypeSymlink:
			err := root.Symlink(h.Linkname, name)
			if errors.Is(err, fs.ErrExist) && isDir(root, name) {
				continue // an upper layer's directory, made for its entries
			}
			if err != nil {
				return 0, fmt.Errorf("layer entry %s: %w", name, err)
			}
		case tar.TypeLink:
			// Extract yields the upper layers first: a link's target can
			// come later.
			links = append(links, h)
		default:
			// Devices and fifos: a box has its own /dev, and makes its
			// own fifos.
		}
	}
	for _, h := range links {
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		target := path.Clean(strings.TrimPrefix(h.Linkname, "/"))
		if !fs.ValidPath(target) {
			return 0, fmt.Errorf("layer entry %s links to %q, outside the image", name, h.Linkname)
		}
		if err := root.Link(target, name); err != nil {
			return 0, fmt.Errorf("layer entry %s: %w", name, err)
		}
	}
	// Directories keep the image's bits for the box, which is never
	// their owner; boxd, which is, may always fill and remove them.
	for _, d := range dirs {
		if err := root.Chmod(d.name, d.mode|0o700); err != nil {
			return 0, fmt.Errorf("layer entry %s: %w", d.name, err)
		}
	}
	return size, nil
}

func isDir(root *os.Root, name string) bool {
	fi, err := root.Lstat(name)
	return err == nil && fi.IsDir()
}
