package core

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// TestLogLines: the lines of the first max bytes are handed on without
// their line ends, a line cut at max as far as it reaches; the rest is
// read to its end and dropped, and the cut is told once, only when there
// is something past max.
func TestLogLines(t *testing.T) {
	long := strings.Repeat("y", 10000) // longer than the reader's buffer
	for _, tc := range []struct {
		name, in string
		max      int
		want     []string
		cut      bool
	}{
		{"lines", "a\nb\r\n\nc", 100, []string{"a", "b", "c"}, false},
		{"exactly max", "ab\ncd\n", 6, []string{"ab", "cd"}, false},
		{"exactly max, no last newline", "ab\ncd", 5, []string{"ab", "cd"}, false},
		{"cut in a line", "ab\ncdef\ngh\n", 5, []string{"ab", "cd"}, true},
		{"cut at a line end", "ab\ncd\nef\n", 6, []string{"ab", "cd"}, true},
		{"long line", long + "\nz\n", 100, []string{long[:100]}, true},
		{"long line within max", long + "\nz\n", 20000, []string{long, "z"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &countReader{r: iotest.HalfReader(strings.NewReader(tc.in))}
			var got []string
			cuts := 0
			err := logLines(src, tc.max, func(l []string) {
				if len(l) == 0 {
					t.Error("an empty batch")
				}
				got = append(got, l...)
			}, func() { cuts++ })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if want := map[bool]int{false: 0, true: 1}[tc.cut]; cuts != want {
				t.Errorf("cut told %d times, want %d", cuts, want)
			}
			if src.n != len(tc.in) {
				t.Errorf("read %d of %d bytes", src.n, len(tc.in))
			}
		})
	}
	// A read error ends it, with what was read so far handed on.
	var got []string
	err := logLines(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(errors.New("broken"))), 100, func(l []string) { got = append(got, l...) }, func() {})
	if err == nil || !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("on a read error: %v, %q", err, got)
	}
}

// TestLogLinesBatches: lines that arrive together are handed on together.
func TestLogLinesBatches(t *testing.T) {
	in := strings.Repeat("line\n", 2000)
	batches := 0
	n := 0
	if err := logLines(strings.NewReader(in), 1<<20, func(l []string) { batches++; n += len(l) }, func() {}); err != nil {
		t.Fatal(err)
	}
	if n != 2000 || batches > 40 {
		t.Errorf("%d lines in %d batches", n, batches)
	}
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
