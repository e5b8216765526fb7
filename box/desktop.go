package box

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"slices"
	"time"

	"github.com/upstash/box-go/gen"
)

// ErrNoDesktop is returned, before any request, by every desktop call on a
// box that was not created with [CreateParams].Desktop.
var ErrNoDesktop = errors.New("box: this box has no desktop; create it with Desktop: true")

// Desktop is the desktop of a box created with Desktop: true: an X
// display with a window manager and Chromium, driven with the mouse and
// the keyboard, seen in screenshots or in a live viewer. Its calls are
// deterministic and use no model; those of [Desktop].Agent call one.
//
// Coordinates are screen pixels from the top left corner.
type Desktop struct {
	b *Box
	// Agent lets a computer-use model drive the desktop.
	Agent *DesktopAgent
}

func newDesktop(b *Box) *Desktop {
	d := &Desktop{b: b}
	d.Agent = &DesktopAgent{d: d}
	return d
}

// check refuses a box without a desktop before any request.
func (d *Desktop) check() error {
	if !d.b.Info().Desktop {
		return ErrNoDesktop
	}
	return nil
}

// DesktopStartParams configures [Desktop.Start]; nil means 1280×800 and
// nothing opened.
type DesktopStartParams struct {
	// Width (640 to 3840) and Height (480 to 2160) are the screen's size
	// in pixels; zero is the server's default, 1280×800.
	Width, Height int
	// Open is a URL that the desktop's Chromium opens.
	Open string
}

// DesktopInfo is a started desktop.
type DesktopInfo struct {
	Running       bool
	Width, Height int
	// Opened is the URL opened, if one was.
	Opened string
}

// Start starts the desktop (POST /v2/box/{id}/desktop/start), or reports
// the one that runs: the call is idempotent. It can take a while; the
// official SDK waits up to 120 s.
func (d *Desktop) Start(ctx context.Context, p *DesktopStartParams, opts ...Option) (*DesktopInfo, error) {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return nil, err
	}
	var body gen.DesktopStartRequest
	if p != nil {
		if p.Width != 0 && (p.Width < 640 || p.Width > 3840) {
			return nil, invalidf("box: DesktopStartParams.Width must be 640 to 3840, got %d", p.Width)
		}
		if p.Height != 0 && (p.Height < 480 || p.Height > 2160) {
			return nil, invalidf("box: DesktopStartParams.Height must be 480 to 2160, got %d", p.Height)
		}
		if p.Width != 0 {
			body.Width = ptr(p.Width)
		}
		if p.Height != 0 {
			body.Height = ptr(p.Height)
		}
		body.Open = nonEmpty(p.Open)
	}
	r, err := call[gen.DesktopStartResponse](d.b.c.api.DesktopStart(ctx, d.b.id, body))
	if err != nil {
		return nil, err
	}
	return &DesktopInfo{Running: r.Running, Width: deref(r.Width), Height: deref(r.Height), Opened: deref(r.Opened)}, nil
}

// StreamAuth is how a desktop's live viewer is protected.
type StreamAuth string

// Viewer protections.
const (
	// StreamAuthBasic: a user name and password (the server's default).
	StreamAuthBasic StreamAuth = "basic"
	// StreamAuthToken: a token in the viewer's URL.
	StreamAuthToken StreamAuth = "token"
	// StreamAuthNone: anyone with the URL.
	StreamAuthNone StreamAuth = "none"
)

// StreamParams configures [Desktop.Stream]; nil means basic auth and
// input allowed.
type StreamParams struct {
	Auth StreamAuth
	// ViewOnly drops the viewer's mouse and keyboard.
	ViewOnly bool
}

// DesktopStream is a desktop's live viewer.
type DesktopStream struct {
	// URL is the viewer's page (noVNC), to open in a browser.
	URL string
	// RawWebSocketURL is the VNC WebSocket itself, for other viewers.
	RawWebSocketURL string
	// Port is the viewer's port in the box.
	Port int
	Auth StreamAuth
	// Username and Password are set with StreamAuthBasic, Token with
	// StreamAuthToken.
	Username, Password, Token string
}

