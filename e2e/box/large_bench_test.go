package box_test

// Benchmarks of transfers of any size: the SDK side runs in a child
// process (this test binary again, as TestLargeTransferClient), so that
// its peak RSS is its own and not boxd's, which runs in this process.
//
//	go test -run '^$' -bench 'Large|Tree' -benchtime=1x ./box/
//
// BOX_BENCH_SIZE sets the size of the large transfers in MiB (1024 by
// default), for a quicker look at memory.
//
// They report MB/s and the client's peak RSS (peak-rss-MiB); the exec
// stream benchmark also reports plain net/http on the same endpoint in the
// same run (raw-MB/s), and the SDK's share of it (sdk-vs-raw-%).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// largeSize is what the large transfers move: 1 GiB, or BOX_BENCH_SIZE
// MiB.
var largeSize = func() int64 {
	if mib, err := strconv.ParseInt(os.Getenv("BOX_BENCH_SIZE"), 10, 64); err == nil && mib > 0 {
		return mib << 20
	}
	return 1 << 30
}()

// clientReport is what the child process prints.
type clientReport struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Raw     float64 `json:"raw_seconds,omitempty"`
	PeakRSS int64   `json:"peak_rss"` // bytes
	Hash    string  `json:"hash,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// runClient runs TestLargeTransferClient in a child process for job
// against srv's box id and returns its report.
func runClient(b *testing.B, srv *boxtest.Server, id, job string) clientReport {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLargeTransferClient$", "-test.v")
	cmd.Env = append(os.Environ(), "BOX_BENCH_JOB="+job, "BOX_BENCH_URL="+srv.URL(), "BOX_BENCH_KEY="+srv.APIKey(), "BOX_BENCH_BOX="+id)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("client: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "REPORT "); ok {
			var r clientReport
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				b.Fatal(err)
			}
			if r.Error != "" {
				b.Fatal(r.Error)
			}
			return r
		}
	}
	b.Fatalf("client printed no report:\n%s", out)
	return clientReport{}
}

func reportLarge(b *testing.B, r clientReport) {
	b.ReportMetric(float64(r.Bytes)/r.Seconds/1e6, "MB/s")
	b.ReportMetric(float64(r.PeakRSS)/(1<<20), "peak-rss-MiB")
}

// BenchmarkLargeExecStream streams 1 GiB of command output through
// Exec.Stream (io.Copy into io.Discard), and the same endpoint with a
// plain http.Client reading and discarding, four times each, interleaved.
func BenchmarkLargeExecStream(b *testing.B) {
	srv := boxtest.NewServer(b)
	bx := newBenchBox(b, srv)
	for range b.N {
		r := runClient(b, srv, bx.ID(), "exec-stream")
		reportLarge(b, r)
		b.ReportMetric(float64(r.Bytes)/r.Raw/1e6, "raw-MB/s")
		b.ReportMetric(100*r.Raw/r.Seconds, "sdk-vs-raw-%")
	}
}

// BenchmarkLargeFiles writes 1 GiB with WriteFrom from a reader of
// unknown length and reads it back with Open, checking its hash.
func BenchmarkLargeFiles(b *testing.B) {
	srv := boxtest.NewServer(b)
	bx := newBenchBox(b, srv)
	for range b.N {
		reportLarge(b, runClient(b, srv, bx.ID(), "files"))
	}
}

// BenchmarkLargeFileRange reads 1 GiB less one byte with OpenRange, from
// offset 1, and checks its hash. The file is written by this process,
// so that the client's peak RSS is OpenRange's alone.
func BenchmarkLargeFileRange(b *testing.B) {
	srv := boxtest.NewServer(b)
	bx := newBenchBox(b, srv)
	h := sha256.New()
	if _, err := bx.Files.WriteFrom(context.Background(), "range.bin", io.TeeReader(&patternReader{left: largeSize}, &skipWriter{w: h, skip: 1}), nil); err != nil {
		b.Fatal(err)
	}
	want := hex.EncodeToString(h.Sum(nil))
	for range b.N {
		r := runClient(b, srv, bx.ID(), "range")
		if r.Hash != want {
			b.Fatalf("the range read back has hash %s, want %s", r.Hash, want)
		}
		reportLarge(b, r)
	}
}

// skipWriter drops the first skip bytes written to it.
type skipWriter struct {
	w    io.Writer
	skip int
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	d := min(s.skip, n)
	s.skip -= d
	if _, err := s.w.Write(p[d:]); err != nil {
		return 0, err
	}
	return n, nil
}

// BenchmarkTreeTransfer uploads a tree of 10,000 files with UploadDir and
// downloads it back with DownloadDir.
func BenchmarkTreeTransfer(b *testing.B) {
	srv := boxtest.NewServer(b)
	bx := newBenchBox(b, srv)
	src := b.TempDir()
	want := makeTree(b, src, 10000)
	ctx := context.Background()
	var total int64
	for _, d := range want {
		total += int64(len(d))
	}
	for i := range b.N {
		remote := "tree" + strconv.Itoa(i)
		start := time.Now()
		if err := bx.Files.UploadDir(ctx, src, remote, nil); err != nil {
			b.Fatal(err)
		}
		up := time.Since(start)
		dst := filepath.Join(b.TempDir(), "back")
		start = time.Now()
		if err := bx.Files.DownloadDir(ctx, remote, dst, nil); err != nil {
			b.Fatal(err)
		}
		down := time.Since(start)
		got, _ := readTree(b, dst)
		if len(got) != len(want) {
			b.Fatalf("%d files came back, want %d", len(got), len(want))
		}
		for rel, data := range want {
			if !bytes.Equal(got[rel], data) {
				b.Fatalf("%s came back with %d bytes that differ from the %d sent", rel, len(got[rel]), len(data))
			}
		}
		b.ReportMetric(float64(len(want))/up.Seconds(), "upload-files/s")
		b.ReportMetric(float64(len(want))/down.Seconds(), "download-files/s")
	}
}

func newBenchBox(b *testing.B, srv *boxtest.Server) *box.Box {
	bx, err := srv.Client().Create(context.Background(), &box.CreateParams{Size: box.SizeLarge})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bx.Exec.Command(context.Background(), "true"); err != nil {
		b.Fatal(err)
	}
	return bx
}

// TestLargeTransferClient is the client side of the large benchmarks: it
// runs only in their child process.
func TestLargeTransferClient(t *testing.T) {
	job := os.Getenv("BOX_BENCH_JOB")
	if job == "" {
		t.Skip("the client of the large-transfer benchmarks")
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	defer http.DefaultClient.CloseIdleConnections()
	rep := func() (r clientReport) {
		c, err := box.NewClient(box.WithAPIKey(os.Getenv("BOX_BENCH_KEY")), box.WithBaseURL(os.Getenv("BOX_BENCH_URL")), box.WithTelemetry(false), box.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			return clientReport{Error: err.Error()}
		}
		ctx := context.Background()
		bx, err := c.Get(ctx, os.Getenv("BOX_BENCH_BOX"), nil)
		if err != nil {
			return clientReport{Error: err.Error()}
		}
		switch job {
		case "exec-stream":
			// Plain net/http and the SDK on the same endpoint, four times
			// each, in the order raw, SDK, SDK, raw (twice), so that a
			// machine that speeds up or slows down favours neither.
			cmd := fmt.Sprintf("head -c %d /dev/zero", largeSize)
			body, _ := json.Marshal(map[string]any{"command": []string{"sh", "-c", cmd}})
			raw := func() error {
				req, _ := http.NewRequest("POST", os.Getenv("BOX_BENCH_URL")+"/v2/box/"+bx.ID()+"/exec-stream", bytes.NewReader(body))
				req.Header.Set("X-Box-Api-Key", os.Getenv("BOX_BENCH_KEY"))
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				n, err := io.Copy(io.Discard, resp.Body)
				if err == nil && n < largeSize {
					err = fmt.Errorf("plain client read %d bytes", n)
				}
				r.Raw += time.Since(start).Seconds()
				return err
			}
			sdk := func() error {
				start := time.Now()
				s, err := bx.Exec.Stream(ctx, cmd)
				if err != nil {
					return err
				}
				defer s.Close()
				n, err := io.Copy(io.Discard, s)
				if err != nil {
					return err
				}
				r.Seconds += time.Since(start).Seconds()
				r.Bytes += n
				if n != largeSize || s.Run().ExitCode != 0 {
					return fmt.Errorf("streamed %d bytes, exit %d", n, s.Run().ExitCode)
				}
				return nil
			}
			const rounds = 4
			for range rounds / 2 {
				for _, run := range []func() error{raw, sdk, sdk, raw} {
					if err := run(); err != nil {
						return clientReport{Error: err.Error()}
					}
				}
			}
			// Report one run of each side.
			r.Raw /= rounds
			r.Seconds /= rounds
			r.Bytes /= rounds
		case "files":
			src := &patternReader{left: largeSize}
			h := sha256.New()
			start := time.Now()
			n, err := bx.Files.WriteFrom(ctx, "large.bin", io.TeeReader(src, h), nil)
			if err != nil {
				return clientReport{Error: err.Error()}
			}
			up := time.Since(start)
			want := hex.EncodeToString(h.Sum(nil))
			f, err := bx.Files.Open(ctx, "large.bin", nil)
			if err != nil {
				return clientReport{Error: err.Error()}
			}
			h.Reset()
			start = time.Now()
			m, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return clientReport{Error: err.Error()}
			}
			down := time.Since(start)
			if n != largeSize || m != largeSize || hex.EncodeToString(h.Sum(nil)) != want {
				return clientReport{Error: fmt.Sprintf("wrote %d, read %d bytes; hashes equal: %v", n, m, hex.EncodeToString(h.Sum(nil)) == want)}
			}
			r.Bytes, r.Seconds = 2*largeSize, (up + down).Seconds()
			fmt.Printf("write %.0f MB/s, read %.0f MB/s\n", float64(largeSize)/up.Seconds()/1e6, float64(largeSize)/down.Seconds()/1e6)
		case "range":
			f, err := bx.Files.OpenRange(ctx, "range.bin", 1, largeSize-1, nil)
			if err != nil {
				return clientReport{Error: err.Error()}
			}
			h := sha256.New()
			start := time.Now()
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return clientReport{Error: err.Error()}
			}
			if n != largeSize-1 {
				return clientReport{Error: fmt.Sprintf("read %d bytes of the range, want %d", n, largeSize-1)}
			}
			r.Bytes, r.Seconds, r.Hash = n, time.Since(start).Seconds(), hex.EncodeToString(h.Sum(nil))
		default:
			return clientReport{Error: "unknown job " + job}
		}
		r.PeakRSS = peakRSS()
		return r
	}()
	out, _ := json.Marshal(rep)
	fmt.Printf("REPORT %s\n", out)
}

// patternReader yields left bytes of a repeating pattern that does not
// compress to nothing, with no Len method: its length is unknown.
type patternReader struct {
	left int64
	i    byte
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(b)), p.left)
	for i := range b[:n] {
		p.i = p.i*31 + 7
		b[i] = p.i
	}
	p.left -= n
	return int(n), nil
}
