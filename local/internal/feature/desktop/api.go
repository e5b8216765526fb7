package desktop

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

var ok = gen.DesktopOK{Ok: wire.Ptr(true)}

// DesktopStart starts the box's desktop, or reports the one that runs.
func (ds *Desktops) DesktopStart(ctx context.Context, req gen.DesktopStartRequestObject) (gen.DesktopStartResponseObject, error) {
	body := cmp.Or(req.Body, &gen.DesktopStartRequest{})
	w, h := wire.DerefOr(body.Width, 1280), wire.DerefOr(body.Height, 800)
	if w < 640 || w > 3840 || h < 480 || h > 2160 {
		return nil, errdefs.Invalid("the screen must be 640 to 3840 wide and 480 to 2160 high, got %dx%d", w, h)
	}
	open := wire.Deref(body.Open)
	if open != "" {
		if err := checkURL(open); err != nil {
			return nil, err
		}
	}
	b, rt, err := ds.box(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	defer ds.host.Busy(b.ID)()
	unlock := ds.lock(b.ID)
	defer unlock()
	ds.mu.Lock()
	s := ds.boxes[b.ID]
	ds.mu.Unlock()
	if s != nil && s.running() {
		if open != "" {
			if err := ds.openURL(ctx, rt, open); err != nil {
				return nil, err
			}
		}
		return gen.DesktopStart200JSONResponse{Running: true, Width: &s.width, Height: &s.height, Opened: wire.NonEmpty(open)}, nil
	}
	s, err = ds.start(ctx, b, rt, w, h, open)
	if err != nil {
		return nil, err
	}
	ds.mu.Lock()
	ds.boxes[b.ID] = s
	ds.mu.Unlock()
	return gen.DesktopStart200JSONResponse{Running: true, Width: &w, Height: &h, Opened: wire.NonEmpty(open)}, nil
}

// checkURL accepts the URLs a desktop opens: http, https, file and
// about:blank.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file" && s != "about:blank") || (u.Scheme != "file" && u.Host == "" && s != "about:blank") {
		return errdefs.Invalid("open: %q is not an http, https or file URL", s)
	}
	return nil
}

// openURL opens a URL in the desktop's Chromium, as a new tab of the one
// that runs.
func (ds *Desktops) openURL(ctx context.Context, rt *agent.Client, target string) error {
	_, err := x(ctx, rt, "", 1<<20, "sh", "-c", `"$1" --user-data-dir="${TMPDIR:-/tmp}/.boxd-desktop-chromium" --no-sandbox "$2" >/dev/null 2>&1 &`, "sh", ds.cfg.ChromiumPath, target)
	return err
}

// DesktopStop stops the box's desktop.
func (ds *Desktops) DesktopStop(ctx context.Context, req gen.DesktopStopRequestObject) (gen.DesktopStopResponseObject, error) {
	b, err := ds.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if !b.Desktop {
		return nil, errdefs.Conflict("the box has no desktop; create it with desktop: true")
	}
	unlock := ds.lock(b.ID)
	defer unlock()
	ds.mu.Lock()
	s := ds.boxes[b.ID]
	delete(ds.boxes, b.ID)
	ds.mu.Unlock()
	if s != nil {
		s.stop()
		<-s.exited
		// The agent kills what the session started once its request has
		// gone, which the session's end does not wait for: Stop answers
		// when the desktop's processes are gone.
		if rt, running := ds.host.Running(b.ID); running {
			if err := waitGone(ctx, rt); err != nil {
				return nil, err
			}
		}
		ds.host.Logf(b.ID, "info", "system", "desktop stopped")
	}
	return gen.DesktopStop200JSONResponse(ok), nil
}

// waitGone waits until none of the desktop's processes runs in the box
// (at most 10 seconds), and kills those that are left then.
func waitGone(ctx context.Context, rt *agent.Client) error {
	script := `for p in Xvfb openbox x11vnc; do pgrep -x "$p"; done; true`
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, err := x(ctx, rt, "", 1<<20, "sh", "-c", script)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(out)) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			_, err := x(ctx, rt, "", 1<<20, "sh", "-c", `pkill -KILL -x Xvfb; pkill -KILL -x openbox; pkill -KILL -x x11vnc; true`)
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// processNames are the desktop's processes that status reports, by the
// name each has in the box.
var processNames = []string{"Xvfb", "openbox", "x11vnc", "chromium"}

