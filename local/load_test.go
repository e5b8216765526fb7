package local_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// TestConcurrentExecsLoseNoOutput runs 1,000 execs at once in one box,
// each with output of its own on stdout and stderr and an exit code of
// its own, and checks every byte of every answer. Under such a load the
// agent once answered some of them "exit 0" with empty or cut output.
func TestConcurrentExecsLoseNoOutput(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, &box.CreateParams{Size: box.SizeLarge})
	const n = 1000
	const lines = 200
	want := func(i int) (stdout, stderr string, code int) {
		var sb strings.Builder
		for l := 1; l <= lines; l++ {
			fmt.Fprintf(&sb, "exec %d line %d of %d: the quick brown fox\n", i, l, lines)
		}
		return sb.String(), fmt.Sprintf("exec %d on stderr\n", i), i % 7
	}
	type outcome struct {
		d   time.Duration
		err error
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "exec %d line $i of %d: the quick brown fox"; i=$((i+1)); done; echo "exec %d on stderr" >&2; exit %d`, lines, i, lines, i, i%7)
			t0 := time.Now()
			r, err := b.Exec.Command(t.Context(), script)
			out[i].d = time.Since(t0)
			if err != nil {
				out[i].err = err
				return
			}
			stdout, stderr, code := want(i)
			switch {
			case r.ExitCode != code:
				out[i].err = fmt.Errorf("exit code %d, want %d", r.ExitCode, code)
			case r.Stdout != stdout:
				out[i].err = fmt.Errorf("stdout has %d bytes, want %d (%d lost)", len(r.Stdout), len(stdout), len(stdout)-len(r.Stdout))
			case r.Stderr != stderr:
				out[i].err = fmt.Errorf("stderr %q, want %q", r.Stderr, stderr)
			}
		}()
	}
	wg.Wait()
	total := time.Since(start)
	var ds []time.Duration
	failed := 0
	for i, o := range out {
		ds = append(ds, o.d)
		if o.err != nil {
			failed++
			if failed <= 10 {
				t.Errorf("exec %d: %v", i, o.err)
			}
		}
	}
	slices.Sort(ds)
	t.Logf("%d concurrent execs in %v: %d wrong; latency p50 %v, p99 %v, max %v", n, total.Round(time.Millisecond), failed,
		ds[n/2].Round(time.Millisecond), ds[n*99/100].Round(time.Millisecond), ds[n-1].Round(time.Millisecond))
}
