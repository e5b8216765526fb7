package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// DefaultMaxEventSize is the largest event data a [Decoder] accepts unless
// [Decoder.SetMaxEventSize] says otherwise.
const DefaultMaxEventSize = 4 << 20

// ErrEventTooLarge is reported (wrapped, with the limit in the message) by
// [Decoder.Err] when an event's data, or a single line, is larger than the
// decoder's limit.
var ErrEventTooLarge = errors.New("stream: SSE event too large")

const (
	// initialBufSize is the size of a Decoder's read buffer before a long
	// line makes it grow.
	initialBufSize = 64 << 10
	// lineSlack is how much longer than the event-size limit one line may
	// be: room for a field name and its colon and space.
	lineSlack = 1 << 10
	// maxEmptyReads is how many (0, nil) reads in a row are taken as a
	// broken reader (io.ErrNoProgress), as bufio does.
	maxEmptyReads = 100
	// maxInterned bounds the per-decoder table of event type strings, so a
	// stream of ever-new event names cannot grow it without limit.
	maxInterned    = 64
	maxInternedLen = 64
)

// knownType returns the Box API's event names (and "message") as constant
// strings, so that decoding them costs no allocation. A switch on the
// string is cheaper than a map lookup for this handful of short names.
func knownType(v []byte) (string, bool) {
	switch string(v) {
	case "message":
		return "message", true
	case "run_start":
		return "run_start", true
	case "text":
		return "text", true
	case "thinking":
		return "thinking", true
	case "tool":
		return "tool", true
	case "tool_result":
		return "tool_result", true
	case "done":
		return "done", true
	case "stats":
		return "stats", true
	case "error":
		return "error", true
	case "exit":
		return "exit", true
	case "ping":
		return "ping", true
	}
	return "", false
}

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the event's "event" field, or "message" when the event had
	// none (as the WHATWG rules say).
	Type string
	// Data is the event's data lines joined with "\n". It is a view of the
	// decoder's buffer, valid only until the next call to [Decoder.Next];
	// copy it to keep it.
	Data []byte
	// ID is the last event ID seen so far in the stream: an "id" field sets
	// it and it stays until another "id" field changes it, as the WHATWG
	// "last event ID buffer" does.
	ID string
	// Retry is the last valid "retry" value seen so far in the stream, or 0
	// if none.
	Retry time.Duration
}

// Decoder reads server-sent events (text/event-stream) from a byte stream,
// following the "event stream interpretation" rules of the WHATWG HTML
// standard:
//
//   - a line ends in LF, CR or CRLF, also when the CR and the LF arrive in
//     different reads;
//   - one UTF-8 byte order mark at the very start of the stream is skipped
//     (a second one is ordinary text);
//   - a line "name: value" sets a field, with at most one space after the
//     colon removed; a line without a colon is a field with an empty value;
//     a line starting with a colon is a comment;
//   - "data" appends its value and a "\n" to the data buffer, "event" sets
//     the event type, "id" sets the last event ID unless the value contains a
//     NUL byte, "retry" sets the reconnection time if the value is all ASCII
//     digits (milliseconds); other fields are ignored;
//   - a blank line dispatches the event, without the final "\n" of its data;
//     if no data line was seen, nothing is dispatched and the event type is
//     reset.
//
// Bytes are not decoded as UTF-8: field values are passed on as they are
// (the standard would replace invalid sequences with U+FFFD).
//
// At the end of the input, an event that was not ended by a blank line is
// NOT dispatched, as the standard says. The official JavaScript client of
// the Box API differs here: it dispatches a pending event when the body
// ends. (It also keeps only the last of several data lines.) The Box server
// ends every event with a blank line and sends one data line per event, so
// the two agree on everything it sends.
//
// Memory is bounded: an event whose data is larger than the limit (see
// [Decoder.SetMaxEventSize]), or a single line longer than the limit plus
// 1 KiB, ends the stream with an error wrapping [ErrEventTooLarge]. A
// decoder holds at most about twice the limit.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	r   io.Reader
	max int

	buf        []byte // read buffer; the unread bytes are buf[start:end]
	bufSize    int    // initial size of buf; tests set it small to exercise growth
	start, end int
	lf, cr     finder // cached positions of the next LF and CR in buf
	skipLF     bool   // the last line ended in CR: an LF right after it belongs to it
	bomChecked bool
	readErr    error // sticky error of r (io.EOF at a clean end)

	// The data buffer is data (each line followed by "\n"), or, while the
	// event has exactly one data line, that line left where it is in buf
	// (one, with hasOne set): most events have one data line, and this
	// saves copying it. It is copied into data before buf changes.
	data     []byte
	one      []byte
	hasOne   bool
	typ      string // the event type buffer, interned
	lastType string
	interned map[string]string
	id       string
	retry    time.Duration

	ev   Event
	err  error
	done bool
}

