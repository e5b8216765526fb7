//go:build linux

package local_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/ocitest"
	"github.com/upstash/box-go/local"
)

// TestFullDataDir runs boxd on a 96 MiB file system of 8,192 inodes and
// fills it from a box. The box's own write fails with ENOSPC, a file
// written through the API in any way is 507 and leaves nothing, a
// directory is 507 once the inodes are used up too, a new box and a
// snapshot are refused with 507 and a message that says why, boxd keeps
// answering, and once the box frees its space all works again.
func TestFullDataDir(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	dir := t.TempDir()
	if err := unix.Mount("boxd-test", dir, "tmpfs", 0, "size=96m,nr_inodes=8192,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	srv := boxtest.NewServer(t, boxtest.WithDataDir(dir), boxtest.WithConfig(func(c *local.Config) { c.MinFreeDisk = 16 << 20 }))
	ctx := t.Context()
	b := newBox(t, srv, nil)

	r, err := b.Exec.Command(ctx, "head -c 200000000 /dev/zero > big; echo $?")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Stderr+r.Stdout, "No space left on device") {
		t.Errorf("filling the disk from the box: %+v", r)
	}
	_, err = b.Files.WriteFrom(ctx, "/workspace/home/more.bin", strings.NewReader(strings.Repeat("x", 1<<20)), nil)
	if box.StatusCode(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("a write through the API on a full disk = %v, want 507", err)
	}
	// Every other way of writing a file through the API: a JSON write,
	// an upload of a small file. Each is 507, and no file is left that
	// looks written.
	writes := map[string]func() error{
		"Write": func() error {
			return b.Files.Write(ctx, "/workspace/home/small.txt", []byte(strings.Repeat("y", 64<<10)))
		},
		"Upload": func() error {
			return b.Files.Upload(ctx, []box.UploadFile{{Destination: "/workspace/home/up.bin", Reader: strings.NewReader(strings.Repeat("z", 256<<10))}})
		},
	}
	for name, write := range writes {
		if err := write(); box.StatusCode(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "no space left on device") {
			t.Errorf("%s on a full disk = %v (status %d), want 507", name, err, box.StatusCode(err))
		}
	}
	if got := mustExec(t, b, "for f in more.bin small.txt up.bin; do [ -e $f ] && echo $f $(stat -c %s $f); done; true"); got != "" {
		t.Errorf("files the refused writes left (name, size): %q", got)
	}
	// A directory takes no data block on this file system (tmpfs), only
	// an inode: with the blocks used up, Mkdir still succeeds, as mkdir
	// does in the box. Once the box has used up the inodes as well,
	// Mkdir is 507, and so is mkdir in the box.
	if err := b.Files.Mkdir(ctx, "/workspace/home/d/e", &box.MkdirParams{Parents: true}); err != nil {
		t.Errorf("Mkdir with the blocks used up and inodes left: %v", err)
	} else if fi, err := b.Files.Stat(ctx, "/workspace/home/d/e", nil); err != nil || fi.Type != box.FileTypeDirectory {
		t.Errorf("the directory Mkdir made: %+v, %v", fi, err)
	}
	// A snippet of code is a file in /tmp, which is full too.
	if _, err := b.Exec.Code(ctx, &box.CodeParams{Lang: box.LangPython, Code: "print(1)"}); box.StatusCode(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("code on a full disk = %v (status %d), want 507", err, box.StatusCode(err))
	}
	if got := mustExec(t, b, `python3 -c '
import errno, os
os.mkdir("/workspace/home/inodes")
n = 0
try:
    while True:
        os.mkdir("/workspace/home/inodes/%d" % n)
        n += 1
except OSError as e:
    print(n, errno.errorcode[e.errno])
'`); !strings.HasSuffix(got, " ENOSPC\n") || strings.HasPrefix(got, "0 ") {
		t.Fatalf("using up the inodes from the box: %q, want some directories, then ENOSPC", got)
	}
	err = b.Files.Mkdir(ctx, "/workspace/home/d/f/g", &box.MkdirParams{Parents: true})
	if box.StatusCode(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("Mkdir with the inodes used up = %v (status %d), want 507", err, box.StatusCode(err))
	}
	err = b.Files.Mkdir(ctx, "/workspace/home/d/h", nil)
	if box.StatusCode(err) != http.StatusInsufficientStorage {
		t.Errorf("Mkdir of one directory with the inodes used up = %v (status %d), want 507", err, box.StatusCode(err))
	}
	mustExec(t, b, "rm -r /workspace/home/inodes")
	_, err = srv.Client().Create(ctx, nil)
	if box.StatusCode(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "cannot create a box: boxd's data directory has") || !strings.Contains(err.Error(), "less than the 16 MB it keeps free") {
		t.Errorf("create on a full disk = %v, want 507 saying why", err)
	}
	if _, err := b.Snapshot(ctx, "full"); box.StatusCode(err) != http.StatusInsufficientStorage {
		t.Errorf("snapshot on a full disk = %v, want 507", err)
	}
	if _, err := srv.Client().List(ctx, nil); err != nil {
		t.Errorf("list on a full disk: %v", err)
	}
	rc, err := b.Files.Open(ctx, "/workspace/home/big", nil)
	if err != nil {
		t.Fatalf("read on a full disk: %v", err)
	}
	n, _ := io.Copy(io.Discard, rc)
	rc.Close()
	if n < 50<<20 {
		t.Errorf("read %d bytes of the big file", n)
	}

	mustExec(t, b, "rm big")
	nb, err := srv.Client().Create(ctx, nil)
	if err != nil {
		t.Fatalf("create once the space is free: %v", err)
	}
	if got := mustExec(t, nb, "echo ok"); got != "ok\n" {
		t.Errorf("exec in the new box: %q", got)
	}
	if _, err := b.Snapshot(ctx, "after"); err != nil {
		t.Errorf("snapshot once the space is free: %v", err)
	}
}