// Stream makes the desktop viewable in a browser (POST
// /v2/box/{id}/desktop/stream) and returns the viewer's URL and
// credentials. [Desktop.Stop] revokes them.
func (d *Desktop) Stream(ctx context.Context, p *StreamParams, opts ...Option) (*DesktopStream, error) {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return nil, err
	}
	var body gen.DesktopStreamRequest
	if p != nil {
		switch p.Auth {
		case "":
		case StreamAuthBasic, StreamAuthToken, StreamAuthNone:
			body.Auth = ptr(gen.DesktopStreamRequestAuth(p.Auth))
		default:
			return nil, invalidf("box: StreamParams.Auth %q is not basic, token or none", p.Auth)
		}
		if p.ViewOnly {
			body.ViewOnly = ptr(true)
		}
	}
	r, err := call[gen.DesktopStream](d.b.c.api.DesktopStream(ctx, d.b.id, body))
	if err != nil {
		return nil, err
	}
	s := &DesktopStream{URL: r.URL, RawWebSocketURL: deref(r.RawWsURL), Port: deref(r.Port), Username: deref(r.Username), Password: deref(r.Password), Token: deref(r.Token)}
	if r.Auth != nil {
		s.Auth = StreamAuth(*r.Auth)
	}
	return s, nil
}

// Stop stops the desktop and revokes its viewer's credentials (POST
// /v2/box/{id}/desktop/stop).
func (d *Desktop) Stop(ctx context.Context, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	return none(d.b.c.api.DesktopStop(ctx, d.b.id))
}

// DesktopStatus is a desktop's state.
type DesktopStatus struct {
	Running, Streaming bool
	// Display is the X display, e.g. ":1".
	Display       string
	Width, Height int
	// Processes says, for each of the desktop's processes by name,
	// whether it runs.
	Processes map[string]bool
}

// Status reports the desktop's state (GET /v2/box/{id}/desktop/status).
func (d *Desktop) Status(ctx context.Context, opts ...Option) (*DesktopStatus, error) {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return nil, err
	}
	r, err := call[gen.DesktopStatus](d.b.c.api.DesktopStatus(ctx, d.b.id))
	if err != nil {
		return nil, err
	}
	return &DesktopStatus{Running: r.Running, Streaming: r.Streaming, Display: deref(r.Display), Width: deref(r.Width), Height: deref(r.Height), Processes: r.Processes}, nil
}

// DesktopScreenshotParams configures a screenshot; nil means with the
// mouse pointer.
type DesktopScreenshotParams struct {
	// NoCursor leaves the mouse pointer out.
	NoCursor bool
}

// ScreenshotPNG returns a PNG of the whole screen (GET
// /v2/box/{id}/desktop/screenshot).
func (d *Desktop) ScreenshotPNG(ctx context.Context, p *DesktopScreenshotParams, opts ...Option) ([]byte, error) {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return nil, err
	}
	params := &gen.DesktopScreenshotParams{Encoding: ptr(gen.DesktopScreenshotParamsEncodingBase64)}
	if p != nil && p.NoCursor {
		params.Cursor = ptr(false)
	}
	r, err := call[gen.DesktopScreenshot](d.b.c.api.DesktopScreenshot(ctx, d.b.id, params))
	if err != nil {
		return nil, err
	}
	return r.Data, nil
}

// Screenshot is ScreenshotPNG, decoded.
func (d *Desktop) Screenshot(ctx context.Context, p *DesktopScreenshotParams, opts ...Option) (image.Image, error) {
	ctx = withCallOptions(ctx, opts)
	raw, err := d.ScreenshotPNG(ctx, p)
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("box: the desktop's screenshot is not a PNG: %w", err)
	}
	return img, nil
}

// Screen is the desktop's screen: its size and the mouse pointer.
type Screen struct {
	Width, Height int
	// Cursor is where the mouse pointer is.
	Cursor image.Point
}

