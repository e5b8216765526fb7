package box

import "testing"

// TestInsideLink: only a relative target that climbs no higher than the
// top of the tree, then only descends, is made again as a link.
func TestInsideLink(t *testing.T) {
	for _, tc := range []struct {
		rel, target string
		ok          bool
	}{
		{"a", ".", true},
		{"a", "./", true},
		{"d/a", ".", true},
		{"d/up", "..", true},
		{"d/e/up", "../..", true},
		{"d/e/x", "../f/g", true},
		{"top", "d/e", true},
		{"up", "..", false},
		{"d/up", "../..", false},
		{"d/x", "../../d", false},
		{"x", "d/..", false}, // through a link, .. may leave the tree
		{"x", "d/../../etc", false},
		{"x", "/etc", false},
		{"x", "", false},
		{"x", `..\..\etc`, false},
		{"x", "a\x00b", false},
		{"x", "bad\uFFFDname", false},
	} {
		if _, ok := insideLink(tc.rel, tc.target); ok != tc.ok {
			t.Errorf("insideLink(%q, %q) = %v, want %v", tc.rel, tc.target, ok, tc.ok)
		}
	}
}
