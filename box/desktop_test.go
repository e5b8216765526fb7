package box

import (
	"encoding/json"
	"errors"
	"image"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/gen"
)

// TestDesktopWire checks what each Desktop call sends, as the official
// SDK's desktop branch sends it, and how it reads the answers, against a
// fake server.
func TestDesktopWire(t *testing.T) {
	t.Parallel()
	type sent struct {
		Method, Path, Query string
		Body                any
	}
	var (
		mu   sync.Mutex
		reqs []sent
	)
	answers := map[string]string{
		"/desktop/start":     `{"running":true,"width":1920,"height":1080,"opened":"https://example.com"}`,
		"/desktop/stream":    `{"url":"https://v/vnc.html","raw_ws_url":"wss://v/ws","port":6080,"auth":"basic","username":"u","password":"p"}`,
		"/desktop/status":    `{"running":true,"streaming":false,"display":":1","width":1920,"height":1080,"processes":{"Xvfb":true}}`,
		"/desktop/screen":    `{"width":1920,"height":1080,"cursor":{"x":3,"y":4}}`,
		"/desktop/actions":   `{"results":[{"ok":true,"data":{"x":7,"y":8}},{"ok":true,"data":"iVBORw=="},{"ok":false,"message":"unknown action type \"teleport\""}]}`,
		"/desktop/agent/act": `{"actions":[{"type":"left_click","coordinate":[10,20]},{"type":"zoom","region":[1,2,3,4]}],"reasoning":"r","input_tokens":5,"output_tokens":6}`,
		"/desktop/agent/run": `{"result":"done","completed":true,"steps":[{"step":1,"actions":[{"type":"type","text":"hi"},{"type":"wait","duration":300}]}],"step_count":1,"input_tokens":50,"output_tokens":60}`,
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body any
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		reqs = append(reqs, sent{r.Method, r.URL.Path, r.URL.RawQuery, body})
		mu.Unlock()
		a, ok := answers[r.URL.Path[len("/v2/box/box-1"):]]
		if !ok {
			a = `{"ok":true}`
		}
		_, _ = io.WriteString(w, a)
	}))
	t.Cleanup(ts.Close)
	c := pollClient(t, ts.URL)
	b := c.newBox(&gen.BoxData{ID: "box-1", Desktop: ptr(true)})
	d := b.Desktop
	ctx := t.Context()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	info, err := d.Start(ctx, &DesktopStartParams{Width: 1920, Height: 1080, Open: "https://example.com"})
	check("Start", err)
	if diff := cmp.Diff(&DesktopInfo{Running: true, Width: 1920, Height: 1080, Opened: "https://example.com"}, info); diff != "" {
		t.Errorf("Start (-want +got):\n%s", diff)
	}
	_, err = d.Start(ctx, nil)
	check("Start without params", err)
	s, err := d.Stream(ctx, &StreamParams{Auth: StreamAuthToken, ViewOnly: true})
	check("Stream", err)
	if diff := cmp.Diff(&DesktopStream{URL: "https://v/vnc.html", RawWebSocketURL: "wss://v/ws", Port: 6080, Auth: StreamAuthBasic, Username: "u", Password: "p"}, s); diff != "" {
		t.Errorf("Stream (-want +got):\n%s", diff)
	}
	check("Stop", d.Stop(ctx))
	st, err := d.Status(ctx)
	check("Status", err)
	if !st.Running || st.Display != ":1" || !st.Processes["Xvfb"] {
		t.Errorf("Status = %+v", st)
	}
	_, err = d.ScreenshotPNG(ctx, &DesktopScreenshotParams{NoCursor: true})
	check("ScreenshotPNG", err)
	_, err = d.ScreenshotPNG(ctx, nil)
	check("ScreenshotPNG with the cursor", err)
	scr, err := d.Screen(ctx)
	check("Screen", err)
	if *scr != (Screen{Width: 1920, Height: 1080, Cursor: image.Pt(3, 4)}) {
		t.Errorf("Screen = %+v", scr)
	}
	check("MoveMouse", d.MoveMouse(ctx, image.Pt(1, 2)))
	check("LeftClick", d.LeftClick(ctx, image.Pt(3, 4)))
	check("DoubleClick", d.DoubleClick(ctx, image.Pt(5, 6)))
	check("Click here", d.Click(ctx, &ClickParams{Button: ButtonRight}))
	check("Drag", d.Drag(ctx, image.Pt(1, 1), image.Pt(9, 9), ""))
	check("MouseDown", d.MouseDown(ctx, ButtonMiddle))
	check("MouseUp", d.MouseUp(ctx, ""))
	check("Scroll", d.Scroll(ctx, ScrollDown, 3, &image.Point{X: 10, Y: 11}))
	check("Type", d.Type(ctx, "hi", 25*time.Millisecond))
	check("Press", d.Press(ctx, "enter"))
	check("PressChord", d.PressChord(ctx, []string{"ctrl", "l"}))
	check("Open", d.Open(ctx, "https://example.com"))
	check("Launch", d.Launch(ctx, "chromium", []string{"--incognito"}))
	res, err := d.Actions(ctx, []ComputerAction{
		{Type: ActionCursorPosition},
		{Type: ActionScreenshot},
		{Type: "teleport", Extra: map[string]any{"to": "mars"}},
		{Type: ActionLeftClickDrag, StartCoordinate: &image.Point{X: 1, Y: 2}, Coordinate: &image.Point{X: 3, Y: 4}},
		{Type: ActionScroll, Coordinate: &image.Point{X: 5, Y: 6}, ScrollDirection: ScrollUp, ScrollAmount: 2},
		{Type: ActionWait, Duration: 300 * time.Millisecond},
	})
	check("Actions", err)
	if len(res) != 3 || *res[0].Cursor != image.Pt(7, 8) || string(res[1].Screenshot) != "\x89PNG" || res[2].OK {
		t.Errorf("Actions = %+v", res)
	}
	act, err := d.Agent.Act(ctx, "click it", &DesktopAgentParams{Model: "anthropic/claude-sonnet-4-5"})
	check("Agent.Act", err)
	wantAct := &DesktopActResult{
		Actions: []ComputerAction{
			{Type: ActionLeftClick, Coordinate: &image.Point{X: 10, Y: 20}},
			{Type: "zoom", Extra: map[string]any{"region": []any{1.0, 2.0, 3.0, 4.0}}},
		},
		Reasoning: "r", Usage: Usage{InputTokens: 5, OutputTokens: 6},
	}
	if diff := cmp.Diff(wantAct, act); diff != "" {
		t.Errorf("Agent.Act (-want +got):\n%s", diff)
	}
	run, err := d.Agent.Run(ctx, "search", &DesktopAgentParams{MaxSteps: 5})
	check("Agent.Run", err)
	wantRun := &DesktopRun{Result: "done", Completed: true, StepCount: 1, Usage: Usage{InputTokens: 50, OutputTokens: 60},
		Steps: []DesktopStep{{Step: 1, Actions: []ComputerAction{{Type: ActionTypeText, Text: "hi"}, {Type: ActionWait, Duration: 300 * time.Millisecond}}}}}
	if diff := cmp.Diff(wantRun, run); diff != "" {
		t.Errorf("Agent.Run (-want +got):\n%s", diff)
	}

	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	p := "/v2/box/box-1/desktop/"
	want := []sent{
		{"POST", p + "start", "", m("width", 1920.0, "height", 1080.0, "open", "https://example.com")},
		{"POST", p + "start", "", m()},
		{"POST", p + "stream", "", m("auth", "token", "view_only", true)},
		{"POST", p + "stop", "", nil},
		{"GET", p + "status", "", nil},
		{"GET", p + "screenshot", "encoding=base64&cursor=false", nil},
		{"GET", p + "screenshot", "encoding=base64", nil},
		{"GET", p + "screen", "", nil},
		{"POST", p + "mouse/move", "", m("x", 1.0, "y", 2.0)},
		{"POST", p + "mouse/click", "", m("button", "left", "x", 3.0, "y", 4.0)},
		{"POST", p + "mouse/click", "", m("button", "left", "count", 2.0, "x", 5.0, "y", 6.0)},
		{"POST", p + "mouse/click", "", m("button", "right")},
		{"POST", p + "mouse/drag", "", m("from", m("x", 1.0, "y", 1.0), "to", m("x", 9.0, "y", 9.0))},
		{"POST", p + "mouse/press", "", m("button", "middle")},
		{"POST", p + "mouse/release", "", m()},
		{"POST", p + "mouse/scroll", "", m("direction", "down", "amount", 3.0, "x", 10.0, "y", 11.0)},
		{"POST", p + "keyboard/type", "", m("text", "hi", "delay_ms", 25.0)},
		{"POST", p + "keyboard/press", "", m("keys", "enter")},
		{"POST", p + "keyboard/press", "", m("keys", []any{"ctrl", "l"})},
		{"POST", p + "open", "", m("target", "https://example.com")},
		{"POST", p + "launch", "", m("app", "chromium", "args", []any{"--incognito"})},
		{"POST", p + "actions", "", m("actions", []any{
			m("type", "cursor_position"),
			m("type", "screenshot"),
			m("type", "teleport", "to", "mars"),
			m("type", "left_click_drag", "start_coordinate", []any{1.0, 2.0}, "coordinate", []any{3.0, 4.0}),
			m("type", "scroll", "coordinate", []any{5.0, 6.0}, "scroll_direction", "up", "scroll_amount", 2.0),
			m("type", "wait", "duration", 300.0),
		})},
		{"POST", p + "agent/act", "", m("instruction", "click it", "model", "anthropic/claude-sonnet-4-5")},
		{"POST", p + "agent/run", "", m("prompt", "search", "max_steps", 5.0)},
	}
	if diff := cmp.Diff(want, reqs); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestDesktopRefusesBadInput: arguments no server would take, and a box
