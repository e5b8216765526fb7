package stream

import (
	"bufio"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sliceNext returns a next function that yields vals, then ends with end
// (io.EOF for a clean end). It fails the test if called after the end.
func sliceNext(t *testing.T, vals []int, end error) func() (int, bool, error) {
	i := 0
	ended := false
	return func() (int, bool, error) {
		if ended {
			t.Error("next called after the stream ended")
		}
		if i == len(vals) {
			ended = true
			return 0, false, end
		}
		i++
		return vals[i-1], false, nil
	}
}

// closeCounter counts calls of its close function, which returns err.
type closeCounter struct {
	n   atomic.Int32
	err error
}

func (c *closeCounter) close() error { c.n.Add(1); return c.err }

func collect[T any](s *Stream[T]) []T {
	var out []T
	for s.Next() {
		out = append(out, s.Current())
	}
	return out
}

func TestStreamEndsOnEOF(t *testing.T) {
	t.Parallel()
	var cc closeCounter
	s := NewStream(sliceNext(t, []int{1, 2, 3}, io.EOF), cc.close)
	if diff := cmp.Diff([]int{1, 2, 3}, collect(s)); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err() = %v", err)
	}
	if cc.n.Load() != 1 {
		t.Errorf("close called %d times at the end, want 1", cc.n.Load())
	}
	if s.Next() {
		t.Error("Next() after the end = true")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if cc.n.Load() != 1 || s.Err() != nil {
		t.Errorf("after Close: close called %d times, Err() = %v", cc.n.Load(), s.Err())
	}
}

func TestStreamEndsOnError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var cc closeCounter
	s := NewStream(sliceNext(t, []int{1}, boom), cc.close)
	if diff := cmp.Diff([]int{1}, collect(s)); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if !errors.Is(s.Err(), boom) {
		t.Errorf("Err() = %v, want %v", s.Err(), boom)
	}
	if cc.n.Load() != 1 {
		t.Errorf("close called %d times, want 1", cc.n.Load())
	}
	if s.Next() || !errors.Is(s.Err(), boom) {
		t.Errorf("Next() after the error = true or Err() changed to %v", s.Err())
	}
}

func TestStreamTerminalValue(t *testing.T) {
	t.Parallel()
	var cc closeCounter
	calls := 0
	s := NewStream(func() (string, bool, error) {
		calls++
		switch calls {
		case 1:
			return "start", false, nil
		case 2:
			return "done", true, nil
		}
		t.Error("next called after the terminal value")
		return "", false, io.EOF
	}, cc.close)
	if diff := cmp.Diff([]string{"start", "done"}, collect(s)); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if s.Err() != nil || cc.n.Load() != 1 || calls != 2 {
		t.Errorf("Err() = %v, close called %d times, next %d times", s.Err(), cc.n.Load(), calls)
	}
}

func TestStreamCloseIdempotent(t *testing.T) {
	t.Parallel()
	closeErr := errors.New("close failed")
	cc := closeCounter{err: closeErr}
	s := NewStream(sliceNext(t, []int{1, 2}, io.EOF), cc.close)
	if !s.Next() {
		t.Fatal("no first value")
	}
	if err := s.Close(); !errors.Is(err, closeErr) {
		t.Errorf("first Close() = %v, want %v", err, closeErr)
	}
	for range 3 {
		if err := s.Close(); err != nil {
			t.Errorf("later Close() = %v, want nil", err)
		}
	}
	if cc.n.Load() != 1 {
		t.Errorf("close called %d times, want 1", cc.n.Load())
	}
	// Breaking out, then closing, leaves Err as it was.
	if err := s.Err(); err != nil {
		t.Errorf("Err() after Close = %v, want nil", err)
	}
	// A later Next sees the closed stream.
	if s.Next() {
		t.Error("Next() after Close = true")
	}
	if !errors.Is(s.Err(), ErrClosed) {
		t.Errorf("Err() after Next on a closed stream = %v, want ErrClosed", s.Err())
	}
}

func TestStreamCloseErrorAfterNaturalEnd(t *testing.T) {
	t.Parallel()
	closeErr := errors.New("close failed")
	cc := closeCounter{err: closeErr}
	s := NewStream(sliceNext(t, nil, io.EOF), cc.close)
	if s.Next() {
		t.Fatal("Next() = true")
	}
	// The connection was released at the end; its error comes from the
	// first Close, not from Err.
	if s.Err() != nil {
		t.Errorf("Err() = %v", s.Err())
	}
	if err := s.Close(); !errors.Is(err, closeErr) {
		t.Errorf("Close() = %v, want %v", err, closeErr)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}

func TestStreamNilClose(t *testing.T) {
	t.Parallel()
	s := NewStream(sliceNext(t, []int{1}, io.EOF), nil)
	if got := collect(s); len(got) != 1 || s.Err() != nil || s.Close() != nil {
		t.Errorf("got %v, Err() = %v", got, s.Err())
	}
}

// pipeStream returns a stream of lines read from a pipe, and the pipe's
// writer. Closing the stream closes the reader, which unblocks a read.
func pipeStream() (*Stream[string], *io.PipeWriter, chan struct{}) {
	pr, pw := io.Pipe()
	br := bufio.NewReader(pr)
	reading := make(chan struct{}, 100)
	s := NewStream(func() (string, bool, error) {
		reading <- struct{}{}
		line, err := br.ReadString('\n')
		if err != nil {
			return "", false, err
		}
		return line, false, nil
	}, pr.Close)
	return s, pw, reading
}

func TestStreamCloseUnblocksNext(t *testing.T) {
	t.Parallel()
	s, pw, reading := pipeStream()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("one\n")) }()
	if !s.Next() || s.Current() != "one\n" {
		t.Fatalf("first value %q, Err() = %v", s.Current(), s.Err())
	}
	result := make(chan bool)
	go func() { result <- s.Next() }()
	<-reading // the first read
	<-reading // the second read, which blocks: nothing more is written
	closeDone := make(chan error)
	go func() { closeDone <- s.Close() }()
	select {
	case ok := <-result:
		if ok {
			t.Error("blocked Next() returned true after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock Next")
	}
	if err := <-closeDone; err != nil {
		t.Errorf("Close() = %v", err)
	}
	if !errors.Is(s.Err(), ErrClosed) {
		t.Errorf("Err() = %v, want ErrClosed", s.Err())
	}
}

