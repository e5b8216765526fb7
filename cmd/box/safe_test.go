package main

import "testing"

// TestSafe: control characters and bytes that are not UTF-8 show
// escaped; everything else, backslashes and other scripts included, as
// it is.
func TestSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain name.txt":             "plain name.txt",
		`C:\Users\me`:                `C:\Users\me`,
		"日本語 ü":                      "日本語 ü",
		"\x1b]0;pwned\x07":           `\x1b]0;pwned\x07`,
		"\x1b]52;c;cHduZWQ=\x1b\\":   `\x1b]52;c;cHduZWQ=\x1b\`,
		"a\nb\rc\td":                 `a\nb\rc\td`,
		"nul\x00del\x7f":             `nul\x00del\x7f`,
		"c1 \u009b2J \u0085":         `c1 \u009b2J \u0085`,
		"bad\xff\xfe":                `bad\xff\xfe`,
		"\u202eevil\u2066\u2028":     `\u202eevil\u2066\u2028`,
		"replacement \uFFFD is text": "replacement \uFFFD is text",
	} {
		if got := safe(in); got != want {
			t.Errorf("safe(%q) = %q, want %q", in, got, want)
		}
		if got := safe(safe(in)); got != safe(in) {
			t.Errorf("safe is not idempotent on %q: %q", in, got)
		}
	}
	if got, want := safeLines("first\nsecond \x1b[2J\n"), "first\n  second \\x1b[2J"; got != want {
		t.Errorf("safeLines = %q, want %q", got, want)
	}
}
