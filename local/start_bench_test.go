package local_test

import (
	"context"
	"math"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// The figures of a box's start: how long a new box takes to run its
// first command, alone and in a burst, and how much processor time each
// one costs boxd (and the client, which is in the same process) from its
// create to its delete. BenchmarkForkExec is the yardstick: the same
// command started on the host.
//
//	go test -run '^$' -bench 'ForkExec|CreateExec|CreateBurst' ./local/
//
// Each runs without a warm pool (cold) and with one (warm-pool).

// burstSize is how many boxes BenchmarkCreateBurst creates at once.
const burstSize = 50

// BenchmarkForkExec measures fork+exec of `sh -c true` on the host.
func BenchmarkForkExec(b *testing.B) {
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command("sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportLatencies(b, lat)
}

// BenchmarkCreateExec measures Create and the box's first
// Exec.Command(ctx, "true"), one box at a time, without a warm pool
// (cold) and with one that is full at each create (warm-pool), against
// fork+exec of `sh -c true` in the same loop (fork-p50-ms, and ratio =
// the create's median over fork+exec's). The box is deleted, and the
// pool refilled, outside the timed region, but within the processor time
// counted for it.
func BenchmarkCreateExec(b *testing.B) {
	for _, bc := range poolCases(4) {
		b.Run(bc.name, func(b *testing.B) {
			srv := bc.server(b)
			c := srv.Client()
			ctx := b.Context()
			// A first box, not counted, so that nothing timed is done only once.
			createExec(ctx, b, c).delete(ctx, b)
			bc.wait(b, srv)
			var lat, forks []time.Duration
			cpu0 := cpuTime()
			for b.Loop() {
				forks = append(forks, timed(func() { forkExec(b) }))
				r := createExec(ctx, b, c)
				lat = append(lat, r.d)
				b.StopTimer()
				r.delete(ctx, b)
				bc.wait(b, srv)
				b.StartTimer()
			}
			reportLatencies(b, lat)
			reportForks(b, lat, forks)
			b.ReportMetric(millis((cpuTime()-cpu0)/time.Duration(len(lat))), "cpu-ms/box")
		})
	}
}

// BenchmarkCreateBurst creates burstSize boxes at once, each followed by
// its first command, without a warm pool (cold) and with a pool of
// burstSize that is full at each burst (warm-pool), and reports the
// median and p95 of those times, the wall time of the whole burst, the
// processor time per box (its delete, and the pool's refill, included),
// and fork+exec's median in the same run with ratio = the burst's median
// over it.
func BenchmarkCreateBurst(b *testing.B) {
	for _, bc := range poolCases(burstSize) {
		b.Run(bc.name, func(b *testing.B) {
			srv := bc.server(b)
			c := srv.Client()
			ctx := b.Context()
			createExec(ctx, b, c).delete(ctx, b)
			bc.wait(b, srv)
			var lat, walls, forks []time.Duration
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				for range 10 {
					forks = append(forks, timed(func() { forkExec(b) }))
				}
				b.StartTimer()
				cpu0 := cpuTime()
				t0 := time.Now()
				rs := make([]started, burstSize)
				var wg sync.WaitGroup
				for i := range rs {
					wg.Go(func() { rs[i] = createExec(ctx, b, c) })
				}
				wg.Wait()
				walls = append(walls, time.Since(t0))
				b.StopTimer()
				for _, r := range rs {
					if r.box == nil {
						b.FailNow()
					}
					lat = append(lat, r.d)
				}
				for _, r := range rs {
					wg.Go(func() { r.delete(ctx, b) })
				}
				wg.Wait()
				bc.wait(b, srv)
				cpu += cpuTime() - cpu0
				b.StartTimer()
			}
			reportLatencies(b, lat)
			reportForks(b, lat, forks)
			b.ReportMetric(millis(percentile(walls, 50)), "wall-ms")
			b.ReportMetric(millis(cpu/time.Duration(len(lat))), "cpu-ms/box")
		})
	}
}

// poolCase is a boxd without a warm pool, or with one of a size.
type poolCase struct {
	name string
	pool int
}

func poolCases(n int) []poolCase {
	return []poolCase{{"cold", 0}, {"warm-pool", n}}
}

func (pc poolCase) server(b *testing.B) *boxtest.Server {
	return boxtest.NewServer(b, boxtest.WithConfig(func(c *local.Config) { c.WarmPool = pc.pool }))
}

// wait waits for the pool to be full again.
func (pc poolCase) wait(b *testing.B, srv *boxtest.Server) {
	if pc.pool == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	if err := srv.Backend().WaitWarmPool(ctx); err != nil {
		b.Fatalf("WaitWarmPool: %v", err)
	}
	if n := srv.Backend().WarmPoolSize(); n != pc.pool {
		b.Fatalf("the warm pool holds %d, want %d", n, pc.pool)
	}
}

// reportForks adds fork+exec's median to b's result, and the ratio of
// lat's median to it.
func reportForks(b *testing.B, lat, forks []time.Duration) {
	if len(lat) == 0 || len(forks) == 0 {
		return
	}
	f := percentile(forks, 50)
	b.ReportMetric(millis(f), "fork-p50-ms")
	b.ReportMetric(float64(percentile(lat, 50))/float64(f), "ratio")
}

// started is a box that has run its first command, d after its create
// began.
type started struct {
	box *box.Box
	d   time.Duration
}

func (s started) delete(ctx context.Context, b *testing.B) {
	if err := s.box.Delete(ctx); err != nil {
		b.Errorf("Delete: %v", err)
	}
}

// createExec creates a box and runs `true` in it. It may run on any
// goroutine: it reports a failure with Errorf and returns no box.
func createExec(ctx context.Context, b *testing.B, c *box.Client) started {
	t0 := time.Now()
	bx, err := c.Create(ctx, nil)
	if err != nil {
		b.Errorf("Create: %v", err)
		return started{}
	}
	r, err := bx.Exec.Command(ctx, "true")
	d := time.Since(t0)
	switch {
	case err != nil:
		b.Errorf("Exec.Command: %v", err)
	case r.ExitCode != 0:
		b.Errorf("exit code %d: %s", r.ExitCode, r.Result)
	}
	return started{box: bx, d: d}
}

// reportLatencies adds the median and p95 of lat to b's result.
func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(millis(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(millis(percentile(lat, 95)), "p95-ms")
}

// percentile returns the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
