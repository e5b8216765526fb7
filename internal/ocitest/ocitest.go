// Package ocitest serves OCI images that tests build, from a real registry
// (go-containerregistry's pkg/registry) on loopback, and counts and
// tampers with what it serves.
package ocitest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Entry is one entry of a layer.
type Entry struct {
	Name string
	// Type is a tar type flag; zero is a regular file (or a directory
	// when Name ends in /).
	Type byte
	Mode int64
	// Body is a regular file's content; File, when set, is a host file
	// whose content it is instead.
	Body string
	File string
	// Link is a symlink's or hard link's target.
	Link string
}

// Layer returns a gzipped layer of entries.
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, Linkname: e.Link, Typeflag: e.Type, Format: tar.FormatPAX}
		body := []byte(e.Body)
		if e.File != "" {
			var err error
			if body, err = os.ReadFile(e.File); err != nil {
				t.Fatal(err)
			}
		}
		switch {
		case h.Typeflag == 0 && strings.HasSuffix(e.Name, "/"):
			h.Typeflag = tar.TypeDir
		case h.Typeflag == 0:
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return tarLayer(t, buf.Bytes())
}

// tarLayer returns a gzipped layer of the tar archive raw.
func tarLayer(t testing.TB, raw []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// BombLayer returns a gzipped layer of one file, name, of size zero
// bytes (a multiple of 1 MiB): about 1 KiB for each MiB it unpacks to, as
// a decompression bomb is. The blob is gzip members one after the other
// (which a gzip reader reads as one stream): the tar header, the same
// member of 1 MiB of zeros over and over, and the archive's end.
func BombLayer(t testing.TB, name string, size int64) v1.Layer {
	t.Helper()
	if size%(1<<20) != 0 {
		t.Fatalf("BombLayer: size %d is not a multiple of 1 MiB", size)
	}
	var head, tail bytes.Buffer
	tw := tar.NewWriter(&head)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	// head is the header alone (the writer has written it; the file's
	// body is the members of zeros).
	tail.Write(make([]byte, 1024)) // the archive's end: two zero blocks
	zeros := make([]byte, 1<<20)
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = zw.Write(b)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	mib := member(zeros)
	blob := append(member(head.Bytes()), bytes.Repeat(mib, int(size>>20))...)
	blob = append(blob, member(tail.Bytes())...)
	b := &bomb{blob: blob, diffID: bombDiffID(head.Bytes(), zeros, tail.Bytes(), size)}
	sum := sha256.Sum256(blob)
	b.digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	l, err := partial.CompressedToLayer(b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// SparseLayer returns a layer of one file, name, that a tar reader reads
// as size zero bytes although the archive holds none of them: a PAX
// header says it is a GNU sparse file (format 0.1) of that real size with
// no data blocks. The archive is a few KiB, whatever size is.
func SparseLayer(t testing.TB, name string, size int64) v1.Layer {
	t.Helper()
	// The file's own header, with no data: written by archive/tar, which
	// writes no sparse records of its own.
	var file bytes.Buffer
	tw := tar.NewWriter(&file)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	var records bytes.Buffer
	for _, kv := range [][2]string{{"GNU.sparse.major", "0"}, {"GNU.sparse.minor", "1"}, {"GNU.sparse.numblocks", "0"}, {"GNU.sparse.realsize", strconv.FormatInt(size, 10)}} {
		rec := " " + kv[0] + "=" + kv[1] + "\n"
		// A record's length counts its own digits.
		n := len(rec)
		for len(strconv.Itoa(n))+len(rec) != n {
			n = len(strconv.Itoa(n)) + len(rec)
		}
		records.WriteString(strconv.Itoa(n) + rec)
	}
	// The extended header's own block: the file's header with type 'x',
	// another name, the records' size, and its checksum again.
	pax := bytes.Clone(file.Bytes()[:512])
	copy(pax[0:100], make([]byte, 100))
	copy(pax[0:100], "PaxHeaders/"+name)
	pax[156] = tar.TypeXHeader
	copy(pax[124:136], fmt.Sprintf("%011o\x00", records.Len()))
	copy(pax[148:156], "        ")
	var sum int64
	for _, c := range pax {
		sum += int64(c)
	}
	copy(pax[148:156], fmt.Sprintf("%06o\x00 ", sum))
	var raw bytes.Buffer
	raw.Write(pax)
	raw.Write(records.Bytes())
	raw.Write(make([]byte, (512-records.Len()%512)%512))
	raw.Write(file.Bytes()[:512])
	raw.Write(make([]byte, 1024)) // the archive's end
	// The layer is a tar reader's reading of it: size zero bytes.
	if h, err := tar.NewReader(bytes.NewReader(raw.Bytes())).Next(); err != nil || h.Size != size || h.Name != name {
		t.Fatalf("SparseLayer: a tar reader reads %+v, %v", h, err)
	}
	return tarLayer(t, raw.Bytes())
}

// bombDiffIDs keeps the digests of the bombs' archives, which take a
// while to hash: head → its archive's digest (the header names the size).
var bombDiffIDs sync.Map

func bombDiffID(head, zeros, tail []byte, size int64) v1.Hash {
	if d, ok := bombDiffIDs.Load(string(head)); ok {
		return d.(v1.Hash)
	}
	h := sha256.New()
	h.Write(head)
	for range size >> 20 {
		h.Write(zeros)
	}
	h.Write(tail)
	d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	bombDiffIDs.Store(string(head), d)
	return d
}

// bomb is BombLayer's layer.
type bomb struct {
	blob           []byte
	digest, diffID v1.Hash
}

func (b *bomb) Digest() (v1.Hash, error)            { return b.digest, nil }
func (b *bomb) DiffID() (v1.Hash, error)            { return b.diffID, nil }
func (b *bomb) Size() (int64, error)                { return int64(len(b.blob)), nil }
func (b *bomb) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }
func (b *bomb) Compressed() (io.ReadCloser, error)  { return io.NopCloser(bytes.NewReader(b.blob)), nil }

// BusyboxLayer is a layer with Debian's static busybox at /bin/busybox
// and the links a shell needs (sh, ls, cat, echo, …) beside it: a root
// with no shell of the host's. The test fails when busybox-static is not
// installed.
func BusyboxLayer(t testing.TB) v1.Layer {
	t.Helper()
	bin, err := exec.LookPath("busybox")
	if err != nil {
		for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
			if _, err2 := os.Stat(p); err2 == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		t.Fatal("busybox is not installed (Debian's busybox-static): ./scripts/deps.sh --tests installs it")
	}
	if f, err := elf.Open(bin); err != nil {
		t.Fatalf("busybox %s: %v", bin, err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Fatalf("%s is linked dynamically; the images need Debian's busybox-static", bin)
			}
		}
		f.Close()
	}
	entries := []Entry{{Name: "bin/"}, {Name: "bin/busybox", File: bin, Mode: 0o755}}
	for _, app := range []string{"sh", "ls", "cat", "echo", "id", "env", "pwd", "sleep", "uname", "wc", "head", "mkdir", "touch", "rm", "test", "true", "false", "printf", "grep", "ps", "kill", "stat"} {
		entries = append(entries, Entry{Name: "bin/" + app, Type: tar.TypeSymlink, Link: "busybox"})
	}
	entries = append(entries, Entry{Name: "etc/"}, Entry{Name: "etc/os-release", Body: "ID=busybox\nNAME=\"Busybox test image\"\n"})
	return Layer(t, entries...)
}

// Registry is a registry on loopback.
type Registry struct {
	// Host is its host:port, to put in references.
	Host string
	srv  *httptest.Server

	mu        sync.Mutex
	user      string // with pass, when set, every request needs basic auth
	pass      string
	blobGets  map[string]int // digest → GETs
	requests  int
	corrupt   map[string][]byte
	stalls    map[string]*Stall // digest → its stall
	redirects map[string]string // digest → where GETs of it are sent
	pads      map[string]pad    // manifest path → its padding
}

// pad is how PadManifest pads a manifest.
type pad struct {
	n       int
	chunked bool
}

// NewRegistry starts a registry; it stops with the test.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{blobGets: map[string]int{}, corrupt: map[string][]byte{}, stalls: map[string]*Stall{}, redirects: map[string]string{}, pads: map[string]pad{}}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests++
		var bad []byte
		var stall *Stall
		var redirect string
		if i := strings.Index(req.URL.Path, "/blobs/"); i >= 0 && req.Method == http.MethodGet {
			d := req.URL.Path[i+len("/blobs/"):]
			r.blobGets[d]++
			bad, stall, redirect = r.corrupt[d], r.stalls[d], r.redirects[d]
		}
		padding, padded := r.pads[req.URL.Path]
		user, pass := r.user, r.pass
		r.mu.Unlock()
		if u, p, ok := req.BasicAuth(); user != "" && (!ok || u != user || p != pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="ocitest"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		switch {
		case bad != nil:
			w.Header().Set("Content-Length", strconv.Itoa(len(bad)))
			_, _ = w.Write(bad)
		case redirect != "":
			http.Redirect(w, req, redirect, http.StatusTemporaryRedirect)
		case stall != nil && stall.serve(w, req, h):
		case padded && req.Method == http.MethodGet:
			padded := httptest.NewRecorder()
			h.ServeHTTP(padded, req)
			maps.Copy(w.Header(), padded.Header())
			body := append(padded.Body.Bytes(), bytes.Repeat([]byte{' '}, padding.n)...)
			w.Header().Del("Content-Length")
			if !padding.chunked {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			w.WriteHeader(padded.Code)
			_, _ = w.Write(body)
		default:
			h.ServeHTTP(w, req)
		}
	}))
	t.Cleanup(r.srv.Close)
	r.Host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// Push pushes an image of layers (bottom first) with cfg as repoTag
