package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// Action is a concrete step on a page that can be replayed without a
// model: a method applied to the element a selector finds.
type Action struct {
	// Selector is a CSS selector, or an XPath with the prefix "xpath=" (or
	// starting with "/"). A "css=" prefix is accepted too.
	Selector    string   `json:"selector"`
	Description string   `json:"description"`
	Method      string   `json:"method,omitempty"`
	Arguments   []string `json:"arguments,omitempty"`
}

// ErrNoElement is returned when no element matches an action's selector.
var ErrNoElement = errors.New("no element matches the selector")

// UnsupportedError is an action the browser cannot replay.
type UnsupportedError struct{ Msg string }

func (e *UnsupportedError) Error() string { return e.Msg }

// Methods lists the methods Perform knows, for prompts and errors.
var Methods = []string{"click", "doubleClick", "hover", "fill", "type", "press", "selectOption", "check", "uncheck", "focus", "scrollIntoView"}

// canonicalMethod maps a method name, in any case and a few common
// spellings, to one of Methods.
func canonicalMethod(m string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(m)) {
	case "", "click":
		return "click", true
	case "doubleclick", "dblclick":
		return "doubleClick", true
	case "hover", "mouseover":
		return "hover", true
	case "fill", "setvalue":
		return "fill", true
	case "type", "sendkeys":
		return "type", true
	case "press", "presskey", "keypress":
		return "press", true
	case "selectoption", "select", "selectoptionfromdropdown":
		return "selectOption", true
	case "check":
		return "check", true
	case "uncheck":
		return "uncheck", true
	case "focus":
		return "focus", true
	case "scrollintoview", "scrollto", "scroll":
		return "scrollIntoView", true
	}
	return "", false
}

// CheckAction reports whether an action can be replayed: it has a
// selector, a known method and the arguments that method needs.
func CheckAction(a Action) error {
	if strings.TrimSpace(a.Selector) == "" {
		return &UnsupportedError{"the action has no selector"}
	}
	m, ok := canonicalMethod(a.Method)
	if !ok {
		return &UnsupportedError{fmt.Sprintf("method %q is not supported; use one of %s", a.Method, strings.Join(Methods, ", "))}
	}
	switch m {
	case "fill", "type", "press", "selectOption":
		if len(a.Arguments) == 0 {
			return &UnsupportedError{fmt.Sprintf("method %s needs an argument", m)}
		}
	}
	if m == "press" {
		if _, err := keyOf(a.Arguments[0]); err != nil {
			return err
		}
	}
	return nil
}

// findJS is a function that returns the element a selector finds, or null.
const findJS = `(sel) => {
	let s = sel.trim(), xpath = false;
	if (s.startsWith('xpath=')) { s = s.slice(6); xpath = true; }
	else if (s.startsWith('css=')) { s = s.slice(4); }
	else if (s.startsWith('/') || s.startsWith('(')) { xpath = true; }
	if (xpath) return document.evaluate(s, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
	return document.querySelector(s);
}`

// locateJS scrolls the element into view and reports where it is.
const locateJS = `((find, sel) => {
	const el = find(sel);
	if (!el) return null;
	if (el.scrollIntoView) el.scrollIntoView({block: 'center', inline: 'center'});
	const r = el.getBoundingClientRect();
	return {x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height,
		tag: el.tagName.toLowerCase(), checked: !!el.checked};
})(%s, %s)`

type located struct {
	X, Y, W, H float64
	Tag        string
	Checked    bool
}