// without a desktop, fail before any request.
func TestDesktopRefusesBadInput(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request was sent: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(ts.Close)
	c := pollClient(t, ts.URL)
	d := c.newBox(&gen.BoxData{ID: "box-1", Desktop: ptr(true)}).Desktop
	ctx := t.Context()
	for what, err := range map[string]error{
		"a narrow screen":      func() error { _, err := d.Start(ctx, &DesktopStartParams{Width: 100}); return err }(),
		"an unknown auth":      func() error { _, err := d.Stream(ctx, &StreamParams{Auth: "open"}); return err }(),
		"four clicks":          d.Click(ctx, &ClickParams{Count: 4}),
		"an unknown button":    d.MouseDown(ctx, "fourth"),
		"an unknown scroll":    d.Scroll(ctx, "sideways", 1, nil),
		"a negative delay":     d.Type(ctx, "x", -time.Second),
		"no key":               d.PressChord(ctx, nil),
		"an empty key":         d.Press(ctx, ""),
		"no target":            d.Open(ctx, ""),
		"no program":           d.Launch(ctx, "", nil),
		"no actions":           func() error { _, err := d.Actions(ctx, nil); return err }(),
		"an untyped action":    func() error { _, err := d.Actions(ctx, []ComputerAction{{}}); return err }(),
		"no instruction":       func() error { _, err := d.Agent.Act(ctx, "", nil); return err }(),
		"too many steps":       func() error { _, err := d.Agent.Run(ctx, "go", &DesktopAgentParams{MaxSteps: 31}); return err }(),
		"a box with no screen": c.newBox(&gen.BoxData{ID: "box-2"}).Desktop.Stop(ctx),
	} {
		if err == nil {
			t.Errorf("%s: no error", what)
		} else if what != "a box with no screen" && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v does not match ErrInvalid", what, err)
		}
	}
	if err := c.newBox(&gen.BoxData{ID: "box-2"}).Desktop.Stop(ctx); !errors.Is(err, ErrNoDesktop) {
		t.Errorf("a box without a desktop: %v, want ErrNoDesktop", err)
	}
}