// Screen reports the screen's size and the pointer (GET
// /v2/box/{id}/desktop/screen).
func (d *Desktop) Screen(ctx context.Context, opts ...Option) (*Screen, error) {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return nil, err
	}
	r, err := call[gen.DesktopScreen](d.b.c.api.DesktopScreen(ctx, d.b.id))
	if err != nil {
		return nil, err
	}
	return &Screen{Width: r.Width, Height: r.Height, Cursor: image.Pt(r.Cursor.X, r.Cursor.Y)}, nil
}

// MouseButton is a mouse button.
type MouseButton string

// Mouse buttons.
const (
	ButtonLeft   MouseButton = "left"
	ButtonRight  MouseButton = "right"
	ButtonMiddle MouseButton = "middle"
)

// wire returns b for a request; "" is the server's default, left.
func (b MouseButton) wire() (*gen.DesktopMouseButton, error) {
	switch b {
	case "":
		return nil, nil
	case ButtonLeft, ButtonRight, ButtonMiddle:
		return ptr(gen.DesktopMouseButton(b)), nil
	}
	return nil, invalidf("box: mouse button %q is not left, right or middle", b)
}

// MoveMouse moves the pointer to at (POST /v2/box/{id}/desktop/mouse/move).
func (d *Desktop) MoveMouse(ctx context.Context, at image.Point, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	return none(d.b.c.api.DesktopMouseMove(ctx, d.b.id, gen.DesktopPoint{X: at.X, Y: at.Y}))
}

// ClickParams configures [Desktop.Click]; nil means one left click where
// the pointer is.
type ClickParams struct {
	Button MouseButton
	// Count is the number of clicks, 1 to 3; zero is 1.
	Count int
	// At moves the pointer there first; nil clicks where it is.
	At *image.Point
}

// Click clicks (POST /v2/box/{id}/desktop/mouse/click).
func (d *Desktop) Click(ctx context.Context, p *ClickParams, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	var body gen.DesktopClickRequest
	if p != nil {
		btn, err := p.Button.wire()
		if err != nil {
			return err
		}
		body.Button = btn
		if p.Count < 0 || p.Count > 3 {
			return invalidf("box: ClickParams.Count must be 1 to 3, got %d", p.Count)
		}
		if p.Count != 0 {
			body.Count = ptr(p.Count)
		}
		if p.At != nil {
			body.X, body.Y = ptr(p.At.X), ptr(p.At.Y)
		}
	}
	return none(d.b.c.api.DesktopMouseClick(ctx, d.b.id, body))
}

// LeftClick clicks the left button at at.
func (d *Desktop) LeftClick(ctx context.Context, at image.Point, opts ...Option) error {
	return d.Click(ctx, &ClickParams{Button: ButtonLeft, At: &at}, opts...)
}

// RightClick clicks the right button at at.
func (d *Desktop) RightClick(ctx context.Context, at image.Point, opts ...Option) error {
	return d.Click(ctx, &ClickParams{Button: ButtonRight, At: &at}, opts...)
}

// MiddleClick clicks the middle button at at.
func (d *Desktop) MiddleClick(ctx context.Context, at image.Point, opts ...Option) error {
	return d.Click(ctx, &ClickParams{Button: ButtonMiddle, At: &at}, opts...)
}

// DoubleClick clicks the left button twice at at.
func (d *Desktop) DoubleClick(ctx context.Context, at image.Point, opts ...Option) error {
	return d.Click(ctx, &ClickParams{Button: ButtonLeft, Count: 2, At: &at}, opts...)
}

// Drag presses button ("" is left) at from, moves to to and releases it
// (POST /v2/box/{id}/desktop/mouse/drag).
func (d *Desktop) Drag(ctx context.Context, from, to image.Point, button MouseButton, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	btn, err := button.wire()
	if err != nil {
		return err
	}
	body := gen.DesktopDragRequest{From: gen.DesktopPoint{X: from.X, Y: from.Y}, To: gen.DesktopPoint{X: to.X, Y: to.Y}, Button: btn}
	return none(d.b.c.api.DesktopMouseDrag(ctx, d.b.id, body))
}