// (repository:tag) and returns its full reference and its id (the hex
// digest of its manifest).
func (r *Registry) Push(t testing.TB, repoTag string, cfg v1.Config, layers ...v1.Layer) (ref, id string) {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref = r.Host + "/" + repoTag
	nref, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return ref, r.write(t, nref, img)
}

// write pushes img as ref, forgets what was fetched before, and returns
// img's id.
func (r *Registry) write(t testing.TB, ref name.Reference, img v1.Image) string {
	t.Helper()
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.blobGets = map[string]int{}
	r.requests = 0
	r.mu.Unlock()
	return h.Hex
}

// PushForged pushes as repoTag an image whose configuration is the image
// like's, byte for byte (so its configuration digest is like's too), over
// layers instead of like's: what a hostile registry can serve, since an
// image's configuration is public. It returns its full reference and its
// id (the hex digest of its manifest).
func (r *Registry) PushForged(t testing.TB, repoTag, like string, layers ...v1.Layer) (ref, id string) {
	t.Helper()
	likeRef, err := name.ParseReference(like)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := remote.Image(likeRef)
	if err != nil {
		t.Fatal(err)
	}
	f := &forged{layers: map[v1.Hash]v1.Layer{}}
	if f.cfg, err = orig.RawConfigFile(); err != nil {
		t.Fatal(err)
	}
	m, err := orig.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	m = m.DeepCopy()
	m.Layers = nil
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		size, err := l.Size()
		if err != nil {
			t.Fatal(err)
		}
		mt, err := l.MediaType()
		if err != nil {
			t.Fatal(err)
		}
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: mt, Size: size, Digest: d})
		f.layers[d] = l
	}
	f.mediaType = m.MediaType
	if f.manifest, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	img, err := partial.CompressedToImage(f)
	if err != nil {
		t.Fatal(err)
	}
	if cn, err := img.ConfigName(); err != nil || cn != m.Config.Digest {
		t.Fatalf("forged image's configuration %v (%v), want %v", cn, err, m.Config.Digest)
	}
	ref = r.Host + "/" + repoTag
	nref, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return ref, r.write(t, nref, img)
}

