// Package image pulls OCI images and keeps them unpacked, for boxes whose
// root is their runtime's image.
//
// A Store lives in a directory of boxd's (under its data directory):
//
//	roots/<id>/rootfs      the image's files, its layers applied in order
//	roots/<id>/image.json  what boxd keeps of the image (Image)
//	refs.json              each reference pulled → the id it gave
//	tmp/                   pulls in progress
//
// An image's id is the digest of its configuration, so two references (or
// two tags) of one image share one unpacked tree, and every box that runs
// the image shares it too, read-only. Pulls go through go-containerregistry:
// registry credentials come from the usual docker configuration
// (DOCKER_CONFIG, ~/.docker/config.json and its credential helpers), every
// blob is checked against its digest as it is read, and whiteouts and
// opaque directories are honoured. A tree is moved into roots only once it
// is complete: an interrupted or refused pull leaves nothing behind.
package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
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
	"golang.org/x/sync/singleflight"
)

// Image is an unpacked image in a Store.
type Image struct {
	// ID is the hex sha256 digest of the image's configuration.
	ID string `json:"id"`
	// Ref is the reference it was first pulled by, and Digest its
	// manifest's digest there.
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
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

// Options configure a Store.
type Options struct {
	// Keychain gives registry credentials; nil is the docker configuration's
	// (authn.DefaultKeychain).
	Keychain authn.Keychain
	// Transport carries registry requests; nil is http.DefaultTransport.
	Transport http.RoundTripper
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
	pull singleflight.Group

	mu   sync.Mutex // refs.json, and moving trees in and out of roots
	refs map[string]string
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
	s := &Store{dir: dir, opts: opts, refs: map[string]string{}}
	raw, err := os.ReadFile(filepath.Join(dir, "refs.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(raw, &s.refs); err != nil {
			return nil, fmt.Errorf("image store: %s: %w", filepath.Join(dir, "refs.json"), err)
		}
	}
	return s, nil
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
		if img, err := s.Lookup(id); err == nil {
			return img, nil
		}
	}
	return s.Pull(ctx, full)
}

// Pull asks ref's registry what ref names now, and unpacks it unless the
// store has it already. Concurrent pulls of one reference share one.
func (s *Store) Pull(ctx context.Context, ref string) (*Image, error) {
	full, err := Normalize(ref)
	if err != nil {
		return nil, &PullError{Ref: ref, Err: err}
	}
	ch := s.pull.DoChan(full, func() (any, error) {
		// The pull is shared: it is not cancelled with one caller.
		return s.pull1(context.WithoutCancel(ctx), full)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Image), nil
	case <-ctx.Done():
		return nil, &PullError{Ref: full, Err: ctx.Err()}
	}
}

func (s *Store) pull1(ctx context.Context, ref string) (*Image, error) {
	fail := func(err error) (*Image, error) { return nil, &PullError{Ref: ref, Err: err} }
	r, err := name.ParseReference(ref)
	if err != nil {
		return fail(err)
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(s.opts.Keychain),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
	}
	if s.opts.Transport != nil {
		opts = append(opts, remote.WithTransport(s.opts.Transport))
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
	// The configuration's digest is in the manifest: knowing the image
	// fetches no blob.
	m, err := img.Manifest()
	if err != nil {
		return fail(err)
	}
	cfgName := m.Config.Digest
	digest, err := img.Digest()
	if err != nil {
		return fail(err)
	}
	id := cfgName.Hex
	if have, err := s.Lookup(id); err == nil {
		if err := s.setRef(ref, id); err != nil {
			return fail(err)
		}
		return have, nil
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
	size, err := unpack(rootfs, mutate.Extract(img))
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
	out := &Image{ID: id, Ref: ref, Digest: digest.String(), Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, Size: size, Pulled: time.Now().UTC()}
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
	s.opts.Log.Info("image pulled", "ref", ref, "id", id[:12], "digest", out.Digest, "size", size, "took", time.Since(start).Round(time.Millisecond))
	return s.Lookup(id)
}

// Lookup returns the image with id, if the store has it.
func (s *Store) Lookup(id string) (*Image, error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w: %q is not an image id", ErrUnknown, id)
	}
	dir := filepath.Join(s.dir, "roots", id)
	raw, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrUnknown, id)
	}
	if err != nil {
		return nil, err
	}
	var img Image
	if err := json.Unmarshal(raw, &img); err != nil {
		return nil, fmt.Errorf("image %s: %w", id, err)
	}
	img.ID, img.Root = id, filepath.Join(dir, "rootfs")
	return &img, nil
}

// List returns the store's images, oldest pull first.
func (s *Store) List() ([]*Image, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "roots"))
	if err != nil {
		return nil, err
	}
	var out []*Image
	for _, e := range ents {
		if img, err := s.Lookup(e.Name()); err == nil {
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
		gone = append(gone, img)
	}
	if len(gone) > 0 {
		if err := s.saveRefsLocked(); err != nil {
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
	raw, err := json.MarshalIndent(s.refs, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, "refs.json.tmp")
	if err := writeFileSync(tmp, raw); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.dir, "refs.json"))
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
// devices are left out (a box has its own /dev).
func unpack(dir string, r io.ReadCloser) (int64, error) {
	defer r.Close()
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
			n, err := io.Copy(f, tr)
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
