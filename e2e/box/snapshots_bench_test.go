package box_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// BenchmarkSnapshot200MB measures a snapshot and a restore of a box
// holding 200 MB in 5,000 files of 40 kB, through the SDK against boxd:
//
//	go test -run '^$' -bench Snapshot200MB -benchtime=3x ./box/
//
// It reports snapshot-s (Box.Snapshot, which on boxd includes freezing the
// box and writing the archive), restore-s (Client.FromSnapshot, including
// unpacking the archive), the CPU time this process (boxd and the client)
// spent on each (snapshot-cpu-s, restore-cpu-s: steadier than wall time
// on a busy machine), frozen-s (how long the box was held still, from
// boxd's log) and archive-MB (the snapshot's size_bytes), for two
// kinds of content: random bytes, which do not compress, and Go source
// text from GOROOT, which does. The files are written straight into the
// box's directory on the host, outside the timed region.
func BenchmarkSnapshot200MB(b *testing.B) {
	const files, size = 5000, 40_000
	for _, kind := range []string{"random", "source"} {
		b.Run(kind, func(b *testing.B) {
			content := benchContent(b, kind, files*size)
			srv := boxtest.NewServer(b)
			ctx := b.Context()
			bx, err := srv.Client().Create(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			benchExec(b, bx)
			home := filepath.Join(srv.DataDir(), "boxes", bx.ID(), "fs", "workspace", "home")
			for i := range files {
				dir := filepath.Join(home, fmt.Sprintf("d%02d", i/100)) // 50 directories of 100 files
				if err := os.MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				p := filepath.Join(dir, fmt.Sprintf("f%04d", i))
				if err := os.WriteFile(p, content[i*size:(i+1)*size], 0o644); err != nil {
					b.Fatal(err)
				}
			}
			if os.Geteuid() == 0 {
				_ = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
					if err == nil {
						err = os.Lchown(p, 1000, 1000)
					}
					return err
				})
			}
			var snapTotal, restoreTotal, snapCPU, restoreCPU, frozen time.Duration
			var archive int64
			b.ResetTimer()
			for range b.N {
				start, cpu := time.Now(), cpuTime()
				s, err := bx.Snapshot(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				snapTotal += time.Since(start)
				snapCPU += cpuTime() - cpu
				frozen += benchFrozen(b, bx)
				archive = s.SizeBytes

				start, cpu = time.Now(), cpuTime()
				r, err := srv.Client().FromSnapshot(ctx, s.ID, nil)
				if err != nil {
					b.Fatal(err)
				}
				restoreTotal += time.Since(start)
				restoreCPU += cpuTime() - cpu

				b.StopTimer()
				if run := benchRun(b, r, "find . -type f | wc -l"); strings.TrimSpace(run) != fmt.Sprint(files) {
					b.Fatalf("restored box has %s files", run)
				}
				if err := r.Delete(ctx); err != nil {
					b.Fatal(err)
				}
				if err := bx.DeleteSnapshot(ctx, s.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(snapTotal.Seconds()/float64(b.N), "snapshot-s")
			b.ReportMetric(restoreTotal.Seconds()/float64(b.N), "restore-s")
			b.ReportMetric(snapCPU.Seconds()/float64(b.N), "snapshot-cpu-s")
			b.ReportMetric(frozen.Seconds()/float64(b.N), "frozen-s")
			b.ReportMetric(restoreCPU.Seconds()/float64(b.N), "restore-cpu-s")
			b.ReportMetric(float64(archive)/1e6, "archive-MB")
			b.ReportMetric(0, "ns/op")
		})
	}
}

var heldRE = regexp.MustCompile(`held still for ([0-9.]+[a-zµ]+)\)`)

// benchFrozen reads from boxd's log of bx how long its last snapshot held
// the box frozen.
func benchFrozen(b *testing.B, bx *box.Box) time.Duration {
	b.Helper()
	logs, err := bx.Logs(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := len(logs) - 1; i >= 0; i-- {
		if m := heldRE.FindStringSubmatch(logs[i].Message); m != nil {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
	}
	b.Fatal("no snapshot in the box's log")
	return 0
}

func benchRun(b *testing.B, bx *box.Box, cmd string) string {
	b.Helper()
	r, err := bx.Exec.Command(b.Context(), cmd)
	if err != nil || r.ExitCode != 0 {
		b.Fatalf("%s: %+v, %v", cmd, r, err)
	}
	return r.Stdout
}

// benchContent returns n bytes of random data, or of Go source text.
func benchContent(b *testing.B, kind string, n int) []byte {
	b.Helper()
	if kind == "random" {
		buf := make([]byte, n)
		_, _ = rand.Read(buf)
		return buf
	}
	var buf bytes.Buffer
	for buf.Len() < n {
		before := buf.Len()
		_ = filepath.WalkDir(filepath.Join(runtime.GOROOT(), "src"), func(p string, d fs.DirEntry, err error) error {
			if err != nil || buf.Len() >= n {
				return filepath.SkipAll
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") {
				data, _ := os.ReadFile(p)
				buf.Write(data)
			}
			return nil
		})
		if buf.Len() == before {
			b.Skip("no Go source under GOROOT to build text content from")
		}
	}
	return buf.Bytes()[:n]
}
