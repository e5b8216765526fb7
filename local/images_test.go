package local_test

import (
	"archive/tar"
	"net/http"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/ocitest"
	"github.com/upstash/box-go/local"
)

// requireImages skips a test of runtime images where boxd runs without
// bubblewrap: images need it.
func requireImages(t *testing.T) {
	t.Helper()
	if isolation(t) != local.IsolationBwrap {
		t.Skip("runtime images need bubblewrap")
	}
}

// busyboxImage pushes an image whose only programs are Debian's static
// busybox, with a second layer that whites out a file of the first, and
// returns its reference.
func busyboxImage(t *testing.T, reg *ocitest.Registry, repoTag string, env ...string) string {
	t.Helper()
	extra := ocitest.Layer(t,
		ocitest.Entry{Name: "etc/"},
		ocitest.Entry{Name: "etc/.wh.os-release"},
		ocitest.Entry{Name: "etc/image-release", Body: "busybox test image\n"},
		ocitest.Entry{Name: "usr/local/bin/"},
		ocitest.Entry{Name: "usr/local/bin/hello", Body: "#!/bin/sh\necho hello from the image\n", Mode: 0o755},
		ocitest.Entry{Name: "tmp", Type: tar.TypeSymlink, Link: "/etc"},
	)
	ref, _ := reg.Push(t, repoTag, v1.Config{Env: append([]string{"PATH=/usr/local/bin:/bin"}, env...), WorkingDir: "/"}, ocitest.BusyboxLayer(t), extra)
	return ref
}

// TestRuntimeImageIsTheBoxRoot: a box's root is its runtime's image. The
// image has no shell, libc or anything else of the host's: the agent runs
// there, exec runs the image's programs with its PATH and environment,
// upper layers and whiteouts are honoured, the image is read-only, and
// the box's workspace, home and /tmp are its own.
func TestRuntimeImageIsTheBoxRoot(t *testing.T) {
	t.Parallel()
	requireImages(t)
	reg := ocitest.NewRegistry(t)
	ref := busyboxImage(t, reg, "test/busybox:1", "IMAGE_FLAVOUR=busybox", "HOME=/root")
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.Root = local.RootImage
		c.Images = map[string]string{"python": ref}
	}))
	b := newBox(t, srv, &box.CreateParams{Runtime: box.Runtime("python"), Env: map[string]string{"MINE": "1"}})
	got := mustExec(t, b, `echo "$PATH|$IMAGE_FLAVOUR|$MINE|$HOME"; cat /etc/image-release; hello; test -e /etc/os-release || echo whited-out; test -e /usr/bin/bash || test -e /bin/bash || echo no-bash; ls /usr/lib 2>&1 | head -1`)
	want := "/home/boxuser/.local/bin:/home/boxuser/bin:/usr/local/bin:/bin|busybox|1|/home/boxuser\nbusybox test image\nhello from the image\nwhited-out\nno-bash\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("in the image:\n%s\nwant it to start with\n%s", got, want)
	}
	if r, err := b.Exec.Command(t.Context(), "touch /etc/x"); err != nil || r.ExitCode == 0 {
		t.Errorf("writing the image's /etc = %+v, %v; want a failure", r, err)
	}
	if got := mustExec(t, b, "echo a > /tmp/t && echo b > /workspace/home/w && echo c > ~/h && cat /tmp/t /workspace/home/w ~/h && id -u && cat /etc/passwd | grep boxuser"); !strings.HasPrefix(got, "a\nb\nc\n1000\nboxuser:") {
		t.Errorf("the box's own directories: %q", got)
	}
	if err := b.Files.WriteText(t.Context(), "/workspace/home/f.txt", "through the files API"); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, b, "cat f.txt"); got != "through the files API" {
		t.Errorf("a file written through the API = %q", got)
	}
	// The sandbox starts again in its image (a killed sandbox, as after a
	// restart), and the image is fetched no more.
	before := reg.Requests()
	killSandbox(t, b)
	if got := mustExec(t, b, "cat /etc/image-release f.txt"); got != "busybox test image\nthrough the files API" {
		t.Errorf("after a restart: %q", got)
	}
	other := newBox(t, srv, &box.CreateParams{Runtime: box.Runtime("python")})
	mustExec(t, other, "true")
	if n := reg.Requests() - before; n != 0 {
		t.Errorf("a box of a cached image sent %d requests to the registry", n)
	}
}

