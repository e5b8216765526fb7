package local

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckOS checks what New and CheckIsolation say off Linux (they call
// checkOS with the running system's GOOS): an error that errors.Is finds
// as ErrUnsupportedOS, names the system, and says what to set instead.
func TestCheckOS(t *testing.T) {
	if err := checkOS("linux"); err != nil {
		t.Fatalf("checkOS(linux) = %v, want nil", err)
	}
	for goos, name := range map[string]string{"darwin": "macOS", "windows": "Windows", "freebsd": "freebsd"} {
		err := checkOS(goos)
		if !errors.Is(err, ErrUnsupportedOS) {
			t.Fatalf("checkOS(%s) = %v, want ErrUnsupportedOS", goos, err)
		}
		msg := err.Error()
		for _, want := range []string{"boxd: boxes run only on Linux", "on " + name + ",", "UPSTASH_BOX_BASE_URL and UPSTASH_BOX_API_KEY", "Upstash Box cloud"} {
			if !strings.Contains(msg, want) {
				t.Errorf("checkOS(%s) = %q, want it to say %q", goos, msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("checkOS(%s) = %q, want one line", goos, msg)
		}
	}
}
