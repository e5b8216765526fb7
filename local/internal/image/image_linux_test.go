package image_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/upstash/box-go/internal/ocitest"
	"github.com/upstash/box-go/local/internal/image"
)

// TestBombKeepsMinFree: a layer of 1.5 MiB that unpacks to 1.5 GiB, under
// the default bound of size, in a store on a file system of 192 MiB that
// keeps 64 MiB free, stops unpacking when the free space is down to that,
// fails with ErrNoSpace, and leaves nothing behind: the file system has
// what it had free before.
func TestBombKeepsMinFree(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref, _ := reg.Push(t, "test/bomb:1", v1.Config{}, ocitest.BombLayer(t, "zeros", 1536<<20))
	dir := t.TempDir()
	if err := unix.Mount("image-test", dir, "tmpfs", 0, "size=192m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	s, err := image.Open(dir, image.Options{MinFree: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	before := free(t, dir)
	_, err = s.Get(bound(t), ref)
	if !errors.Is(err, image.ErrNoSpace) {
		t.Fatalf("pull of a bomb near the free space kept = %v, want ErrNoSpace", err)
	}
	t.Logf("refused: %v", err)
	if got := ocitest.Unpacked(t, dir); !cmp.Equal(got, []string{"format", "roots/", "tmp/"}) {
		t.Errorf("the store kept %v after a refused pull", got)
	}
	if after := free(t, dir); after != before {
		t.Errorf("%d bytes free after the pull, %d before", after, before)
	}
}

func free(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
