package box_test

// Benchmarks of the SDK against boxd (boxtest), on this machine:
//
//	go test -run '^$' -bench . -benchmem -benchtime=200x ./box/
//
// BenchmarkExecCommand compares an Exec.Command through the SDK with the
// same request sent by hand over net/http, to show what the SDK adds;
// BenchmarkExecCommandClient does the same against a stub server, leaving
// only the client side. The latency benchmarks also report p50-ms and
// p95-ms over their iterations (use -benchtime=200x for "200 runs"). Every
// benchmark does its setup (boxd, a warm box, test data) outside the timed
// region.
//
// boxd runs in the benchmark's own process, so B/op and allocs/op count
// boxd's allocations too; compare them between variants (sdk and raw),
// not with zero. Box agents and box commands run in other processes.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// benchLatencies collects per-iteration durations and reports their
// percentiles as custom benchmark metrics.
type benchLatencies []time.Duration

// report adds p50-ms and p95-ms to b's result.
func (l benchLatencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	b.ReportMetric(benchMillis(l.percentile(50)), "p50-ms")
	b.ReportMetric(benchMillis(l.percentile(95)), "p95-ms")
}

// percentile returns the nearest-rank p-th percentile of l (0 if empty).
func (l benchLatencies) percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func benchMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchBox starts boxd and creates a box whose sandbox is running (its
// first command has run), so that nothing timed waits for a sandbox start.
func benchBox(b *testing.B) (*boxtest.Server, *box.Box) {
	b.Helper()
	srv := boxtest.NewServer(b)
	bx, err := srv.Client().Create(b.Context(), nil)
	if err != nil {
		b.Fatalf("Create: %v", err)
	}
	benchExec(b, bx)
	return srv, bx
}

// benchExec runs `true` in bx and fails the benchmark unless it succeeds.
func benchExec(b *testing.B, bx *box.Box) {
	r, err := bx.Exec.Command(b.Context(), "true")
	if err != nil {
		b.Fatalf("Exec.Command: %v", err)
	}
	if r.ExitCode != 0 {
		b.Fatalf("Exec.Command: exit code %d: %s", r.ExitCode, r.Result)
	}
}

// benchRawExec is the SDK-free baseline: one POST to the exec endpoint with
// a keep-alive http.Client, decoding the JSON result.
type benchRawExec struct {
	hc   *http.Client
	url  string
	key  string
	body []byte
}

func newBenchRawExec(b *testing.B, srv *boxtest.Server, id string) *benchRawExec {
	// The SDK's default client sends through http.DefaultTransport; a
	// clone has the same keep-alive settings and its own connection pool.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	b.Cleanup(tr.CloseIdleConnections)
	return &benchRawExec{
		hc:   &http.Client{Transport: tr},
		url:  srv.URL() + "/v2/box/" + url.PathEscape(id) + "/exec",
		key:  srv.APIKey(),
		body: []byte(`{"command":["sh","-c","true"]}`),
	}
}

type benchExecResult struct {
	ExitCode int     `json:"exit_code"`
	Output   string  `json:"output"`
	Error    *string `json:"error"`
}

func (r *benchRawExec) do(ctx context.Context) (*benchExecResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Box-Api-Key", r.key)
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, &benchStatusError{code: resp.StatusCode, body: string(msg)}
	}
	var res benchExecResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, err
	}
	// Read to EOF so the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, resp.Body)
	return &res, nil
}

type benchStatusError struct {
	code int
	body string
}

func (e *benchStatusError) Error() string { return http.StatusText(e.code) + ": " + e.body }