// MouseDown presses button ("" is left) and holds it (POST
// /v2/box/{id}/desktop/mouse/press).
func (d *Desktop) MouseDown(ctx context.Context, button MouseButton, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	btn, err := button.wire()
	if err != nil {
		return err
	}
	return none(d.b.c.api.DesktopMousePress(ctx, d.b.id, gen.DesktopButtonRequest{Button: btn}))
}

// MouseUp releases button ("" is left) (POST
// /v2/box/{id}/desktop/mouse/release).
func (d *Desktop) MouseUp(ctx context.Context, button MouseButton, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	btn, err := button.wire()
	if err != nil {
		return err
	}
	return none(d.b.c.api.DesktopMouseRelease(ctx, d.b.id, gen.DesktopButtonRequest{Button: btn}))
}

// ScrollDirection is a direction to scroll in.
type ScrollDirection string

// Scroll directions.
const (
	ScrollUp    ScrollDirection = "up"
	ScrollDown  ScrollDirection = "down"
	ScrollLeft  ScrollDirection = "left"
	ScrollRight ScrollDirection = "right"
)

// Scroll scrolls amount steps (zero is 1) in direction, at at when it is
// not nil (POST /v2/box/{id}/desktop/mouse/scroll).
func (d *Desktop) Scroll(ctx context.Context, direction ScrollDirection, amount int, at *image.Point, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	switch direction {
	case ScrollUp, ScrollDown, ScrollLeft, ScrollRight:
	default:
		return invalidf("box: scroll direction %q is not up, down, left or right", direction)
	}
	if amount < 0 {
		return invalidf("box: scroll amount must not be negative, got %d", amount)
	}
	body := gen.DesktopScrollRequest{Direction: gen.DesktopScrollRequestDirection(direction)}
	if amount != 0 {
		body.Amount = ptr(amount)
	}
	if at != nil {
		body.X, body.Y = ptr(at.X), ptr(at.Y)
	}
	return none(d.b.c.api.DesktopMouseScroll(ctx, d.b.id, body))
}

// Type types text, waiting delay between keys (POST
// /v2/box/{id}/desktop/keyboard/type; the delay is sent in milliseconds).
func (d *Desktop) Type(ctx context.Context, text string, delay time.Duration, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	if delay < 0 {
		return invalidf("box: the typing delay must not be negative, got %v", delay)
	}
	body := gen.DesktopTypeRequest{Text: text}
	if delay > 0 {
		body.DelayMs = ptr(int(max(1, delay.Milliseconds())))
	}
	return none(d.b.c.api.DesktopKeyboardType(ctx, d.b.id, body))
}

// Press presses and releases a key, such as "enter", "a" or "F5" (POST
// /v2/box/{id}/desktop/keyboard/press).
func (d *Desktop) Press(ctx context.Context, key string, opts ...Option) error {
	return d.press(withCallOptions(ctx, opts), []string{key})
}

// PressChord presses keys held together, such as ["ctrl", "l"], and
// releases them.
func (d *Desktop) PressChord(ctx context.Context, keys []string, opts ...Option) error {
	return d.press(withCallOptions(ctx, opts), keys)
}

func (d *Desktop) press(ctx context.Context, keys []string) error {
	if err := d.check(); err != nil {
		return err
	}
	if len(keys) == 0 || slices.Contains(keys, "") {
		return invalidf("box: a key to press is empty")
	}
	var k gen.DesktopKeys
	var err error
	if len(keys) == 1 {
		err = k.FromDesktopKeys0(keys[0])
	} else {
		err = k.FromDesktopKeys1(keys)
	}
	if err != nil {
		return err
	}
	return none(d.b.c.api.DesktopKeyboardPress(ctx, d.b.id, gen.DesktopPressRequest{Keys: k}))
}

// Open opens target, a URL or a path in the box, with its default
// program (POST /v2/box/{id}/desktop/open).
func (d *Desktop) Open(ctx context.Context, target string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	if target == "" {
		return invalidf("box: Open needs a URL or a path")
	}
	return none(d.b.c.api.DesktopOpen(ctx, d.b.id, gen.DesktopOpenRequest{Target: target}))
}