// TestRuntimeImagePulledOnceAndRefused: concurrent creates of a runtime
// whose image is new pull it once; with the registry gone a runtime whose
// image was never pulled fails create with an error that names the image
// and the reason, and one pulled before still works; unused images are
// pruned.
func TestRuntimeImagePulledOnceAndRefused(t *testing.T) {
	t.Parallel()
	requireImages(t)
	reg := ocitest.NewRegistry(t)
	ref := busyboxImage(t, reg, "test/once:1")
	never := busyboxImage(t, reg, "test/never:1", "NEVER=1")
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.Root = local.RootImage
		c.Images = map[string]string{"node": ref, "ruby": never}
	}))
	var wg sync.WaitGroup
	boxes := make([]*box.Box, 4)
	errs := make([]error, 4)
	for i := range boxes {
		wg.Go(func() {
			boxes[i], errs[i] = srv.Client().Create(t.Context(), nil) // node, the default runtime
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if n := reg.MaxBlobGets(); n != 1 {
		t.Errorf("concurrent creates fetched a blob %d times, want once", n)
	}
	if got := mustExec(t, boxes[3], "cat /etc/image-release"); got != "busybox test image\n" {
		t.Errorf("box of the default runtime: %q", got)
	}
	// A box with a browser runs on the host's /usr, where Chromium is.
	bb := newBox(t, srv, &box.CreateParams{Browser: true})
	if got := mustExec(t, bb, "test -e /etc/image-release || echo host; command -v bash"); got != "host\n/usr/bin/bash\n" {
		t.Errorf("a box with a browser: %q", got)
	}
	if err := bb.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}

	reg.Close()
	c := rawFor(t, srv)
	r := c.do("POST", "/v2/box", map[string]any{"runtime": "ruby"}, nil)
	wantError(t, "create with the registry down", r, http.StatusBadGateway, "runtime ruby", never, "connection refused")
	if b, err := srv.Client().Create(t.Context(), &box.CreateParams{Runtime: box.Runtime("node")}); err != nil {
		t.Errorf("create of a cached runtime with the registry down: %v", err)
	} else {
		boxes = append(boxes, b)
	}

	imgs, err := srv.Backend().Images()
	if err != nil || len(imgs) != 1 || imgs[0].Boxes != len(boxes) || imgs[0].Refs[0] != ref {
		t.Fatalf("images = %+v, %v", imgs, err)
	}
	if gone, err := srv.Backend().PruneImages(); err != nil || len(gone) != 0 {
		t.Errorf("prune with boxes on the image = %+v, %v", gone, err)
	}
	for _, b := range boxes {
		if err := b.Delete(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := srv.Backend().PruneImages()
	if err != nil || len(gone) != 1 || gone[0].ID != imgs[0].ID {
		t.Errorf("prune of an unused image = %+v, %v", gone, err)
	}
	if imgs, _ := srv.Backend().Images(); len(imgs) != 0 {
		t.Errorf("images after the prune: %+v", imgs)
	}
}

// TestForgedImageDoesNotPoisonTrustedRuntime: a registry serves, as one
// runtime's image, the configuration of another runtime's trusted image,
// byte for byte, over layers of its own. After a box of the forged
// runtime, a box of the trusted runtime runs the trusted layers, which
// boxd fetched for it, and the forged runtime's box ran the forged ones:
// two images, each pulled in full.
func TestForgedImageDoesNotPoisonTrustedRuntime(t *testing.T) {
	t.Parallel()
	requireImages(t)
	reg := ocitest.NewRegistry(t)
	good := ocitest.Layer(t, ocitest.Entry{Name: "marker", Body: "TRUSTED-node\n"})
	evil := ocitest.Layer(t, ocitest.Entry{Name: "marker", Body: "EVIL-forged\n"}, ocitest.Entry{Name: "etc/"}, ocitest.Entry{Name: "etc/evil", Body: "planted\n"})
	trusted, _ := reg.Push(t, "library/node:lts", v1.Config{Env: []string{"PATH=/bin"}}, ocitest.BusyboxLayer(t), good)
	forged, _ := reg.PushForged(t, "evil/node:lts", trusted, ocitest.BusyboxLayer(t), evil)
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.Root = local.RootImage
		c.Images = map[string]string{"node": trusted, "ruby": forged}
	}))
	hostile := newBox(t, srv, &box.CreateParams{Runtime: box.Runtime("ruby")})
	if got := mustExec(t, hostile, "cat /marker"); got != "EVIL-forged\n" {
		t.Errorf("the forged runtime's box: /marker = %q", got)
	}
	if n := reg.BlobGetsOf(t, evil); n != 1 {
		t.Errorf("the forged layer was fetched %d times, want once", n)
	}
	for i := range 2 { // the second box is served from the store
		b := newBox(t, srv, &box.CreateParams{Runtime: box.Runtime("node")})
		if got := mustExec(t, b, "cat /marker; test -e /etc/evil && echo poisoned; true"); got != "TRUSTED-node\n" {
			t.Errorf("box %d of the trusted runtime: %q, want the trusted /marker alone", i, got)
		}
	}
	if n := reg.BlobGetsOf(t, good); n != 1 {
		t.Errorf("the trusted runtime's own layer was fetched %d times, want once", n)
	}
	imgs, err := srv.Backend().Images()
	if err != nil || len(imgs) != 2 || imgs[0].ID == imgs[1].ID {
		t.Fatalf("images = %+v, %v; want two", imgs, err)
	}
	boxes := map[string]int{}
	for _, img := range imgs {
		boxes[img.Refs[0]] = img.Boxes
	}
	if boxes[trusted] != 2 || boxes[forged] != 1 {
		t.Errorf("boxes per image = %v", boxes)
	}
}