func TestStreamConcurrentClose(t *testing.T) {
	t.Parallel()
	s, pw, _ := pipeStream()
	defer pw.Close()
	var cc atomic.Int32
	inner := s.closeFn
	s.closeFn = func() error { cc.Add(1); return inner() }
	var wg sync.WaitGroup
	var nilErrs atomic.Int32
	wg.Go(func() {
		for s.Next() {
		}
	})
	for range 8 {
		wg.Go(func() {
			if s.Close() == nil {
				nilErrs.Add(1)
			}
		})
	}
	wg.Go(func() { _, _ = pw.Write([]byte("a\nb\n")) })
	wg.Wait()
	if cc.Load() != 1 || nilErrs.Load() != 8 {
		t.Errorf("close called %d times, %d nil results", cc.Load(), nilErrs.Load())
	}
}

func TestStreamAll(t *testing.T) {
	t.Parallel()
	t.Run("clean end", func(t *testing.T) {
		t.Parallel()
		var cc closeCounter
		s := NewStream(sliceNext(t, []int{1, 2, 3}, io.EOF), cc.close)
		var got []int
		for v, err := range s.All() {
			if err != nil {
				t.Fatalf("err %v", err)
			}
			got = append(got, v)
		}
		if diff := cmp.Diff([]int{1, 2, 3}, got); diff != "" || cc.n.Load() != 1 {
			t.Errorf("values (-want +got):\n%s; close called %d times", diff, cc.n.Load())
		}
	})
	t.Run("error yielded once at the end", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		s := NewStream(sliceNext(t, []int{1}, boom), nil)
		var vals []int
		var errs []error
		for v, err := range s.All() {
			vals = append(vals, v)
			errs = append(errs, err)
		}
		if diff := cmp.Diff([]int{1, 0}, vals); diff != "" {
			t.Errorf("values (-want +got):\n%s", diff)
		}
		if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], boom) {
			t.Errorf("errors %v", errs)
		}
	})
	t.Run("break closes", func(t *testing.T) {
		t.Parallel()
		var cc closeCounter
		s := NewStream(sliceNext(t, []int{1, 2, 3}, io.EOF), cc.close)
		for v := range s.All() {
			if v == 2 {
				break
			}
		}
		if cc.n.Load() != 1 {
			t.Errorf("close called %d times after break, want 1", cc.n.Load())
		}
		if s.Next() {
			t.Error("Next() after break = true")
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close() after break = %v", err)
		}
		if cc.n.Load() != 1 {
			t.Errorf("close called %d times", cc.n.Load())
		}
	})
	t.Run("break on a blocking stream", func(t *testing.T) {
		t.Parallel()
		s, pw, _ := pipeStream()
		defer pw.Close()
		go func() { _, _ = pw.Write([]byte("x\n")) }()
		for v, err := range s.All() {
			if err != nil || v != "x\n" {
				t.Fatalf("got %q, %v", v, err)
			}
			break
		}
		// The pipe reader is closed: a writer now fails at once.
		if _, err := pw.Write([]byte("y\n")); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("write after break = %v, want io.ErrClosedPipe", err)
		}
	})
}

func TestStreamWithDecoder(t *testing.T) {
	t.Parallel()
	// How the SDK puts the pieces together: an SSE body, a Decoder, and a
	// Stream ending at a terminal "done" event.
	pr, pw := io.Pipe()
	go func() {
		e := NewEncoder(pw)
		_ = e.Encode("text", []byte(`{"text":"a"}`))
		_ = e.Encode("done", []byte(`{}`))
		_ = e.Encode("stats", []byte(`{}`)) // after the terminal event: never read
		_ = pw.Close()
	}()
	d := NewDecoder(pr)
	s := NewStream(func() (Event, bool, error) {
		if !d.Next() {
			if err := d.Err(); err != nil {
				return Event{}, false, err
			}
			return Event{}, false, io.EOF
		}
		e := d.Event()
		e.Data = append([]byte(nil), e.Data...)
		return e, e.Type == "done", nil
	}, pr.Close)
	var types []string
	for e, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	if diff := cmp.Diff([]string{"text", "done"}, types); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
}