// Launch starts app with args on the desktop (POST
// /v2/box/{id}/desktop/launch). The server starts only programs it
// allows, such as chromium.
func (d *Desktop) Launch(ctx context.Context, app string, args []string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return err
	}
	if app == "" {
		return invalidf("box: Launch needs a program")
	}
	return none(d.b.c.api.DesktopLaunch(ctx, d.b.id, gen.DesktopLaunchRequest{App: app, Args: args}))
}

// Actions runs a batch of computer-use actions in order (POST
// /v2/box/{id}/desktop/actions) and returns one result each. The official
// SDK waits up to 180 s.
func (d *Desktop) Actions(ctx context.Context, actions []ComputerAction, opts ...Option) ([]ComputerActionResult, error) {
	ctx = withCallOptions(ctx, opts)
	if err := d.check(); err != nil {
		return nil, err
	}
	if len(actions) == 0 {
		return nil, invalidf("box: Actions needs an action")
	}
	body := gen.DesktopActionsRequest{Actions: make([]gen.ComputerUseAction, len(actions))}
	for i, a := range actions {
		w, err := a.wire()
		if err != nil {
			return nil, fmt.Errorf("box: action %d: %w", i, err)
		}
		body.Actions[i] = w
	}
	r, err := call[gen.DesktopActionsResponse](d.b.c.api.DesktopActions(ctx, d.b.id, body))
	if err != nil {
		return nil, err
	}
	out := make([]ComputerActionResult, 0, len(r.Results))
	for _, res := range r.Results {
		out = append(out, resultFrom(res))
	}
	return out, nil
}

// ComputerActionType names a computer-use action, as Anthropic's
// computer-use tool (computer_20250124) does.
type ComputerActionType string

// Computer-use actions. A server may know more; an action of a type not
// listed here is sent and read as it is.
const (
	ActionKey            ComputerActionType = "key" // press Text, a key or chord such as "ctrl+l"
	ActionHoldKey        ComputerActionType = "hold_key"
	ActionTypeText       ComputerActionType = "type" // type Text
	ActionCursorPosition ComputerActionType = "cursor_position"
	ActionMouseMove      ComputerActionType = "mouse_move"
	ActionLeftMouseDown  ComputerActionType = "left_mouse_down"
	ActionLeftMouseUp    ComputerActionType = "left_mouse_up"
	ActionLeftClick      ComputerActionType = "left_click"
	ActionRightClick     ComputerActionType = "right_click"
	ActionMiddleClick    ComputerActionType = "middle_click"
	ActionDoubleClick    ComputerActionType = "double_click"
	ActionTripleClick    ComputerActionType = "triple_click"
	ActionLeftClickDrag  ComputerActionType = "left_click_drag" // from StartCoordinate to Coordinate
	ActionScroll         ComputerActionType = "scroll"
	ActionWait           ComputerActionType = "wait"
	ActionScreenshot     ComputerActionType = "screenshot"
)

// ComputerAction is one computer-use action. Only the fields its type
// uses are sent.
type ComputerAction struct {
	Type ComputerActionType
	// Coordinate is where a mouse action happens (and where a drag
	// ends); nil is where the pointer is.
	Coordinate *image.Point
	// StartCoordinate is where a drag starts.
	StartCoordinate *image.Point
	// Text is what a key, hold_key or type action presses or types.
	Text string
	// ScrollDirection and ScrollAmount are a scroll's.
	ScrollDirection ScrollDirection
	ScrollAmount    int
	// Duration is how long a wait or hold_key lasts; it is sent in
	// milliseconds, as the official SDK sends it.
	Duration time.Duration
	// Extra holds fields this package does not know, sent and read as
	// they are.
	Extra map[string]any
}