// DesktopStatus reports the box's desktop.
func (ds *Desktops) DesktopStatus(ctx context.Context, req gen.DesktopStatusRequestObject) (gen.DesktopStatusResponseObject, error) {
	b, err := ds.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if !b.Desktop {
		return nil, errdefs.Conflict("the box has no desktop; create it with desktop: true")
	}
	ds.mu.Lock()
	s := ds.boxes[b.ID]
	ds.mu.Unlock()
	if s == nil || !s.running() {
		return gen.DesktopStatus200JSONResponse{Running: false, Streaming: false}, nil
	}
	b, rt, err := ds.box(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	procs := map[string]bool{}
	for _, name := range processNames {
		_, err := x(ctx, rt, "", 1<<20, "pgrep", "-x", name)
		procs[name] = err == nil
	}
	ds.mu.Lock()
	streaming := s.view != nil
	ds.mu.Unlock()
	return gen.DesktopStatus200JSONResponse{Running: true, Streaming: streaming, Display: wire.Ptr(Display), Width: &s.width, Height: &s.height, Processes: procs}, nil
}

// on returns the box and its agent when its desktop runs, and the
// session.
func (ds *Desktops) on(ctx context.Context, id string) (*store.Box, *agent.Client, *session, error) {
	b, rt, err := ds.box(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := ds.running(b.ID)
	if err != nil {
		return nil, nil, nil, err
	}
	return b, rt, s, nil
}

// DesktopScreenshot takes a screenshot.
func (ds *Desktops) DesktopScreenshot(ctx context.Context, req gen.DesktopScreenshotRequestObject) (gen.DesktopScreenshotResponseObject, error) {
	b, rt, _, err := ds.on(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	defer ds.host.Busy(b.ID)()
	png, err := screenshot(ctx, rt, wire.DerefOr(req.Params.Cursor, true))
	if err != nil {
		return nil, err
	}
	return gen.DesktopScreenshot200JSONResponse{Data: png}, nil
}

// DesktopScreen reports the screen's size and the pointer.
func (ds *Desktops) DesktopScreen(ctx context.Context, req gen.DesktopScreenRequestObject) (gen.DesktopScreenResponseObject, error) {
	b, rt, _, err := ds.on(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	defer ds.host.Busy(b.ID)()
	w, h, err := geometry(ctx, rt)
	if err != nil {
		return nil, err
	}
	at, err := cursor(ctx, rt)
	if err != nil {
		return nil, err
	}
	return gen.DesktopScreen200JSONResponse{Width: w, Height: h, Cursor: gen.DesktopPoint{X: at.X, Y: at.Y}}, nil
}

// do runs xdotool with args on the running desktop of box id, after check
// has accepted the screen's size.
func (ds *Desktops) do(ctx context.Context, id string, check func(s *session) error, args ...string) error {
	b, rt, s, err := ds.on(ctx, id)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(s); err != nil {
			return err
		}
	}
	defer ds.host.Busy(b.ID)()
	_, err = xdotool(ctx, rt, args...)
	return err
}

func onScreen(x, y int) func(*session) error {
	return func(s *session) error { return point(x, y, s.width, s.height) }
}

// DesktopMouseMove moves the pointer.
func (ds *Desktops) DesktopMouseMove(ctx context.Context, req gen.DesktopMouseMoveRequestObject) (gen.DesktopMouseMoveResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("a body with x and y is required")
	}
	if err := ds.do(ctx, req.ID, onScreen(req.Body.X, req.Body.Y), moveArgs(req.Body.X, req.Body.Y)...); err != nil {
		return nil, err
	}
	return gen.DesktopMouseMove200JSONResponse(ok), nil
}

// DesktopMouseClick clicks.
func (ds *Desktops) DesktopMouseClick(ctx context.Context, req gen.DesktopMouseClickRequestObject) (gen.DesktopMouseClickResponseObject, error) {
	body := cmp.Or(req.Body, &gen.DesktopClickRequest{})
	btn, err := button(string(wire.Deref(body.Button)))
	if err != nil {
		return nil, err
	}
	count := wire.DerefOr(body.Count, 1)
	if count < 1 || count > 3 {
		return nil, errdefs.Invalid("count must be 1 to 3, got %d", count)
	}
	if (body.X == nil) != (body.Y == nil) {
		return nil, errdefs.Invalid("x and y go together")
	}
	var args []string
	var check func(*session) error
	if body.X != nil {
		args = moveArgs(*body.X, *body.Y)
		check = onScreen(*body.X, *body.Y)
	}
	args = append(args, "click", "--repeat", strconv.Itoa(count), "--delay", "80", btn)
	if err := ds.do(ctx, req.ID, check, args...); err != nil {
		return nil, err
	}
	return gen.DesktopMouseClick200JSONResponse(ok), nil
}

// DesktopMouseDrag drags.
func (ds *Desktops) DesktopMouseDrag(ctx context.Context, req gen.DesktopMouseDragRequestObject) (gen.DesktopMouseDragResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("a body with from and to is required")
	}
	body := req.Body
	btn, err := button(string(wire.Deref(body.Button)))
	if err != nil {
		return nil, err
	}
	from, to := body.From, body.To
	check := func(s *session) error {
		return cmp.Or(point(from.X, from.Y, s.width, s.height), point(to.X, to.Y, s.width, s.height))
	}
	args := append(moveArgs(from.X, from.Y), "mousedown", btn, "sleep", "0.05")
	args = append(append(args, moveArgs(to.X, to.Y)...), "sleep", "0.05", "mouseup", btn)
	if err := ds.do(ctx, req.ID, check, args...); err != nil {
		return nil, err
	}
	return gen.DesktopMouseDrag200JSONResponse(ok), nil
}

// DesktopMousePress presses a button.
func (ds *Desktops) DesktopMousePress(ctx context.Context, req gen.DesktopMousePressRequestObject) (gen.DesktopMousePressResponseObject, error) {
	btn, err := button(string(wire.Deref(cmp.Or(req.Body, &gen.DesktopButtonRequest{}).Button)))
	if err != nil {
		return nil, err
	}
	if err := ds.do(ctx, req.ID, nil, "mousedown", btn); err != nil {
		return nil, err
	}
	return gen.DesktopMousePress200JSONResponse(ok), nil
}

// DesktopMouseRelease releases a button.
func (ds *Desktops) DesktopMouseRelease(ctx context.Context, req gen.DesktopMouseReleaseRequestObject) (gen.DesktopMouseReleaseResponseObject, error) {
	btn, err := button(string(wire.Deref(cmp.Or(req.Body, &gen.DesktopButtonRequest{}).Button)))
	if err != nil {
		return nil, err
	}
	if err := ds.do(ctx, req.ID, nil, "mouseup", btn); err != nil {
		return nil, err
	}
	return gen.DesktopMouseRelease200JSONResponse(ok), nil
}

// scrollButtons are the X buttons that scroll.
var scrollButtons = map[string]string{"up": "4", "down": "5", "left": "6", "right": "7"}

// maxScroll bounds one scroll's steps.
const maxScroll = 100

func scrollArgs(direction string, amount int, at *[2]int) ([]string, error) {
	btn, found := scrollButtons[direction]
	if !found {
		return nil, errdefs.Invalid("direction must be up, down, left or right, got %q", direction)
	}
	if amount < 1 || amount > maxScroll {
		return nil, errdefs.Invalid("amount must be 1 to %d, got %d", maxScroll, amount)
	}
	var args []string
	if at != nil {
		args = moveArgs(at[0], at[1])
	}
	return append(args, "click", "--repeat", strconv.Itoa(amount), "--delay", "20", btn), nil
}

// DesktopMouseScroll scrolls.
func (ds *Desktops) DesktopMouseScroll(ctx context.Context, req gen.DesktopMouseScrollRequestObject) (gen.DesktopMouseScrollResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("a body with a direction is required")
	}
	body := req.Body
	if (body.X == nil) != (body.Y == nil) {
		return nil, errdefs.Invalid("x and y go together")
	}
	var at *[2]int
	var check func(*session) error
	if body.X != nil {
		at = &[2]int{*body.X, *body.Y}
		check = onScreen(*body.X, *body.Y)
	}
	args, err := scrollArgs(string(body.Direction), wire.DerefOr(body.Amount, 1), at)
	if err != nil {
		return nil, err
	}
	if err := ds.do(ctx, req.ID, check, args...); err != nil {
		return nil, err
	}
	return gen.DesktopMouseScroll200JSONResponse(ok), nil
}

