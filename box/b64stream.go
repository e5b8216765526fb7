package box

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// b64Content streams the bytes of a read response, {"content": "<base64>"},
// as they arrive: the base64 is decoded from the body in blocks, without
// the whole string in memory. Its buffers are kept for the next response
// (reset).
type b64Content struct {
	body io.ReadCloser
	br   *bufio.Reader
	in   []byte // base64 text not decoded yet: less than a quantum between reads
	inb  []byte // in's storage
	out  []byte // bytes decoded and not yet read
	outb []byte // out's storage
	end  bool   // the string has ended
	pad  bool   // a quantum with padding was decoded: nothing may follow
}

// b64Block is how much base64 text is decoded at a time.
const b64Block = 64 << 10

// errBadContent is wrapped by the errors of a read response that is not
// what the read endpoint sends.
var errBadContent = errors.New("malformed read response")

// reset starts reading body, a read response, up to the start of its
// content string.
func (c *b64Content) reset(body io.ReadCloser) error {
	c.body, c.in, c.out, c.end, c.pad = body, nil, nil, false, false
	if c.inb == nil {
		c.inb, c.outb = make([]byte, b64Block), make([]byte, b64Block/4*3)
	}
	// Walk the object's keys to "content"; other values are small and are
	// skipped whole.
	dec := json.NewDecoder(body)
	tok, err := dec.Token()
	if err != nil {
		return bodyErr(err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%w: not an object", errBadContent)
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return bodyErr(err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: no content", errBadContent)
		}
		if key == "content" {
			break
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return bodyErr(err)
		}
	}
	rest := io.MultiReader(dec.Buffered(), body)
	if c.br == nil {
		c.br = bufio.NewReaderSize(rest, b64Block)
	} else {
		c.br.Reset(rest)
	}
	// The decoder stops after the key; the colon may or may not be
	// consumed yet.
	colon := false
	for {
		b, err := c.br.ReadByte()
		if err != nil {
			return unexpected(err)
		}
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
		case b == ':' && !colon:
			colon = true
		case b == '"':
			return nil
		default:
			return fmt.Errorf("%w: content is not a string", errBadContent)
		}
	}
}

// unexpected is the error of reading a response that ends too early, or
// cannot be read on (a cancelled context, a cut connection): the body's own
// error, io.ErrUnexpectedEOF for an end, and not errBadContent, so that
// callers can tell a failed transfer from a malformed answer.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// bodyErr is the error of the JSON decoder walking to the content: what it
// cannot parse is a malformed response, the rest is the body's own error.
func bodyErr(err error) error {
	if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
		return fmt.Errorf("%w: %v", errBadContent, err)
	}
	return unexpected(err)
}

// Read reads decoded bytes; io.EOF comes at the end of the string.
func (c *b64Content) Read(p []byte) (int, error) {
	for {
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			return n, nil
		}
		if len(p) == 0 {
			return 0, nil
		}
		if c.end && len(c.in) == 0 {
			return 0, io.EOF
		}
		// Gather whole quanta of text, as many as p holds (at least one),
		// keeping what is left of a quantum for the next time.
		want := min(len(c.inb), max(4, len(p)/3*4))
		c.in = c.inb[:copy(c.inb, c.in)]
		for len(c.in) < want && !c.end {
			n, err := c.text(c.inb[len(c.in):want])
			c.in = c.inb[:len(c.in)+n]
			if err != nil {
				return 0, err
			}
			if n == 0 || len(c.in) >= 4 && c.br.Buffered() == 0 {
				break // decode what has come before waiting for more
			}
		}
		q := len(c.in) / 4 * 4
		if c.end && q != len(c.in) {
			return 0, fmt.Errorf("%w: truncated base64", errBadContent)
		}
		if q == 0 {
			continue
		}
		if c.pad {
			return 0, fmt.Errorf("%w: base64 after its padding", errBadContent)
		}
		// Straight into p when it has room, else through outb.
		direct := len(p) >= q/4*3
		dst := p
		if !direct {
			dst = c.outb
		}
		n, err := base64.StdEncoding.Decode(dst, c.in[:q])
		if err != nil {
			return 0, fmt.Errorf("%w: invalid base64: %v", errBadContent, err)
		}
		c.in = c.in[q:]
		c.pad = n < q/4*3
		if direct {
			return n, nil
		}
		c.out = c.outb[:n]
	}
}

// text reads the string's characters into dst, unescaped, up to its
// closing quote; it blocks only when it has nothing for dst.
func (c *b64Content) text(dst []byte) (int, error) {
	n := 0
	for n < len(dst) && !c.end {
		if n > 0 && c.br.Buffered() == 0 {
			break
		}
		if _, err := c.br.Peek(1); err != nil {
			return n, unexpected(err)
		}
		buf, _ := c.br.Peek(min(c.br.Buffered(), len(dst)-n))
		seg := buf
		if i := bytes.IndexByte(seg, '"'); i >= 0 {
			seg = seg[:i]
		}
		if i := bytes.IndexByte(seg, '\\'); i >= 0 {
			seg = seg[:i]
		}
		n += copy(dst[n:], seg)
		_, _ = c.br.Discard(len(seg))
		if len(seg) == len(buf) {
			continue
		}
		// A quote or a backslash; there is room for one more byte.
		b, _ := c.br.ReadByte()
		if b == '"' {
			c.end = true
			break
		}
		e, err := c.br.ReadByte()
		if err != nil {
			return n, unexpected(err)
		}
		switch e {
		case 'n', 'r':
			continue // base64 wrapped in lines: the breaks are no data
		case '/', '\\', '"':
			dst[n] = e
		case 'u':
			var hex [4]byte
			if _, err := io.ReadFull(c.br, hex[:]); err != nil {
				return n, unexpected(err)
			}
			v, err := strconv.ParseUint(string(hex[:]), 16, 16)
			if err != nil || v >= 0x80 {
				return n, fmt.Errorf("%w: invalid base64 character \\u%s", errBadContent, hex)
			}
			dst[n] = byte(v)
		default:
			return n, fmt.Errorf("%w: invalid base64 character \\%c", errBadContent, e)
		}
		n++
	}
	return n, nil
}

// Close closes the response; the rest of it is drained, so that its
// connection can be used again, if it is short.
func (c *b64Content) Close() error {
	if c.body == nil {
		return nil
	}
	drainAndClose(c.body)
	c.body = nil
	return nil
}
