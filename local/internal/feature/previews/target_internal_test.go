package previews

import "testing"

// TestTarget: a public URL's host names one box and one port in exactly
// one way; every other host is not a public URL (and so goes to the API,
// which asks for the key).
func TestTarget(t *testing.T) {
	pv := &Previews{domain: defaultPreviewDomain}
	for _, c := range []struct {
		host string
		id   string
		port int
		ok   bool
	}{
		{"box-abc-3000.localhost:8989", "box-abc", 3000, true},
		{"box-abc-3000.localhost", "box-abc", 3000, true},
		{"BOX-ABC-3000.LOCALHOST.", "box-abc", 3000, true},
		{"box-abc-65535.localhost", "box-abc", 65535, true},
		{"box-abc-+3000.localhost", "", 0, false},
		{"box-abc-03000.localhost", "", 0, false},
		{"box-abc-3000x.localhost", "", 0, false},
		{"box-abc-.localhost", "", 0, false},
		{"box-abc-0.localhost", "", 0, false},
		{"box-abc-65536.localhost", "", 0, false},
		{"-3000.localhost", "", 0, false},
		{"box-abc-3000.preview.localhost", "", 0, false},
		{"localhost:8989", "", 0, false},
		{"box-abc-3000.example.com", "", 0, false},
	} {
		id, port, ok := pv.Target(c.host)
		if id != c.id || port != c.port || ok != c.ok {
			t.Errorf("Target(%q) = %q, %d, %v; want %q, %d, %v", c.host, id, port, ok, c.id, c.port, c.ok)
		}
	}
}