// maxType bounds the text one call types.
const maxType = 64 << 10

// typeText types text on the box's display, delay between keys.
func typeText(ctx context.Context, rt *agent.Client, text string, delay time.Duration) error {
	_, err := x(ctx, rt, text, 1<<20, "xdotool", "type", "--delay", strconv.FormatInt(delay.Milliseconds(), 10), "--file", "-")
	return err
}

// DesktopKeyboardType types text.
func (ds *Desktops) DesktopKeyboardType(ctx context.Context, req gen.DesktopKeyboardTypeRequestObject) (gen.DesktopKeyboardTypeResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("a body with text is required")
	}
	text, delay := req.Body.Text, wire.DerefOr(req.Body.DelayMs, 12)
	if len(text) > maxType {
		return nil, errdefs.TooLarge("text: at most %d bytes", maxType)
	}
	if delay < 0 || delay > 1000 {
		return nil, errdefs.Invalid("delay_ms must be 0 to 1000, got %d", delay)
	}
	b, rt, _, err := ds.on(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	defer ds.host.Busy(b.ID)()
	if err := typeText(ctx, rt, text, time.Duration(delay)*time.Millisecond); err != nil {
		return nil, err
	}
	return gen.DesktopKeyboardType200JSONResponse(ok), nil
}

