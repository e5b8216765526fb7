package image

import (
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultMaxSize is Options.MaxSize when it is zero: 16 GiB.
const DefaultMaxSize = 16 << 30

// ErrTooLarge is the cause of a pull refused because of its size: an
// image whose layers unpack to more than Options.MaxSize.
var ErrTooLarge = errors.New("too large")

// ErrNoSpace is the cause of a pull stopped because the store's file
// system had less free space than Options.MinFree.
var ErrNoSpace = errors.New("not enough free disk space")

// sized is an image whose layers, uncompressed, stop with ErrTooLarge
// past max bytes in all: what their archives hold (what they unpack to is
// bounded by room).
type sized struct {
	v1.Image
	max  int64
	read int64 // uncompressed bytes of its layers read so far
}

func (img *sized) Layers() ([]v1.Layer, error) {
	ls, err := img.Image.Layers()
	if err != nil {
		return nil, err
	}
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = sizedLayer{Layer: l, img: img}
	}
	return out, nil
}

// sizedLayer is a layer of a sized image.
type sizedLayer struct {
	v1.Layer
	img *sized
}

func (l sizedLayer) Uncompressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Uncompressed()
	if err != nil {
		return nil, err
	}
	return &sizedReader{ReadCloser: rc, img: l.img}, nil
}

// sizedReader counts what a layer of a sized image unpacks to. Layers
// are read one after the other (mutate.Extract), never at once.
type sizedReader struct {
	io.ReadCloser
	img *sized
}

func (r *sizedReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if r.img.read += int64(n); r.img.read > r.img.max {
		return n, fmt.Errorf("%w: its layers unpack to more than %s, the most boxd unpacks of an image", ErrTooLarge, sizeText(r.img.max))
	}
	return n, err
}

// room keeps minFree bytes free on dir's file system while a pull
// unpacks there, and stops the unpack past max bytes written in all: what
// the layers' archives read as, which is not bounded by their size (a
// sparse entry reads as as many zeros as its header says).
type room struct {
	dir     string
	minFree int64
	max     int64
	total   int64 // bytes written so far
	since   int64 // bytes written since the last look
}

// checkEvery is how many bytes an unpack writes between two looks at the
// free space; each entry counts as entryCost (its inode, its directory
// entry), so that a layer of many empty files is looked at too.
const (
	checkEvery = 4 << 20
	entryCost  = 512
)

// wrote counts n bytes written, and looks at the free space once enough
// were since the last look.
func (r *room) wrote(n int64) error {
	if r.total += n; r.max > 0 && r.total > r.max {
		return fmt.Errorf("%w: its layers unpack to more than %s, the most boxd unpacks of an image", ErrTooLarge, sizeText(r.max))
	}
	if r.since += n; r.since < checkEvery {
		return nil
	}
	r.since = 0
	return r.check()
}

// check fails with ErrNoSpace when less than minFree is free.
func (r *room) check() error {
	if r.minFree <= 0 {
		return nil
	}
	free, err := freeSpace(r.dir)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("free disk space: %w", err)
	}
	if free < r.minFree {
		return fmt.Errorf("%w: the image store's file system has %s free, less than the %s boxd keeps free", ErrNoSpace, sizeText(free), sizeText(r.minFree))
	}
	return nil
}

// roomWriter is a file being unpacked, whose writes count in its room.
type roomWriter struct {
	w    io.Writer
	room *room
}

func (w roomWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err == nil {
		err = w.room.wrote(int64(n))
	}
	return n, err
}

// sizeText writes n in MiB or GiB, to a tenth, rounded down (so that
// what is below a bound never reads as the bound), for messages.
func sizeText(n int64) string {
	tenths := func(unit int64) string {
		t := n * 10 / unit
		return fmt.Sprintf("%d.%d", t/10, t%10)
	}
	switch {
	case n >= 1<<30:
		return tenths(1<<30) + " GiB"
	case n >= 1<<20:
		return tenths(1<<20) + " MiB"
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}