// TestImageBombKeepsMinFreeDisk: a runtime image with a layer of 1.5 MiB
// that unpacks to 1.5 GiB, on a data file system of 256 MiB of which boxd
// keeps 64 MiB free. The create is refused with 507 and a message that
// says why, once the unpack has come down to the free space kept, not
// when the disk is full; nothing of the pull is left, and a box of
// another runtime is created after it.
func TestImageBombKeepsMinFreeDisk(t *testing.T) {
	t.Parallel()
	requireImages(t)
	requireRootSandbox(t)
	dir := t.TempDir()
	if err := unix.Mount("boxd-test", dir, "tmpfs", 0, "size=256m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	reg := ocitest.NewRegistry(t)
	bomb, _ := reg.Push(t, "test/bomb:1", v1.Config{}, ocitest.BusyboxLayer(t), ocitest.BombLayer(t, "zeros", 1536<<20))
	ok := busyboxImage(t, reg, "test/ok:1")
	srv := boxtest.NewServer(t, boxtest.WithDataDir(dir), boxtest.WithConfig(func(c *local.Config) {
		c.MinFreeDisk = 64 << 20
		c.Root = local.RootImage
		c.Images = map[string]string{"ruby": bomb, "python": ok}
	}))
	r := rawFor(t, srv).do("POST", "/v2/box", map[string]any{"runtime": "ruby"}, nil)
	wantError(t, "create of a bomb", r, http.StatusInsufficientStorage, "runtime ruby", bomb, "not enough free disk space", "64.0 MiB")
	for _, sub := range []string{"roots", "tmp"} {
		if ents, err := os.ReadDir(filepath.Join(dir, "images", sub)); err != nil || len(ents) != 0 {
			t.Errorf("images/%s after a refused pull: %v, %v", sub, ents, err)
		}
	}
	b := newBox(t, srv, &box.CreateParams{Runtime: box.Runtime("python")})
	if got := mustExec(t, b, "cat /etc/image-release"); got != "busybox test image\n" {
		t.Errorf("a box of another runtime after the bomb: %q", got)
	}
}
