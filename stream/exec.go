package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// The terminator frames of an exec stream (Box API: POST
// /v2/box/{id}/exec-stream and /code-stream).
const (
	exitHeader  = "event: exit\n"
	errorHeader = "event: error\n"
	eventPrefix = "event: "
	dataPrefix  = "data:"
)

var (
	exitHeaderB  = []byte(exitHeader)
	errorHeaderB = []byte(errorHeader)
	eventPrefixB = []byte(eventPrefix)
	dataPrefixB  = []byte(dataPrefix)
)

// MaxExecFrameSize is the size of the largest terminator frame an
// [ExecDecoder] recognises. Text that looks like the start of a frame but
// grows larger than this is program output.
const MaxExecFrameSize = 64 << 10

const (
	// maxExecErrorMessage bounds the message [WriteExecError] sends, so that
	// its frame stays below MaxExecFrameSize even if every byte needs a
	// six-byte JSON escape.
	maxExecErrorMessage = 8 << 10
	// execBufSize is an ExecDecoder's read buffer; it doubles once if a
	// held-back candidate frame leaves too little room to read into.
	execBufSize = 64 << 10
)

// WriteExit writes the success terminator of an exec stream,
//
//	event: exit
//	data: {"exit_code":N,"cpu_ns":M}
//	(blank line)
//
// in a single Write, then flushes w if it can be flushed (as [NewEncoder]
// describes), so that the client sees the frame whole.
func WriteExit(w io.Writer, exitCode int, cpuNs int64) error {
	b := make([]byte, 0, 64)
	b = append(b, exitHeader...)
	b = append(b, `data: {"exit_code":`...)
	b = strconv.AppendInt(b, int64(exitCode), 10)
	b = append(b, `,"cpu_ns":`...)
	b = strconv.AppendInt(b, cpuNs, 10)
	b = append(b, "}\n\n"...)
	return writeFlush(w, b)
}

// WriteExecError writes the failure terminator of an exec stream,
//
//	event: error
//	data: {"error":"msg"}
//	(blank line)
//
// in a single Write, then flushes w like [WriteExit]. A message longer than
// 8 KiB is cut (at a UTF-8 boundary) so that the frame stays well within
// what an [ExecDecoder] recognises; invalid UTF-8 is replaced with U+FFFD
// by the JSON encoding.
func WriteExecError(w io.Writer, msg string) error {
	if len(msg) > maxExecErrorMessage {
		cut := maxExecErrorMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	var jb bytes.Buffer
	enc := json.NewEncoder(&jb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Error string `json:"error"`
	}{msg}); err != nil {
		return err // not reached: a string always encodes
	}
	b := make([]byte, 0, len(errorHeader)+len("data: ")+jb.Len()+1)
	b = append(b, errorHeader...)
	b = append(b, "data: "...)
	b = append(b, jb.Bytes()...) // ends in the "\n" of the data line
	b = append(b, '\n')
	return writeFlush(w, b)
}

func writeFlush(w io.Writer, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	if flush := flusherOf(w); flush != nil {
		return flush()
	}
	return nil
}

// ExecChunk is one piece of an exec stream.
type ExecChunk struct {
	// Output is raw program output, a view of the decoder's buffer valid
	// until the next call to [ExecDecoder.Next]. Chunk boundaries follow
	// the reads and mean nothing.
	Output []byte
	// Exit is set, with no Output, on the final chunk of a stream that ended
	// with an exit frame.
	Exit *ExecExit
}

// ExecExit is the content of an exit frame. Fields missing from the frame
// are 0, as the official client defaults them.
type ExecExit struct {
	Code  int   // the program's exit code (JSON exit_code)
	CPUNs int64 // CPU time used, in nanoseconds (JSON cpu_ns)
}

// ExecError is the error [ExecDecoder.Err] returns when the stream ended
// with an error frame.
type ExecError struct {
	// Message is the frame's "error" value, or "Stream error" (the official
	// client's default) when the frame had none.
	Message string
}

func (e *ExecError) Error() string { return "exec stream: " + e.Message }

