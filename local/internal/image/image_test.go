package image_test

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

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
	if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"format", "roots/", "tmp/"}) {
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

// TestForgedConfigurationGetsItsOwnTree: a registry serves an image whose
// configuration is a trusted image's, byte for byte, over layers of its
// own. Whichever is pulled first, each reference gets the tree of its own
// layers: the second pull fetches its own layers, and the store keeps two
// images. Two tags of one manifest still share one tree.
func TestForgedConfigurationGetsItsOwnTree(t *testing.T) {
	for _, forgedFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "forged first", false: "trusted first"}[forgedFirst], func(t *testing.T) {
			reg := ocitest.NewRegistry(t)
			good := ocitest.Layer(t, ocitest.Entry{Name: "marker", Body: "TRUSTED\n"})
			evil := ocitest.Layer(t, ocitest.Entry{Name: "marker", Body: "EVIL\n"}, ocitest.Entry{Name: "planted", Body: "x"})
			trusted, trustedID := reg.Push(t, "library/node:lts", v1.Config{Env: []string{"PATH=/bin"}}, good)
			forged, forgedID := reg.PushForged(t, "evil/node:lts", trusted, evil)
			if forgedID == trustedID {
				t.Fatal("the forged image has the trusted one's manifest")
			}
			s, _ := open(t, image.Options{})
			order := []string{trusted, forged}
			if forgedFirst {
				order = []string{forged, trusted}
			}
			imgs := map[string]*image.Image{}
			for _, ref := range order {
				img, err := s.Get(t.Context(), ref)
				if err != nil {
					t.Fatal(err)
				}
				imgs[ref] = img
			}
			for ref, want := range map[string]string{trusted: "TRUSTED\n", forged: "EVIL\n"} {
				if b, err := os.ReadFile(filepath.Join(imgs[ref].Root, "marker")); string(b) != want {
					t.Errorf("%s: /marker = %q (%v), want %q", ref, b, err, want)
				}
			}
			if imgs[trusted].ID != trustedID || imgs[forged].ID != forgedID {
				t.Errorf("ids %s and %s, want the manifests' %s and %s", imgs[trusted].ID, imgs[forged].ID, trustedID, forgedID)
			}
			if got := ocitest.Unpacked(t, imgs[trusted].Root); !cmp.Equal(got, []string{"marker"}) {
				t.Errorf("the trusted tree: %v", got)
			}
			if g, e := reg.BlobGetsOf(t, good), reg.BlobGetsOf(t, evil); g != 1 || e != 1 {
				t.Errorf("the trusted layer was fetched %d times and the forged one %d, want each once", g, e)
			}
			if l, err := s.List(); err != nil || len(l) != 2 {
				t.Errorf("the store has %d images (%v), want 2", len(l), err)
			}
			// Another tag of the trusted manifest is the same image.
			again, _ := reg.Push(t, "library/node:22", v1.Config{Env: []string{"PATH=/bin"}}, good)
			if img, err := s.Get(t.Context(), again); err != nil || img.ID != trustedID || img.Root != imgs[trusted].Root {
				t.Errorf("another tag of the trusted image = %+v, %v", img, err)
			}
			if n := reg.BlobGets(); n != 0 {
				t.Errorf("another tag of an image the store has fetched %d blobs", n)
			}
		})
	}
}

