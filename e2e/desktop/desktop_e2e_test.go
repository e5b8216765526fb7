package desktop_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/modeltest"
	"github.com/upstash/box-go/local"
)

// needDesktop skips a desktop test where boxd cannot run desktops (no
// bubblewrap, or the programs are missing), and fails it under CI, which
// installs them (./scripts/deps.sh --tests).
func needDesktop(t *testing.T) {
	t.Helper()
	var missing []string
	for _, p := range []string{"Xvfb", "openbox", "x11vnc", "xdotool", "import", "chromium"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if err := local.CheckIsolation(); err != nil {
		missing = append(missing, "bubblewrap")
	}
	if len(missing) > 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and %v are missing (./scripts/deps.sh --tests installs them)", missing)
		}
		t.Skipf("desktops need %v", missing)
	}
	desktopSlots <- struct{}{}
	t.Cleanup(func() { <-desktopSlots })
}

// desktopPage is served in the box: a text field across the upper
// middle of the page and a button across its lower half, whatever the
// height of Chromium's toolbar. A click on the button turns it green and
// reports the field's text to the page's server, which logs the request.
const desktopPage = `<!doctype html>
<html><body style="margin:0;background:#fff">
<input id="t" autofocus style="position:fixed;left:0;top:20vh;width:100vw;height:25vh;font-size:40px">
<button id="b" style="position:fixed;left:0;top:50vh;width:100vw;height:50vh;background:rgb(0,0,255);border:0"
 onclick="this.style.background='rgb(0,200,0)';fetch('/clicked?text='+encodeURIComponent(document.getElementById('t').value))">go</button>
</body></html>`

