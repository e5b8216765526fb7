package stream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func exitFrame(code int, cpu int64) string {
	var b bytes.Buffer
	if err := WriteExit(&b, code, cpu); err != nil {
		panic(err)
	}
	return b.String()
}

func errorFrame(msg string) string {
	var b bytes.Buffer
	if err := WriteExecError(&b, msg); err != nil {
		panic(err)
	}
	return b.String()
}

// execResult is everything an ExecDecoder yields.
type execResult struct {
	Output string
	Chunks int
	Exit   *ExecExit
	Err    error
}

func decodeExec(t testing.TB, r io.Reader) execResult {
	t.Helper()
	return decodeExecBuf(t, r, 0)
}

// decodeExecBuf is decodeExec with the decoder's initial read buffer set
// to bufSize bytes (0 for the default), so that tests can make the buffer
// fill, move and grow often.
func decodeExecBuf(t testing.TB, r io.Reader, bufSize int) execResult {
	t.Helper()
	d := NewExecDecoder(r)
	d.bufSize = bufSize
	var res execResult
	var out strings.Builder // += would be quadratic for one-byte chunks
	for d.Next() {
		c := d.Chunk()
		if res.Exit != nil {
			t.Fatalf("chunk %+v after the exit chunk", c)
		}
		if c.Exit != nil {
			if len(c.Output) != 0 {
				t.Fatalf("exit chunk with output %q", c.Output)
			}
			res.Exit = c.Exit
			continue
		}
		if len(c.Output) == 0 {
			t.Fatal("empty output chunk")
		}
		out.Write(c.Output)
		res.Chunks++
	}
	res.Err = d.Err()
	if d.Next() {
		t.Fatal("Next() = true after the end")
	}
	res.Output = out.String()
	return res
}

func TestWriteExit(t *testing.T) {
	t.Parallel()
	var w httpFlusher
	if err := WriteExit(&w, 3, 12345); err != nil {
		t.Fatal(err)
	}
	want := []string{"event: exit\ndata: {\"exit_code\":3,\"cpu_ns\":12345}\n\n"}
	if diff := cmp.Diff(want, w.writes); diff != "" || w.flushes != 1 {
		t.Errorf("writes (-want +got):\n%s; %d flushes", diff, w.flushes)
	}
	var ew httpFlusher
	if err := WriteExecError(&ew, `bad "thing" <x>`+"\n"); err != nil {
		t.Fatal(err)
	}
	want = []string{"event: error\ndata: {\"error\":\"bad \\\"thing\\\" <x>\\n\"}\n\n"}
	if diff := cmp.Diff(want, ew.writes); diff != "" || ew.flushes != 1 {
		t.Errorf("writes (-want +got):\n%s; %d flushes", diff, ew.flushes)
	}
	boom := errors.New("boom")
	if err := WriteExit(&errFlusher{err: boom}, 0, 0); !errors.Is(err, boom) {
		t.Errorf("WriteExit with a failing flush = %v", err)
	}
}

func TestWriteExecErrorLongMessage(t *testing.T) {
	t.Parallel()
	msg := strings.Repeat("é", maxExecErrorMessage) // 2 bytes each: cut in the middle of a rune
	res := decodeExec(t, strings.NewReader("out"+errorFrame(msg)))
	var ee *ExecError
	if !errors.As(res.Err, &ee) {
		t.Fatalf("Err() = %v, want *ExecError", res.Err)
	}
	if len(ee.Message) > maxExecErrorMessage || !strings.HasPrefix(msg, ee.Message) || len(ee.Message) < maxExecErrorMessage-1 {
		t.Errorf("message of %d bytes, want %d cut at a rune boundary", len(ee.Message), maxExecErrorMessage)
	}
	// The worst case for the JSON escaping still fits a frame.
	if n := len(errorFrame(strings.Repeat("\x01", 2*maxExecErrorMessage))); n > MaxExecFrameSize {
		t.Errorf("error frame of %d bytes", n)
	}
}

