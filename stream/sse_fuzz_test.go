package stream

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// refDecode is a deliberately plain reading of the WHATWG rules, written
// for clarity rather than speed, that the fuzzer compares the Decoder with.
// It has no size limit.
func refDecode(body []byte) []ev {
	s := strings.TrimPrefix(string(body), "\uFEFF")
	var lines []string
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			break // an unterminated last line is not a line
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	var (
		out         []ev
		data        strings.Builder // += would be quadratic for many lines
		typ         string
		hasData     bool
		id          string
		retry       time.Duration
		validDigits = func(v string) bool {
			if v == "" {
				return false
			}
			for _, c := range v {
				if c < '0' || c > '9' {
					return false
				}
			}
			return true
		}
	)
	for _, line := range lines {
		if line == "" {
			if hasData {
				t := typ
				if t == "" {
					t = "message"
				}
				out = append(out, ev{t, strings.TrimSuffix(data.String(), "\n"), id, retry})
			}
			data.Reset()
			typ, hasData = "", false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		case "retry":
			if validDigits(value) {
				if ms, err := strconv.ParseInt(value, 10, 64); err == nil && ms <= int64(1<<63-1)/int64(time.Millisecond) {
					retry = time.Duration(ms) * time.Millisecond
				}
			}
		}
	}
	return out
}

const fuzzMaxEventSize = 32

func FuzzDecoder(f *testing.F) {
	seeds := []struct {
		body, event, data string
	}{
		{"data: a\n\n", "text", "hello"},
		{"data: a\r\rdata: b\r\n\r\n", "", "a\nb"},
		{"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", "\xEF\xBB\xBF", "\xEF\xBB\xBF"},
		{"event: x\ndata\nid: 1\x002\nretry: 10\n\n", " x", ""},
		{"id: 1\ndata: a\n\n:c\n\nid\ndata: b\n\nretry: 9x\ndata:  c\n", "a:b", "\n\n"},
		{"data: 0123456789012345678901234567890123456789\n\n", "event", "data: y\n: z\n"},
		{"data: x\r", "e", "x\ry"},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.event, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, body []byte, event string, data []byte) {
		// 1. Any body, default limit (never reached by fuzz inputs):
		// exactly what the reference reading gives, however the input is
		// split into reads.
		want := refDecode(body)
		for name, decode := range map[string]func() ([]ev, error){
			"whole":   func() ([]ev, error) { return decodeAll(bytes.NewReader(body), 0) },
			"onebyte": func() ([]ev, error) { return decodeAll(iotest.OneByteReader(bytes.NewReader(body)), 0) },
			"tinybuf": func() ([]ev, error) { return decodeAllBuf(iotest.HalfReader(bytes.NewReader(body)), 0, 4) },
		} {
			got, err := decode()
			if err != nil {
				t.Fatalf("%s: Err() = %v", name, err)
			}
			if !cmp.Equal(want, got) {
				t.Fatalf("%s: body %q:\n%s", name, body, cmp.Diff(want, got))
			}
		}

		// 2. A small limit: never a larger event, bounded buffers, and
		// otherwise the same events up to the point where it stops.
		d := NewDecoder(iotest.HalfReader(bytes.NewReader(body)))
		d.SetMaxEventSize(fuzzMaxEventSize)
		d.bufSize = 8
		var got []ev
		for d.Next() {
			e := d.Event()
			if len(e.Data) > fuzzMaxEventSize {
				t.Fatalf("event of %d bytes with a limit of %d", len(e.Data), fuzzMaxEventSize)
			}
			got = append(got, ev{e.Type, string(e.Data), e.ID, e.Retry})
		}
		if len(d.buf) > fuzzMaxEventSize+lineSlack+1 || cap(d.data) > 2*fuzzMaxEventSize+64 {
			t.Fatalf("buffers grew to %d and %d bytes", len(d.buf), cap(d.data))
		}
		if err := d.Err(); err != nil && !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("Err() = %v", err)
		}
		if len(got) > len(want) || !cmp.Equal(want[:len(got)], got, cmpopts.EquateEmpty()) {
			t.Fatalf("with a limit: got %q, want a prefix of %q", got, want)
		}
		if d.Err() == nil && len(got) != len(want) {
			t.Fatalf("with a limit and no error: got %q, want %q", got, want)
		}

		// 3. What the Encoder accepts decodes to exactly what was
		// encoded, also between other events and comments.
		var enc bytes.Buffer
		e := NewEncoder(&enc)
		err := e.Encode(event, data)
		if strings.ContainsAny(event, "\r\n") || bytes.IndexByte(data, '\r') >= 0 {
			if err == nil {
				t.Fatalf("Encode(%q, %q) accepted a line break", event, data)
			}
			return
		}
		if err != nil {
			t.Fatalf("Encode(%q, %q): %v", event, data, err)
		}
		if err := e.Comment("x"); err != nil {
			t.Fatal(err)
		}
		if err := e.Encode(event, data); err != nil {
			t.Fatal(err)
		}
		typ := event
		if typ == "" {
			typ = "message"
		}
		wantEnc := []ev{{Type: typ, Data: string(data)}, {Type: typ, Data: string(data)}}
		gotEnc, err := decodeAll(iotest.OneByteReader(bytes.NewReader(enc.Bytes())), 0)
		if err != nil || !cmp.Equal(wantEnc, gotEnc) {
			t.Fatalf("round trip of %q, %q through %q: got %q, %v", event, data, enc.Bytes(), gotEnc, err)
		}
	})
}