// TestDesktop drives a real desktop in a box through the SDK: it starts
// at 1280×800 with a page served in the box, a click in the text field
// and typing fill it, a click on the button turns it green and sends the
// field's text to the page's server, the screenshots are PNGs of the
// screen's size whose pixels show the change, and a batch of actions
// answers one result each.
func TestDesktop(t *testing.T) {
	t.Parallel()
	needDesktop(t)
	models := modeltest.New(t, func(*modeltest.Request) modeltest.Reply { return modeltest.Reply{Text: "nothing to do"} })
	srv := modelServer(t, models)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Desktop: true, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-scripted"}})
	if !b.Info().Desktop {
		t.Fatalf("the box's info says no desktop: %+v", b.Info())
	}
	if err := b.Files.Write(ctx, "site/index.html", []byte(desktopPage)); err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "cd site && (python3 -m http.server 8000 --bind 127.0.0.1 > ../server.log 2>&1 &) && sleep 0.5")

	start := time.Now()
	info, err := b.Desktop.Start(ctx, &box.DesktopStartParams{Open: "http://127.0.0.1:8000/index.html"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !info.Running || info.Width != 1280 || info.Height != 800 {
		t.Fatalf("Start = %+v", info)
	}
	// Wait for the page: the button's blue at the bottom of the screen.
	var before image.Image
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		img, err := b.Desktop.Screenshot(ctx, &box.DesktopScreenshotParams{NoCursor: true})
		if err != nil {
			t.Fatalf("Screenshot: %v", err)
		}
		if isBlue(img.At(100, 760)) {
			before = img
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not show within 60 s; the pixel at (100, 760) is %v", img.At(100, 760))
		}
	}
	t.Logf("first screenshot of the page %v after Start", time.Since(start).Round(time.Millisecond))
	if got := before.Bounds().Size(); got != image.Pt(1280, 800) {
		t.Fatalf("screenshot size %v, want 1280x800", got)
	}
	st, err := b.Desktop.Status(ctx)
	if err != nil || !st.Running || st.Width != 1280 || !st.Processes["Xvfb"] || !st.Processes["chromium"] || !st.Processes["x11vnc"] {
		t.Fatalf("Status = %+v, %v", st, err)
	}

	// The text field spans 20% to 45% of the page's height, the button
	// the lower half; the toolbar is under 20% of 800 pixels.
	if err := b.Desktop.LeftClick(ctx, image.Pt(640, 350)); err != nil {
		t.Fatalf("click the field: %v", err)
	}
	if err := b.Desktop.Type(ctx, "hello desktop", 0); err != nil {
		t.Fatalf("Type: %v", err)
	}
	if err := b.Desktop.LeftClick(ctx, image.Pt(640, 700)); err != nil {
		t.Fatalf("click the button: %v", err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		log, err := b.Files.Read(ctx, "server.log")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), "GET /clicked?text=hello%20desktop") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not report the click with the typed text; its server logged:\n%s", log)
		}
	}
	after, err := b.Desktop.Screenshot(ctx, &box.DesktopScreenshotParams{NoCursor: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := after.At(100, 760); !isGreen(c) {
		t.Errorf("after the click the button's pixel is %v, want green", c)
	}
	if c := after.At(5, 5); c != before.At(5, 5) {
		t.Errorf("a pixel away from the page changed: %v to %v", before.At(5, 5), c)
	}
	scr, err := b.Desktop.Screen(ctx)
	if err != nil || scr.Width != 1280 || scr.Height != 800 || scr.Cursor != image.Pt(640, 700) {
		t.Errorf("Screen = %+v, %v; want 1280x800 with the pointer at (640, 700)", scr, err)
	}
	// The pointer is drawn unless left out.
	withCursor, err := b.Desktop.Screenshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if withCursor.At(641, 705) == after.At(641, 705) {
		t.Errorf("the pointer is not drawn at (640, 700)")
	}

	results, err := b.Desktop.Actions(ctx, []box.ComputerAction{
		{Type: box.ActionMouseMove, Coordinate: &image.Point{X: 300, Y: 400}},
		{Type: box.ActionCursorPosition},
		{Type: box.ActionLeftClick, Coordinate: &image.Point{X: 320, Y: 350}},
		{Type: box.ActionKey, Text: "ctrl+a"},
		{Type: box.ActionTypeText, Text: "again"},
		{Type: box.ActionWait, Duration: 100 * time.Millisecond},
		{Type: box.ActionScreenshot},
		{Type: "teleport"},
	})
	if err != nil {
		t.Fatalf("Actions: %v", err)
	}
	if len(results) != 8 {
		t.Fatalf("%d results for 8 actions: %+v", len(results), results)
	}
	for i, r := range results[:7] {
		if !r.OK {
			t.Errorf("action %d failed: %s", i, r.Message)
		}
	}
	if c := results[1].Cursor; c == nil || *c != image.Pt(300, 400) {
		t.Errorf("cursor_position = %v, want (300, 400)", c)
	}
	if img, err := png.Decode(bytes.NewReader(results[6].Screenshot)); err != nil || img.Bounds().Size() != image.Pt(1280, 800) {
		t.Errorf("the screenshot action's data is not a 1280x800 PNG: %v", err)
	}
	if r := results[7]; r.OK || !strings.Contains(r.Message, "teleport") {
		t.Errorf("an unknown action's result = %+v", r)
	}

	// Bad input is the caller's error; the server says so.
	var apiErr *box.Error
	if err := b.Desktop.MoveMouse(ctx, image.Pt(5000, 10)); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("a move off the screen: %v, want a 400", err)
	}
	if err := b.Desktop.Press(ctx, "--help"); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("a key that is an option: %v, want a 400", err)
	}

	// A pause freezes the desktop with the box; a resume brings it back
	// as it was.
	if err := b.Pause(ctx); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := b.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if scr, err := b.Desktop.Screen(ctx); err != nil || scr.Width != 1280 || scr.Cursor != image.Pt(320, 350) {
		t.Errorf("after a pause and a resume, Screen = %+v, %v; want the pointer where the actions left it", scr, err)
	}
	if img, err := b.Desktop.Screenshot(ctx, &box.DesktopScreenshotParams{NoCursor: true}); err != nil || !isGreen(img.At(100, 760)) {
		t.Errorf("after a pause and a resume the page is not as it was: %v", err)
	}

	checkComputerUse(t, b, models)
	checkViewer(t, b)

	if err := b.Desktop.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st, err := b.Desktop.Status(ctx); err != nil || st.Running {
		t.Errorf("Status after Stop = %+v, %v", st, err)
	}
	if r := mustRun(t, b, "pgrep -x Xvfb || pgrep -x x11vnc || echo none"); r.Stdout != "none\n" {
		t.Errorf("the desktop's processes run after Stop: %q", r.Stdout)
	}
	if err := b.Desktop.LeftClick(ctx, image.Pt(1, 1)); !errors.As(err, &apiErr) || apiErr.StatusCode != 409 {
		t.Errorf("a click on a stopped desktop: %v, want a 409", err)
	}
}

