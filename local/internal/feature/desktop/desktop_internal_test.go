package desktop

import (
	"errors"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/local/internal/errdefs"
)

// TestAvailableNamesThePackages: a machine without the desktop's
// programs is told which Debian packages to install, as a not
// implemented error (a 501).
func TestAvailableNamesThePackages(t *testing.T) {
	dir := t.TempDir()
	// Only xdotool is here.
	if err := os.WriteFile(filepath.Join(dir, "xdotool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	err := Available(errors.New("no chromium"))
	if !errors.Is(err, errdefs.ErrNotImplemented) {
		t.Fatalf("Available = %v, want a not implemented error", err)
	}
	for _, pkg := range []string{"chromium", "xvfb", "openbox", "x11vnc", "imagemagick", "apt-get install"} {
		if !strings.Contains(err.Error(), pkg) {
			t.Errorf("%q does not name %s", err, pkg)
		}
	}
	if strings.Contains(err.Error(), "xdotool") {
		t.Errorf("%q names xdotool, which is installed", err)
	}
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{[]string{"enter"}, "Return"},
		{[]string{"ctrl", "l"}, "ctrl+l"},
		{[]string{"Ctrl", "Shift", "T"}, "ctrl+shift+T"},
		{[]string{"PageDown"}, "Next"},
		{[]string{"F5"}, "F5"},
		{[]string{"KP_Enter"}, "KP_Enter"},
		{[]string{"-"}, "minus"},
		{splitChord("ctrl+plus"), "ctrl+plus"},
		{splitChord("+"), "plus"},
	} {
		got, err := chord(tc.keys)
		if err != nil || got != tc.want {
			t.Errorf("chord(%q) = %q, %v; want %q", tc.keys, got, err, tc.want)
		}
	}
	// Nothing that xdotool could read as an option or a second command.
	for _, bad := range [][]string{nil, {""}, {"--help"}, {"-x"}, {"a b"}, {"ctrl", "l;rm"}, {"é"}, {strings.Repeat("a", 40)}} {
		if _, err := chord(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("chord(%q) = %v, want an invalid argument", bad, err)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want time.Duration
		ok   bool
	}{
		{300.0, 300 * time.Millisecond, true}, // the official SDK's example
		{2.0, 2 * time.Second, true},          // Anthropic's seconds
		{0.5, 500 * time.Millisecond, true},
		{31.0, 0, false},
		{-1.0, 0, false},
		{"1", 0, false},
		{nil, 0, false},
	} {
		got, err := fields{"duration": tc.v}.duration()
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("duration %v = %v, %v; want %v (ok %v)", tc.v, got, err, tc.want, tc.ok)
		}
	}
}

func TestPoints(t *testing.T) {
	for _, tc := range []struct {
		v  any
		ok bool
	}{
		{[]any{1.0, 2.0}, true},
		{[]any{1.5, 2.0}, false},
		{[]any{1.0}, false},
		{"1,2", false},
		{map[string]any{"x": 1.0}, false},
	} {
		_, has, err := fields{"coordinate": tc.v}.point("coordinate")
		if (err == nil && has) != tc.ok {
			t.Errorf("point %v: has %v, %v; want ok %v", tc.v, has, err, tc.ok)
		}
	}
	if err := point(1280, 10, 1280, 800); err == nil {
		t.Errorf("x = width is on the screen")
	}
}

func TestScrollArgs(t *testing.T) {
	got, err := scrollArgs("down", 3, &[2]int{10, 20})
	if err != nil || strings.Join(got, " ") != "mousemove 10 20 click --repeat 3 --delay 20 5" {
		t.Errorf("scrollArgs = %q, %v", got, err)
	}
	for _, tc := range []struct {
		dir    string
		amount int
	}{{"sideways", 1}, {"up", 0}, {"up", maxScroll + 1}} {
		if _, err := scrollArgs(tc.dir, tc.amount, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("scrollArgs(%q, %d) = %v", tc.dir, tc.amount, err)
		}
	}
}

func TestToolUseAction(t *testing.T) {
	a := toolUse{ID: "t1", Name: "computer", Input: map[string]any{"action": "left_click", "coordinate": []any{1.0, 2.0}}}.action()
	if a.Type != "left_click" || len(a.AdditionalProperties) != 1 || a.AdditionalProperties["coordinate"] == nil {
		t.Errorf("action = %+v", a)
	}
}

func TestDrawPointer(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 20, 20))
	drawPointer(img, image.Pt(15, 15)) // partly off the image: clipped, no panic
	if img.RGBAAt(15, 15) != (color.RGBA{0, 0, 0, 255}) || img.RGBAAt(16, 17) != (color.RGBA{255, 255, 255, 255}) {
		t.Errorf("the pointer's tip is not drawn at (15, 15)")
	}
}
