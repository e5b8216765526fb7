package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/upstash/box-go/box"
)

// homeMark stands, in a word splitLine returns, for the home directory:
// the box's or this machine's, as the word is used (see replWords). No
// line typed holds a NUL.
const homeMark = "\x00home\x00"

// splitLine splits a REPL line into words as a POSIX shell does, without
// running anything: blanks separate words; 'single quotes' keep
// everything; "double quotes" keep everything but \ before $ " \ and a
// line end, and $HOME; a backslash outside quotes keeps the character
// after it. An unquoted ~ that starts a word (alone or before /), and
// $HOME or ${HOME} outside single quotes, become homeMark. Other
// variables are left as written.
func splitLine(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	// home reports whether s[i:] starts with $HOME or ${HOME} (not a
	// longer name), and its length.
	home := func(i int) (int, bool) {
		rest := s[i:]
		if strings.HasPrefix(rest, "${HOME}") {
			return len("${HOME}"), true
		}
		if strings.HasPrefix(rest, "$HOME") {
			if n := len("$HOME"); len(rest) == n || !isNameByte(rest[n]) {
				return n, true
			}
		}
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, badLine("a ' is not closed")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$\"\\\n", s[i+1]) >= 0:
					i++
					cur.WriteByte(s[i])
				case s[i] == '$':
					if n, ok := home(i); ok {
						cur.WriteString(homeMark)
						i += n - 1
						continue
					}
					cur.WriteByte('$')
				default:
					cur.WriteByte(s[i])
				}
			}
			if i == len(s) {
				return nil, badLine(`a " is not closed`)
			}
			inWord = true
		case c == '\\':
			if i+1 == len(s) {
				return nil, badLine("a line cannot end in \\")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == '~' && !inWord && (i+1 == len(s) || s[i+1] == '/' || s[i+1] == ' ' || s[i+1] == '\t'):
			cur.WriteString(homeMark)
			inWord = true
		case c == '$':
			if n, ok := home(i); ok {
				cur.WriteString(homeMark)
				i += n - 1
			} else {
				cur.WriteByte('$')
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	end()
	return words, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// replWords are the words of a REPL line after its command, with the
// home directory put in as each is used: the box's for a box path, this
// machine's for a local one. The box's is asked of the box once, and
// cached on the app. A failure to learn it is kept in err.
type replWords struct {
	a     *app
	ctx   context.Context
	b     *box.Box
	words []string
	err   error
}

// word is word i, as typed (a home in it stays ~); "" when there is none.
func (w *replWords) word(i int) string {
	if i >= len(w.words) {
		return ""
	}
	return strings.ReplaceAll(w.words[i], homeMark, "~")
}

// rest is the words from i on, joined by spaces, with the box's home.
func (w *replWords) rest(i int) string {
	if i >= len(w.words) {
		return ""
	}
	return w.expand(strings.Join(w.words[i:], " "), w.boxHome)
}

// box is word i as a box path.
func (w *replWords) box(i int) string {
	if i >= len(w.words) {
		return ""
	}
	return w.expand(w.words[i], w.boxHome)
}

// local is word i as a path on this machine.
func (w *replWords) local(i int) string {
	if i >= len(w.words) {
		return ""
	}
	return w.expand(w.words[i], os.UserHomeDir)
}

func (w *replWords) expand(s string, home func() (string, error)) string {
	if !strings.Contains(s, homeMark) {
		return s
	}
	h, err := home()
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return ""
	}
	return strings.ReplaceAll(s, homeMark, h)
}

// boxHome is $HOME in the box.
func (w *replWords) boxHome() (string, error) {
	if h, ok := w.a.homes[w.b.ID()]; ok {
		return h, nil
	}
	r, err := w.b.Exec.Command(w.ctx, `printf %s "$HOME"`)
	if err != nil {
		return "", err
	}
	if r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "/") {
		return "", errors.New("the box has no home directory to put for ~")
	}
	if w.a.homes == nil {
		w.a.homes = map[string]string{}
	}
	w.a.homes[w.b.ID()] = r.Stdout
	return r.Stdout, nil
}