// TestDesktopRefusedWithoutDesktop: a box created without a desktop
// refuses the desktop's calls: the SDK before any request, boxd with a
// 409.
func TestDesktopRefusedWithoutDesktop(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	if _, err := b.Desktop.Start(t.Context(), nil); !errors.Is(err, box.ErrNoDesktop) {
		t.Errorf("Start on a box without a desktop: %v, want ErrNoDesktop", err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL()+"/v2/box/"+b.ID()+"/desktop/start", strings.NewReader("{}"))
	req.Header.Set("X-Box-Api-Key", srv.APIKey())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 409 || !strings.Contains(string(body), "desktop: true") {
		t.Errorf("boxd answered %d %s, want a 409 that says how to get a desktop", resp.StatusCode, body)
	}
}

func isBlue(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return b>>8 > 200 && r>>8 < 60 && g>>8 < 60
}

func isGreen(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return g>>8 > 150 && r>>8 < 60 && b>>8 < 60
}

// checkViewer opens the desktop's live viewer: noVNC's page needs the
// basic auth it was given, and its WebSocket speaks RFB through boxd to
// the box's VNC server, where a pointer event moves the pointer; a
// view-only viewer's does not, and a new viewer revokes the old one.
func checkViewer(t *testing.T, b *box.Box) {
	t.Helper()
	ctx := t.Context()
	v, err := b.Desktop.Stream(ctx, nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if v.Auth != box.StreamAuthBasic || v.Username == "" || v.Password == "" || !strings.Contains(v.URL, "/vnc.html?") {
		t.Fatalf("Stream = %+v", v)
	}
	get := func(u, user, pass string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get(v.URL, "", ""); code != 401 {
		t.Errorf("the viewer without its password: %d, want 401", code)
	}
	if code, _ := get(v.URL, v.Username, "wrong"); code != 401 {
		t.Errorf("the viewer with a wrong password: %d, want 401", code)
	}
	if code, body := get(v.URL, v.Username, v.Password); code != 200 || !strings.Contains(body, "noVNC") {
		t.Errorf("the viewer's page: %d %.200q", code, body)
	}
	auth := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(v.Username+":"+v.Password))}}
	if _, _, err := websocket.Dial(ctx, v.RawWebSocketURL, nil); err == nil {
		t.Errorf("the VNC WebSocket opened without the password")
	}
	rfbPointer(t, v.RawWebSocketURL, auth, image.Pt(100, 120))
	if scr, err := b.Desktop.Screen(ctx); err != nil || scr.Cursor != image.Pt(100, 120) {
		t.Errorf("after the viewer's pointer event the pointer is at %+v, %v; want (100, 120)", scr, err)
	}
	st, err := b.Desktop.Status(ctx)
	if err != nil || !st.Streaming {
		t.Errorf("Status while viewable = %+v, %v", st, err)
	}

	ro, err := b.Desktop.Stream(ctx, &box.StreamParams{Auth: box.StreamAuthToken, ViewOnly: true})
	if err != nil || ro.Token == "" || !strings.Contains(ro.URL, "view_only=1") {
		t.Fatalf("a view-only viewer: %+v, %v", ro, err)
	}
	if code, _ := get(v.URL, v.Username, v.Password); code != 401 {
		t.Errorf("the first viewer after a new one: %d, want 401", code)
	}
	rfbPointer(t, ro.RawWebSocketURL, nil, image.Pt(300, 330))
	if scr, err := b.Desktop.Screen(ctx); err != nil || scr.Cursor != image.Pt(100, 120) {
		t.Errorf("a view-only viewer moved the pointer: %+v, %v", scr, err)
	}
}