// TestFormatOneStoreIsRekeyed: a store of boxd's first layout, keyed by
// configuration digests, poisoned as the attack left it (the forged image
// pulled first, the trusted reference then given its tree), with a second
// image whose move a killed boxd left halfway. Opened now, no tree of it is
// found by the trusted reference, which fetches its own layers; each tree
// is under its own manifest's id; the reference each was pulled by still
// finds it without asking the registry; a box record's old id still finds
// the tree it ran; and the move is done once.
func TestFormatOneStoreIsRekeyed(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	good := ocitest.Layer(t, ocitest.Entry{Name: "marker", Body: "TRUSTED\n"})
	evil := ocitest.Layer(t, ocitest.Entry{Name: "marker", Body: "EVIL\n"})
	otherLayer := ocitest.Layer(t, ocitest.Entry{Name: "other", Body: "o\n"})
	trusted, _ := reg.Push(t, "library/node:lts", v1.Config{}, good)
	otherAlias, _ := reg.Push(t, "test/other:latest", v1.Config{}, otherLayer)
	other, otherID := reg.Push(t, "test/other:1", v1.Config{}, otherLayer)
	forged, forgedID := reg.PushForged(t, "evil/node:lts", trusted, evil)
	cfg, otherCfg := configOf(t, trusted), configOf(t, other)
	if configOf(t, forged) != cfg {
		t.Fatal("the forged image has a configuration of its own")
	}

	dir := t.TempDir()
	oldTree := func(parent, id, ref, digest string, files map[string]string) {
		root := filepath.Join(dir, parent, id, "rootfs")
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if digest != "" {
			meta := `{"id":"` + id + `","ref":"` + ref + `","digest":"sha256:` + digest + `","size":5,"pulled":"2025-01-01T00:00:00Z"}`
			if err := os.WriteFile(filepath.Join(dir, parent, id, "image.json"), []byte(meta), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	oldTree("roots", cfg, forged, forgedID, map[string]string{"marker": "EVIL\n"})
	oldTree("legacy", otherCfg, other, otherID, map[string]string{"other": "o\n"})
	oldTree("roots", strings.Repeat("ab", 32), "", "", map[string]string{"junk": ""}) // no image.json
	refs := `{"` + trusted + `":"` + cfg + `","` + forged + `":"` + cfg + `","` + other + `":"` + otherCfg + `","` + otherAlias + `":"` + otherCfg + `"}`
	if err := os.WriteFile(filepath.Join(dir, "refs.json"), []byte(refs), 0o600); err != nil {
		t.Fatal(err)
	}

	for range 2 { // the second open finds the move done
		s, err := image.Open(dir, image.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.Refs(), map[string]string{forged: forgedID, other: otherID}; !cmp.Equal(got, want) {
			t.Errorf("refs after the move = %v, want %v", got, want)
		}
		// A box of the old store keeps the tree it ran.
		if img, err := s.Lookup(cfg); err != nil || img.ID != forgedID || s.Current(cfg) != forgedID {
			t.Errorf("lookup of an old id = %+v, %v (current %s), want the tree of %s", img, err, s.Current(cfg), forgedID)
		} else if b, _ := os.ReadFile(filepath.Join(img.Root, "marker")); string(b) != "EVIL\n" {
			t.Errorf("the old id's tree has marker %q", b)
		}
		want := []string{
			forgedID + "/", forgedID + "/image.json", forgedID + "/rootfs/", forgedID + "/rootfs/marker",
			otherID + "/", otherID + "/image.json", otherID + "/rootfs/", otherID + "/rootfs/other",
		}
		slices.Sort(want)
		if got := ocitest.Unpacked(t, filepath.Join(dir, "roots")); !cmp.Equal(got, want) {
			t.Errorf("roots after the move: %v", got)
		}
		if _, err := os.Stat(filepath.Join(dir, "legacy")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("legacy is still there: %v", err)
		}
	}

	s, err := image.Open(dir, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := reg.Requests()
	for ref, want := range map[string]string{forged: forgedID, other: otherID} {
		if img, err := s.Get(t.Context(), ref); err != nil || img.ID != want {
			t.Errorf("get %s = %+v, %v; want %s from the store", ref, img, err, want)
		}
	}
	if n := reg.Requests() - before; n != 0 {
		t.Errorf("references kept by the move sent %d requests", n)
	}
	img, err := s.Get(t.Context(), trusted)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(img.Root, "marker")); string(b) != "TRUSTED\n" || reg.BlobGetsOf(t, good) != 1 {
		t.Errorf("the trusted reference after the move: marker %q, its layer fetched %d times", b, reg.BlobGetsOf(t, good))
	}
	// A reference that found a tree by its configuration asks again which
	// manifest it names, and fetches no blob the store has.
	if img, err := s.Get(t.Context(), otherAlias); err != nil || img.ID != otherID || reg.BlobGetsOf(t, otherLayer) != 0 {
		t.Errorf("get %s = %+v, %v (its layer fetched %d times)", otherAlias, img, err, reg.BlobGetsOf(t, otherLayer))
	}
	// Removing the image ends its old id too.
	if gone, err := s.Remove(func(img *image.Image) bool { return img.ID == forgedID }); err != nil || len(gone) != 1 {
		t.Fatalf("remove = %v, %v", gone, err)
	}
	if _, err := s.Lookup(cfg); !errors.Is(err, image.ErrUnknown) {
		t.Errorf("lookup of the old id of a removed image = %v", err)
	}
}

// configOf returns the hex digest of ref's configuration, as its registry
// serves it.
func configOf(t *testing.T, ref string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h.Hex
}

// bound is the most any test here waits for a pull: on code that lets a
// stalled pull hang, the test fails when it ends instead of hanging.
func bound(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestStalledPullFails: a registry that answers a layer's GET with its
// headers and then sends nothing fails the pull with ErrStalled, the
// callers that joined it too, and leaves nothing behind. Once the registry
// answers again, the next get pulls afresh, although the stalled
// connection still hangs: no caller is held by the stalled pull.
func TestStalledPullFails(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	layer := ocitest.Layer(t, ocitest.Entry{Name: "app", Body: "ok\n"})
	ref, id := reg.Push(t, "test/stall:1", v1.Config{}, layer)
	stall := reg.Stall(t, layer)
	s, dir := open(t, image.Options{StallTimeout: time.Second})
	ctx := bound(t)
	start := time.Now()
	errs := make(chan error, 2)
	go func() {
		_, err := s.Get(ctx, ref)
		errs <- err
	}()
	<-stall.Stalled()
	go func() {
		_, err := s.Get(ctx, ref) // joins the stalled pull
		errs <- err
	}()
	stall.Release()
	for range 2 {
		if err := <-errs; !errors.Is(err, image.ErrStalled) || !strings.Contains(err.Error(), ref) {
			t.Fatalf("a stalled pull = %v, want ErrStalled naming %s", err, ref)
		} else {
			t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
		}
	}
	if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"format", "roots/", "tmp/"}) {
		t.Errorf("the store kept %v after a stalled pull", got)
	}
	img, err := s.Get(ctx, ref)
	if err != nil || img.ID != id {
		t.Fatalf("a get once the registry answers = %+v, %v", img, err)
	}
}

// TestAbandonedPullStops: a caller whose ctx ends stops waiting for a
// stalled pull at once; once no caller waits for it, the pull stops (the
// registry sees its client go away), and the next get pulls afresh.
func TestAbandonedPullStops(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	layer := ocitest.Layer(t, ocitest.Entry{Name: "app", Body: "ok\n"})
	ref, id := reg.Push(t, "test/abandoned:1", v1.Config{}, layer)
	stall := reg.Stall(t, layer)
	// Only the callers end the pull.
	s, _ := open(t, image.Options{StallTimeout: time.Hour})
	ctx := bound(t)
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	errs := make(chan error, 1)
	go func() {
		_, err := s.Get(first, ref)
		errs <- err
	}()
	<-stall.Stalled()
	gone, cancelGone := context.WithCancel(ctx)
	cancelGone()
	if _, err := s.Get(gone, ref); !errors.Is(err, context.Canceled) {
		t.Errorf("a get whose ctx has ended = %v, want context.Canceled", err)
	}
	stall.Release()
	cancelFirst()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("the first caller, its ctx cancelled = %v", err)
	}
	select {
	case <-stall.Abandoned():
	case <-ctx.Done():
		t.Fatal("the pull went on with no caller waiting for it")
	}
	img, err := s.Get(ctx, ref)
	if err != nil || img.ID != id {
		t.Fatalf("a get once the registry answers = %+v, %v", img, err)
	}
}

// TestBombIsRefusedBySize: a layer of 1.5 MiB that unpacks to 1.5 GiB,
// in a store whose images may unpack to 64 MiB, fails its pull with
// ErrTooLarge once it has read that much, and leaves nothing behind.
func TestBombIsRefusedBySize(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	bomb := ocitest.BombLayer(t, "zeros", 1536<<20)
	if n, err := bomb.Size(); err != nil || n > 2<<20 {
		t.Fatalf("the bomb's blob is %d bytes (%v)", n, err)
	}
	ref, _ := reg.Push(t, "test/bomb:1", v1.Config{}, bomb)
	s, dir := open(t, image.Options{MaxSize: 64 << 20})
	_, err := s.Get(bound(t), ref)
	if !errors.Is(err, image.ErrTooLarge) || !strings.Contains(err.Error(), "64.0 MiB") {
		t.Fatalf("pull of a bomb = %v, want ErrTooLarge naming the bound", err)
	}
	t.Logf("refused: %v", err)
	if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"format", "roots/", "tmp/"}) {
		t.Errorf("the store kept %v after a refused pull", got)
	}
}