// ExecDecoder splits the body of an exec stream (POST /exec-stream and
// /code-stream) into program output and its terminator.
//
// The body is the program's raw output, unframed, followed by one
// terminator frame: "event: exit\ndata: {...}\n\n" ([WriteExit]) or
// "event: error\ndata: {...}\n\n" ([WriteExecError]). Nothing stops a
// program from printing those exact bytes itself.
//
// The official JavaScript client ends the stream at the first
// "event: exit\n" anywhere in the text it has received (and fails at the
// first "event: error\n"), so a program that prints such text cuts its own
// stream short there, and output that arrives in the same read as an error
// frame is lost.
//
// ExecDecoder relies instead on the terminator being the LAST thing in the
// body. When text that may start a frame appears, it yields the output
// before it and holds the candidate back. The candidate is the terminator
// only if it is a complete, well-formed frame followed directly by the end
// of the input; if any byte follows it, it was program output: it is
// yielded and the search goes on just after its first byte (so a fake frame
// followed immediately by the real one is handled). A trailing proper
// prefix of either header at the end of a read ("...event: ex") is held
// back the same way until later input decides. Held-back text is bounded:
// anything longer than [MaxExecFrameSize] cannot be a terminator and is
// yielded. Output is otherwise yielded as soon as it is read.
//
// A frame is well-formed when it is the header line, a line "data:" whose
// value (the space after the colon is optional) is a JSON object — for an
// exit frame, with numeric "exit_code" and "cpu_ns" if present; for an
// error frame, with a string "error" if present — and one empty line, all
// ended by "\n" only. Anything else is not a terminator and so is output;
// in particular a frame whose data is not valid JSON (the official client
// would report it as exit 0). Missing or null fields default to 0 (exit)
// and "Stream error" (error), as in the official client.
//
// The exit frame becomes a final chunk with Exit set and no Output. The
// price of holding text back is latency for programs that print the start
// of a frame and then pause: that text waits for their next output (or the
// end of the body, or the size bound).
//
// If the body ends without a terminator, everything was output and
// [ExecDecoder.Err] is nil: the stream completed without an exit chunk. On
// a read error, the held-back text is yielded as output (no terminator was
// confirmed) and Err returns the error.
//
// An ExecDecoder is not safe for concurrent use.
type ExecDecoder struct {
	r   io.Reader
	buf []byte
	// buf[start:safe] is output ready to yield; buf[safe:end] is not yet
	// examined, or is a held-back candidate frame.
	start, safe, end int
	readErr          error
	bufSize          int // initial size of buf; tests set it small to exercise growth

	chunk ExecChunk
	err   error
	done  bool
}

// NewExecDecoder returns an ExecDecoder reading from r. It reads in large
// blocks, so r needs no buffering of its own.
func NewExecDecoder(r io.Reader) *ExecDecoder {
	return &ExecDecoder{r: r}
}

// Next advances to the next chunk, which [ExecDecoder.Chunk] then returns.
// It blocks until output is available or the stream ends. It returns false
// at the end of the stream or on an error; [ExecDecoder.Err] tells which.
func (d *ExecDecoder) Next() bool {
	if d.done {
		return false
	}
	d.chunk = ExecChunk{}
	for {
		if d.safe > d.start {
			d.chunk.Output = d.buf[d.start:d.safe]
			d.start = d.safe
			return true
		}
		if d.safe < d.end {
			switch d.examine() {
			case progressed:
				continue
			case endedExit:
				return true
			case endedError:
				return false
			case needInput:
				// fall through to read
			}
		} else if d.readErr != nil {
			d.done = true
			if d.readErr != io.EOF {
				d.err = d.readErr
			}
			return false
		}
		d.fill()
	}
}

// Chunk returns the chunk that the last successful call to Next read.
func (d *ExecDecoder) Chunk() ExecChunk { return d.chunk }

// Err returns nil after a clean end of the stream (with or without an exit
// frame), an [*ExecError] after an error frame, or the reader's error.
func (d *ExecDecoder) Err() error { return d.err }

type examineResult uint8

const (
	progressed examineResult = iota
	needInput
	endedExit
	endedError
)

// examine looks at buf[safe:end] (with safe == start) and either moves safe
// forward over output, ends the stream at a terminator, or asks for more
// input to decide about a candidate frame at safe.
func (d *ExecDecoder) examine() examineResult {
	b := d.buf[d.safe:d.end]
	p := findCandidate(b)
	if p != 0 {
		if p < 0 {
			p = len(b)
		}
		d.safe += p
		return progressed
	}
	st, exit, execErr := parseFrame(b)
	if st == notFrame {
		// The candidate is output; so is everything up to the next one.
		q := findCandidate(b[1:])
		if q < 0 {
			d.safe = d.end
		} else {
			d.safe += 1 + q
		}
		return progressed
	}
	if d.readErr == nil {
		return needInput
	}
	if st == completeFrame && d.readErr == io.EOF {
		d.done = true
		d.start, d.safe = d.end, d.end
		if execErr != nil {
			d.err = execErr
			return endedError
		}
		d.chunk = ExecChunk{Exit: exit}
		return endedExit
	}
	// The input ended (or failed) before the candidate was complete.
	d.safe = d.end
	return progressed
}

