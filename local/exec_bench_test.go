package local_test

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// parallelExecs is how many execs BenchmarkExecVsForkExec/parallel runs at
// once.
const parallelExecs = 16

// BenchmarkExecVsForkExec measures an exec round trip on a running box
// (Exec.Command(ctx, "true"), which sends `sh -c true`, through the SDK: boxd, the box's
// agent, the process in the sandbox and the run's record) against fork+exec
// of `sh -c true` on the host, in the same loop, alternating which goes
// first so that the machine's noise falls on both alike.
//
//	go test -run '^$' -bench ExecVsForkExec -benchtime=200x ./local/
//
// latency reports both medians and p95s and ratio = exec median over
// fork+exec median. parallel runs parallelExecs execs one after another
// and then parallelExecs at once (and fork+exec the same two ways), and
// reports each rate and speedup = the parallel exec rate over the
// sequential one.
func BenchmarkExecVsForkExec(b *testing.B) {
	srv := boxtest.NewServer(b)
	ctx := b.Context()
	bx, err := srv.Client().Create(ctx, nil)
	if err != nil {
		b.Fatalf("Create: %v", err)
	}
	benchBoxExec(ctx, b, bx) // the sandbox is up before anything is timed

	b.Run("latency", func(b *testing.B) {
		var execs, forks []time.Duration
		i := 0
		for b.Loop() {
			if i%2 == 0 {
				forks = append(forks, timed(func() { forkExec(b) }))
				execs = append(execs, timed(func() { benchBoxExec(ctx, b, bx) }))
			} else {
				execs = append(execs, timed(func() { benchBoxExec(ctx, b, bx) }))
				forks = append(forks, timed(func() { forkExec(b) }))
			}
			i++
		}
		e, f := percentile(execs, 50), percentile(forks, 50)
		b.ReportMetric(millis(e), "exec-p50-ms")
		b.ReportMetric(millis(percentile(execs, 95)), "exec-p95-ms")
		b.ReportMetric(millis(f), "fork-p50-ms")
		b.ReportMetric(millis(percentile(forks, 95)), "fork-p95-ms")
		b.ReportMetric(float64(e)/float64(f), "ratio")
	})

	b.Run("parallel", func(b *testing.B) {
		var seq, par, fseq, fpar time.Duration
		for b.Loop() {
			seq += timed(func() {
				for range parallelExecs {
					benchBoxExec(ctx, b, bx)
				}
			})
			par += timed(func() {
				var wg sync.WaitGroup
				for range parallelExecs {
					wg.Go(func() { benchBoxExec(ctx, b, bx) })
				}
				wg.Wait()
			})
			fseq += timed(func() {
				for range parallelExecs {
					forkExec(b)
				}
			})
			fpar += timed(func() {
				var wg sync.WaitGroup
				for range parallelExecs {
					wg.Go(func() { forkExec(b) })
				}
				wg.Wait()
			})
		}
		n := float64(b.N * parallelExecs)
		rate := func(d time.Duration) float64 { return n / d.Seconds() }
		b.ReportMetric(rate(seq), "seq-exec/s")
		b.ReportMetric(rate(par), "par-exec/s")
		b.ReportMetric(rate(fseq), "seq-fork/s")
		b.ReportMetric(rate(fpar), "par-fork/s")
		b.ReportMetric(float64(seq)/float64(par), "speedup")
	})
}

// timed returns how long f took.
func timed(f func()) time.Duration {
	t0 := time.Now()
	f()
	return time.Since(t0)
}

// forkExec runs `sh -c true` on the host. It may run on any goroutine.
func forkExec(b *testing.B) {
	if err := exec.Command("sh", "-c", "true").Run(); err != nil {
		b.Errorf("sh -c true: %v", err)
	}
}

// benchBoxExec runs `sh -c true` in bx. It may run on any goroutine.
func benchBoxExec(ctx context.Context, b *testing.B, bx *box.Box) {
	r, err := bx.Exec.Command(ctx, "true")
	switch {
	case err != nil:
		b.Errorf("Exec.Command: %v", err)
	case r.ExitCode != 0:
		b.Errorf("exit code %d: %s", r.ExitCode, r.Result)
	}
}
