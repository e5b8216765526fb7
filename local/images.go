package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/upstash/box-go/local/internal/boxes"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/image"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// Root file system modes (Config.Root).
const (
	// RootHost gives every box the host's /usr read-only, whatever its
	// runtime: nothing is pulled, so it works offline. It is what an
	// empty Config.Root means, and what the embedded backend and boxtest
	// use.
	RootHost = "host"
	// RootImage gives each box its runtime's OCI image as its root
	// (Config.Images), pulled into the data directory the first time a
	// box needs it. It needs bubblewrap isolation. cmd/boxd's default.
	RootImage = "image"
)

// DefaultImages are the images of the runtimes in RootImage mode: the
// official images of each language, Debian-based and Alpine-based. A box
// created without a runtime runs "node".
func DefaultImages() map[string]string {
	return map[string]string{
		"node":          "docker.io/library/node:lts",
		"python":        "docker.io/library/python:3",
		"golang":        "docker.io/library/golang:1",
		"ruby":          "docker.io/library/ruby:3",
		"rust":          "docker.io/library/rust:1",
		"node-alpine":   "docker.io/library/node:lts-alpine",
		"python-alpine": "docker.io/library/python:3-alpine",
		"golang-alpine": "docker.io/library/golang:1-alpine",
		"ruby-alpine":   "docker.io/library/ruby:3-alpine",
		"rust-alpine":   "docker.io/library/rust:1-alpine",
	}
}

// DefaultMaxImageSize is what a runtime image may unpack to when
// Config.MaxImageSize is zero: 16 GiB.
const DefaultMaxImageSize = image.DefaultMaxSize

// defaultRuntime is the runtime of a box created without one.
const defaultRuntime = "node"

// images is boxd's side of runtime images: the store, and which image
// each runtime is.
type images struct {
	s     *Server
	mode  string
	refs  map[string]string // runtime → full reference
	store *image.Store
	// inUse is held (shared) by a create from its pull until its box is
	// recorded, and (alone) by PruneImages.
	inUse sync.RWMutex
}

func newImages(s *Server) (*images, error) {
	im := &images{s: s, mode: cmp.Or(s.cfg.Root, RootHost), refs: DefaultImages()}
	if im.mode != RootHost && im.mode != RootImage {
		return nil, fmt.Errorf("unknown root %q (want %q or %q)", s.cfg.Root, RootHost, RootImage)
	}
	if im.mode == RootImage && s.cfg.Isolation != sandbox.ModeBwrap {
		return nil, fmt.Errorf("root %q needs isolation %q; without it, boxes run on the host's /usr (root %q)", RootImage, IsolationBwrap, RootHost)
	}
	for rt, ref := range s.cfg.Images {
		if !slices.Contains(boxes.Runtimes, rt) {
			return nil, fmt.Errorf("images: unknown runtime %q (want one of %s)", rt, strings.Join(boxes.Runtimes, ", "))
		}
		im.refs[rt] = ref
	}
	for rt, ref := range im.refs {
		full, err := image.Normalize(ref)
		if err != nil {
			return nil, fmt.Errorf("images: runtime %s: %q is not an image reference: %v", rt, ref, err)
		}
		im.refs[rt] = full
	}
	st, err := image.Open(filepath.Join(s.cfg.DataDir, "images"), image.Options{
		Prepare: sandbox.PrepareImageRoot,
		Log:     s.log,
		MaxSize: s.cfg.MaxImageSize,
		MinFree: core.MinFreeDisk(s.cfg.MinFreeDisk),
	})
	if err != nil {
		return nil, err
	}
	im.store = st
	return im, nil
}

// DescribeRoot says, in a line, what new boxes' root is (Config.Root) and,
// for images, which image each runtime is.
func (s *Server) DescribeRoot() string { return s.images.describe() }

func (im *images) describe() string {
	if im.mode == RootHost {
		return "boxes run on the host's /usr (root " + RootHost + "): their runtime is recorded, not installed"
	}
	var parts []string
	for _, rt := range boxes.Runtimes {
		parts = append(parts, rt+"="+im.refs[rt])
	}
	return "boxes run in their runtime's image (root " + RootImage + "): " + strings.Join(parts, " ")
}

