package desktop_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// BenchmarkDesktopStart measures a desktop's start: Start, then the
// first screenshot (ms-to-screenshot), and the memory its processes hold
// then (MiB-pss: the proportional set size of Xvfb, openbox, the two
// x11vnc and Chromium's processes, summed, so that pages they share count
// once).
func BenchmarkDesktopStart(b *testing.B) {
	if testing.Short() {
		b.Skip("starts desktops")
	}
	srv := boxtest.NewServer(b)
	ctx := b.Context()
	var total time.Duration
	var rss float64
	for b.Loop() {
		bx, err := srv.Client().Create(ctx, &box.CreateParams{Desktop: true})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := bx.Desktop.Start(ctx, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := bx.Desktop.ScreenshotPNG(ctx, nil); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		r, err := bx.Exec.Command(ctx, "for p in $(pgrep '^(Xvfb|openbox|x11vnc|chromium)$'); do cat /proc/$p/smaps_rollup; done 2>/dev/null | awk '/^Pss:/ {s += $2} END {print s}'")
		if err != nil {
			b.Fatal(err)
		}
		kb, _ := strconv.ParseFloat(strings.TrimSpace(r.Stdout), 64)
		rss += kb / 1024
		if err := bx.Delete(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-screenshot")
	b.ReportMetric(rss/float64(b.N), "MiB-pss")
}
