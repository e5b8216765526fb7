package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text a box or the server chose (file names, box names, error messages,
// log lines) reaches the user's terminal only through safe: a name that
// holds ESC ] 0 ; ... BEL would otherwise retitle the window, ESC [ 2 J
// clear the screen, and ESC ] 52 write the clipboard. What a command the
// user ran prints (exec, shell, a file read to standard output, the
// agent's text) is the user's own stream and is not touched.

// safe returns s with every control character written as an escape, so
// that it shows and does nothing: C0 (ESC among them) and DEL as \xNN,
// or \n, \r, \t; C1 and the characters that reorder or break lines of
// text (bidi overrides and isolates, line and paragraph separators) as
// \uNNNN; a byte that is not UTF-8 as \xNN. Everything else, backslashes
// included, is left as it is.
func safe(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !unsafeRune(r, size):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// unsafeRune reports whether the rune r, of size bytes, must be escaped.
func unsafeRune(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true // bidi controls
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// safeLines is safe for a message that may span lines, such as an error
// that quotes a command's output: each line is escaped, and the lines
// after the first are indented, so that no line of it passes for a line
// of box's own.
func safeLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = safe(l)
	}
	return strings.Join(lines, "\n  ")
}
