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
// agent once answered some of them "exit 0" with empty or cut output. It
// logs the figures: wrong answers, bytes lost, latency.
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
		d                time.Duration
		problems         []string
		sizeOut, sizeErr int // of the expected output
		lostOut, lostErr int // bytes of it not received as written
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "exec %d line $i of %d: the quick brown fox"; i=$((i+1)); done; echo "exec %d on stderr" >&2; exit %d`, lines, i, lines, i, i%7)
			stdout, stderr, code := want(i)
			o := &out[i]
			o.sizeOut, o.sizeErr = len(stdout), len(stderr)
			t0 := time.Now()
			r, err := b.Exec.Command(t.Context(), script)
			o.d = time.Since(t0)
			if err != nil {
				o.problems = append(o.problems, err.Error())
				o.lostOut, o.lostErr = len(stdout), len(stderr)
				return
			}
			// Every part is checked, whatever another part got.
			if r.ExitCode != code {
				o.problems = append(o.problems, fmt.Sprintf("exit code %d, want %d", r.ExitCode, code))
			}
			o.lostOut, o.lostErr = lost(stdout, r.Stdout), lost(stderr, r.Stderr)
			if r.Stdout != stdout {
				o.problems = append(o.problems, fmt.Sprintf("stdout has %d bytes, want %d (%d lost)", len(r.Stdout), len(stdout), o.lostOut))
			}
			if r.Stderr != stderr {
				o.problems = append(o.problems, fmt.Sprintf("stderr %q, want %q", r.Stderr, stderr))
			}
		}()
	}
	wg.Wait()
	total := time.Since(start)
	var ds []time.Duration
	failed, lostOut, lostErr, bytes := 0, 0, 0, 0
	for i, o := range out {
		ds = append(ds, o.d)
		lostOut += o.lostOut
		lostErr += o.lostErr
		bytes += o.sizeOut + o.sizeErr
		if len(o.problems) > 0 {
			failed++
			if failed <= 10 {
				t.Errorf("exec %d: %s", i, strings.Join(o.problems, "; "))
			}
		}
	}
	slices.Sort(ds)
	t.Logf("%d concurrent execs in %v: %d wrong; %d of %d bytes lost (stdout %d, stderr %d); latency p50 %v, p99 %v, max %v",
		n, total.Round(time.Millisecond), failed, lostOut+lostErr, bytes, lostOut, lostErr,
		ds[n/2].Round(time.Millisecond), ds[n*99/100].Round(time.Millisecond), ds[n-1].Round(time.Millisecond))
	if lostOut+lostErr > 0 {
		t.Errorf("%d bytes of output lost", lostOut+lostErr)
	}
}

// lost counts the bytes of want that got does not hold as written: all
// of them from the first one that differs, or that is missing.
func lost(want, got string) int {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return len(want) - i
}