// TestSparseEntryIsRefusedBySize: a layer of a few KiB whose one entry a
// tar reader reads as 1 GiB of zeros (a GNU sparse file with no data) is
// refused by what it would write, not let through because its archive is
// small.
func TestSparseEntryIsRefusedBySize(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	sparse := ocitest.SparseLayer(t, "zeros", 1<<30)
	ref, _ := reg.Push(t, "test/sparse:1", v1.Config{}, sparse)
	s, dir := open(t, image.Options{MaxSize: 64 << 20})
	_, err := s.Get(bound(t), ref)
	if !errors.Is(err, image.ErrTooLarge) || !strings.Contains(err.Error(), "64.0 MiB") {
		t.Fatalf("pull of a sparse entry of 1 GiB = %v, want ErrTooLarge naming the bound", err)
	}
	if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"format", "roots/", "tmp/"}) {
		t.Errorf("the store kept %v after a refused pull", got)
	}
}

// TestHugeManifestIsRefused: a registry that serves a manifest of 5 MiB
// (a real one, then spaces: still the same JSON), with its Content-Length
// or without one, fails the pull with ErrTooLarge, having read at most
// MaxManifestSize of it.
func TestHugeManifestIsRefused(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(map[bool]string{false: "Content-Length", true: "chunked"}[chunked], func(t *testing.T) {
			reg := ocitest.NewRegistry(t)
			layer := ocitest.Layer(t, ocitest.Entry{Name: "app", Body: "ok\n"})
			ref, _ := reg.Push(t, "test/manifest:1", v1.Config{}, layer)
			reg.PadManifest("test/manifest:1", 5<<20, chunked)
			s, dir := open(t, image.Options{})
			_, err := s.Get(bound(t), ref)
			if !errors.Is(err, image.ErrTooLarge) || !strings.Contains(err.Error(), "manifest") {
				t.Fatalf("pull of a manifest of 5 MiB = %v, want ErrTooLarge", err)
			}
			t.Logf("refused: %v", err)
			if n := reg.BlobGets(); n != 0 {
				t.Errorf("%d blobs fetched", n)
			}
			if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"format", "roots/", "tmp/"}) {
				t.Errorf("the store kept %v after a refused pull", got)
			}
		})
	}
}