// forged is an image made of a raw configuration, a raw manifest and the
// layers it lists.
type forged struct {
	cfg, manifest []byte
	mediaType     types.MediaType
	layers        map[v1.Hash]v1.Layer
}

func (f *forged) RawConfigFile() ([]byte, error)      { return f.cfg, nil }
func (f *forged) RawManifest() ([]byte, error)        { return f.manifest, nil }
func (f *forged) MediaType() (types.MediaType, error) { return f.mediaType, nil }

func (f *forged) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := f.layers[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("forged image: no layer %s", h)
}

// RequireAuth makes every later request need HTTP basic auth as user and
// pass, as a private registry does.
func (r *Registry) RequireAuth(user, pass string) {
	r.mu.Lock()
	r.user, r.pass = user, pass
	r.mu.Unlock()
}

// Corrupt makes the registry serve with in place of the blob of layer l.
func (r *Registry) Corrupt(t testing.TB, l v1.Layer, with []byte) {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.corrupt[d.String()] = with
	r.mu.Unlock()
}

// Blob names a blob of the registry: a v1.Layer is one, and BlobOf makes
// one of a digest.
type Blob interface {
	Digest() (v1.Hash, error)
}

// BlobOf names the blob whose digest is h.
func BlobOf(h v1.Hash) Blob { return digestBlob(h) }

