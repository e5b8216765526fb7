package box_test

import (
	"github.com/upstash/box-go/boxtest"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// endlessReader hands out zeros until left runs out, counting them.
type endlessReader struct {
	left  int64
	given atomic.Int64
	reads atomic.Int64
}

func (r *endlessReader) Read(p []byte) (int, error) {
	r.reads.Add(1)
	n := int64(len(p))
	if n > r.left-r.given.Load() {
		n = r.left - r.given.Load()
	}
	if n == 0 {
		return 0, io.EOF
	}
	clear(p[:n])
	r.given.Add(n)
	return int(n), nil
}

// TestWriteFromRefusedEarly: a write the box refuses before it has read
// the body returns once the SDK no longer reads the caller's reader, and
// says how much it took from it.
func TestWriteFromRefusedEarly(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	r := &endlessReader{left: 64 << 20}
	n, err := b.Files.WriteFrom(t.Context(), "/usr/refused.bin", r, nil)
	if err == nil {
		t.Fatal("a write to /usr succeeded")
	}
	reads := r.reads.Load()
	time.Sleep(200 * time.Millisecond)
	if got := r.reads.Load(); got != reads {
		t.Errorf("the reader was read %d more times after WriteFrom returned (%v)", got-reads, err)
	}
	if n != r.given.Load() {
		t.Errorf("WriteFrom says it took %d bytes, the reader gave %d", n, r.given.Load())
	}
	t.Logf("refused after %d bytes: %v", n, err)
}