// rfbPointer speaks RFB 3.8 over the WebSocket at u as a VNC viewer does:
// the handshake with no VNC password (boxd's grant is the auth), a
// pointer event at at, then a framebuffer update request, whose answer
// shows the server has handled the pointer event before it.
func rfbPointer(t *testing.T, u string, h http.Header, at image.Point) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{"binary"}})
	if err != nil {
		t.Fatalf("the VNC WebSocket: %v", err)
	}
	defer c.CloseNow()
	conn := websocket.NetConn(ctx, c, websocket.MessageBinary)
	read := func(n int) []byte {
		t.Helper()
		buf := make([]byte, n)
		if _, err := io.ReadFull(conn, buf); err != nil {
			t.Fatalf("RFB: reading %d bytes: %v", n, err)
		}
		return buf
	}
	write := func(b []byte) {
		t.Helper()
		if _, err := conn.Write(b); err != nil {
			t.Fatalf("RFB: %v", err)
		}
	}
	if v := string(read(12)); !strings.HasPrefix(v, "RFB 003.") {
		t.Fatalf("the server's RFB version is %q", v)
	}
	write([]byte("RFB 003.008\n"))
	types := read(int(read(1)[0]))
	if !bytes.Contains(types, []byte{1}) {
		t.Fatalf("the VNC server asks for security types %v, not None", types)
	}
	write([]byte{1})
	if r := read(4); !bytes.Equal(r, []byte{0, 0, 0, 0}) {
		t.Fatalf("security result %v", r)
	}
	write([]byte{1}) // ClientInit: shared
	init := read(24)
	if w, hgt := int(init[0])<<8|int(init[1]), int(init[2])<<8|int(init[3]); w != 1280 || hgt != 800 {
		t.Errorf("the VNC screen is %dx%d", w, hgt)
	}
	read(int(init[20])<<24 | int(init[21])<<16 | int(init[22])<<8 | int(init[23])) // the desktop's name
	write([]byte{5, 0, byte(at.X >> 8), byte(at.X), byte(at.Y >> 8), byte(at.Y)})
	write([]byte{3, 0, 0, 0, 0, 0, 0, 16, 0, 16}) // a full update of a 16x16 corner
	if typ := read(1)[0]; typ != 0 {
		t.Fatalf("the server's first message is of type %d, not a framebuffer update", typ)
	}
}