// elementJS runs body with el bound to the element of sel.
func elementJS(sel, body string) string {
	return fmt.Sprintf(`((find, sel) => { const el = find(sel); if (!el) throw new Error('no element matches the selector'); %s })(%s, %s)`, body, findJS, jsString(sel))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Perform replays an action in a tab. It waits up to 5 seconds for the
// element to appear, and afterwards for a navigation the action started
// to load (the page a script of it redirects to included). It returns the
// JavaScript dialogs that boxd dismissed for it (at most 20): those that
// opened meanwhile, or stood open when it began, in the tab or in a page
// that shares its renderer (see begin).
func (c *Controller) Perform(ctx context.Context, id string, a Action) ([]Dialog, error) {
	if err := CheckAction(a); err != nil {
		return nil, err
	}
	t, ctx, err := c.begin(ctx, id, true)
	if err != nil {
		return nil, err
	}
	err = c.opErr(ctx, t.perform(ctx, a))
	return c.end(t), err
}

func (t *tab) perform(ctx context.Context, a Action) error {
	method, _ := canonicalMethod(a.Method)
	octx := t.opContext(ctx)
	var loc *located
	deadline := time.Now().Add(5 * time.Second)
	for {
		loc = nil
		err := t.eval(ctx, fmt.Sprintf(locateJS, findJS, jsString(a.Selector)), &loc)
		var ex *chromedp.ExceptionError
		if errors.As(err, &ex) {
			return &UnsupportedError{fmt.Sprintf("invalid selector %q", a.Selector)}
		}
		if err != nil {
			return err
		}
		if loc != nil || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if loc == nil {
		return fmt.Errorf("%w %q", ErrNoElement, a.Selector)
	}

	// A navigation the action starts is waited for: subscribe first.
	wctx, stop := context.WithCancel(octx)
	defer stop()
	lifecycle := chromedp.Events(wctx, page.LifecycleEvent)

	visible := loc.W > 0 && loc.H > 0
	click := func(opts ...chromedp.MouseOption) error {
		if !visible {
			return t.eval(ctx, elementJS(a.Selector, `el.click(); return null;`), nil)
		}
		if err := chromedp.Do(octx, chromedp.MouseEvent(chromedp.MouseMoved, loc.X, loc.Y)); err != nil {
			return err
		}
		return chromedp.Do(octx, chromedp.MouseClickXY(loc.X, loc.Y, opts...))
	}
	var err error
	switch method {
	case "click":
		err = click()
	case "doubleClick":
		if err = click(); err == nil {
			err = click(chromedp.ClickCount(2))
		}
	case "hover":
		err = chromedp.Do(octx, chromedp.MouseEvent(chromedp.MouseMoved, loc.X, loc.Y))
	case "focus", "scrollIntoView":
		if method == "focus" {
			err = t.eval(ctx, elementJS(a.Selector, `el.focus(); return null;`), nil)
		}
	case "fill":
		err = t.eval(ctx, elementJS(a.Selector, `el.focus();
			if (el.select) { el.select(); }
			else if (el.isContentEditable) { const r = document.createRange(); r.selectNodeContents(el); const s = getSelection(); s.removeAllRanges(); s.addRange(r); }
			return null;`), nil)
		if err == nil {
			if a.Arguments[0] == "" {
				err = chromedp.Do(octx, chromedp.KeyEvent(kb.Delete))
			} else {
				_, err = chromedp.Call(octx, input.InsertText, input.InsertTextParams{Text: a.Arguments[0]})
			}
		}
	case "type":
		err = t.eval(ctx, elementJS(a.Selector, `el.focus();
			if (typeof el.value === 'string' && el.setSelectionRange) { try { el.setSelectionRange(el.value.length, el.value.length); } catch (e) {} }
			return null;`), nil)
		if err == nil {
			_, err = chromedp.Call(octx, input.InsertText, input.InsertTextParams{Text: a.Arguments[0]})
		}
	case "press":
		key, _ := keyOf(a.Arguments[0])
		if err = t.eval(ctx, elementJS(a.Selector, `el.focus(); return null;`), nil); err == nil {
			err = chromedp.Do(octx, chromedp.KeyEvent(key))
		}
	case "selectOption":
		var ok bool
		err = t.eval(ctx, elementJS(a.Selector, fmt.Sprintf(`const want = %s;
			if (!el.options) throw new Error('the element is not a select');
			const o = Array.from(el.options).find(o => o.value === want || o.label.trim() === want || o.text.trim() === want);
			if (!o) return false;
			el.value = o.value;
			el.dispatchEvent(new Event('input', {bubbles: true}));
			el.dispatchEvent(new Event('change', {bubbles: true}));
			return true;`, jsString(a.Arguments[0]))), &ok)
		if err == nil && !ok {
			return &UnsupportedError{fmt.Sprintf("the select has no option %q", a.Arguments[0])}
		}
	case "check", "uncheck":
		if loc.Checked != (method == "check") {
			err = click()
		}
	}
	if err != nil {
		var ex *chromedp.ExceptionError
		if errors.As(err, &ex) {
			return &UnsupportedError{fmt.Sprintf("%s on %q failed: %v", method, a.Selector, err)}
		}
		return err
	}
	t.settle(wctx, lifecycle, stop)
	return nil
}

// settle waits briefly (300 ms) for a navigation of the tab's page that an
// action may have started, and if one starts, for the load of the
// document it leads to, at most 15 seconds. stop ends lifecycle, the
// page's lifecycle events since before the action, which end with ctx.
func (t *tab) settle(ctx context.Context, lifecycle iter.Seq2[page.EventLifecycleEvent, error], stop context.CancelFunc) {
	frame := cdp.FrameID(t.id) // a page's main frame has its target's id
	var started atomic.Bool
	quiet := time.AfterFunc(300*time.Millisecond, func() {
		if !started.Load() {
			stop()
		}
	})
	defer quiet.Stop()
	limit := time.AfterFunc(15*time.Second, stop)
	defer limit.Stop()
	noted := func(yield func(page.EventLifecycleEvent, error) bool) {
		for ev, err := range lifecycle {
			if err == nil && ev.FrameID == frame && ev.Name == "init" {
				started.Store(true)
			}
			if !yield(ev, err) {
				return
			}
		}
	}
	_ = reached(ctx, noted, frame, "", "load") // ends with the page, or with stop
}

// keyOf maps a key name (as Playwright and DOM spell them) or a single
// character to what chromedp.KeyEvent sends.
func keyOf(name string) (string, error) {
	named := map[string]string{
		"enter": kb.Enter, "return": kb.Enter, "tab": kb.Tab, "escape": kb.Escape, "esc": kb.Escape,
		"backspace": kb.Backspace, "delete": kb.Delete, "arrowup": kb.ArrowUp, "arrowdown": kb.ArrowDown,
		"arrowleft": kb.ArrowLeft, "arrowright": kb.ArrowRight, "home": kb.Home, "end": kb.End,
		"pageup": kb.PageUp, "pagedown": kb.PageDown, "space": " ",
	}
	if k, ok := named[strings.ToLower(name)]; ok {
		return k, nil
	}
	if r := []rune(name); len(r) == 1 {
		return name, nil
	}
	return "", &UnsupportedError{fmt.Sprintf("key %q is not supported", name)}
}

// Exists reports whether an element matches selector in a tab now.
func (c *Controller) Exists(ctx context.Context, id, selector string) (bool, error) {
	t, ctx, err := c.begin(ctx, id, false)
	if err != nil {
		return false, err
	}
	defer c.end(t)
	var ok bool
	err = t.eval(ctx, fmt.Sprintf(`!!(%s)(%s)`, findJS, jsString(selector)), &ok)
	var ex *chromedp.ExceptionError
	if errors.As(err, &ex) {
		return false, nil
	}
	return ok, c.opErr(ctx, err)
}