// TestImageEnvKeepsBoxdProxy: an image whose configuration sets the proxy
// variables (in upper, lower and mixed case), the CA bundle's and Node's
// switch for the proxy to bogus values does not change them in its boxes:
// their programs go through boxd's egress proxy and trust its CA. The
// image's other variables stay, and the box's own env still comes first.
func TestImageEnvKeepsBoxdProxy(t *testing.T) {
	t.Parallel()
	requireImages(t)
	reg := ocitest.NewRegistry(t)
	ref := busyboxImage(t, reg, "test/proxy:1",
		"HTTP_PROXY=http://bogus:1", "https_proxy=http://bogus:2", "Http_Proxy=http://bogus:3", "ALL_PROXY=socks5://bogus:4",
		"no_proxy=*", "SSL_CERT_FILE=/bogus.pem", "NODE_USE_ENV_PROXY=0", "IMAGE_KEEP=kept")
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.Root = local.RootImage
		c.Images = map[string]string{"node": ref}
	}))
	b := newBox(t, srv, &box.CreateParams{Env: map[string]string{"MINE": "1"}})
	env := map[string]string{}
	for _, kv := range strings.Split(mustExec(t, b, "env"), "\n") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for k, v := range env {
		if strings.Contains(v, "bogus") || strings.EqualFold(k, "Http_Proxy") && k != "HTTP_PROXY" && k != "http_proxy" {
			t.Errorf("the image's %s=%s is in the box", k, v)
		}
	}
	const proxy = "http://127.0.0.1:3128"
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		if env[k] != proxy {
			t.Errorf("%s = %q, want boxd's proxy %s", k, env[k], proxy)
		}
	}
	if !strings.HasPrefix(env["no_proxy"], "localhost,") || env["NODE_USE_ENV_PROXY"] != "1" || env["SSL_CERT_FILE"] == "" {
		t.Errorf("no_proxy %q, NODE_USE_ENV_PROXY %q, SSL_CERT_FILE %q: want boxd's", env["no_proxy"], env["NODE_USE_ENV_PROXY"], env["SSL_CERT_FILE"])
	}
	if env["IMAGE_KEEP"] != "kept" || env["MINE"] != "1" {
		t.Errorf("IMAGE_KEEP %q, MINE %q: the image's other variables and the box's own are lost", env["IMAGE_KEEP"], env["MINE"])
	}
}