type digestBlob v1.Hash

func (d digestBlob) Digest() (v1.Hash, error) { return v1.Hash(d), nil }

// ConfigOf returns the digest of the configuration of the image ref names,
// as its manifest says, and fetches no blob.
func (r *Registry) ConfigOf(t testing.TB, ref string) v1.Hash {
	t.Helper()
	nref, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(nref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest() // not ConfigName, which fetches the configuration
	if err != nil {
		t.Fatal(err)
	}
	return m.Config.Digest
}

// Stall is a blob whose GETs stall (Registry.Stall).
type Stall struct {
	stalledOnce, goneOnce, releaseOnce, endOnce sync.Once
	stalled, gone, released, end                chan struct{}
}

// Stall makes every GET of blob b answer its headers (200, with the
// blob's Content-Length) and then send nothing, for as long as its client
// stays: what a registry that hangs mid-blob does. Release makes later
// GETs be served; the test's end ends those that stall.
func (r *Registry) Stall(t testing.TB, b Blob) *Stall {
	t.Helper()
	d, err := b.Digest()
	if err != nil {
		t.Fatal(err)
	}
	s := &Stall{stalled: make(chan struct{}), gone: make(chan struct{}), released: make(chan struct{}), end: make(chan struct{})}
	r.mu.Lock()
	r.stalls[d.String()] = s
	r.mu.Unlock()
	// Before the server's Close, which waits for its handlers.
	t.Cleanup(func() { s.endOnce.Do(func() { close(s.end) }) })
	return s
}

// Stalled is closed once a GET of the blob has stalled.
func (s *Stall) Stalled() <-chan struct{} { return s.stalled }

// Abandoned is closed once a client has gone away from a stalled GET.
func (s *Stall) Abandoned() <-chan struct{} { return s.gone }

// Release makes the registry answer again: later GETs of the blob are
// served. Those that stall stay so until their clients go away.
func (s *Stall) Release() { s.releaseOnce.Do(func() { close(s.released) }) }

// serve stalls a GET, and reports whether it did: once released, it does
// not.
func (s *Stall) serve(w http.ResponseWriter, req *http.Request, h http.Handler) bool {
	select {
	case <-s.released:
		return false
	default:
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.(http.Flusher).Flush()
	s.stalledOnce.Do(func() { close(s.stalled) })
	select {
	case <-req.Context().Done():
		s.goneOnce.Do(func() { close(s.gone) })
	case <-s.end:
	}
	return true
}

// Redirect makes every GET of blob b answer 307 to the URL to, as a
// registry that keeps its blobs elsewhere does.
func (r *Registry) Redirect(t testing.TB, b Blob, to string) {
	t.Helper()
	d, err := b.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.redirects[d.String()] = to
	r.mu.Unlock()
}

// PadManifest makes GETs of the manifest of repoTag (repository:tag)
// answer it followed by n spaces (the same JSON, n bytes longer): with its
// Content-Length, or chunked with none.
func (r *Registry) PadManifest(repoTag string, n int, chunked bool) {
	repo, tag, _ := strings.Cut(repoTag, ":")
	r.mu.Lock()
	r.pads["/v2/"+repo+"/manifests/"+tag] = pad{n: n, chunked: chunked}
	r.mu.Unlock()
}

// BlobGets is how many times blobs were fetched since the last Push.
func (r *Registry) BlobGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.blobGets {
		n += c
	}
	return n
}

// BlobGetsOf is how many times blob b (a layer, or BlobOf a digest) was
// fetched since the last Push.
func (r *Registry) BlobGetsOf(t testing.TB, b Blob) int {
	t.Helper()
	d, err := b.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets[d.String()]
}

// MaxBlobGets is the most times any one blob was fetched since the last
// Push.
func (r *Registry) MaxBlobGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.blobGets {
		n = max(n, c)
	}
	return n
}

// Requests is how many requests the registry had since the last Push.
func (r *Registry) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Close stops the registry: later pulls find nobody there.
func (r *Registry) Close() { r.srv.Close() }

// Unpacked lists the regular files, links and directories below dir, as
// "name", "name/" and "name -> target", for comparing trees.
func Unpacked(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out = append(out, rel+" -> "+l)
		case fi.IsDir():
			out = append(out, rel+"/")
		default:
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
