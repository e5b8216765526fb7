package local_test

import (
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/ocitest"
	"github.com/upstash/box-go/local"
)

// debianRootfs returns a tarball of a minimal Debian (the host's release)
// with python3, built from Debian's archive with mmdebstrap. It is built
// once per machine and kept in the user's cache directory.
func debianRootfs(t testing.TB) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	suite := "bookworm"
	if raw, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "VERSION_CODENAME="); ok && v != "" {
				suite = v
			}
		}
	}
	out := filepath.Join(cache, "box-go-tests", "debian-"+suite+"-python3.tar")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	mmdebstrap, err := exec.LookPath("mmdebstrap")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set and mmdebstrap is not installed (./scripts/deps.sh --tests installs it)")
		}
		t.Skip("mmdebstrap is not installed")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(out), "partial-"+filepath.Base(out)) // mmdebstrap takes the format from the name: .tar
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), mmdebstrap, "--quiet", "--variant=essential", "--include=python3",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
		suite, tmp)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		t.Fatalf("mmdebstrap: %v\n%s", err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s with mmdebstrap in %v", out, time.Since(start).Round(time.Millisecond))
	return out
}

// pushDebian pushes the Debian root file system as a one-layer image.
func pushDebian(t testing.TB, reg *ocitest.Registry) string {
	t.Helper()
	l, err := tarball.LayerFromFile(debianRootfs(t), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := reg.Push(t, "debian/python:3", v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}}, l)
	return ref
}

// pythonImageServer is boxd with ref as the python runtime's image.
func pythonImageServer(t testing.TB, ref string) *boxtest.Server {
	return boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.Root = local.RootImage
		c.Images = map[string]string{"python": ref}
	}))
}

// TestDebianRuntimeImage runs python3 in a box whose root is an image built
// from Debian's packages, and reports the pull and the create + first exec
// from the cached image.
func TestDebianRuntimeImage(t *testing.T) {
	t.Parallel()
	requireImages(t)
	reg := ocitest.NewRegistry(t)
	ref := pushDebian(t, reg)
	srv := pythonImageServer(t, ref)
	start := time.Now()
	b := newBox(t, srv, &box.CreateParams{Runtime: box.RuntimePython})
	pulled := time.Since(start)
	got := mustExec(t, b, `python3 -c 'import sys, sqlite3; print(sys.version_info[0], sqlite3.sqlite_version_info[0])'; cat /etc/debian_version >/dev/null && echo debian; command -v python3`)
	if got != "3 3\ndebian\n/usr/bin/python3\n" {
		t.Errorf("python3 in the Debian image: %q", got)
	}
	if err := b.Files.WriteText(t.Context(), "/workspace/home/app.py", "import json\nprint(json.dumps({'sum': sum(range(10))}))\n"); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, b, "python3 app.py"); got != "{\"sum\": 45}\n" {
		t.Errorf("python3 app.py = %q", got)
	}
	var lat []time.Duration
	for range 10 {
		start := time.Now()
		nb := newBox(t, srv, &box.CreateParams{Runtime: box.RuntimePython})
		mustExec(t, nb, "true")
		lat = append(lat, time.Since(start))
		if err := nb.Delete(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(lat)
	imgs, _ := srv.Backend().Images()
	var size int64
	if len(imgs) == 1 {
		size = imgs[0].Size
	}
	t.Logf("Debian python3 image (%d MB unpacked): first create with the pull %v; create + first exec from the cached image: median %v, max %v",
		size/1e6, pulled.Round(time.Millisecond), lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))
}

// BenchmarkImagePull pulls and unpacks the Debian python3 image from a
// registry on loopback into an empty store, per iteration.
func BenchmarkImagePull(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root for bubblewrap boxes of images")
	}
	reg := ocitest.NewRegistry(b)
	ref := pushDebian(b, reg)
	for b.Loop() {
		b.StopTimer()
		srv := pythonImageServer(b, ref)
		b.StartTimer()
		if _, err := srv.Client().Create(b.Context(), &box.CreateParams{Runtime: box.RuntimePython}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateAndFirstExecImage is BenchmarkCreateAndFirstExec (package
// box) for a box whose root is a cached image (the Debian python3 one).
func BenchmarkCreateAndFirstExecImage(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root for bubblewrap boxes of images")
	}
	reg := ocitest.NewRegistry(b)
	ref := pushDebian(b, reg)
	srv := pythonImageServer(b, ref)
	ctx := b.Context()
	warm, err := srv.Client().Create(ctx, &box.CreateParams{Runtime: box.RuntimePython})
	if err != nil {
		b.Fatal(err)
	}
	_ = warm.Delete(ctx)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		bx, err := srv.Client().Create(ctx, &box.CreateParams{Runtime: box.RuntimePython})
		if err != nil {
			b.Fatal(err)
		}
		r, err := bx.Exec.Command(ctx, "true")
		lat = append(lat, time.Since(start))
		if err != nil || r.ExitCode != 0 {
			b.Fatalf("exec: %+v, %v", r, err)
		}
		b.StopTimer()
		if err := bx.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}
