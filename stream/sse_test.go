package stream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// ev is an Event with its data copied, for comparisons.
type ev struct {
	Type  string
	Data  string
	ID    string
	Retry time.Duration
}

// decodeAll reads every event from r and returns them with the decoder's
// final error.
func decodeAll(r io.Reader, maxSize int) ([]ev, error) {
	return decodeAllBuf(r, maxSize, 0)
}

// decodeAllBuf is decodeAll with the decoder's initial read buffer set to
// bufSize bytes (0 for the default), so that tests can make the buffer
// fill, move and grow often.
func decodeAllBuf(r io.Reader, maxSize, bufSize int) ([]ev, error) {
	d := NewDecoder(r)
	d.bufSize = bufSize
	if maxSize > 0 {
		d.SetMaxEventSize(maxSize)
	}
	var out []ev
	for d.Next() {
		e := d.Event()
		out = append(out, ev{e.Type, string(e.Data), e.ID, e.Retry})
	}
	return out, d.Err()
}

// readers returns the ways the table tests feed a body to the decoder.
func readers(body string) map[string]io.Reader {
	return map[string]io.Reader{
		"whole":   strings.NewReader(body),
		"onebyte": iotest.OneByteReader(strings.NewReader(body)),
		"half":    iotest.HalfReader(strings.NewReader(body)),
		"dataerr": iotest.DataErrReader(strings.NewReader(body)),
	}
}

// splitReader returns its chunks one per Read.
type splitReader struct{ chunks []string }

func (r *splitReader) Read(p []byte) (int, error) {
	for len(r.chunks) > 0 && r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	return n, nil
}

func msg(data string) ev { return ev{Type: "message", Data: data} }