// checkComputerUse drives the desktop with a scripted computer-use model:
// Act performs the model's click, and Run types into the field and
// clicks the button over three model turns, each of which sees the
// screen; the page's server learns the text the model typed.
func checkComputerUse(t *testing.T, b *box.Box, models *modeltest.Server) {
	t.Helper()
	ctx := t.Context()
	usage := modeltest.Usage{Input: 1500, Output: 40}
	models.SetScript(func(r *modeltest.Request) modeltest.Reply {
		return modeltest.Reply{Text: "I select the field.", Usage: usage,
			Tool: &modeltest.ToolCall{Name: "computer", Input: map[string]any{"action": "triple_click", "coordinate": []int{640, 350}}}}
	})
	before := len(models.Requests())
	act, err := b.Desktop.Agent.Act(ctx, "Select the text field", nil)
	if err != nil {
		t.Fatalf("Agent.Act: %v", err)
	}
	want := []box.ComputerAction{{Type: box.ActionTripleClick, Coordinate: &image.Point{X: 640, Y: 350}}}
	if len(act.Actions) != 1 || act.Actions[0].Type != want[0].Type || *act.Actions[0].Coordinate != *want[0].Coordinate ||
		act.Reasoning != "I select the field." || act.Usage.InputTokens != 1500 || act.Usage.OutputTokens != 40 {
		t.Errorf("Agent.Act = %+v", act)
	}
	if scr, err := b.Desktop.Screen(ctx); err != nil || scr.Cursor != image.Pt(640, 350) {
		t.Errorf("after Act the pointer is at %+v, %v; want the model's (640, 350)", scr, err)
	}
	reqs := models.Requests()[before:]
	if len(reqs) != 1 {
		t.Fatalf("Act made %d model requests, want 1", len(reqs))
	}
	first := reqs[0]
	if first.Key != "sk-ant-scripted" || first.Model != "claude-sonnet-4-5" || !first.HasTool("computer") || !strings.Contains(first.User, "Select the text field") || len(first.Images) != 1 {
		t.Fatalf("Act's model request: key %q, model %q, tools %v, user %q, %d images", first.Key, first.Model, first.Tools, first.User, len(first.Images))
	}
	if img, err := png.Decode(bytes.NewReader(first.Images[0])); err != nil || img.Bounds().Size() != image.Pt(1280, 800) {
		t.Errorf("the model did not see a 1280x800 screenshot: %v", err)
	}
	tool := jsonText(first.Body["tools"])
	if !strings.Contains(tool, `"display_width_px":1280`) || !strings.Contains(tool, `"type":"computer_20250124"`) {
		t.Errorf("the computer tool offered: %s", tool)
	}

	models.SetScript(func(r *modeltest.Request) modeltest.Reply {
		switch {
		case !r.HasToolResult:
			return modeltest.Reply{Usage: usage, Tool: &modeltest.ToolCall{Name: "computer", Input: map[string]any{"action": "type", "text": "from the agent"}}}
		case !strings.Contains(jsonText(r.Body["messages"]), "left_click"):
			return modeltest.Reply{Text: "Now the button.", Usage: usage, Tool: &modeltest.ToolCall{Name: "computer", Input: map[string]any{"action": "left_click", "coordinate": []int{640, 700}}}}
		}
		return modeltest.Reply{Text: "Done: the text is sent.", Usage: usage}
	})
	before = len(models.Requests())
	run, err := b.Desktop.Agent.Run(ctx, "Type 'from the agent' and press the button", &box.DesktopAgentParams{MaxSteps: 5})
	if err != nil {
		t.Fatalf("Agent.Run: %v", err)
	}
	if !run.Completed || run.StepCount != 3 || len(run.Steps) != 3 || run.Result != "Done: the text is sent." || run.Usage.InputTokens != 3*1500 || run.Usage.OutputTokens != 3*40 {
		t.Errorf("Agent.Run = %+v", run)
	}
	if len(run.Steps) == 3 && (len(run.Steps[0].Actions) != 1 || run.Steps[0].Actions[0].Text != "from the agent" || run.Steps[1].Actions[0].Type != box.ActionLeftClick || len(run.Steps[2].Actions) != 0) {
		t.Errorf("Agent.Run's steps = %+v", run.Steps)
	}
	for i, r := range models.Requests()[before:] {
		if len(r.Images) == 0 {
			t.Errorf("model request %d of the run carried no screenshot", i+1)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		log, err := b.Files.Read(ctx, "server.log")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), "GET /clicked?text=from%20the%20agent") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the model's typing and click did not reach the page; its server logged:\n%s", log)
		}
	}
}

// TestDesktopNeedsIsolation: a boxd that runs boxes without bubblewrap
// refuses desktop: true with a 501 that says why (every box's display
// would be the machine's own), and makes no box.
func TestDesktopNeedsIsolation(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t, boxtest.WithIsolation(local.IsolationNone))
	_, err := srv.Client().Create(t.Context(), &box.CreateParams{Desktop: true})
	var apiErr *box.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 501 || !strings.Contains(err.Error(), "bubblewrap") {
		t.Fatalf("Create with a desktop on a boxd without isolation: %v, want a 501 naming bubblewrap", err)
	}
	if list, err := srv.Client().List(t.Context(), nil); err != nil || len(list) != 0 {
		t.Errorf("boxes after the refusal: %v, %v", list, err)
	}
}
