package session_test

// Benchmarks of live sessions against boxd (boxtest), with a real box:
//
//	go test -run '^$' -bench . -benchtime=20x ./session/
//
// BenchmarkSessionThroughput streams 64 MB of stdout per iteration
// (SetBytes makes `go test` print MB/s). BenchmarkSessionEcho sends one
// line to cat and waits for it to come back, and reports the median and
// p99 round trip (p50-ms, p99-ms). boxd runs in the benchmark's process;
// the box's agent and processes run in other processes.

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/session"
)

func benchBox(b *testing.B) *box.Box {
	b.Helper()
	srv := boxtest.NewServer(b)
	bx, err := srv.Client().Create(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bx.Exec.Command(b.Context(), "true"); err != nil {
		b.Fatal(err)
	}
	return bx
}

func BenchmarkSessionThroughput(b *testing.B) {
	bx := benchBox(b)
	const size = 64 << 20
	for _, tc := range []struct {
		name string
		p    box.SessionParams
	}{
		{"pipe", box.SessionParams{Cmd: "dd if=/dev/zero bs=1M count=64 status=none"}},
		{"tty", box.SessionParams{Cmd: "stty raw -echo; dd if=/dev/zero bs=1M count=64 status=none", TTY: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(size)
			buf := make([]byte, 256<<10)
			for b.Loop() {
				s, err := bx.Exec.Session(b.Context(), &tc.p)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, s.Stdout, buf)
				if err != nil || n != size {
					b.Fatalf("read %d bytes, %v", n, err)
				}
				if code, err := s.Wait(b.Context()); code != 0 || err != nil {
					b.Fatalf("Wait = %d, %v", code, err)
				}
				s.Close()
			}
		})
	}
}

func BenchmarkSessionEcho(b *testing.B) {
	bx := benchBox(b)
	for _, tc := range []struct {
		name string
		p    box.SessionParams
	}{
		{"pipe", box.SessionParams{Cmd: "echo ready; exec cat"}},
		// Raw mode: the terminal neither echoes input nor edits lines.
		{"tty", box.SessionParams{Cmd: "stty raw -echo; echo ready; exec cat", TTY: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := bx.Exec.Session(b.Context(), &tc.p)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			rw := struct {
				io.Writer
				io.Reader
			}{s.Stdin, s.Stdout}
			// Input typed before stty has run would be echoed: wait.
			ready := make([]byte, len("ready\n"))
			if _, err := io.ReadFull(s.Stdout, ready); err != nil || string(ready) != "ready\n" {
				b.Fatalf("ready line = %q, %v", ready, err)
			}
			line := []byte("ping 0123456789\n")
			got := make([]byte, len(line))
			for range 10 { // warm up
				roundTrip(b, rw, line, got)
			}
			var lat []time.Duration
			for b.Loop() {
				t := time.Now()
				roundTrip(b, rw, line, got)
				lat = append(lat, time.Since(t))
			}
			slices.Sort(lat)
			b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
			b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
		})
	}
}

func roundTrip(b *testing.B, s interface {
	io.Writer
	io.Reader
}, line, got []byte) {
	if _, err := s.Write(line); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(s, got); err != nil {
		b.Fatal(err)
	}
	if !bytes.Equal(got, line) {
		b.Fatalf("echo = %q, want %q", got, line)
	}
}

// percentile returns the nearest-rank p-th percentile of sorted l.
func percentile(l []time.Duration, p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(l)))) - 1
	return l[min(max(i, 0), len(l)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// zeroProc is a process that writes n zero bytes and exits.
type zeroProc struct{ r io.Reader }

func (p *zeroProc) PID() int              { return 1 }
func (p *zeroProc) Stdout() io.Reader     { return p.r }
func (p *zeroProc) Stderr() io.Reader     { return nil }
func (p *zeroProc) Stdin() io.WriteCloser { return nopWriteCloser{} }
func (p *zeroProc) Resize(int, int) error { return nil }
func (p *zeroProc) Signal(string) error   { return nil }
func (p *zeroProc) Wait() int             { return 0 }
func (p *zeroProc) Kill() error           { return nil }
func (p *zeroProc) Close() error          { return nil }

type nopWriteCloser struct{}

func (nopWriteCloser) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriteCloser) Close() error                { return nil }

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// BenchmarkLoopbackThroughput is BenchmarkSessionThroughput without boxd,
// a box or a process: the session package's client and server over a
// loopback TCP connection, which shows what the protocol itself costs.
func BenchmarkLoopbackThroughput(b *testing.B) {
	const size = 64 << 20
	h := &session.Handler{Start: func(ctx context.Context, req *session.Start) (session.Process, error) {
		return &zeroProc{r: io.LimitReader(zeros{}, size)}, nil
	}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	b.SetBytes(size)
	buf := make([]byte, 256<<10)
	for b.Loop() {
		s, err := session.Dial(b.Context(), srv.URL, &session.Start{Cmd: "x", Cwd: "/"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.CopyBuffer(io.Discard, s.Stdout, buf); err != nil || n != size {
			b.Fatalf("read %d, %v", n, err)
		}
		s.Close()
	}
}