// NewDecoder returns a Decoder reading from r. It reads in large blocks, so
// r needs no buffering of its own.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{
		r:   r,
		max: DefaultMaxEventSize,
		lf:  finder{c: '\n', at: -1},
		cr:  finder{c: '\r', at: -1},
	}
}

// SetMaxEventSize sets the largest event data, in bytes, the decoder
// accepts (default [DefaultMaxEventSize], 4 MiB); a single line may be at
// most 1 KiB longer. n <= 0 restores the default. Call it before the first
// call to Next.
func (d *Decoder) SetMaxEventSize(n int) {
	if n <= 0 {
		n = DefaultMaxEventSize
	}
	d.max = min(n, math.MaxInt-lineSlack-1) // keep maxLine()+1 from overflowing
}

// Next advances to the next event, which [Decoder.Event] then returns. It
// returns false at the end of the input or on an error; [Decoder.Err] tells
// which.
func (d *Decoder) Next() bool {
	if d.done {
		return false
	}
	d.data, d.one, d.hasOne = d.data[:0], nil, false // the previous event's Data is no longer valid
	for {
		line, ok := d.readLine()
		if !ok {
			d.finish()
			return false
		}
		if len(line) == 0 {
			var data []byte
			switch {
			case d.hasOne:
				data = d.one
			case len(d.data) > 0:
				data = d.data[:len(d.data)-1]
			default:
				d.typ = ""
				continue
			}
			typ := d.typ
			if typ == "" {
				typ = "message"
			}
			d.ev = Event{Type: typ, Data: data, ID: d.id, Retry: d.retry}
			d.typ = ""
			return true
		}
		if !d.field(line) {
			d.finish()
			return false
		}
	}
}

// Event returns the event that the last successful call to Next read.
func (d *Decoder) Event() Event { return d.ev }

// Err returns the error that ended the stream: nil after a clean end of
// input, an error wrapping [ErrEventTooLarge], or the reader's error.
func (d *Decoder) Err() error { return d.err }

func (d *Decoder) finish() {
	d.done = true
	d.ev = Event{}
	if d.err == nil && d.readErr != nil && d.readErr != io.EOF {
		d.err = d.readErr
	}
}

func (d *Decoder) tooLarge(line bool) {
	if line {
		d.err = fmt.Errorf("%w: a line is longer than %d bytes (the limit of %d bytes plus 1 KiB)",
			ErrEventTooLarge, d.maxLine(), d.max)
		return
	}
	d.err = fmt.Errorf("%w: event data exceeds the limit of %d bytes", ErrEventTooLarge, d.max)
}

// field applies one non-empty line to the event being built. It reports
// false if the line made the event too large.
func (d *Decoder) field(line []byte) bool {
	// Fast paths for the two fields of nearly every event.
	if len(line) >= 5 && line[4] == ':' && string(line[:4]) == "data" {
		return d.appendData(trimSpace(line[5:]))
	}
	if len(line) >= 6 && line[5] == ':' && string(line[:5]) == "event" {
		d.typ = d.intern(trimSpace(line[6:]))
		return true
	}
	colon := bytes.IndexByte(line, ':')
	if colon == 0 {
		return true // comment
	}
	name, value := line, []byte(nil)
	if colon > 0 {
		name, value = line[:colon], trimSpace(line[colon+1:])
	}
	switch string(name) {
	case "data":
		return d.appendData(value)
	case "event":
		d.typ = d.intern(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != d.id {
			d.id = string(value)
		}
	case "retry":
		if ms, ok := parseRetry(value); ok {
			d.retry = ms
		}
	}
	return true
}

// trimSpace removes the one optional space after a field's colon.
func trimSpace(v []byte) []byte {
	if len(v) > 0 && v[0] == ' ' {
		return v[1:]
	}
	return v
}

// appendData adds a data line's value (already without the optional
// space) and a "\n" to the data buffer. It reports false if the event's
// data would exceed the limit.
func (d *Decoder) appendData(value []byte) bool {
	if !d.hasOne && len(d.data) == 0 {
		if len(value) > d.max {
			d.tooLarge(false)
			return false
		}
		d.one, d.hasOne = value, true
		return true
	}
	d.keepData()
	if len(d.data)+len(value) > d.max {
		d.tooLarge(false)
		return false
	}
	d.data = append(d.data, value...)
	d.data = append(d.data, '\n')
	return true
}

// keepData copies a data line still in the read buffer into the data
// buffer.
func (d *Decoder) keepData() {
	if d.hasOne {
		d.data = append(d.data[:0], d.one...)
		d.data = append(d.data, '\n')
		d.one, d.hasOne = nil, false
	}
}

// parseRetry reads a retry value: only ASCII digits, at least one. A value
// too large for a time.Duration is ignored like any other invalid value.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	const limit = int64(1<<63-1) / int64(time.Millisecond)
	var ms int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
		if ms > limit {
			return 0, false
		}
	}
	return time.Duration(ms) * time.Millisecond, true
}