// fill reads more input, first moving the unconsumed bytes to the front of
// the buffer.
func (d *ExecDecoder) fill() {
	if d.buf == nil {
		if d.bufSize <= 0 {
			d.bufSize = execBufSize
		}
		d.buf = make([]byte, d.bufSize)
	}
	if d.start > 0 {
		n := copy(d.buf, d.buf[d.start:d.end])
		d.safe -= d.start
		d.start, d.end = 0, n
	}
	if d.end > len(d.buf)/2 {
		// A held-back candidate (at most MaxExecFrameSize) fills half
		// the buffer: make room so reads stay large.
		nb := make([]byte, 2*len(d.buf))
		copy(nb, d.buf[:d.end])
		d.buf = nb
	}
	for range maxEmptyReads {
		n, err := d.r.Read(d.buf[d.end:])
		if n < 0 || n > len(d.buf)-d.end {
			d.readErr = errors.New("stream: reader returned an invalid count")
			return
		}
		d.end += n
		if err != nil {
			d.readErr = err
			return
		}
		if n > 0 {
			return
		}
	}
	d.readErr = io.ErrNoProgress
}

// findCandidate returns the index of the first place in b where a
// terminator frame may start: an exit or error header, or a suffix of b
// that is a proper prefix of one. It returns -1 if there is none.
func findCandidate(b []byte) int {
	for off := 0; off < len(b); {
		i := bytes.Index(b[off:], eventPrefixB)
		if i < 0 {
			break
		}
		p := off + i
		if rest := b[p:]; bytes.HasPrefix(rest, exitHeaderB) || bytes.HasPrefix(rest, errorHeaderB) ||
			bytes.HasPrefix(exitHeaderB, rest) || bytes.HasPrefix(errorHeaderB, rest) {
			return p
		}
		off = p + 1
	}
	// A suffix shorter than "event: " that begins it.
	for p := max(0, len(b)-len(eventPrefix)+1); p < len(b); p++ {
		if bytes.HasPrefix(eventPrefixB, b[p:]) {
			return p
		}
	}
	return -1
}

type frameState uint8

const (
	notFrame      frameState = iota // cannot become a terminator, whatever follows
	partialFrame                    // a proper prefix of a well-formed frame
	completeFrame                   // a well-formed frame and nothing after it
)

// parseFrame tells whether b, which starts at a candidate, is a complete
// terminator frame, could still become one, or cannot. For a complete
// frame it returns its content.
func parseFrame(b []byte) (frameState, *ExecExit, *ExecError) {
	if len(b) > MaxExecFrameSize {
		return notFrame, nil, nil
	}
	isErr := false
	switch {
	case bytes.HasPrefix(b, exitHeaderB):
		b = b[len(exitHeader):]
	case bytes.HasPrefix(b, errorHeaderB):
		b = b[len(errorHeader):]
		isErr = true
	case bytes.HasPrefix(exitHeaderB, b) || bytes.HasPrefix(errorHeaderB, b):
		return partialFrame, nil, nil
	default:
		return notFrame, nil, nil
	}
	if !bytes.HasPrefix(b, dataPrefixB) {
		if bytes.HasPrefix(dataPrefixB, b) {
			return partialFrame, nil, nil
		}
		return notFrame, nil, nil
	}
	b = b[len(dataPrefix):]
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		// The data line is not complete; give up early if it cannot be
		// a JSON object.
		if v := bytes.TrimLeft(b, " \t"); len(v) > 0 && v[0] != '{' {
			return notFrame, nil, nil
		}
		return partialFrame, nil, nil
	}
	payload, rest := b[:i], b[i+1:]
	switch {
	case len(rest) == 0:
		return partialFrame, nil, nil
	case len(rest) > 1 || rest[0] != '\n':
		return notFrame, nil, nil
	}
	if v := bytes.TrimLeft(payload, " \t\r"); len(v) == 0 || v[0] != '{' {
		return notFrame, nil, nil
	}
	if isErr {
		var v struct {
			Error *string `json:"error"`
		}
		if json.Unmarshal(payload, &v) != nil {
			return notFrame, nil, nil
		}
		msg := "Stream error"
		if v.Error != nil {
			msg = *v.Error
		}
		return completeFrame, nil, &ExecError{Message: msg}
	}
	var v struct {
		ExitCode int   `json:"exit_code"`
		CPUNs    int64 `json:"cpu_ns"`
	}
	if json.Unmarshal(payload, &v) != nil {
		return notFrame, nil, nil
	}
	return completeFrame, &ExecExit{Code: v.ExitCode, CPUNs: v.CPUNs}, nil
}
