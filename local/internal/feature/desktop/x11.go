package desktop

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/errdefs"
)

// maxScreenshot bounds a screenshot's PNG (a 3840×2160 screen of noise is
// about 25 MiB).
const maxScreenshot = 64 << 20

// x runs a program on the box's display through its agent, with stdin,
// and returns its standard output, at most limit bytes. A program that
// fails is an error with the end of its standard error.
func x(ctx context.Context, rt *agent.Client, stdin string, limit int64, argv ...string) ([]byte, error) {
	p, err := rt.Process(ctx, agent.ProcessRequest{Argv: argv, Env: map[string]string{"DISPLAY": Display}, Stdin: stdin})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	defer p.Close()
	out, err := io.ReadAll(io.LimitReader(p.Output, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading its output: %w", argv[0], err)
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("%s: its output is over %d bytes", argv[0], limit)
	}
	st, err := p.Wait()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	if st.ExitCode != 0 {
		msg := strings.TrimSpace(st.Stderr)
		if len(msg) > 500 {
			msg = msg[len(msg)-500:]
		}
		return nil, fmt.Errorf("%s exited with status %d: %s", argv[0], st.ExitCode, msg)
	}
	return out, nil
}

// xdotool runs xdotool with args.
func xdotool(ctx context.Context, rt *agent.Client, args ...string) ([]byte, error) {
	return x(ctx, rt, "", 1<<20, append([]string{"xdotool"}, args...)...)
}

// buttons are xdotool's numbers of the mouse buttons.
var buttons = map[string]string{"": "1", "left": "1", "middle": "2", "right": "3"}

func button(name string) (string, error) {
	b, ok := buttons[name]
	if !ok {
		return "", errdefs.Invalid("button must be left, right or middle, got %q", name)
	}
	return b, nil
}

// point checks that (x, y) is on a w×h screen.
func point(x, y, w, h int) error {
	if x < 0 || y < 0 || x >= w || y >= h {
		return errdefs.Invalid("(%d, %d) is off the %dx%d screen", x, y, w, h)
	}
	return nil
}

// moveArgs are xdotool's arguments that move the pointer to (x, y).
func moveArgs(x, y int) []string {
	return []string{"mousemove", strconv.Itoa(x), strconv.Itoa(y)}
}

// keyNames maps the key names clients send (the official SDK's, and
// Anthropic's computer-use tool's, which are xdotool's) to X keysyms.
var keyNames = map[string]string{
	"enter": "Return", "return": "Return", "esc": "Escape", "escape": "Escape", "tab": "Tab",
	"backspace": "BackSpace", "delete": "Delete", "del": "Delete", "insert": "Insert", "space": "space",
	"up": "Up", "down": "Down", "left": "Left", "right": "Right", "home": "Home", "end": "End",
	"pageup": "Prior", "page_up": "Prior", "pagedown": "Next", "page_down": "Next",
	"ctrl": "ctrl", "control": "ctrl", "alt": "alt", "shift": "shift", "meta": "super", "cmd": "super",
	"command": "super", "super": "super", "win": "super", "capslock": "Caps_Lock",
	"-": "minus", "+": "plus", "=": "equal", ",": "comma", ".": "period", "/": "slash", "\\": "backslash",
	";": "semicolon", "'": "apostrophe", "[": "bracketleft", "]": "bracketright", "`": "grave", " ": "space",
}

// keysym turns one key name into an X keysym that xdotool takes: a known
// name, a letter or digit, F1 to F24, or a keysym name as xdotool spells
// it ("Return", "KP_Enter"). Anything else, which xdotool could take for
// an option, is refused.
func keysym(name string) (string, error) {
	if k, ok := keyNames[strings.ToLower(name)]; ok {
		return k, nil
	}
	if k, ok := keyNames[name]; ok {
		return k, nil
	}
	if len(name) == 1 && (unicode.IsLetter(rune(name[0])) || unicode.IsDigit(rune(name[0]))) {
		return name, nil
	}
	if len(name) >= 2 && len(name) <= 32 && unicode.IsLetter(rune(name[0])) {
		for _, c := range name {
			if !(c < 128 && (unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_')) {
				return "", errdefs.Invalid("unknown key %q", name)
			}
		}
		return name, nil
	}
	return "", errdefs.Invalid("unknown key %q", name)
}

// chord turns keys held together into xdotool's "ctrl+l".
func chord(keys []string) (string, error) {
	if len(keys) == 0 {
		return "", errdefs.Invalid("keys must name a key")
	}
	syms := make([]string, len(keys))
	for i, k := range keys {
		s, err := keysym(k)
		if err != nil {
			return "", err
		}
		syms[i] = s
	}
	return strings.Join(syms, "+"), nil
}

// splitChord splits the "ctrl+l" of a computer-use key action; a lone
// "+" is the plus key.
func splitChord(s string) []string {
	if s == "+" {
		return []string{"+"}
	}
	return strings.Split(s, "+")
}

// geometry returns the size of the box's screen.
func geometry(ctx context.Context, rt *agent.Client) (w, h int, err error) {
	out, err := xdotool(ctx, rt, "getdisplaygeometry")
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(string(out), &w, &h); err != nil {
		return 0, 0, fmt.Errorf("xdotool getdisplaygeometry said %q", out)
	}
	return w, h, nil
}

// cursor returns where the pointer is.
func cursor(ctx context.Context, rt *agent.Client) (image.Point, error) {
	out, err := xdotool(ctx, rt, "getmouselocation", "--shell")
	if err != nil {
		return image.Point{}, err
	}
	var p image.Point
	var seen int
	for line := range strings.SplitSeq(string(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			continue
		}
		switch k {
		case "X":
			p.X, seen = n, seen|1
		case "Y":
			p.Y, seen = n, seen|2
		}
	}
	if seen != 3 {
		return image.Point{}, fmt.Errorf("xdotool getmouselocation said %q", out)
	}
	return p, nil
}

// screenshot returns a PNG of the screen, with the pointer drawn when
// withCursor is set.
func screenshot(ctx context.Context, rt *agent.Client, withCursor bool) ([]byte, error) {
	raw, err := x(ctx, rt, "", maxScreenshot, "import", "-silent", "-window", "root", "png:-")
	if err != nil {
		return nil, err
	}
	if !withCursor {
		return raw, nil
	}
	at, err := cursor(ctx, rt)
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the screenshot is not a PNG: %w", err)
	}
	rgba, ok := img.(*image.RGBA)
	if !ok {
		rgba = image.NewRGBA(img.Bounds())
		draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	}
	drawPointer(rgba, at)
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, rgba); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// pointerShape is an arrow pointer, 12 pixels wide and 19 high: 'B' is
// its black outline, 'W' its white body.
var pointerShape = []string{
	"B",
	"BB",
	"BWB",
	"BWWB",
	"BWWWB",
	"BWWWWB",
	"BWWWWWB",
	"BWWWWWWB",
	"BWWWWWWWB",
	"BWWWWWWWWB",
	"BWWWWWWWWWB",
	"BWWWWWWBBBBB",
	"BWWWBWWB",
	"BWWBBWWB",
	"BWB  BWWB",
	"BB   BWWB",
	"B     BWWB",
	"      BWWB",
	"       BB",
}

// drawPointer draws the arrow pointer with its tip at at.
func drawPointer(img *image.RGBA, at image.Point) {
	for dy, row := range pointerShape {
		for dx, c := range row {
			var col color.RGBA
			switch c {
			case 'B':
				col = color.RGBA{0, 0, 0, 255}
			case 'W':
				col = color.RGBA{255, 255, 255, 255}
			default:
				continue
			}
			p := at.Add(image.Pt(dx, dy))
			if p.In(img.Bounds()) {
				img.SetRGBA(p.X, p.Y, col)
			}
		}
	}
}