// intern returns v as a string, without allocating for the Box API's event
// names or for names this decoder has seen before.
func (d *Decoder) intern(v []byte) string {
	if string(v) == d.lastType {
		return d.lastType
	}
	s, ok := knownType(v)
	if !ok {
		s, ok = d.interned[string(v)]
	}
	if !ok {
		s = string(v)
		if len(s) <= maxInternedLen && len(d.interned) < maxInterned {
			if d.interned == nil {
				d.interned = make(map[string]string)
			}
			d.interned[s] = s
		}
	}
	d.lastType = s
	return s
}

// maxLine is the longest line, without its end, that the decoder accepts.
func (d *Decoder) maxLine() int { return d.max + lineSlack }

// readLine returns the next complete line without its line end. The line
// is a view of the read buffer, valid until the next call. It returns false
// at the end of input, on a read error, or when a line is too long.
func (d *Decoder) readLine() ([]byte, bool) {
	for {
		if d.skipLF && d.start < d.end {
			if d.buf[d.start] == '\n' {
				d.start++
			}
			d.skipLF = false
		}
		if !d.bomChecked && !d.checkBOM() {
			// Need more bytes to tell whether the input starts with a
			// BOM (checkBOM decides at once after the end of input).
			d.fill()
			continue
		}
		if d.start < d.end {
			if d.buf[d.start] == '\n' {
				// A blank line, as ends every event: no search needed.
				d.start++
				return d.buf[d.start-1 : d.start-1], true
			}
			i := d.lf.next(d.buf, d.start, d.end)
			if c := d.cr.next(d.buf, d.start, d.end); c >= 0 && (i < 0 || c < i) {
				i = c
			}
			if i >= 0 {
				line := d.buf[d.start:i]
				d.start = i + 1
				if d.buf[i] == '\r' {
					if d.start < d.end {
						if d.buf[d.start] == '\n' {
							d.start++
						}
					} else {
						d.skipLF = true
					}
				}
				return line, true
			}
			if d.end-d.start > d.maxLine() {
				d.tooLarge(true)
				return nil, false
			}
		}
		if d.readErr != nil {
			// A partial line at the end of the input is not a line.
			return nil, false
		}
		d.fill()
	}
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// checkBOM skips a byte order mark at the start of the input. It returns
// false if the buffered bytes are a proper prefix of a BOM and more input
// may follow.
func (d *Decoder) checkBOM() bool {
	b := d.buf[d.start:d.end]
	if len(b) < len(bom) && d.readErr == nil && bytes.HasPrefix(bom, b) {
		return false
	}
	if bytes.HasPrefix(b, bom) {
		d.start += len(bom)
	}
	d.bomChecked = true
	return true
}

// fill reads more input into the buffer, first moving the unread bytes to
// its front and growing it if a line fills it. It sets d.readErr when the
// reader fails or ends.
func (d *Decoder) fill() {
	d.keepData()
	if d.buf == nil {
		if d.bufSize <= 0 {
			d.bufSize = initialBufSize
		}
		d.buf = make([]byte, min(d.bufSize, d.maxLine()+1))
	}
	if d.start > 0 {
		n := copy(d.buf, d.buf[d.start:d.end])
		d.lf.shift(d.start)
		d.cr.shift(d.start)
		d.start, d.end = 0, n
	}
	if d.end == len(d.buf) {
		nb := make([]byte, min(2*len(d.buf), d.maxLine()+1))
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

// finder remembers where the next occurrence of one byte is in a read
// buffer, so that searching for LF and for CR separately scans every byte
// at most once for each, whatever mix of line ends the input uses.
//
// Invariant: buf[read position:scanned] holds no c, and at, if not below the
// read position, is the first c after it.
type finder struct {
	c       byte
	at      int
	scanned int
}

func (f *finder) next(buf []byte, start, end int) int {
	// scanned reaches end only after a search that found nothing (at is
	// -1 then). This stays small enough to inline: the common cases cost
	// no call.
	if f.at >= start || f.scanned >= end {
		return f.at
	}
	return f.search(buf, start, end)
}

func (f *finder) search(buf []byte, start, end int) int {
	from := max(start, f.scanned)
	if i := bytes.IndexByte(buf[from:end], f.c); i >= 0 {
		f.at = from + i
		f.scanned = f.at
		return f.at
	}
	f.at = -1
	f.scanned = end
	return -1
}

// shift adjusts the finder after the buffer's contents moved n bytes to
// the front.
func (f *finder) shift(n int) {
	if f.at >= n {
		f.at -= n
	} else {
		f.at = -1 // it was behind the read position, so no longer needed
	}
	f.scanned = max(f.scanned-n, 0)
}

// Encoder writes server-sent events. It is not safe for concurrent use.
type Encoder struct {
	w     io.Writer
	flush func() error
	buf   []byte
	jbuf  bytes.Buffer
	jenc  *json.Encoder
}

// NewEncoder returns an Encoder writing to w. After each event or comment
// it flushes w if w has a Flush() method (as [net/http.Flusher] does) or a
// Flush() error method (as [bufio.Writer] does), so that events reach the
// client as they are written.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{w: w, flush: flusherOf(w)}
}

func flusherOf(w io.Writer) func() error {
	switch f := w.(type) {
	case interface{ Flush() error }:
		return f.Flush
	case interface{ Flush() }:
		return func() error { f.Flush(); return nil }
	}
	return nil
}

// Encode writes one event: an "event: " line (left out when event is ""),
// one "data: " line for each line of data (split at "\n"; empty data gives
// one empty data line, so the event is still dispatched), and a blank line.
// The whole event is written with a single Write, then flushed.
//
// SSE cannot carry every byte string, so Encode refuses, without writing
// anything, an event name containing CR or LF and data containing CR: a
// decoder would read a CR as a line end and hand back "\n" in its place.
// Refusing keeps Encode lossless — what it accepts, a [Decoder] returns
// unchanged — and JSON data never contains a raw CR anyway.
func (e *Encoder) Encode(event string, data []byte) error {
	if err := checkEvent(event); err != nil {
		return err
	}
	if bytes.IndexByte(data, '\r') >= 0 {
		return errors.New("stream: SSE data contains a carriage return, which SSE cannot carry")
	}
	e.buf = appendEvent(e.buf[:0], event, data)
	return e.write()
}

// EncodeJSON writes one event whose data is v encoded as compact,
// single-line JSON (HTML characters are not escaped).
func (e *Encoder) EncodeJSON(event string, v any) error {
	if err := checkEvent(event); err != nil {
		return err
	}
	if e.jenc == nil {
		e.jenc = json.NewEncoder(&e.jbuf)
		e.jenc.SetEscapeHTML(false)
	}
	e.jbuf.Reset()
	if err := e.jenc.Encode(v); err != nil {
		return fmt.Errorf("stream: encoding %q event: %w", event, err)
	}
	data := bytes.TrimSuffix(e.jbuf.Bytes(), []byte{'\n'})
	e.buf = appendEvent(e.buf[:0], event, data)
	return e.write()
}

// Comment writes a comment line ": text" and a blank line, which clients
// ignore; servers send it as a keep-alive. text must not contain CR or LF.
func (e *Encoder) Comment(text string) error {
	if containsLineEnd(text) {
		return errors.New("stream: SSE comment contains a line break")
	}
	e.buf = append(e.buf[:0], ':')
	if text != "" {
		e.buf = append(e.buf, ' ')
		e.buf = append(e.buf, text...)
	}
	e.buf = append(e.buf, "\n\n"...)
	return e.write()
}

func (e *Encoder) write() error {
	if _, err := e.w.Write(e.buf); err != nil {
		return err
	}
	if e.flush != nil {
		return e.flush()
	}
	return nil
}

func checkEvent(event string) error {
	if containsLineEnd(event) {
		return fmt.Errorf("stream: SSE event name %q contains a line break", event)
	}
	return nil
}

func containsLineEnd(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return true
		}
	}
	return false
}

func appendEvent(b []byte, event string, data []byte) []byte {
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	for {
		i := bytes.IndexByte(data, '\n')
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			b = append(b, '\n')
			break
		}
		b = append(b, data[:i+1]...)
		data = data[i+1:]
	}
	return append(b, '\n')
}
