package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// TestDesktopCommand: box create --desktop, then box desktop starts the
// desktop and prints a viewer's URL and password that open noVNC's page,
// box desktop screenshot writes the screen's PNG to a file or to
// standard output, box desktop stop stops it, and bad flags exit 2.
func TestDesktopCommand(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"Xvfb", "openbox", "x11vnc", "xdotool", "import", "chromium"} {
		if _, err := exec.LookPath(p); err != nil || local.CheckIsolation() != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI is set and desktops cannot run here (%s: %v; ./scripts/deps.sh --tests installs their programs)", p, err)
			}
			t.Skipf("desktops need %s and bubblewrap", p)
		}
	}
	srv := boxtest.NewServer(t)
	var made struct{ ID string }
	if err := json.Unmarshal([]byte(mustCLI(t, srv, "", "create", "--desktop", "--no-repl", "--json")), &made); err != nil || made.ID == "" {
		t.Fatalf("create --desktop --json: %v", err)
	}
	if r := cli(t, srv, "", "desktop", made.ID, "--auth", "open"); r.code != 2 {
		t.Errorf("an unknown --auth: exit %d, want 2", r.code)
	}
	if r := cli(t, srv, "", "desktop", made.ID, "--width", "99999"); r.code != 2 {
		t.Errorf("a screen too wide: exit %d, want 2", r.code)
	}
	var v struct {
		URL, Username, Password string
		Width, Height           int
	}
	if err := json.Unmarshal([]byte(mustCLI(t, srv, "", "desktop", made.ID, "--json")), &v); err != nil || v.Password == "" || v.Width != 1280 || v.Height != 800 {
		t.Fatalf("desktop --json = %+v, %v", v, err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", v.URL, nil)
	req.SetBasicAuth(v.Username, v.Password)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("the viewer's page: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	file := filepath.Join(t.TempDir(), "screen.png")
	mustCLI(t, srv, "", "desktop", "screenshot", made.ID, file)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for what, data := range map[string][]byte{"the file": raw, "standard output": []byte(mustCLI(t, srv, "", "desktop", "screenshot", "--no-cursor", made.ID, "-"))} {
		if img, err := png.Decode(bytes.NewReader(data)); err != nil || img.Bounds().Size() != image.Pt(1280, 800) {
			t.Errorf("the screenshot in %s is not a 1280x800 PNG: %v", what, err)
		}
	}
	mustCLI(t, srv, "", "desktop", "stop", made.ID)
	if r := cli(t, srv, "", "desktop", "screenshot", made.ID, "-"); r.code != 1 {
		t.Errorf("a screenshot of a stopped desktop: exit %d, want 1 (%s)", r.code, r.stderr)
	}
}
