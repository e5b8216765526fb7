package desktop

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/wire"
)

// maxActions bounds one batch.
const maxActions = 100

// maxWait bounds a wait or a held key.
const maxWait = 30 * time.Second

// DesktopActions runs a batch of computer-use actions, in order, and
// answers with one result each. After an action fails, the rest are not
// run, and their results say so.
func (ds *Desktops) DesktopActions(ctx context.Context, req gen.DesktopActionsRequestObject) (gen.DesktopActionsResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("a body with actions is required")
	}
	if n := len(req.Body.Actions); n == 0 || n > maxActions {
		return nil, errdefs.Invalid("actions: 1 to %d actions, got %d", maxActions, n)
	}
	b, rt, s, err := ds.on(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	defer ds.host.Busy(b.ID)()
	results := ds.perform(ctx, rt, s, req.Body.Actions)
	return gen.DesktopActions200JSONResponse{Results: results}, nil
}

// perform runs actions on the desktop s of the box rt reaches.
func (ds *Desktops) perform(ctx context.Context, rt *agent.Client, s *session, actions []gen.ComputerUseAction) []gen.DesktopActionResult {
	results := make([]gen.DesktopActionResult, len(actions))
	failed := false
	for i, a := range actions {
		if failed {
			results[i] = gen.DesktopActionResult{Ok: false, Message: wire.Ptr("not run: an earlier action failed")}
			continue
		}
		data, err := act(ctx, rt, s, a)
		if err != nil {
			failed = true
			results[i] = gen.DesktopActionResult{Ok: false, Message: wire.Ptr(fmt.Sprintf("%s: %v", a.Type, err))}
			continue
		}
		results[i] = gen.DesktopActionResult{Ok: true, Data: data}
	}
	return results
}

// act performs one action and returns its result's data.
func act(ctx context.Context, rt *agent.Client, s *session, a gen.ComputerUseAction) (any, error) {
	f := fields(a.AdditionalProperties)
	at, hasAt, err := f.point("coordinate")
	if err != nil {
		return nil, err
	}
	if hasAt {
		if err := point(at[0], at[1], s.width, s.height); err != nil {
			return nil, err
		}
	}
	click := func(btn string, n int) (any, error) {
		var args []string
		if hasAt {
			args = moveArgs(at[0], at[1])
		}
		_, err := xdotool(ctx, rt, append(args, "click", "--repeat", strconv.Itoa(n), "--delay", "80", btn)...)
		return nil, err
	}
	switch a.Type {
	case "key", "hold_key":
		text, err := f.text()
		if err != nil {
			return nil, err
		}
		c, err := chord(splitChord(text))
		if err != nil {
			return nil, err
		}
		if a.Type == "key" {
			_, err = xdotool(ctx, rt, "key", "--clearmodifiers", c)
			return nil, err
		}
		d, err := f.duration()
		if err != nil {
			return nil, err
		}
		_, err = xdotool(ctx, rt, "keydown", c, "sleep", strconv.FormatFloat(d.Seconds(), 'f', 3, 64), "keyup", c)
		return nil, err
	case "type":
		text, err := f.text()
		if err != nil {
			return nil, err
		}
		if len(text) > maxType {
			return nil, fmt.Errorf("text: at most %d bytes", maxType)
		}
		return nil, typeText(ctx, rt, text, 12*time.Millisecond)
	case "cursor_position":
		p, err := cursor(ctx, rt)
		if err != nil {
			return nil, err
		}
		return map[string]int{"x": p.X, "y": p.Y}, nil
	case "mouse_move":
		if !hasAt {
			return nil, fmt.Errorf("coordinate is required")
		}
		_, err := xdotool(ctx, rt, moveArgs(at[0], at[1])...)
		return nil, err
	case "left_mouse_down", "left_mouse_up":
		var args []string
		if hasAt {
			args = moveArgs(at[0], at[1])
		}
		verb := "mousedown"
		if a.Type == "left_mouse_up" {
			verb = "mouseup"
		}
		_, err := xdotool(ctx, rt, append(args, verb, "1")...)
		return nil, err
	case "left_click":
		return click("1", 1)
	case "right_click":
		return click("3", 1)
	case "middle_click":
		return click("2", 1)
	case "double_click":
		return click("1", 2)
	case "triple_click":
		return click("1", 3)
	case "left_click_drag":
		from, ok, err := f.point("start_coordinate")
		if err != nil {
			return nil, err
		}
		if !ok || !hasAt {
			return nil, fmt.Errorf("start_coordinate and coordinate are required")
		}
		if err := point(from[0], from[1], s.width, s.height); err != nil {
			return nil, err
		}
		args := append(moveArgs(from[0], from[1]), "mousedown", "1", "sleep", "0.05")
		args = append(append(args, moveArgs(at[0], at[1])...), "sleep", "0.05", "mouseup", "1")
		_, err = xdotool(ctx, rt, args...)
		return nil, err
	case "scroll":
		dir, _ := f["scroll_direction"].(string)
		amount := 1
		if v, ok := f["scroll_amount"]; ok {
			n, isNum := v.(float64)
			if !isNum || n != float64(int(n)) {
				return nil, fmt.Errorf("scroll_amount must be a whole number")
			}
			amount = int(n)
		}
		var where *[2]int
		if hasAt {
			where = &at
		}
		args, err := scrollArgs(dir, amount, where)
		if err != nil {
			return nil, err
		}
		_, err = xdotool(ctx, rt, args...)
		return nil, err
	case "wait":
		d, err := f.duration()
		if err != nil {
			return nil, err
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "screenshot":
		png, err := screenshot(ctx, rt, true)
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString(png), nil
	}
	return nil, fmt.Errorf("unknown action type %q", a.Type)
}

// fields are an action's fields besides its type.
type fields map[string]any

// point reads the [x, y] pair under key.
func (f fields) point(key string) ([2]int, bool, error) {
	v, ok := f[key]
	if !ok || v == nil {
		return [2]int{}, false, nil
	}
	xy, isList := v.([]any)
	if !isList || len(xy) != 2 {
		return [2]int{}, false, fmt.Errorf("%s must be [x, y]", key)
	}
	var out [2]int
	for i, c := range xy {
		n, isNum := c.(float64)
		if !isNum || n != float64(int(n)) {
			return [2]int{}, false, fmt.Errorf("%s must be [x, y] in whole pixels", key)
		}
		out[i] = int(n)
	}
	return out, true, nil
}

func (f fields) text() (string, error) {
	t, ok := f["text"].(string)
	if !ok || t == "" {
		return "", fmt.Errorf("text is required")
	}
	return t, nil
}

// duration reads a wait's or a held key's duration: milliseconds from
// 100 up (the official SDK's examples send 300), seconds below that
// (Anthropic's tool speaks in seconds).
func (f fields) duration() (time.Duration, error) {
	n, ok := f["duration"].(float64)
	if !ok || n < 0 {
		return 0, fmt.Errorf("duration is required, a number not below zero")
	}
	d := time.Duration(n * float64(time.Second))
	if n >= 100 {
		d = time.Duration(n * float64(time.Millisecond))
	}
	if d > maxWait {
		return 0, fmt.Errorf("duration: at most %v", maxWait)
	}
	return d, nil
}