func (a ComputerAction) wire() (gen.ComputerUseAction, error) {
	if a.Type == "" {
		return gen.ComputerUseAction{}, invalidf("box: a ComputerAction needs a Type")
	}
	if a.Duration < 0 || a.ScrollAmount < 0 {
		return gen.ComputerUseAction{}, invalidf("box: a ComputerAction's Duration and ScrollAmount must not be negative")
	}
	w := gen.ComputerUseAction{Type: string(a.Type), AdditionalProperties: map[string]any{}}
	for k, v := range a.Extra {
		w.AdditionalProperties[k] = v
	}
	if a.Coordinate != nil {
		w.AdditionalProperties["coordinate"] = []int{a.Coordinate.X, a.Coordinate.Y}
	}
	if a.StartCoordinate != nil {
		w.AdditionalProperties["start_coordinate"] = []int{a.StartCoordinate.X, a.StartCoordinate.Y}
	}
	if a.Text != "" {
		w.AdditionalProperties["text"] = a.Text
	}
	if a.ScrollDirection != "" {
		w.AdditionalProperties["scroll_direction"] = string(a.ScrollDirection)
	}
	if a.ScrollAmount != 0 {
		w.AdditionalProperties["scroll_amount"] = a.ScrollAmount
	}
	if a.Duration != 0 {
		w.AdditionalProperties["duration"] = max(1, a.Duration.Milliseconds())
	}
	return w, nil
}

// actionFrom reads an action a server sent; fields it cannot read stay
// in Extra.
func actionFrom(w gen.ComputerUseAction) ComputerAction {
	a := ComputerAction{Type: ComputerActionType(w.Type)}
	for k, v := range w.AdditionalProperties {
		ok := true
		switch k {
		case "coordinate":
			a.Coordinate, ok = pointFrom(v)
		case "start_coordinate":
			a.StartCoordinate, ok = pointFrom(v)
		case "text":
			a.Text, ok = v.(string)
		case "scroll_direction":
			var s string
			s, ok = v.(string)
			a.ScrollDirection = ScrollDirection(s)
		case "scroll_amount":
			var f float64
			f, ok = v.(float64)
			a.ScrollAmount = int(f)
		case "duration":
			var f float64
			f, ok = v.(float64)
			a.Duration = time.Duration(f * float64(time.Millisecond))
		default:
			ok = false
		}
		if !ok {
			if a.Extra == nil {
				a.Extra = map[string]any{}
			}
			a.Extra[k] = v
		}
	}
	return a
}

// pointFrom reads a [x, y] pair, or an {"x": …, "y": …} object.
func pointFrom(v any) (*image.Point, bool) {
	switch v := v.(type) {
	case []any:
		if len(v) == 2 {
			x, okx := v[0].(float64)
			y, oky := v[1].(float64)
			if okx && oky {
				return &image.Point{X: int(x), Y: int(y)}, true
			}
		}
	case map[string]any:
		x, okx := v["x"].(float64)
		y, oky := v["y"].(float64)
		if okx && oky {
			return &image.Point{X: int(x), Y: int(y)}, true
		}
	}
	return nil, false
}

// ComputerActionResult is the result of one computer-use action.
type ComputerActionResult struct {
	OK bool
	// Message says why the action failed, or what it reports.
	Message string
	// Screenshot is the PNG a screenshot action took.
	Screenshot []byte
	// Cursor is where a cursor_position action found the pointer.
	Cursor *image.Point
	// Data is the result's data as the server sent it.
	Data json.RawMessage
}

func resultFrom(r gen.DesktopActionResult) ComputerActionResult {
	out := ComputerActionResult{OK: r.Ok, Message: deref(r.Message)}
	if r.Data == nil {
		return out
	}
	out.Data, _ = json.Marshal(r.Data)
	switch v := r.Data.(type) {
	case string:
		if png, err := base64.StdEncoding.DecodeString(v); err == nil {
			out.Screenshot = png
		}
	default:
		out.Cursor, _ = pointFrom(v)
	}
	return out
}

// DesktopAgent lets a computer-use model drive a desktop. Its calls are
// metered: they need an Anthropic key on the box or the account.
type DesktopAgent struct{ d *Desktop }