func TestDecoderTable(t *testing.T) {
	t.Parallel()
	const bom = "\xEF\xBB\xBF"
	tests := []struct {
		name string
		body string
		want []ev
	}{
		{"empty body", "", nil},
		{"only blank lines", "\n\n\r\n\r\r", nil},
		{"LF", "data: a\n\ndata: b\n\n", []ev{msg("a"), msg("b")}},
		{"CR", "data: a\r\rdata: b\r\r", []ev{msg("a"), msg("b")}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{msg("a"), msg("b")}},
		{"mixed line ends", "event: x\rdata: a\r\ndata: b\n\r\ndata: c\r\n\n", []ev{{Type: "x", Data: "a\nb"}, msg("c")}},
		{"CR CR LF is two line ends", "data: a\r\r\ndata: b\n\n", []ev{msg("a"), msg("b")}},
		{"LF CR is two line ends", "data: a\n\rdata: b\n\n", []ev{msg("a"), msg("b")}},
		{"BOM stripped", bom + "data: a\n\n", []ev{msg("a")}},
		{"second BOM is part of the field name", bom + bom + "data: a\n\ndata: b\n\n", []ev{msg("b")}},
		{"BOM in a value is data", bom + "data: " + bom + "a\n\n", []ev{msg(bom + "a")}},
		{"BOM later in the stream is not stripped", "data: a\n\n" + bom + "data: b\n\n", []ev{msg("a")}},
		{"partial BOM is text", "\xEF\xBBdata: a\n\ndata: b\n\n", []ev{msg("b")}},
		{"only a BOM", bom, nil},
		{"multi-line data", "data: a\ndata: b\ndata: c\n\n", []ev{msg("a\nb\nc")}},
		{"empty data line", "data\n\n", []ev{msg("")}},
		{"empty data value", "data:\n\n", []ev{msg("")}},
		{"two empty data lines", "data:\ndata\n\n", []ev{msg("\n")}},
		{"empty line between data lines", "data: a\ndata:\ndata: b\n\n", []ev{msg("a\n\nb")}},
		{"comments ignored", ": hello\ndata: a\n: mid\n\n:\n\n", []ev{msg("a")}},
		{"comment only event not dispatched", ": ping\n\n", nil},
		{"event type", "event: text\ndata: {}\n\n", []ev{{Type: "text", Data: "{}"}}},
		{"custom event type", "event: my-event\ndata: 1\n\nevent: my-event\ndata: 2\n\n", []ev{{Type: "my-event", Data: "1"}, {Type: "my-event", Data: "2"}}},
		{"empty event type is message", "event:\ndata: a\n\n", []ev{msg("a")}},
		{"event type resets after dispatch", "event: x\ndata: a\n\ndata: b\n\n", []ev{{Type: "x", Data: "a"}, msg("b")}},
		{"last event field wins", "event: x\nevent: y\ndata: a\n\n", []ev{{Type: "y", Data: "a"}}},
		{"event without data not dispatched, type reset", "event: a\n\ndata: b\n\n", []ev{msg("b")}},
		{"id", "id: 1\ndata: a\n\n", []ev{{Type: "message", Data: "a", ID: "1"}}},
		{"id persists across events", "id: 7\ndata: a\n\ndata: b\n\n", []ev{{"message", "a", "7", 0}, {"message", "b", "7", 0}}},
		{"id from an undispatched event persists", "id: 5\n\ndata: a\n\n", []ev{{"message", "a", "5", 0}}},
		{"empty id resets", "id: 7\ndata: a\n\nid\ndata: b\n\n", []ev{{"message", "a", "7", 0}, {"message", "b", "", 0}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []ev{{"message", "a", "1", 0}, {"message", "b", "1", 0}}},
		{"NUL in data kept", "data: a\x00b\n\n", []ev{msg("a\x00b")}},
		{"retry valid", "retry: 1500\ndata: a\n\ndata: b\n\n", []ev{{"message", "a", "", 1500 * time.Millisecond}, {"message", "b", "", 1500 * time.Millisecond}}},
		{"retry invalid values ignored", "retry: 20\ndata: a\n\nretry: 1x\nretry: -1\nretry:  30\nretry:\nretry\nretry: 1.5\nretry: 99999999999999999999\ndata: b\n\n",
			[]ev{{"message", "a", "", 20 * time.Millisecond}, {"message", "b", "", 20 * time.Millisecond}}},
		{"retry zero", "retry: 20\nretry: 0\ndata: a\n\n", []ev{{"message", "a", "", 0}}},
		{"field without colon", "data\nevent\nfoo\n\n", []ev{msg("")}},
		{"unknown fields ignored", "foo: bar\nData: x\nDATA: y\n data: z\ndata: a\n\n", []ev{msg("a")}},
		{"no space after colon", "data:x\n\n", []ev{msg("x")}},
		{"one space removed", "data: x\n\n", []ev{msg("x")}},
		{"only one space removed", "data:  x\n\n", []ev{msg(" x")}},
		{"trailing space kept", "data: x \n\n", []ev{msg("x ")}},
		{"tab is not a space", "data:\tx\n\n", []ev{msg("\tx")}},
		{"colon in value", "data: a: b\n\n", []ev{msg("a: b")}},
		{"space in event type", "event:  t\ndata: a\n\n", []ev{{Type: " t", Data: "a"}}},
		{"stream ends mid-event", "data: a\n\ndata: b\n", []ev{msg("a")}},
		{"stream ends mid-line", "data: a\n\ndata: b", []ev{msg("a")}},
		{"stream ends after CR of a data line", "data: a\n\ndata: b\r", []ev{msg("a")}},
		{"stream ends after one line end", "data: a\r\n", nil},
		{"JSON data", "event: text\ndata: {\"text\":\"hi\"}\n\n", []ev{{Type: "text", Data: `{"text":"hi"}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for rname, r := range readers(tt.body) {
				got, err := decodeAll(r, 0)
				if err != nil {
					t.Errorf("%s: Err() = %v", rname, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: events (-want +got):\n%s", rname, diff)
				}
			}
			for _, size := range []int{1, 2, 3, 7} {
				got, err := decodeAllBuf(iotest.HalfReader(strings.NewReader(tt.body)), 0, size)
				if err != nil || !cmp.Equal(tt.want, got) {
					t.Errorf("buffer of %d: got %v, %v; want %v", size, got, err, tt.want)
				}
			}
			// Every way of splitting the body in two reads gives the
			// same events; this covers a CRLF split between reads.
			for i := 0; i <= len(tt.body); i++ {
				got, err := decodeAll(&splitReader{[]string{tt.body[:i], tt.body[i:]}}, 0)
				if err != nil || !cmp.Equal(tt.want, got) {
					t.Errorf("split at %d: got %v, %v; want %v", i, got, err, tt.want)
				}
			}
		})
	}
}

func TestDecoderCRLFSplitAcrossReads(t *testing.T) {
	t.Parallel()
	// If the LF after a CR that ended one read were taken as a second line
	// end, it would be a blank line and dispatch "a" alone.
	r := &splitReader{[]string{"data: a\r", "\ndata: b\r", "\n\r", "\n"}}
	got, err := decodeAll(r, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ev{msg("a\nb")}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestDecoderMaxEventSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		want    []ev
		tooBig  bool
		maxSize int
	}{
		{"at the limit", "data: 0123456789\n\n", []ev{msg("0123456789")}, false, 10},
		{"one over", "data: a\n\ndata: 0123456789x\n\n", []ev{msg("a")}, true, 10},
		{"multi-line at the limit", "data: 01234\ndata: 5678\n\n", []ev{msg("01234\n5678")}, false, 10},
		{"multi-line one over", "data: 01234\ndata: 56789\n\n", nil, true, 10},
		{"undispatched data counts", "data: 01234\ndata: 56789\n", nil, true, 10},
		{"unterminated line is not a line", "data: 01234\ndata: 56789", nil, false, 10},
		{"long comment line", ":" + strings.Repeat("x", 10+lineSlack+1) + "\n\n", nil, true, 10},
		{"comment line at the line limit", ":" + strings.Repeat("x", 10+lineSlack-1) + "\ndata: ok\n\n", []ev{msg("ok")}, false, 10},
		{"long unterminated line", "data: a\n\n" + strings.Repeat("y", 3*(10+lineSlack)), []ev{msg("a")}, true, 10},
		{"default limit", "data: " + strings.Repeat("z", DefaultMaxEventSize+1) + "\n\n", nil, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for rname, r := range readers(tt.body) {
				if rname == "onebyte" && len(tt.body) > 1<<20 {
					continue
				}
				got, err := decodeAll(r, tt.maxSize)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: events (-want +got):\n%s", rname, diff)
				}
				if errors.Is(err, ErrEventTooLarge) != tt.tooBig {
					t.Errorf("%s: Err() = %v, want ErrEventTooLarge: %v", rname, err, tt.tooBig)
				}
				limit := tt.maxSize
				if limit == 0 {
					limit = DefaultMaxEventSize
				}
				if err != nil && !strings.Contains(err.Error(), fmt.Sprint(limit)) {
					t.Errorf("%s: Err() = %q, want the limit %d in it", rname, err, limit)
				}
			}
		})
	}
}

// endless returns an endless stream of one byte, like a hostile server.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

func TestDecoderBoundedOnEndlessInput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		r    io.Reader
	}{
		{"one endless line", endless('a')},
		{"endless data lines", io.MultiReader(strings.NewReader("data: x"), strings.NewReader(strings.Repeat("\ndata: 0123456789", 1<<20)))},
	} {
		d := NewDecoder(tt.r)
		d.SetMaxEventSize(64 << 10)
		if d.Next() {
			t.Fatalf("%s: Next() = true", tt.name)
		}
		if !errors.Is(d.Err(), ErrEventTooLarge) {
			t.Errorf("%s: Err() = %v, want ErrEventTooLarge", tt.name, d.Err())
		}
		if len(d.buf) > 64<<10+lineSlack+1 || cap(d.data) > 2*(64<<10)+64 {
			t.Errorf("%s: buffers grew to %d and %d bytes", tt.name, len(d.buf), cap(d.data))
		}
	}
}

func TestDecoderReadErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	t.Run("error after events", func(t *testing.T) {
		t.Parallel()
		r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
		got, err := decodeAll(r, 0)
		if !errors.Is(err, boom) {
			t.Errorf("Err() = %v, want %v", err, boom)
		}
		if diff := cmp.Diff([]ev{msg("a")}, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("timeout reader", func(t *testing.T) {
		t.Parallel()
		r := iotest.TimeoutReader(strings.NewReader("data: a\n\n"))
		// The first read takes the whole body, the second times out.
		got, err := decodeAll(r, 0)
		if !errors.Is(err, iotest.ErrTimeout) {
			t.Errorf("Err() = %v, want ErrTimeout", err)
		}
		if diff := cmp.Diff([]ev{msg("a")}, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("error with data in the same read", func(t *testing.T) {
		t.Parallel()
		r := &errWithData{data: "data: a\n\n", err: boom}
		got, err := decodeAll(r, 0)
		if !errors.Is(err, boom) || len(got) != 1 {
			t.Errorf("got %v, %v; want one event and %v", got, err, boom)
		}
	})
	t.Run("no progress", func(t *testing.T) {
		t.Parallel()
		got, err := decodeAll(zeroReader{}, 0)
		if !errors.Is(err, io.ErrNoProgress) || got != nil {
			t.Errorf("got %v, %v; want io.ErrNoProgress", got, err)
		}
	})
	t.Run("Next after the end", func(t *testing.T) {
		t.Parallel()
		d := NewDecoder(strings.NewReader("data: a\n\n"))
		for d.Next() {
		}
		if d.Next() || d.Err() != nil {
			t.Errorf("Next() after end = true or Err() = %v", d.Err())
		}
	})
}

type errWithData struct {
	data string
	err  error
}

func (r *errWithData) Read(p []byte) (int, error) {
	n := copy(p, r.data)
	r.data = r.data[n:]
	if r.data == "" {
		return n, r.err
	}
	return n, nil
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// writeRecorder records each Write call and each flush.
type writeRecorder struct {
	writes  []string
	flushes int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

type httpFlusher struct{ writeRecorder }

func (f *httpFlusher) Flush() { f.flushes++ }

type errFlusher struct {
	writeRecorder
	err error
}

func (f *errFlusher) Flush() error { f.flushes++; return f.err }

func TestEncoder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		event string
		data  string
		want  string
	}{
		{"text", `{"text":"hi"}`, "event: text\ndata: {\"text\":\"hi\"}\n\n"},
		{"", "a", "data: a\n\n"},
		{"", "a\nb", "data: a\ndata: b\n\n"},
		{"x", "", "event: x\ndata: \n\n"},
		{"x", "a\n", "event: x\ndata: a\ndata: \n\n"},
		{"x", "\n\n", "event: x\ndata: \ndata: \ndata: \n\n"},
		{" sp", " lead", "event:  sp\ndata:  lead\n\n"},
	}
	for _, tt := range tests {
		var w httpFlusher
		e := NewEncoder(&w)
		if err := e.Encode(tt.event, []byte(tt.data)); err != nil {
			t.Fatalf("Encode(%q, %q): %v", tt.event, tt.data, err)
		}
		if diff := cmp.Diff([]string{tt.want}, w.writes); diff != "" {
			t.Errorf("Encode(%q, %q) writes (-want +got):\n%s", tt.event, tt.data, diff)
		}
		if w.flushes != 1 {
			t.Errorf("Encode(%q, %q): %d flushes, want 1", tt.event, tt.data, w.flushes)
		}
	}
}

func TestEncoderRejects(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ event, data string }{
		{"a\nb", "x"},
		{"a\rb", "x"},
		{"ok", "x\ry"},
		{"ok", "x\r\ny"},
	} {
		var w writeRecorder
		if err := NewEncoder(&w).Encode(tt.event, []byte(tt.data)); err == nil {
			t.Errorf("Encode(%q, %q) = nil, want an error", tt.event, tt.data)
		}
		if len(w.writes) != 0 {
			t.Errorf("Encode(%q, %q) wrote %q", tt.event, tt.data, w.writes)
		}
	}
	var w writeRecorder
	if err := NewEncoder(&w).Comment("a\nb"); err == nil || len(w.writes) != 0 {
		t.Errorf("Comment with LF: err = %v, writes = %q", err, w.writes)
	}
	if err := NewEncoder(&w).EncodeJSON("a\nb", 1); err == nil || len(w.writes) != 0 {
		t.Errorf("EncodeJSON with LF in event: err = %v, writes = %q", err, w.writes)
	}
	if err := NewEncoder(&w).EncodeJSON("x", func() {}); err == nil || len(w.writes) != 0 {
		t.Errorf("EncodeJSON(func): err = %v, writes = %q", err, w.writes)
	}
}

type indented struct{}

func (indented) MarshalJSON() ([]byte, error) { return []byte("{\n  \"a\": 1\n}"), nil }

func TestEncoderJSONAndComment(t *testing.T) {
	t.Parallel()
	var w httpFlusher
	e := NewEncoder(&w)
	if err := e.EncodeJSON("text", map[string]any{"text": "<b>\nx</b>"}); err != nil {
		t.Fatal(err)
	}
	if err := e.EncodeJSON("", indented{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Comment("keep-alive"); err != nil {
		t.Fatal(err)
	}
	if err := e.Comment(""); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"event: text\ndata: {\"text\":\"<b>\\nx</b>\"}\n\n",
		"data: {\"a\":1}\n\n",
		": keep-alive\n\n",
		":\n\n",
	}
	if diff := cmp.Diff(want, w.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if w.flushes != 4 {
		t.Errorf("%d flushes, want 4", w.flushes)
	}
}

func TestEncoderFlushError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	w := &errFlusher{err: boom}
	if err := NewEncoder(w).Encode("x", []byte("y")); !errors.Is(err, boom) {
		t.Errorf("Encode = %v, want %v", err, boom)
	}
	// bufio.Writer has Flush() error: events must reach the underlying
	// writer without an explicit flush.
	var sink bytes.Buffer
	bw := bufio.NewWriter(&sink)
	if err := NewEncoder(bw).Encode("x", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if sink.String() != "event: x\ndata: y\n\n" {
		t.Errorf("underlying writer got %q", sink.String())
	}
	if err := NewEncoder(iotest.TruncateWriter(io.Discard, 0)).Encode("x", nil); err != nil {
		t.Errorf("Encode to a truncating writer: %v", err)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	datas := []string{"", "a", "\n", "\n\n", "a\n", "\na", "a\nb\nc", " lead", "  two", "data: x", ": comment",
		"event: y", "\xEF\xBB\xBFbom", "x\x00y", "tail \n\n", strings.Repeat("long line ", 10000)}
	events := []string{"", "message", "text", "tool_result", " sp", "a:b", "\xEF\xBB\xBF"}
	var body bytes.Buffer
	e := NewEncoder(&body)
	var want []ev
	for i, data := range datas {
		event := events[i%len(events)]
		if err := e.Encode(event, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := e.Comment("ka"); err != nil {
				t.Fatal(err)
			}
		}
		typ := event
		if typ == "" {
			typ = "message"
		}
		want = append(want, ev{Type: typ, Data: data})
	}
	for rname, r := range readers(body.String()) {
		got, err := decodeAll(r, 0)
		if err != nil {
			t.Fatalf("%s: %v", rname, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", rname, diff)
		}
	}
}

func TestDecoderAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count")
	}
	body := benchBody(1000)
	allocs := testing.AllocsPerRun(20, func() {
		d := NewDecoder(bytes.NewReader(body))
		for d.Next() {
		}
	})
	// NewDecoder, its read buffer and the data buffer: a handful for the
	// whole body of 1000 events.
	if allocs > 10 {
		t.Errorf("%v allocations to decode 1000 events, want at most 10", allocs)
	}
}

// benchBody returns n typical agent-run events of about 100 bytes each.
func benchBody(n int) []byte {
	var b bytes.Buffer
	e := NewEncoder(&b)
	types := []string{"text", "text", "text", "thinking", "tool"}
	for i := range n {
		data := fmt.Sprintf(`{"text":"hello world %06d, the quick brown fox jumps over the lazy dog again"}`, i)
		if err := e.Encode(types[i%len(types)], []byte(data)); err != nil {
			panic(err)
		}
	}
	return b.Bytes()
}

func BenchmarkDecode(b *testing.B) {
	const n = 10000
	body := benchBody(n)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for b.Loop() {
		d := NewDecoder(bytes.NewReader(body))
		count := 0
		for d.Next() {
			count++
		}
		if count != n || d.Err() != nil {
			b.Fatalf("decoded %d events, err %v", count, d.Err())
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N*n), "allocs/event")
	b.ReportMetric(float64(len(body))/n, "bytes/event")
}

func BenchmarkEncode(b *testing.B) {
	data := []byte(`{"text":"hello world 000001, the quick brown fox jumps over the lazy dog again"}`)
	e := NewEncoder(io.Discard)
	b.SetBytes(int64(len("event: text\ndata: \n\n") + len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Encode("text", data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSetMaxEventSize(t *testing.T) {
	t.Parallel()
	d := NewDecoder(strings.NewReader("data: a\n\n"))
	d.SetMaxEventSize(math.MaxInt) // no overflow in the line limit
	if !d.Next() || string(d.Event().Data) != "a" {
		t.Fatalf("Next() with the largest limit: %v", d.Err())
	}
	d.SetMaxEventSize(-1)
	if d.max != DefaultMaxEventSize {
		t.Errorf("SetMaxEventSize(-1) left the limit at %d", d.max)
	}
}
