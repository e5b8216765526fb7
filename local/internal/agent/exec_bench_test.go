//go:build linux

package agent

import (
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkExecVsForkExec measures the agent's share of an exec: a real
// agent, serving on a unix socket as in a box but without isolation, runs
// `sh -c true` for its client (an HTTP request, the command's pipes, its
// wait), against fork+exec of `sh -c true` here, alternated in one loop.
// boxd's own BenchmarkExecVsForkExec (./local/) adds the client's request
// to boxd and boxd's hop to the agent.
//
//	go test -run '^$' -bench ExecVsForkExec -benchtime=1000x ./local/internal/agent/
//
// It reports both medians and ratio = the exec's median over fork+exec's.
func BenchmarkExecVsForkExec(b *testing.B) {
	c, _ := realAgent(b, "box-test")
	ctx := b.Context()
	run := func() {
		r, err := c.Exec(ctx, []string{"sh", "-c", "true"}, "")
		if err != nil || r.ExitCode != 0 {
			b.Fatalf("Exec: %+v, %v", r, err)
		}
	}
	fork := func() {
		if err := exec.Command("sh", "-c", "true").Run(); err != nil {
			b.Fatalf("sh -c true: %v", err)
		}
	}
	run() // the connection is open before anything is timed
	var execs, forks []time.Duration
	i := 0
	for b.Loop() {
		first, second, fa, sa := run, fork, &execs, &forks
		if i%2 == 0 {
			first, second, fa, sa = fork, run, &forks, &execs
		}
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		*fa = append(*fa, t1.Sub(t0))
		*sa = append(*sa, time.Since(t1))
		i++
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	e, f := median(execs), median(forks)
	b.ReportMetric(float64(e.Microseconds())/1000, "exec-p50-ms")
	b.ReportMetric(float64(f.Microseconds())/1000, "fork-p50-ms")
	b.ReportMetric(float64(e)/float64(f), "ratio")
}
