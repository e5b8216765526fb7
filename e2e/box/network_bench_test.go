package box_test

// Benchmarks of box networking on this machine:
//
//	go test -run '^$' -bench 'PublicURL|Egress' -benchtime=20x ./box/
//
// BenchmarkPublicURLThroughput downloads 64 MiB from a server in a box
// through its public URL (boxd → the box's agent over its unix socket →
// the server on the box's loopback), and for comparison from the same
// server program run directly on the host's loopback. The MB/s column is
// the result.
//
// BenchmarkPublicURLLatency alternates small GETs (keep-alive) through a
// public URL and directly, and reports the medians and their difference:
// what a public URL adds to a request.
//
// BenchmarkEgressThroughput has curl in a box download 256 MiB from a
// server on the host through the box's egress proxy (the agent's relay on
// 127.0.0.1:3128 → boxd's proxy on the box's unix socket → the server).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
)

// hostNetServer runs the netserver binary on the host's loopback and
// returns its base URL.
func hostNetServer(b *testing.B, bin string) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-addr", addr)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if i > 200 {
			b.Fatalf("netserver on the host did not start: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// netBench is a box running netserver on port 3000 behind a public URL,
// and the same program on the host.
type netBench struct {
	ns     *netServer
	box    *box.Box
	url    string // public URL
	direct string // host server
	hc     *http.Client
}

func newNetBench(b *testing.B) *netBench {
	b.Helper()
	nb := &netBench{ns: newNetServer(b, netOptions{})}
	bin := buildNetServer(b)
	nb.box = nb.ns.create(b, nil)
	startNetServer(b, nb.box, bin, 3000)
	pu, err := nb.box.GetPublicURL(b.Context(), 3000, nil)
	if err != nil {
		b.Fatal(err)
	}
	nb.url = pu.URL
	nb.direct = hostNetServer(b, bin)
	nb.hc = previewClient(b)
	return nb
}

func (nb *netBench) get(b *testing.B, u string, want int64) {
	resp, err := nb.hc.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || (want >= 0 && n != want) {
		b.Fatalf("GET %s: %d, %d bytes, %v", u, resp.StatusCode, n, err)
	}
}

func BenchmarkPublicURLThroughput(b *testing.B) {
	nb := newNetBench(b)
	const size = 64 << 20
	for _, tc := range []struct{ name, base string }{{"direct", nb.direct}, {"public-url", nb.url}} {
		b.Run(tc.name, func(b *testing.B) {
			u := tc.base + "/bytes?n=" + strconv.Itoa(size)
			nb.get(b, u, size) // warm: connection, page cache
			b.SetBytes(size)
			for b.Loop() {
				nb.get(b, u, size)
			}
		})
	}
}

func BenchmarkPublicURLLatency(b *testing.B) {
	nb := newNetBench(b)
	var direct, public []time.Duration
	for range 20 { // warm both paths' connections
		nb.get(b, nb.direct+"/id", -1)
		nb.get(b, nb.url+"/id", -1)
	}
	for b.Loop() {
		t0 := time.Now()
		nb.get(b, nb.direct+"/id", -1)
		t1 := time.Now()
		nb.get(b, nb.url+"/id", -1)
		direct = append(direct, t1.Sub(t0))
		public = append(public, time.Since(t1))
	}
	d, p := median(direct), median(public)
	b.ReportMetric(float64(d.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(p.Microseconds()), "public-url-p50-µs")
	b.ReportMetric(float64((p - d).Microseconds()), "added-p50-µs")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func BenchmarkEgressThroughput(b *testing.B) {
	ns := newNetServer(b, netOptions{})
	bin := buildNetServer(b)
	host := hostNetServer(b, bin)
	_, port, _ := net.SplitHostPort(host[len("http://"):])
	bx := ns.create(b, nil)
	const size = 256 << 20
	cmd := fmt.Sprintf("curl -sS -f -o /dev/null http://host.boxd.internal:%s/bytes?n=%d", port, size)
	run := func() {
		r, err := bx.Exec.Command(context.Background(), cmd)
		if err != nil || r.ExitCode != 0 {
			b.Fatalf("%s: %+v, %v", cmd, r, err)
		}
	}
	run()
	b.SetBytes(size)
	for b.Loop() {
		run()
	}
}
