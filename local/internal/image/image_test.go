package image_test

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/upstash/box-go/internal/ocitest"
	"github.com/upstash/box-go/local/internal/image"
)

func open(t *testing.T, opts image.Options) (*image.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := image.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// TestPullUnpacksLayersWithWhiteouts pulls a three-layer image and checks
// the tree: upper layers win, a whiteout removes a lower file, an opaque
// directory hides the lower one's entries, links and modes are kept, and
// setuid is not.
func TestPullUnpacksLayersWithWhiteouts(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	base := ocitest.Layer(t,
		ocitest.Entry{Name: "etc/"},
		ocitest.Entry{Name: "etc/motd", Body: "base\n"},
		ocitest.Entry{Name: "etc/gone", Body: "whited out\n"},
		ocitest.Entry{Name: "opaque/"},
		ocitest.Entry{Name: "opaque/old", Body: "hidden\n"},
		ocitest.Entry{Name: "usr/", Mode: 0o755},
		ocitest.Entry{Name: "usr/bin/"},
		ocitest.Entry{Name: "usr/bin/tool", Body: "#!/bin/sh\n", Mode: 0o4755},
		ocitest.Entry{Name: "bin", Type: tar.TypeSymlink, Link: "usr/bin"},
		ocitest.Entry{Name: "dev/"},
		ocitest.Entry{Name: "dev/null", Type: tar.TypeChar, Mode: 0o666},
	)
	mid := ocitest.Layer(t,
		ocitest.Entry{Name: "etc/"},
		ocitest.Entry{Name: "etc/.wh.gone"},
		ocitest.Entry{Name: "etc/motd", Body: "mid\n"},
		ocitest.Entry{Name: "opaque/"},
		ocitest.Entry{Name: "opaque/.wh..wh..opq"},
		ocitest.Entry{Name: "opaque/new", Body: "kept\n"},
		ocitest.Entry{Name: "usr/bin/"},
		ocitest.Entry{Name: "usr/bin/tool2", Type: tar.TypeLink, Link: "usr/bin/tool"},
	)
	top := ocitest.Layer(t,
		ocitest.Entry{Name: "etc/"},
		ocitest.Entry{Name: "etc/motd", Body: "top\n", Mode: 0o600},
		ocitest.Entry{Name: "srv/app/data.txt", Body: "no parent entries\n"},
	)
	ref, id := reg.Push(t, "test/layers:1", v1.Config{Env: []string{"PATH=/usr/bin", "APP=1"}, WorkingDir: "/srv"}, base, mid, top)
	s, _ := open(t, image.Options{})
	img, err := s.Get(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if img.ID != id || img.Ref != ref || !cmp.Equal(img.Env, []string{"PATH=/usr/bin", "APP=1"}) || img.WorkingDir != "/srv" {
		t.Errorf("image = %+v, want id %s", img, id)
	}
	want := []string{
		"bin -> usr/bin", "dev/", "etc/", "etc/motd", "opaque/", "opaque/new",
		"srv/", "srv/app/", "srv/app/data.txt", "usr/", "usr/bin/", "usr/bin/tool", "usr/bin/tool2",
	}
	if diff := cmp.Diff(want, ocitest.Unpacked(t, img.Root)); diff != "" {
		t.Errorf("unpacked tree (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(img.Root, "etc/motd")); string(b) != "top\n" {
		t.Errorf("etc/motd = %q, want the top layer's", b)
	}
	fi, err := os.Stat(filepath.Join(img.Root, "etc/motd"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("etc/motd mode = %v (%v), want 0600", fi.Mode(), err)
	}
	tool, err := os.Stat(filepath.Join(img.Root, "usr/bin/tool"))
	if err != nil || tool.Mode() != 0o755 {
		t.Errorf("usr/bin/tool mode = %v (%v), want 0755 without setuid", tool.Mode(), err)
	}
	if tool2, err := os.Stat(filepath.Join(img.Root, "usr/bin/tool2")); err != nil || !os.SameFile(tool, tool2) {
		t.Errorf("usr/bin/tool2 is not a hard link of tool (%v)", err)
	}
	if img.Size != int64(len("top\n")+len("kept\n")+len("#!/bin/sh\n")+len("no parent entries\n")) {
		t.Errorf("size = %d", img.Size)
	}
}

// TestCachedImageFetchesNothing: a reference pulled once is served from the
// store with no request to its registry, also after the store is opened
// again; an explicit Pull asks for the manifest and fetches no blob.
func TestCachedImageFetchesNothing(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref, id := reg.Push(t, "test/cache:1", v1.Config{}, ocitest.Layer(t, ocitest.Entry{Name: "hello", Body: "hi\n"}))
	s, dir := open(t, image.Options{})
	if _, err := s.Get(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if n := reg.BlobGets(); n != 2 {
		t.Errorf("first pull fetched %d blobs, want 2 (configuration and layer)", n)
	}
	before := reg.Requests()
	again, err := image.Open(dir, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := again.Get(t.Context(), ref)
	if err != nil || img.ID != id {
		t.Fatalf("cached get = %+v, %v", img, err)
	}
	if n := reg.Requests() - before; n != 0 {
		t.Errorf("a cached get sent %d requests to the registry", n)
	}
	if _, err := again.Pull(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if n := reg.BlobGets(); n != 2 {
		t.Errorf("a pull of an image the store has fetched %d more blobs", n-2)
	}
}

// TestCorruptBlobIsRefused: a registry that serves a layer whose bytes are
// not its digest's fails the pull with a digest error, and nothing of the
// image is kept.
func TestCorruptBlobIsRefused(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	good := ocitest.Layer(t, ocitest.Entry{Name: "app", Body: "good\n"})
	ref, _ := reg.Push(t, "test/corrupt:1", v1.Config{}, good)
	s, dir := open(t, image.Options{})
	// Another blob of another size, then one of the same size.
	longer := compressed(t, ocitest.Layer(t, ocitest.Entry{Name: "app", Body: "evil\n"}, ocitest.Entry{Name: "planted", Body: "x"}))
	reg.Corrupt(t, good, longer)
	if _, err := s.Get(t.Context(), ref); err == nil || !strings.Contains(err.Error(), "size") {
		t.Errorf("a blob of the wrong size = %v", err)
	}
	var same []byte
	for _, body := range []string{"evil\n", "good!", "gooe\n", "Good\n", "goof\n", "food\n"} {
		if b := compressed(t, ocitest.Layer(t, ocitest.Entry{Name: "app", Body: body})); len(b) == len(compressed(t, good)) {
			same = b
			break
		}
	}
	if same == nil {
		t.Fatal("no other blob of the good one's size: the test needs one")
	}
	reg.Corrupt(t, good, same)
	_, err := s.Get(t.Context(), ref)
	var pe *image.PullError
	if !errors.As(err, &pe) || pe.Ref != ref {
		t.Fatalf("pull of a corrupt blob = %v, want a PullError for %s", err, ref)
	}
	if msg := err.Error(); !strings.Contains(msg, ref) || !(strings.Contains(msg, "sha256")) {
		t.Errorf("error %q does not name the image and the digest check", msg)
	}
	t.Logf("refused: %v", err)
	if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"roots/", "tmp/"}) {
		t.Errorf("the store kept %v after a refused pull", got)
	}
}

// TestRegistryDown: with nobody at the registry the error names the image
// and the reason.
func TestRegistryDown(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref, _ := reg.Push(t, "test/down:1", v1.Config{}, ocitest.Layer(t, ocitest.Entry{Name: "x", Body: "x"}))
	reg.Close()
	s, _ := open(t, image.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 60e9)
	defer cancel()
	_, err := s.Get(ctx, ref)
	if err == nil || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("pull with the registry down = %v, want the image and connection refused", err)
	}
	if _, err := s.Get(ctx, "UPPER/case"); err == nil || !strings.Contains(err.Error(), "UPPER/case") {
		t.Errorf("a bad reference = %v", err)
	}
}

// TestConcurrentGetsPullOnce: ten gets of one new reference at once fetch
// each blob once and share one tree.
func TestConcurrentGetsPullOnce(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref, id := reg.Push(t, "test/once:1", v1.Config{}, ocitest.Layer(t, ocitest.Entry{Name: "big", Body: strings.Repeat("x", 4<<20)}))
	s, _ := open(t, image.Options{})
	var wg sync.WaitGroup
	roots := make([]string, 10)
	errs := make([]error, 10)
	for i := range roots {
		wg.Go(func() {
			img, err := s.Get(t.Context(), ref)
			errs[i] = err
			if err == nil {
				roots[i] = img.Root
			}
		})
	}
	wg.Wait()
	for i := range roots {
		if errs[i] != nil || roots[i] != roots[0] || !strings.Contains(roots[i], id) {
			t.Errorf("get %d = %q, %v", i, roots[i], errs[i])
		}
	}
	if n := reg.MaxBlobGets(); n != 1 {
		t.Errorf("a blob was fetched %d times by concurrent gets, want once", n)
	}
}

// TestLinksCannotReachOutside: layers that plant links to the host and
// write through them, or hard-link host files, write nothing on the host
// and bring no host file into the image. (A link that climbs out is left
// out; what the layer puts below it lands in a directory of that name.)
func TestLinksCannotReachOutside(t *testing.T) {
	host := t.TempDir()
	reg := ocitest.NewRegistry(t)
	ref, _ := reg.Push(t, "test/escape:1", v1.Config{},
		ocitest.Layer(t, ocitest.Entry{Name: "out/"}, ocitest.Entry{Name: "out/pwned", Body: "lower"}),
		ocitest.Layer(t,
			ocitest.Entry{Name: "out", Type: tar.TypeSymlink, Link: host},
			ocitest.Entry{Name: "out/pwned", Body: "x"},
			ocitest.Entry{Name: "rel", Type: tar.TypeSymlink, Link: "../../../../../../../.." + host},
			ocitest.Entry{Name: "rel/pwned", Body: "x"},
		))
	s, _ := open(t, image.Options{})
	img, err := s.Get(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(host); len(ents) != 0 {
		t.Errorf("the pull wrote %v into the host directory", ents)
	}
	if got := ocitest.Unpacked(t, img.Root); !cmp.Equal(got, []string{"out -> " + host, "rel/", "rel/pwned"}) {
		t.Errorf("unpacked %v", got)
	}
	for _, link := range []string{"/etc/passwd", "../../../../../../etc/passwd"} {
		ref, _ := reg.Push(t, "test/hardlink:1", v1.Config{}, ocitest.Layer(t,
			ocitest.Entry{Name: "passwd", Type: tar.TypeLink, Link: link},
		))
		img, err := s.Pull(t.Context(), ref)
		if err != nil {
			t.Logf("hard link to %s: %v", link, err)
			continue
		}
		if _, err := os.Lstat(filepath.Join(img.Root, "passwd")); err == nil {
			t.Errorf("a hard link to %s was unpacked", link)
		}
	}
}

// TestRemoveUnused removes only what the caller says is unused, with its
// references; a later get pulls it again.
func TestRemoveUnused(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	refA, idA := reg.Push(t, "test/a:1", v1.Config{}, ocitest.Layer(t, ocitest.Entry{Name: "a", Body: "a"}))
	refB, idB := reg.Push(t, "test/b:1", v1.Config{}, ocitest.Layer(t, ocitest.Entry{Name: "b/", Mode: 0o500}, ocitest.Entry{Name: "b/f", Body: "b", Mode: 0o400}))
	s, _ := open(t, image.Options{})
	for _, r := range []string{refA, refB} {
		if _, err := s.Get(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := s.Remove(func(img *image.Image) bool { return img.ID == idB })
	if err != nil || len(gone) != 1 || gone[0].ID != idB {
		t.Fatalf("remove = %v, %v", gone, err)
	}
	if _, err := s.Lookup(idB); !errors.Is(err, image.ErrUnknown) {
		t.Errorf("lookup of a removed image = %v", err)
	}
	if _, err := s.Lookup(idA); err != nil {
		t.Errorf("the image in use went: %v", err)
	}
	if refs := s.Refs(); !cmp.Equal(refs, map[string]string{refA: idA}) {
		t.Errorf("refs after remove = %v", refs)
	}
	reg.Push(t, "test/b:1", v1.Config{}, ocitest.Layer(t, ocitest.Entry{Name: "b/", Mode: 0o500}, ocitest.Entry{Name: "b/f", Body: "b", Mode: 0o400}))
	if img, err := s.Get(t.Context(), refB); err != nil || img.ID != idB || reg.BlobGets() == 0 {
		t.Errorf("get after remove = %+v, %v (blobs fetched %d)", img, err, reg.BlobGets())
	}
}

func compressed(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPrivateRegistryWithDockerConfig: a registry that wants credentials
// gets those of the docker configuration (DOCKER_CONFIG); without them the
// pull fails with the registry's answer, and the password is in no error.
func TestPrivateRegistryWithDockerConfig(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref, id := reg.Push(t, "private/app:1", v1.Config{}, ocitest.Layer(t, ocitest.Entry{Name: "secret-app", Body: "x"}))
	const pass = "s3cret-registry-pass"
	reg.RequireAuth("robot", pass)

	t.Setenv("DOCKER_CONFIG", t.TempDir())
	s, _ := open(t, image.Options{})
	_, err := s.Get(t.Context(), ref)
	if err == nil || !strings.Contains(err.Error(), ref) || !(strings.Contains(err.Error(), "UNAUTHORIZED") || strings.Contains(err.Error(), "401")) {
		t.Errorf("pull without credentials = %v, want the registry's refusal", err)
	}

	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("robot:" + pass))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{"`+reg.Host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	img, err := s.Get(t.Context(), ref)
	if err != nil || img.ID != id {
		t.Fatalf("pull with the docker configuration's credentials = %+v, %v", img, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{"`+reg.Host+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte("robot:wrong-"+pass))+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pull(t.Context(), ref); err == nil || strings.Contains(err.Error(), pass) {
		t.Errorf("pull with a wrong password = %v; want an error without the password", err)
	}
}