// DesktopKeyboardPress presses a key or a chord.
func (ds *Desktops) DesktopKeyboardPress(ctx context.Context, req gen.DesktopKeyboardPressRequestObject) (gen.DesktopKeyboardPressResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("a body with keys is required")
	}
	var keys []string
	if one, err := req.Body.Keys.AsDesktopKeys0(); err == nil {
		keys = []string{one}
	} else if many, err := req.Body.Keys.AsDesktopKeys1(); err == nil {
		keys = many
	} else {
		return nil, errdefs.Invalid("keys must be a key or a list of keys")
	}
	c, err := chord(keys)
	if err != nil {
		return nil, err
	}
	if err := ds.do(ctx, req.ID, nil, "key", "--clearmodifiers", c); err != nil {
		return nil, err
	}
	return gen.DesktopKeyboardPress200JSONResponse(ok), nil
}

// DesktopOpen opens a URL or a file in the desktop's Chromium.
func (ds *Desktops) DesktopOpen(ctx context.Context, req gen.DesktopOpenRequestObject) (gen.DesktopOpenResponseObject, error) {
	if req.Body == nil || req.Body.Target == "" {
		return nil, errdefs.Invalid("target is required")
	}
	target := req.Body.Target
	if target[0] == '/' {
		target = (&url.URL{Scheme: "file", Path: target}).String()
	}
	if err := checkURL(target); err != nil {
		return nil, err
	}
	b, rt, _, err := ds.on(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	defer ds.host.Busy(b.ID)()
	if err := ds.openURL(ctx, rt, target); err != nil {
		return nil, err
	}
	return gen.DesktopOpen200JSONResponse(ok), nil
}

// launchable are the programs a desktop launches, by the name clients
// give; each must be on the host's PATH.
var launchable = []string{"chromium", "xterm", "xeyes", "xclock", "xcalc"}

// DesktopLaunch starts a program on the desktop.
func (ds *Desktops) DesktopLaunch(ctx context.Context, req gen.DesktopLaunchRequestObject) (gen.DesktopLaunchResponseObject, error) {
	if req.Body == nil || req.Body.App == "" {
		return nil, errdefs.Invalid("app is required")
	}
	app := req.Body.App
	allowed := false
	for _, a := range launchable {
		if a == app {
			if _, err := exec.LookPath(a); err == nil {
				allowed = true
			}
		}
	}
	if !allowed {
		return nil, errdefs.Invalid("app %q cannot be launched here; this boxd launches %v where installed", app, launchable)
	}
	argv := []string{"sh", "-c", `"$@" >/dev/null 2>&1 &`, "sh", app}
	if app == "chromium" {
		argv = append(argv, "--no-sandbox", "--user-data-dir=/tmp/.boxd-desktop-chromium")
	}
	argv = append(argv, req.Body.Args...)
	b, rt, _, err := ds.on(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	defer ds.host.Busy(b.ID)()
	if _, err := x(ctx, rt, "", 1<<20, argv...); err != nil {
		return nil, fmt.Errorf("launch %s: %w", app, err)
	}
	return gen.DesktopLaunch200JSONResponse(ok), nil
}