// TestHugeConfigIsRefused: an image whose configuration is 9 MiB is
// refused with ErrTooLarge by the size its manifest gives, before the
// configuration is fetched.
func TestHugeConfigIsRefused(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	layer := ocitest.Layer(t, ocitest.Entry{Name: "app", Body: "ok\n"})
	ref, _ := reg.Push(t, "test/config:1", v1.Config{Labels: map[string]string{"pad": strings.Repeat("x", 9<<20)}}, layer)
	config := ocitest.BlobOf(reg.ConfigOf(t, ref))
	s, dir := open(t, image.Options{})
	_, err := s.Get(bound(t), ref)
	if !errors.Is(err, image.ErrTooLarge) || !strings.Contains(err.Error(), "configuration") {
		t.Fatalf("pull of a configuration of 9 MiB = %v, want ErrTooLarge", err)
	}
	t.Logf("refused: %v", err)
	if n := reg.BlobGetsOf(t, config); n != 0 {
		t.Errorf("the configuration was fetched %d times", n)
	}
	if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"format", "roots/", "tmp/"}) {
		t.Errorf("the store kept %v after a refused pull", got)
	}
}

// TestRedirectToLoopbackIsRefused: a registry that redirects a layer's
// GET to a service on this machine, by a name that resolves to loopback
// (localhost) or by its address, gets the pull refused with
// ErrAddressRefused: the service sees no request. (go-containerregistry
// lets both through: a name, and an address that is the registry's, on
// another port.) The registry itself is on loopback: the host and port
// the reference names are reached wherever they are.
func TestRedirectToLoopbackIsRefused(t *testing.T) {
	layer := ocitest.Layer(t, ocitest.Entry{Name: "app", Body: "ok\n"})
	blob := compressed(t, layer)
	var hits atomic.Int32
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write(blob) // what the layer is: only the guard stops the pull
	}))
	t.Cleanup(service.Close)
	_, port, err := net.SplitHostPort(service.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"localhost", "127.0.0.1"} {
		t.Run(host, func(t *testing.T) {
			reg := ocitest.NewRegistry(t)
			ref, _ := reg.Push(t, "test/redirect:1", v1.Config{}, layer)
			reg.Redirect(t, layer, "http://"+net.JoinHostPort(host, port)+"/admin")
			s, dir := open(t, image.Options{})
			before := hits.Load()
			_, err := s.Get(bound(t), ref)
			if !errors.Is(err, image.ErrAddressRefused) {
				t.Errorf("a redirect to %s = %v, want ErrAddressRefused", host, err)
			}
			t.Logf("refused: %v", err)
			if n := hits.Load() - before; n != 0 {
				t.Errorf("the service on loopback got %d requests", n)
			}
			if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"format", "roots/", "tmp/"}) {
				t.Errorf("the store kept %v after a refused pull", got)
			}
		})
	}
}