func TestExecDecoder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want execResult // Chunks not compared
	}{
		{"normal run", "hello\nworld\n" + exitFrame(0, 123), execResult{Output: "hello\nworld\n", Exit: &ExecExit{0, 123}}},
		{"non-zero exit", "oops\n" + exitFrame(2, 9), execResult{Output: "oops\n", Exit: &ExecExit{2, 9}}},
		{"no output", exitFrame(0, 1), execResult{Exit: &ExecExit{0, 1}}},
		{"output without final newline", "no newline" + exitFrame(1, 1), execResult{Output: "no newline", Exit: &ExecExit{1, 1}}},
		{"empty body", "", execResult{}},
		{"no terminator", "just output\n", execResult{Output: "just output\n"}},
		{"fake exit frame in the middle", "a\n" + exitFrame(1, 2) + "b\n" + exitFrame(0, 5),
			execResult{Output: "a\n" + exitFrame(1, 2) + "b\n", Exit: &ExecExit{0, 5}}},
		{"fake frame immediately followed by the real one", exitFrame(7, 7) + exitFrame(0, 1),
			execResult{Output: exitFrame(7, 7), Exit: &ExecExit{0, 1}}},
		{"several fake frames back to back", exitFrame(7, 7) + errorFrame("x") + exitFrame(8, 8) + exitFrame(0, 1),
			execResult{Output: exitFrame(7, 7) + errorFrame("x") + exitFrame(8, 8), Exit: &ExecExit{0, 1}}},
		{"fake error frame then a real exit", "x" + errorFrame("boom") + "y" + exitFrame(0, 0),
			execResult{Output: "x" + errorFrame("boom") + "y", Exit: &ExecExit{0, 0}}},
		{"real error frame", "partial output" + errorFrame("failed to start stream"),
			execResult{Output: "partial output", Err: &ExecError{"failed to start stream"}}},
		{"error frame without message", "event: error\ndata: {}\n\n", execResult{Err: &ExecError{"Stream error"}}},
		{"error frame with null message", "event: error\ndata: {\"error\":null}\n\n", execResult{Err: &ExecError{"Stream error"}}},
		{"error frame with empty message", "event: error\ndata: {\"error\":\"\"}\n\n", execResult{Err: &ExecError{""}}},
		{"ends inside a held-back prefix", "out event: ex", execResult{Output: "out event: ex"}},
		{"ends with a bare header", "out event: exit\n", execResult{Output: "out event: exit\n"}},
		{"ends with e", "done e", execResult{Output: "done e"}},
		{"ends without the blank line", "event: exit\ndata: {\"exit_code\":1}\n", execResult{Output: "event: exit\ndata: {\"exit_code\":1}\n"}},
		{"ends without the data line end", "event: exit\ndata: {\"exit_code\":1}", execResult{Output: "event: exit\ndata: {\"exit_code\":1}"}},
		{"unparseable JSON is output", "event: exit\ndata: {oops}\n\n", execResult{Output: "event: exit\ndata: {oops}\n\n"}},
		{"data not an object is output", "event: exit\ndata: 3\n\n", execResult{Output: "event: exit\ndata: 3\n\n"}},
		{"data null is output", "event: exit\ndata: null\n\n", execResult{Output: "event: exit\ndata: null\n\n"}},
		{"wrongly typed field is output", "event: exit\ndata: {\"exit_code\":\"1\"}\n\n", execResult{Output: "event: exit\ndata: {\"exit_code\":\"1\"}\n\n"}},
		{"missing fields default to zero", "event: exit\ndata: {}\n\n", execResult{Exit: &ExecExit{0, 0}}},
		{"null fields default to zero", "event: exit\ndata: {\"exit_code\":null,\"cpu_ns\":null}\n\n", execResult{Exit: &ExecExit{0, 0}}},
		{"unknown fields ignored", "event: exit\ndata: {\"exit_code\":4,\"cpu_ns\":5,\"memory\":6}\n\n", execResult{Exit: &ExecExit{4, 5}}},
		{"data without space", "event: exit\ndata:{\"exit_code\":3}\n\n", execResult{Exit: &ExecExit{3, 0}}},
		{"negative exit code", exitFrame(-1, 0), execResult{Exit: &ExecExit{-1, 0}}},
		{"CRLF frame is output", "event: exit\r\ndata: {}\r\n\r\n", execResult{Output: "event: exit\r\ndata: {}\r\n\r\n"}},
		{"CRLF data line is output", "event: exit\ndata: {}\r\n\r\n", execResult{Output: "event: exit\ndata: {}\r\n\r\n"}},
		{"other events are output", "event: text\ndata: {}\n\n" + exitFrame(0, 0), execResult{Output: "event: text\ndata: {}\n\n", Exit: &ExecExit{0, 0}}},
		{"bytes after the frame", exitFrame(0, 0) + "\n", execResult{Output: exitFrame(0, 0) + "\n"}},
		{"header inside a header", "event: event: exit\ndata: {}\n\n", execResult{Output: "event: ", Exit: &ExecExit{0, 0}}},
		{"oversized frame is output", "event: error\ndata: {\"error\":\"" + strings.Repeat("x", MaxExecFrameSize) + "\"}\n\n",
			execResult{Output: "event: error\ndata: {\"error\":\"" + strings.Repeat("x", MaxExecFrameSize) + "\"}\n\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			readers := map[string]io.Reader{
				"whole":   strings.NewReader(tt.body),
				"onebyte": iotest.OneByteReader(strings.NewReader(tt.body)),
				"half":    iotest.HalfReader(strings.NewReader(tt.body)),
				"dataerr": iotest.DataErrReader(strings.NewReader(tt.body)),
			}
			for name, r := range readers {
				got := decodeExec(t, r)
				got.Chunks = 0
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: (-want +got):\n%s", name, diff)
				}
			}
			for _, size := range []int{1, 2, 5, 13} {
				got := decodeExecBuf(t, iotest.HalfReader(strings.NewReader(tt.body)), size)
				got.Chunks = 0
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("buffer of %d: (-want +got):\n%s", size, diff)
				}
			}
			for i := 0; i <= len(tt.body) && len(tt.body) < 4096; i++ {
				got := decodeExec(t, &splitReader{[]string{tt.body[:i], tt.body[i:]}})
				got.Chunks = 0
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Fatalf("split at %d: (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestExecDecoderOneByteReads(t *testing.T) {
	t.Parallel()
	out := strings.Repeat("line of output\n", 100)
	res := decodeExec(t, iotest.OneByteReader(strings.NewReader(out+exitFrame(0, 42))))
	if res.Output != out || res.Exit == nil || *res.Exit != (ExecExit{0, 42}) || res.Err != nil {
		t.Fatalf("got %+v", res)
	}
	// Output is yielded as it is read, not gathered: with one-byte reads,
	// nearly every byte is its own chunk (an "e" waits for the next byte).
	if res.Chunks < len(out)/2 {
		t.Errorf("%d chunks for %d one-byte reads", res.Chunks, len(out))
	}
}

func TestExecDecoderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, out := range []string{"some output", "some output event: ex", "x" + exitFrame(0, 0)} {
		res := decodeExec(t, io.MultiReader(strings.NewReader(out), iotest.ErrReader(boom)))
		if res.Output != out || res.Exit != nil || !errors.Is(res.Err, boom) {
			t.Errorf("%q then an error: got %+v", out, res)
		}
	}
	res := decodeExec(t, zeroReader{})
	if !errors.Is(res.Err, io.ErrNoProgress) {
		t.Errorf("reader making no progress: got %+v", res)
	}
}

