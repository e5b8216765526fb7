package session

import (
	"sync"
)

// chunkSize is the capacity of pooled output buffers: the output of one
// frame as this package's server sends it (up to 64 KiB), and a little.
const chunkSize = 64<<10 + 64

// chunks recycles the buffers that frames are decoded into on their way
// to a pipe, so that a fast stream does not allocate (and collect) one per
// frame.
var chunks sync.Pool // of *[]byte

// getChunk returns a buffer of length n, pooled when n fits.
func getChunk(n int) []byte {
	if n > chunkSize {
		return make([]byte, n)
	}
	if b, ok := chunks.Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, chunkSize)
}

// putChunk returns a buffer that nothing refers to any more.
func putChunk(b []byte) {
	if cap(b) == chunkSize {
		b = b[:0]
		chunks.Put(&b)
	}
}

// pipeBuffer is how many bytes of output a pipe holds before the session's
// reader goroutine waits for the caller to read. While it waits, nothing
// else arrives either (the exit frame included), and the server, then the
// process, is slowed down by TCP flow control.
const pipeBuffer = 1 << 20

// pipe is an in-memory pipe with a bounded buffer. One goroutine writes
// (the session's reader), any number read. Unlike io.Pipe, a write does
// not wait for a reader unless the buffer is full, so output that nobody
// reads right now (stderr of a chatty program while the caller reads
// stdout) does not stall the session until it reaches pipeBuffer.
type pipe struct {
	mu     sync.Mutex
	cond   sync.Cond
	chunks [][]byte // unread data; chunks[0][off:] is next
	off    int
	size   int   // unread bytes
	err    error // set by closeWithError: returned once the buffer is empty
	broken bool  // closeWithError was called: writes fail at once
}

func newPipe() *pipe {
	p := &pipe{}
	p.cond.L = &p.mu
	return p
}

// Read reads buffered output, waiting for some when there is none. Once
// the pipe is closed and empty it returns the close error (io.EOF after a
// normal exit).
func (p *pipe) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.size == 0 {
		if p.err != nil {
			return 0, p.err
		}
		p.cond.Wait()
	}
	n := 0
	for n < len(b) && len(p.chunks) > 0 {
		c := p.chunks[0][p.off:]
		k := copy(b[n:], c)
		n += k
		p.off += k
		if p.off == len(p.chunks[0]) {
			putChunk(p.chunks[0])
			p.chunks[0] = nil
			p.chunks = p.chunks[1:]
			p.off = 0
		}
	}
	p.size -= n
	p.cond.Broadcast() // room for the writer
	return n, nil
}

// write appends data, taking ownership of it. It waits while the buffer
// is full and reports false if the pipe was closed meanwhile (the data is
// then dropped).
func (p *pipe) write(data []byte) bool {
	if len(data) == 0 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.size >= pipeBuffer && !p.broken {
		p.cond.Wait()
	}
	if p.broken {
		return false
	}
	p.chunks = append(p.chunks, data)
	p.size += len(data)
	p.cond.Broadcast()
	return true
}

// closeWithError ends the pipe: writers are released and data written
// from now on is dropped; readers get what is buffered, then err. Only the
// first call sets the error.
func (p *pipe) closeWithError(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.broken {
		p.broken = true
		p.err = err
	}
	p.cond.Broadcast()
}