// BenchmarkExecCommand compares Exec.Command(ctx, "true") through the SDK
// with the same request sent over plain net/http, on one boxd and one box.
func BenchmarkExecCommand(b *testing.B) {
	srv, bx := benchBox(b)
	raw := newBenchRawExec(b, srv, bx.ID())
	if _, err := raw.do(b.Context()); err != nil { // open its connection
		b.Fatalf("raw exec: %v", err)
	}

	b.Run("sdk", func(b *testing.B) {
		ctx := b.Context()
		var lat benchLatencies
		b.ReportAllocs()
		for b.Loop() {
			start := time.Now()
			r, err := bx.Exec.Command(ctx, "true")
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			if r.ExitCode != 0 {
				b.Fatalf("exit code %d: %s", r.ExitCode, r.Result)
			}
		}
		lat.report(b)
	})
	b.Run("raw", func(b *testing.B) {
		ctx := b.Context()
		var lat benchLatencies
		b.ReportAllocs()
		for b.Loop() {
			start := time.Now()
			r, err := raw.do(ctx)
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			if r.ExitCode != 0 {
				b.Fatalf("exit code %d: %s", r.ExitCode, r.Output)
			}
		}
		lat.report(b)
	})
	// paired alternates the two in one loop (swapping which goes first),
	// so that machine noise and boxd's growing run history affect both
	// alike; ns/op is the cost of one SDK call plus one raw call. It
	// reports both medians and overhead-% = SDK median over raw median.
	b.Run("paired", func(b *testing.B) {
		ctx := b.Context()
		var sdk, rawLat benchLatencies
		sdkCall := func() {
			start := time.Now()
			r, err := bx.Exec.Command(ctx, "true")
			sdk = append(sdk, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			if r.ExitCode != 0 {
				b.Fatalf("exit code %d: %s", r.ExitCode, r.Result)
			}
		}
		rawCall := func() {
			start := time.Now()
			r, err := raw.do(ctx)
			rawLat = append(rawLat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			if r.ExitCode != 0 {
				b.Fatalf("exit code %d: %s", r.ExitCode, r.Output)
			}
		}
		i := 0
		for b.Loop() {
			if i%2 == 0 {
				sdkCall()
				rawCall()
			} else {
				rawCall()
				sdkCall()
			}
			i++
		}
		sdkP50, rawP50 := sdk.percentile(50), rawLat.percentile(50)
		b.ReportMetric(benchMillis(sdkP50), "sdk-p50-ms")
		b.ReportMetric(benchMillis(rawP50), "raw-p50-ms")
		b.ReportMetric(benchMillis(sdk.percentile(95)), "sdk-p95-ms")
		b.ReportMetric(benchMillis(rawLat.percentile(95)), "raw-p95-ms")
		b.ReportMetric((float64(sdkP50)/float64(rawP50)-1)*100, "overhead-%")
	})
}

// BenchmarkExecCommandClient is BenchmarkExecCommand against a stub server
// that answers every exec at once with a fixed result: no boxd, no box,
// so what is left is the client side alone, and sdk minus raw is the
// SDK's own cost per call (time and allocations).
func BenchmarkExecCommandClient(b *testing.B) {
	const id, key = "box-bench", "box_bench_key"
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet { // the Get below
			_, _ = io.WriteString(w, `{"id":"`+id+`","status":"idle"}`+"\n")
			return
		}
		_, _ = io.WriteString(w, `{"exit_code":0,"output":""}`+"\n")
	}))
	b.Cleanup(stub.Close)
	c, err := box.NewClient(box.WithAPIKey(key), box.WithBaseURL(stub.URL), box.WithTelemetry(false))
	if err != nil {
		b.Fatal(err)
	}
	bx, err := c.Get(b.Context(), id, nil)
	if err != nil {
		b.Fatalf("Get: %v", err)
	}
	if bx.ID() != id {
		b.Fatalf("Get: box id %q, want %q", bx.ID(), id)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	b.Cleanup(tr.CloseIdleConnections)
	raw := &benchRawExec{
		hc:   &http.Client{Transport: tr},
		url:  stub.URL + "/v2/box/" + id + "/exec",
		key:  key,
		body: []byte(`{"command":["sh","-c","true"]}`),
	}

	b.Run("sdk", func(b *testing.B) {
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bx.Exec.Command(ctx, "true"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := raw.do(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreate measures client.Create(ctx, nil): the API call only.
// boxd answers before the box's sandbox is up and starts it in the
// background; outside the timed region each iteration waits for that
// start (with a first command) and deletes the box, so iterations do not
// overlap with earlier sandbox starts and the data directory stays small.
// BenchmarkCreateAndFirstExec measures the time to a first command.
func BenchmarkCreate(b *testing.B) {
	srv := boxtest.NewServer(b)
	c := srv.Client()
	ctx := b.Context()
	var lat benchLatencies
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		bx, err := c.Create(ctx, nil)
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		benchExec(b, bx)
		if err := bx.Delete(ctx); err != nil {
			b.Fatalf("Delete: %v", err)
		}
		b.StartTimer()
	}
	lat.report(b)
}

// BenchmarkCreateAndFirstExec measures Create followed by the box's first
// Exec.Command(ctx, "true"): the time until a new box has run a command,
// including its sandbox start. The box is deleted outside the timed region.
func BenchmarkCreateAndFirstExec(b *testing.B) {
	srv := boxtest.NewServer(b)
	c := srv.Client()
	ctx := b.Context()
	var lat benchLatencies
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		bx, err := c.Create(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		r, err := bx.Exec.Command(ctx, "true")
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if r.ExitCode != 0 {
			b.Fatalf("exit code %d: %s", r.ExitCode, r.Result)
		}
		b.StopTimer()
		if err := bx.Delete(ctx); err != nil {
			b.Fatalf("Delete: %v", err)
		}
		b.StartTimer()
	}
	lat.report(b)
}

// BenchmarkExecLatency measures Exec.Command(ctx, "true") on a warm box and
// reports its median and p95; run it with -benchtime=200x for 200 runs.
func BenchmarkExecLatency(b *testing.B) {
	_, bx := benchBox(b)
	ctx := b.Context()
	var lat benchLatencies
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		r, err := bx.Exec.Command(ctx, "true")
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if r.ExitCode != 0 {
			b.Fatalf("exit code %d: %s", r.ExitCode, r.Result)
		}
	}
	lat.report(b)
}

// BenchmarkFiles moves an 8 MiB file of random bytes: Files.Write and
// Files.Read (one base64 JSON body each), and Files.Upload (multipart,
// streamed from a local file) and Files.Download (a box directory holding
// the one file) for comparison.
func BenchmarkFiles(b *testing.B) {
	const size = 8 << 20
	_, bx := benchBox(b)
	ctx := b.Context()
	data := make([]byte, size)
	_, _ = rand.Read(data)

	src := filepath.Join(b.TempDir(), "upload.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		b.Fatal(err)
	}
	// read-8MiB reads this file; download-8MiB fetches the directory dl,
	// which holds only its copy.
	if err := bx.Files.Write(ctx, "bench/read.bin", data); err != nil {
		b.Fatalf("Write: %v", err)
	}
	if err := bx.Files.Write(ctx, "dl/file.bin", data); err != nil {
		b.Fatalf("Write: %v", err)
	}
	dest := filepath.Join(b.TempDir(), "dl")

	b.Run("write-8MiB", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if err := bx.Files.Write(ctx, "bench/write.bin", data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-8MiB", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			got, err := bx.Files.Read(ctx, "bench/read.bin")
			if err != nil {
				b.Fatal(err)
			}
			if len(got) != size {
				b.Fatalf("read %d bytes, want %d", len(got), size)
			}
		}
	})
	b.Run("upload-8MiB", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		files := []box.UploadFile{{LocalPath: src, Destination: "bench/upload.bin"}}
		for b.Loop() {
			if err := bx.Files.Upload(ctx, files); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("download-8MiB", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		params := &box.DownloadParams{Folder: "dl", Dest: dest}
		for b.Loop() {
			got, err := bx.Files.Download(ctx, params)
			if err != nil {
				b.Fatal(err)
			}
			if len(got) != 1 {
				b.Fatalf("downloaded %d files, want 1", len(got))
			}
		}
	})
}

// BenchmarkExecStream streams 100 MB of command output through boxd and
// the SDK.
func BenchmarkExecStream(b *testing.B) {
	_, bx := benchBox(b)
	const size = 100 << 20
	ctx := context.Background()
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		s, err := bx.Exec.Stream(ctx, fmt.Sprintf("head -c %d /dev/zero", size))
		if err != nil {
			b.Fatal(err)
		}
		var n int
		for s.Next() {
			if c, ok := s.Current().(*box.OutputChunk); ok {
				n += len(c.Data)
			}
		}
		if err := s.Err(); err != nil || n != size {
			b.Fatalf("streamed %d bytes, %v", n, err)
		}
		s.Close()
	}
}
