package box

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/upstash/box-go/gen"
)

// TestB64Content decodes read responses as they stream, in reads of
// every size and bodies that arrive a byte at a time, whatever else the
// object holds and however its string is escaped.
func TestB64Content(t *testing.T) {
	t.Parallel()
	data := make([]byte, 100_003)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	enc := base64.StdEncoding.EncodeToString(data)
	for name, body := range map[string]string{
		"plain":          `{"content":"` + enc + `"}`,
		"spaced":         "{ \"content\" :\n \"" + enc + "\" }\n",
		"other keys":     `{"size":100003,"meta":{"a":[1,"}"]},"content":"` + enc + `","after":"x"}`,
		"escaped slash":  `{"content":"` + strings.ReplaceAll(enc, "/", `\/`) + `"}`,
		"unicode escape": `{"content":"` + strings.ReplaceAll(strings.ReplaceAll(enc, "+", `\u002b`), "A", `\u0041`) + `"}`,
		"wrapped lines":  `{"content":"` + wrap(enc, 76, `\r\n`) + `"}`,
		"wrapped, LF":    `{"content":"` + wrap(enc, 64, `\n`) + `"}`,
	} {
		for _, size := range []int{1, 2, 3, 5, 4096, 1 << 20} {
			for _, slow := range []bool{false, true} {
				var src io.Reader = strings.NewReader(body)
				if slow {
					src = iotest.OneByteReader(src)
				}
				var c b64Content
				if err := c.reset(io.NopCloser(src)); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				var got bytes.Buffer
				buf := make([]byte, size)
				for {
					n, err := c.Read(buf)
					got.Write(buf[:n])
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("%s, reads of %d: %v", name, size, err)
					}
				}
				if !bytes.Equal(got.Bytes(), data) {
					t.Errorf("%s, reads of %d, slow %v: %d bytes differ", name, size, slow, got.Len())
				}
			}
		}
	}
	// The buffers serve the next response.
	var c b64Content
	for _, want := range []string{"first", "", "the third one"} {
		if err := c.reset(io.NopCloser(strings.NewReader(`{"content":"` + base64.StdEncoding.EncodeToString([]byte(want)) + `"}`))); err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(&c); err != nil || string(got) != want {
			t.Errorf("after a reset: %q, %v; want %q", got, err, want)
		}
	}
	for name, body := range map[string]string{
		"not an object": `["content"]`,
		"no content":    `{"size":3}`,
		"not a string":  `{"content":12}`,
		"cut quantum":   `{"content":"` + enc[:1001] + `"}`,
		"bad base64":    `{"content":"ab*d"}`,
		"bad escape":    `{"content":"ab\tcd"}`,
		"wide escape":   `{"content":"ab\u00e9d"}`,
		"padding early": `{"content":"YQ==YWJj"}`,
	} {
		var c b64Content
		err := c.reset(io.NopCloser(strings.NewReader(body)))
		if err == nil {
			_, err = io.ReadAll(&c)
		}
		if !errors.Is(err, errBadContent) {
			t.Errorf("%s: %v, want a malformed response", name, err)
		}
	}
	// A body that ends early or fails is a failed transfer with the
	// body's own error, not a malformed answer.
	for name, tc := range map[string]struct {
		body io.Reader
		want error
	}{
		"cut in the string":   {strings.NewReader(`{"content":"` + enc[:1000]), io.ErrUnexpectedEOF},
		"cut before it":       {strings.NewReader(`{"size":3,"con`), io.ErrUnexpectedEOF},
		"empty":               {strings.NewReader(``), io.ErrUnexpectedEOF},
		"deadline in it":      {io.MultiReader(strings.NewReader(`{"content":"`+enc[:1000]), iotest.ErrReader(context.DeadlineExceeded)), context.DeadlineExceeded},
		"deadline before it":  {io.MultiReader(strings.NewReader(`{"size":`), iotest.ErrReader(context.DeadlineExceeded)), context.DeadlineExceeded},
		"deadline in escapes": {io.MultiReader(strings.NewReader(`{"content":"QUFB\u00`), iotest.ErrReader(context.DeadlineExceeded)), context.DeadlineExceeded},
	} {
		var c b64Content
		err := c.reset(io.NopCloser(tc.body))
		if err == nil {
			_, err = io.ReadAll(&c)
		}
		if !errors.Is(err, tc.want) || errors.Is(err, errBadContent) {
			t.Errorf("%s: %v, want %v and not a malformed response", name, err, tc.want)
		}
	}
}

// wrap breaks s into lines of n characters, joined by sep.
func wrap(s string, n int, sep string) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + sep)
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

// TestOpenRangeMemory reads 48 MiB through OpenRange from a server that
// sends its chunks whole, and checks that the reader allocates a small
// part of that: nothing in proportion to a chunk. (Not parallel: it
// counts the process's allocations.)
func TestOpenRangeMemory(t *testing.T) {
	const size = 48 << 20
	// Each chunk is the same bytes: one answer prepared once.
	chunk := make([]byte, rangeChunk)
	for i := range chunk {
		chunk[i] = byte(i * 31)
	}
	answer := []byte(`{"content":"` + base64.StdEncoding.EncodeToString(chunk) + `"}`)
	empty := []byte(`{"content":""}`)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		n, _ := strconv.ParseInt(r.URL.Query().Get("length"), 10, 64)
		if off%rangeChunk != 0 || n != rangeChunk {
			http.Error(w, fmt.Sprintf(`{"error":"offset %d, length %d"}`, off, n), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if off >= size {
			_, _ = w.Write(empty)
			return
		}
		_, _ = w.Write(answer)
	}))
	defer ts.Close()
	c, err := NewClient(WithAPIKey("k"), WithBaseURL(ts.URL), WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	b := c.newBox(&gen.BoxData{ID: "box-1", Status: gen.BoxStatusIdle})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := b.Files.OpenRange(context.Background(), "/f", 0, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, r)
	r.Close()
	runtime.ReadMemStats(&after)
	if err != nil || n != size {
		t.Fatalf("read %d bytes, %v; want %d", n, err, size)
	}
	// The server's side allocates little: its answers are prepared.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("reading %d MiB allocated %d KiB", size>>20, alloc>>10)
	}
}

// TestOpenRangeErrorSticks: once a chunk of a ranged read fails, every
// later Read fails the same way; none goes on with what is left of the
// cut chunk.
func TestOpenRangeErrorSticks(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":"QUFBQUFB`)
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // cut inside the string
		}
	}))
	defer ts.Close()
	c, err := NewClient(WithAPIKey("k"), WithBaseURL(ts.URL), WithTelemetry(false), WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	b := c.newBox(&gen.BoxData{ID: "box-1", Status: gen.BoxStatusIdle})
	r, err := b.Files.OpenRange(context.Background(), "/f", 0, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 3)
	var first error
	read := 0
	for range 10 {
		n, err := r.Read(buf)
		read += n
		if err != nil {
			first = err
			break
		}
	}
	if first == nil {
		t.Fatalf("a cut chunk read on: %d bytes", read)
	}
	for range 3 {
		if n, err := r.Read(buf); n != 0 || err != first {
			t.Errorf("Read after %v = %d, %v; want 0 and the same error", first, n, err)
		}
	}
}