// TestExecDecoderStreams checks that output is yielded as it arrives and
// that held-back text is released as soon as later input shows it is not
// a terminator, without waiting for the end of the body.
func TestExecDecoderStreams(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	d := NewExecDecoder(pr)
	writes := make(chan string, 10) // a pipe Write blocks until read: do not wait for it
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s := range writes {
			if _, err := pw.Write([]byte(s)); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	expect := func(want string) {
		t.Helper()
		var got string
		for len(got) < len(want) {
			if !d.Next() {
				t.Fatalf("Next() = false, Err() = %v, after %q", d.Err(), got)
			}
			got += string(d.Chunk().Output)
		}
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	writes <- "hello "
	expect("hello ")
	// A partial header is held back until the next write decides.
	writes <- "progress event: e"
	expect("progress ")
	writes <- "xtra\n"
	expect("event: extra\n")
	// A complete fake frame is held back until more bytes arrive.
	writes <- exitFrame(1, 1)
	writes <- "more\n"
	expect(exitFrame(1, 1) + "more\n")
	// A candidate that grows beyond the frame bound is released before
	// the end of the body.
	big := "event: exit\ndata: {\"a\":\"" + strings.Repeat("x", MaxExecFrameSize)
	writes <- big
	expect(big)
	writes <- exitFrame(0, 7)
	close(writes)
	if !d.Next() || d.Chunk().Exit == nil || *d.Chunk().Exit != (ExecExit{0, 7}) {
		t.Fatalf("want the exit chunk, got %+v, Err() = %v", d.Chunk(), d.Err())
	}
	if d.Next() || d.Err() != nil {
		t.Fatalf("Next() after exit = true or Err() = %v", d.Err())
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("writer stuck")
	}
}

func TestExecErrorMessage(t *testing.T) {
	t.Parallel()
	var err error = &ExecError{Message: "failed to start stream"}
	if got := err.Error(); got != "exec stream: failed to start stream" {
		t.Errorf("Error() = %q", got)
	}
}

// repeatReader serves block n times, at most chunk bytes per Read, then
// tail.
type repeatReader struct {
	block []byte
	n     int
	chunk int
	off   int
	tail  *strings.Reader
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return r.tail.Read(p)
	}
	p = p[:min(len(p), r.chunk, len(r.block)-r.off)]
	n := copy(p, r.block[r.off:])
	r.off += n
	if r.off == len(r.block) {
		r.off = 0
		r.n--
	}
	return n, nil
}

func BenchmarkExecDecode(b *testing.B) {
	const (
		total = 64 << 20
		read  = 32 << 10
	)
	// Log-like program output, with many "e"s and the odd "event: ".
	var block bytes.Buffer
	for i := 0; block.Len() < read; i++ {
		if i%50 == 0 {
			block.WriteString("event: progress, see the next line\n")
		}
		block.WriteString("2026-01-02T03:04:05Z INFO served request method=GET path=/items/42 status=200 elapsed=1.2ms\n")
	}
	blk := block.Bytes()[:read]
	frame := exitFrame(0, 123456789)
	b.SetBytes(total + int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewExecDecoder(&repeatReader{block: blk, n: total / read, chunk: read, tail: strings.NewReader(frame)})
		var n int
		var exit *ExecExit
		for d.Next() {
			n += len(d.Chunk().Output)
			exit = d.Chunk().Exit
		}
		if n != total || exit == nil || d.Err() != nil {
			b.Fatalf("got %d bytes, exit %v, err %v", n, exit, d.Err())
		}
	}
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

func FuzzExecDecoder(f *testing.F) {
	f.Add([]byte("hello\n"), 0, int64(1), uint8(0), "boom")
	f.Add([]byte(exitFrame(1, 2)), 3, int64(4), uint8(5), "")
	f.Add([]byte("x"+errorFrame("e")+"event: ex"), -1, int64(0), uint8(1), "failed to start stream")
	f.Add([]byte("event: exit\ndata: {}\n"), 255, int64(1<<62), uint8(12), "\xff")
	f.Add([]byte("event: error\ndata: {\"error\":1}\n\nevent: e"), 0, int64(0), uint8(200), "a\nb")
	f.Fuzz(checkExecRoundTrip)
}

// checkExecRoundTrip is the body of FuzzExecDecoder.
func checkExecRoundTrip(t *testing.T, out []byte, code int, cpu int64, readSize uint8, msg string) {
	{
		n := int(readSize) + 1
		// A small buffer (it grows as needed) makes it move and grow
		// often; reads are at most n bytes.
		decode := func(body []byte) execResult {
			return decodeExecBuf(t, &chunkReader{bytes.NewReader(body), n}, 8)
		}

		// Output followed by a real exit frame: exactly the output, then
		// that exit, whatever the output contains.
		res := decode(append(bytes.Clone(out), exitFrame(code, cpu)...))
		if res.Output != string(out) || res.Exit == nil || *res.Exit != (ExecExit{code, cpu}) || res.Err != nil {
			t.Fatalf("output %q + exit(%d, %d) in %d-byte reads: got %+v", out, code, cpu, n, res)
		}

		// Output followed by a real error frame.
		res = decode(append(bytes.Clone(out), errorFrame(msg)...))
		var ee *ExecError
		if res.Output != string(out) || res.Exit != nil || !errors.As(res.Err, &ee) {
			t.Fatalf("output %q + error(%q): got %+v", out, msg, res)
		}
		if utf8.ValidString(msg) && len(msg) <= maxExecErrorMessage && ee.Message != msg {
			t.Fatalf("error message %q, want %q", ee.Message, msg)
		}

		// Any body: the output is a prefix of it, the same whatever the
		// reads, and all of it unless a terminator was found.
		res = decode(out)
		whole := decodeExec(t, bytes.NewReader(out))
		whole.Chunks, res.Chunks = 0, 0
		if !cmp.Equal(whole, res, cmp.Comparer(func(a, b error) bool { return fmt.Sprint(a) == fmt.Sprint(b) })) {
			t.Fatalf("body %q: whole read %+v, %d-byte reads %+v", out, whole, n, res)
		}
		if !bytes.HasPrefix(out, []byte(res.Output)) {
			t.Fatalf("body %q: output %q is not a prefix", out, res.Output)
		}
		rest := out[len(res.Output):]
		if res.Exit == nil && res.Err == nil {
			if len(rest) != 0 {
				t.Fatalf("body %q: %q neither output nor terminator", out, rest)
			}
		} else if st, _, _ := parseFrame(rest); st != completeFrame {
			t.Fatalf("body %q: terminator %q is not a frame", out, rest)
		}
	}
}
