package stream

import (
	"errors"
	"io"
	"iter"
	"sync"
)

// ErrClosed is the error a [Stream] reports when [Stream.Close] ended it
// while a call to Next was waiting, or before a later call to Next.
var ErrClosed = errors.New("stream: closed")

// Stream is a pull iterator over values of a remote stream, such as the
// events of a server-sent event body:
//
//	defer s.Close()
//	for s.Next() {
//		v := s.Current()
//		...
//	}
//	if err := s.Err(); err != nil {
//		...
//	}
//
// or, with range-over-func, for v, err := range s.All() { ... }.
//
// Next, Current and Err belong to the goroutine that reads the stream.
// Close may be called from any goroutine, also while Next is blocked, to
// abort the stream.
type Stream[T any] struct {
	next    func() (T, bool, error)
	closeFn func() error
	cur     T // only touched by the reading goroutine

	closeOnce sync.Once
	closeErr  error // set by closeOnce

	mu            sync.Mutex
	ended         bool  // no more values: the stream ended by itself or was closed
	closedByClose bool  // Close was called before the stream ended by itself
	err           error // the error that ended the stream
	closeErrTaken bool  // a call to Close has returned closeErr
}

// NewStream returns a Stream that calls next for each value. next returns
// (v, last, err): with err == io.EOF the stream ends cleanly (v ignored);
// with another err the stream ends with that error; with last == true, v is
// yielded and the stream then ends (a terminal event). closeFn (may be nil)
// releases the underlying connection; it is called exactly once, when the
// stream ends by itself or on Close, whichever is first.
//
// next is only called from Next, one call at a time, and not after the
// stream has ended by itself. When Close is called from another goroutine,
// closeFn may run while next is blocked (or just as a call to next starts);
// it must then make next return promptly, as closing an HTTP response body
// makes a pending or later read fail.
func NewStream[T any](next func() (v T, last bool, err error), closeFn func() error) *Stream[T] {
	return &Stream[T]{next: next, closeFn: closeFn}
}

// Next advances to the next value, which [Stream.Current] then returns. It
// returns false when the stream has ended: by itself (Err is nil), with an
// error (Err returns it), or because Close was called (Err returns
// [ErrClosed] if this call or an earlier one was cut short by it).
func (s *Stream[T]) Next() bool {
	s.mu.Lock()
	if s.ended {
		s.endedByClose()
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()

	v, last, err := s.next()

	s.mu.Lock()
	if s.ended {
		// Close ran while next was blocked; whatever next returned
		// (usually a "closed body" error) is the consequence.
		s.endedByClose()
		s.mu.Unlock()
		return false
	}
	switch {
	case err == io.EOF:
		s.ended = true
	case err != nil:
		s.ended, s.err = true, err
	case last:
		s.ended = true
		s.cur = v
	default:
		s.cur = v
		s.mu.Unlock()
		return true
	}
	s.mu.Unlock()
	s.closeOnce.Do(s.callClose)
	return err == nil
}

// endedByClose records ErrClosed if Close, rather than the stream itself,
// ended the stream. s.mu must be held.
func (s *Stream[T]) endedByClose() {
	if s.closedByClose && s.err == nil {
		s.err = ErrClosed
	}
}

// Current returns the value read by the last call to Next that returned
// true.
func (s *Stream[T]) Current() T { return s.cur }

// Err returns the error that ended the stream, or nil if it ended cleanly
// or has not ended. See [Stream.Next] for [ErrClosed].
func (s *Stream[T]) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the stream and releases its connection. It is idempotent: the
// first call returns the error of the connection's close function (also
// when the stream had already ended by itself and released the connection
// then), later calls return nil.
//
// Close may be called from another goroutine while Next is blocked: it
// calls the close function, which unblocks the pending read, and that Next
// returns false with [ErrClosed].
func (s *Stream[T]) Close() error {
	s.mu.Lock()
	if !s.ended {
		s.ended, s.closedByClose = true, true
	}
	s.mu.Unlock()

	s.closeOnce.Do(s.callClose)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeErrTaken {
		return nil
	}
	s.closeErrTaken = true
	return s.closeErr
}

func (s *Stream[T]) callClose() {
	if s.closeFn != nil {
		s.closeErr = s.closeFn()
	}
}

// All returns an iterator over the stream's values: it yields (v, nil) for
// each value and finally, if the stream failed, (zero, err) once. Breaking
// out of the loop closes the stream (the close function's error is then
// dropped). The stream can be ranged over once; All does not start again.
func (s *Stream[T]) All() iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for s.Next() {
			if !yield(s.Current(), nil) {
				_ = s.Close()
				return
			}
		}
		if err := s.Err(); err != nil {
			var zero T
			yield(zero, err)
		}
	}
}