// DesktopAgentParams configures a model call; nil means the server's
// model.
type DesktopAgentParams struct {
	Model Model
	// MaxSteps bounds [DesktopAgent.Run]: 1 to 30, zero is 12.
	MaxSteps int
}

// DesktopActResult is what [DesktopAgent.Act] did.
type DesktopActResult struct {
	// Actions are the actions the model chose, which were performed.
	Actions []ComputerAction
	// Reasoning is what the model said of them.
	Reasoning string
	// Screenshot is the PNG the model saw, when the server returns it.
	Screenshot []byte
	Usage      Usage
}

// Act shows the model a screenshot and instruction, performs the actions
// it answers with, and returns them (POST
// /v2/box/{id}/desktop/agent/act).
func (a *DesktopAgent) Act(ctx context.Context, instruction string, p *DesktopAgentParams, opts ...Option) (*DesktopActResult, error) {
	ctx = withCallOptions(ctx, opts)
	if err := a.d.check(); err != nil {
		return nil, err
	}
	if instruction == "" {
		return nil, invalidf("box: Act needs an instruction")
	}
	body := gen.DesktopAgentActRequest{Instruction: instruction}
	if p != nil {
		body.Model = nonEmpty(string(p.Model))
	}
	r, err := call[gen.DesktopAgentActResponse](a.d.b.c.api.DesktopAgentAct(ctx, a.d.b.id, body))
	if err != nil {
		return nil, err
	}
	out := &DesktopActResult{Reasoning: deref(r.Reasoning), Usage: Usage{InputTokens: deref(r.InputTokens), OutputTokens: deref(r.OutputTokens)}}
	for _, w := range r.Actions {
		out.Actions = append(out.Actions, actionFrom(w))
	}
	if r.Screenshot != nil {
		out.Screenshot = r.Screenshot.Data
	}
	return out, nil
}

// DesktopStep is one step of [DesktopAgent.Run].
type DesktopStep struct {
	Step      int
	Reasoning string
	Actions   []ComputerAction
}

// DesktopRun is what [DesktopAgent.Run] did.
type DesktopRun struct {
	// Result is the model's final answer.
	Result string
	// Completed is false when the run stopped at its step limit.
	Completed bool
	Steps     []DesktopStep
	StepCount int
	Usage     Usage
}

// Run lets the model drive the desktop for prompt, a screenshot and a
// batch of actions at a time, until it is done or p.MaxSteps is reached
// (POST /v2/box/{id}/desktop/agent/run). The official SDK waits up to
// 600 s.
func (a *DesktopAgent) Run(ctx context.Context, prompt string, p *DesktopAgentParams, opts ...Option) (*DesktopRun, error) {
	ctx = withCallOptions(ctx, opts)
	if err := a.d.check(); err != nil {
		return nil, err
	}
	if prompt == "" {
		return nil, invalidf("box: Run needs a prompt")
	}
	body := gen.DesktopAgentRunRequest{Prompt: prompt}
	if p != nil {
		body.Model = nonEmpty(string(p.Model))
		if p.MaxSteps < 0 || p.MaxSteps > 30 {
			return nil, invalidf("box: DesktopAgentParams.MaxSteps must be 1 to 30, got %d", p.MaxSteps)
		}
		if p.MaxSteps != 0 {
			body.MaxSteps = ptr(p.MaxSteps)
		}
	}
	r, err := call[gen.DesktopAgentRunResponse](a.d.b.c.api.DesktopAgentRun(ctx, a.d.b.id, body))
	if err != nil {
		return nil, err
	}
	out := &DesktopRun{Result: deref(r.Result), Completed: deref(r.Completed), StepCount: deref(r.StepCount), Usage: Usage{InputTokens: deref(r.InputTokens), OutputTokens: deref(r.OutputTokens)}}
	for _, s := range r.Steps {
		st := DesktopStep{Step: s.Step, Reasoning: deref(s.Reasoning)}
		for _, w := range s.Actions {
			st.Actions = append(st.Actions, actionFrom(w))
		}
		out.Steps = append(out.Steps, st)
	}
	return out, nil
}