// ForCreate pulls (or finds) the image of a new box's runtime and returns
// its id, with a release to call once the box is recorded. In RootHost
// mode there is none, and neither is there for a box with a browser: the
// browser is the host's Chromium, which runs on the host's /usr.
func (im *images) ForCreate(ctx context.Context, runtime string, browser bool) (string, func(), error) {
	if im.mode != RootImage || browser {
		return "", func() {}, nil
	}
	rt := cmp.Or(runtime, defaultRuntime)
	ref := im.refs[rt]
	im.inUse.RLock()
	img, err := im.store.Get(ctx, ref)
	if err != nil {
		im.inUse.RUnlock()
		kind := errdefs.ErrUpstream
		if core.DiskFull(err) || errors.Is(err, image.ErrNoSpace) {
			kind = errdefs.ErrNoSpace
		}
		return "", nil, errdefs.New(kind, "runtime %s: %v (boxd runs boxes in their runtime's image; with root %q it runs them on the host's /usr, offline)", rt, err, RootHost)
	}
	var once sync.Once
	return img.ID, func() { once.Do(im.inUse.RUnlock) }, nil
}

// Of returns what sandbox.Spec needs of box b's image: the host directory
// of its tree, its PATH, and its other environment. A box with no image
// runs on the host's /usr.
func (im *images) Of(b *store.Box) (root, path string, env map[string]string, err error) {
	if b.Image == "" {
		return "", "", nil, nil
	}
	img, err := im.store.Lookup(b.Image)
	if err != nil {
		return "", "", nil, fmt.Errorf("the box's image %s: %w", b.Image[:min(12, len(b.Image))], err)
	}
	env = map[string]string{}
	for _, kv := range img.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch k {
		case "PATH":
			path = v
		case "HOME", "USER", "LOGNAME", "HOSTNAME", "SHELL", "TMPDIR", "BOX_ID":
			// The box's own.
		default:
			env[k] = v
		}
	}
	return img.Root, sandbox.ImagePath(path), env, nil
}

// ImageInfo is an image in boxd's store (Server.Images).
type ImageInfo struct {
	// ID is the digest of the image's manifest (hex), which names its
	// configuration and its layers.
	ID string
	// Refs are the references that name it in the store.
	Refs []string
	// Size is what its unpacked files take, in bytes.
	Size int64
	// Boxes counts the boxes that run it.
	Boxes int
}

// Images lists the runtime images in boxd's data directory.
func (s *Server) Images() ([]ImageInfo, error) {
	imgs, err := s.images.store.List()
	if err != nil {
		return nil, err
	}
	users, err := s.imageUsers()
	if err != nil {
		return nil, err
	}
	byID := s.images.refsByID()
	out := make([]ImageInfo, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, ImageInfo{ID: img.ID, Refs: byID[img.ID], Size: img.Size, Boxes: users[img.ID]})
	}
	return out, nil
}

// refsByID returns the references of each image id in the store, sorted.
func (im *images) refsByID() map[string][]string {
	byID := map[string][]string{}
	for ref, id := range im.store.Refs() {
		byID[id] = append(byID[id], ref)
	}
	for _, refs := range byID {
		sort.Strings(refs)
	}
	return byID
}

// PruneImages removes the runtime images that no box runs, and returns
// them. A box created meanwhile waits for it, and pulls its image again
// if it was removed.
func (s *Server) PruneImages() ([]ImageInfo, error) {
	s.images.inUse.Lock()
	defer s.images.inUse.Unlock()
	users, err := s.imageUsers()
	if err != nil {
		return nil, err
	}
	refs := s.images.refsByID()
	gone, err := s.images.store.Remove(func(img *image.Image) bool { return users[img.ID] == 0 })
	out := make([]ImageInfo, 0, len(gone))
	for _, img := range gone {
		out = append(out, ImageInfo{ID: img.ID, Refs: refs[img.ID], Size: img.Size})
		s.log.Info("image removed", "id", img.ID[:12], "refs", strings.Join(refs[img.ID], " "), "size", img.Size)
	}
	return out, err
}

// imageUsers counts the boxes (and snapshots' boxes) of each image.
func (s *Server) imageUsers() (map[string]int, error) {
	boxes, err := s.db.Boxes()
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, b := range boxes {
		if b.Image != "" {
			// A box of an older store may know its image by its old id.
			n[s.images.store.Current(b.Image)]++
		}
	}
	return n, nil
}
