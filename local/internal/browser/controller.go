package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// ErrNoTab is returned for a tab id that is not an open tab.
var ErrNoTab = errors.New("no such tab")

// ErrClosed is returned once the connection to the browser is gone.
var ErrClosed = errors.New("the connection to the browser is closed")

// NavigationError is a navigation that the browser could not complete, for
// example because the host does not resolve or the network policy
// refused it.
type NavigationError struct {
	URL  string
	Text string // Chromium's error, e.g. net::ERR_CONNECTION_REFUSED
}

func (e *NavigationError) Error() string {
	return fmt.Sprintf("navigating to %s failed: %s", e.URL, e.Text)
}

// TimeoutError is a navigation that did not reach its wait condition in
// time.
type TimeoutError struct {
	URL     string
	Wait    string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("navigating to %s: %q was not reached within %s", e.URL, e.Wait, e.Timeout)
}

// Tab is what the browser reports about a page target.
type Tab struct {
	ID    string
	URL   string
	Title string
}

// Link is a link of a page.
type Link struct {
	Text string `json:"text"`
	Href string `json:"href"`
}

// Content is the readable content of a page.
type Content struct {
	Title string `json:"title"`
	URL   string `json:"url"`
	Text  string `json:"text"`
	Links []Link `json:"links"`
}

// Wait conditions of a navigation.
const (
	WaitLoad             = "load"
	WaitDOMContentLoaded = "domcontentloaded"
	WaitNetworkIdle      = "networkidle"
)

// lifecycleName maps a wait condition to Chromium's lifecycle event.
var lifecycleName = map[string]string{
	WaitLoad:             "load",
	WaitDOMContentLoaded: "DOMContentLoaded",
	WaitNetworkIdle:      "networkIdle",
}

// Controller is a connection to one browser. Its methods are safe for
// concurrent use; operations on one tab run one at a time.
type Controller struct {
	root       context.Context // the chromedp context of the browser
	cancelRoot context.CancelFunc
	cancelLife context.CancelFunc

	dialogs *dialogWatch // the JavaScript dialogs of every page; set once Connect returns

	mu     sync.Mutex
	tabs   map[string]*tab     // the tabs boxd is attached to
	pages  map[string]struct{} // every page target the browser has
	used   []string            // open tabs by last use: the foreground is the last
	closed bool
}

// tab is a page target boxd is attached to.
type tab struct {
	id     string
	ctx    context.Context // chromedp context attached to the target
	cancel context.CancelFunc
	ready  chan struct{} // closed when the attach has finished
	err    error         // the attach's outcome, once ready

	op     sync.Mutex // one page operation at a time
	stopOp func()     // ends the context of the operation that holds op
	cast   *caster    // the tab's screencast, while someone watches
}

// Dialog is a JavaScript dialog that a page opened, and boxd dismissed.
type Dialog struct {
	Type    string `json:"type"` // alert, confirm, prompt or beforeunload
	Message string `json:"message"`
}

// maxDialogs bounds the dialogs one operation reports.
const maxDialogs = 20

// Connect attaches to the browser whose DevTools listen at host (as the
// browser sees it, e.g. "127.0.0.1:9222") with the WebSocket path of its
// browser target, reached through dial.
func Connect(ctx context.Context, dial Dialer, host, path string) (*Controller, error) {
	life, cancelLife := context.WithCancel(context.Background())
	alloc := &allocator{life: life, dial: dial, host: host, path: path}
	actx, _ := chromedp.NewAllocatorContext(life, alloc)
	quiet := func(string, ...any) {}
	root, cancelRoot := chromedp.NewContext(actx, chromedp.WithBrowserOption(
		chromedp.WithBrowserLogf(quiet), chromedp.WithBrowserErrorf(quiet)))
	c := &Controller{root: root, cancelRoot: cancelRoot, cancelLife: cancelLife, tabs: map[string]*tab{}, pages: map[string]struct{}{}}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.CallBrowser(withValues(cctx, root), browser.GetVersion, cdp.Empty{}); err != nil {
		c.Close()
		return nil, err
	}
	// Follow the page targets before discovery starts: it reports the
	// targets that exist already, then every change.
	if err := chromedp.ListenBrowser(root, c.targetEvent); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := cdp.Call(cctx, c.session(), target.SetDiscoverTargets, target.SetDiscoverTargetsParams{Discover: true}); err != nil {
		c.Close()
		return nil, err
	}
	// Losing the watch loses the connection to the browser, as losing
	// chromedp's does: boxd connects anew.
	d, err := watchDialogs(cctx, dial, host, path, cancelRoot)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.dialogs = d
	return c, nil
}

// withValues returns ctx carrying the chromedp context of from, so that a
// call made with it runs on from's browser or target but ends with ctx.
func withValues(ctx, from context.Context) context.Context {
	return valueCtx{Context: ctx, from: from}
}

type valueCtx struct {
	context.Context
	from context.Context
}

func (v valueCtx) Value(key any) any {
	if x := v.from.Value(key); x != nil {
		return x
	}
	return v.Context.Value(key)
}

// session is the browser-level DevTools session.
func (c *Controller) session() cdp.Session { return chromedp.FromContext(c.root).Browser }

// Done is closed when the connection to the browser is lost or Close was
// called.
func (c *Controller) Done() <-chan struct{} { return c.root.Done() }

// Close detaches from the browser. It does not close the browser.
func (c *Controller) Close() {
	c.mu.Lock()
	c.closed = true
	tabs := c.tabs
	c.tabs = map[string]*tab{}
	c.mu.Unlock()
	// Close the connections first, so that detaching the tabs does not
	// wait for answers that cannot come.
	if c.dialogs != nil {
		c.dialogs.close()
	}
	c.cancelLife()
	for _, t := range tabs {
		if cs := c.takeCast(t); cs != nil {
			cs.stop()
		}
		t.cancel()
	}
	c.cancelRoot()
}

// targetEvent follows the browser's page targets, in the order the
// browser reports them: a new page (opened by a program driving the
// browser over CDP, or by a page) comes to the foreground, and a closed
// one is forgotten. It runs in the connection's read loop: it must not
// block.
func (c *Controller) targetEvent(ev any) {
	switch ev := ev.(type) {
	case *target.EventTargetCreated:
		if ev.TargetInfo == nil || ev.TargetInfo.Type != "page" {
			return
		}
		id := string(ev.TargetInfo.TargetID)
		c.mu.Lock()
		if _, known := c.pages[id]; !known {
			c.pages[id] = struct{}{}
			if !slices.Contains(c.used, id) {
				c.used = append(c.used, id)
			}
		}
		c.mu.Unlock()
	case *target.EventTargetDestroyed:
		c.forget(string(ev.TargetID))
	}
}

// forget drops a closed tab.
func (c *Controller) forget(id string) {
	c.mu.Lock()
	t := c.tabs[id]
	delete(c.tabs, id)
	delete(c.pages, id)
	c.used = slices.DeleteFunc(c.used, func(x string) bool { return x == id })
	c.mu.Unlock()
	if t != nil {
		go func() {
			if cs := c.takeCast(t); cs != nil {
				cs.stop()
			}
			t.cancel()
		}()
	}
}

// Touch brings a tab to the foreground (what recordings and a live view
// without a tab show). An id that is not an open tab is ignored.
func (c *Controller) Touch(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, page := c.pages[id]
	if c.tabs[id] == nil && !page {
		return
	}
	c.used = slices.DeleteFunc(c.used, func(x string) bool { return x == id })
	c.used = append(c.used, id)
}

// Foreground returns the tab in the foreground: the last one used (after
// a tab closes, the one used before it), or else any open tab, or "" when
// there is none.
func (c *Controller) Foreground(ctx context.Context) string {
	c.mu.Lock()
	if n := len(c.used); n > 0 {
		fg := c.used[n-1]
		c.mu.Unlock()
		return fg
	}
	c.mu.Unlock()
	tabs, err := c.Tabs(ctx)
	if err != nil || len(tabs) == 0 {
		return ""
	}
	c.Touch(tabs[0].ID)
	return tabs[0].ID
}

// Tabs lists the browser's tabs (page targets).
func (c *Controller) Tabs(ctx context.Context) ([]Tab, error) {
	res, err := cdp.Call(ctx, c.session(), target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		return nil, c.wrap(err)
	}
	var out []Tab
	for _, ti := range res.TargetInfos {
		if ti.Type == "page" {
			out = append(out, Tab{ID: string(ti.TargetID), URL: ti.URL, Title: ti.Title})
		}
	}
	return out, nil
}

// wrap turns the errors of a lost connection into ErrClosed.
func (c *Controller) wrap(err error) error {
	if err != nil && c.root.Err() != nil {
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return err
}

// attach returns the tab with id, attaching to it the first time.
func (c *Controller) attach(ctx context.Context, id string) (*tab, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	t := c.tabs[id]
	if t == nil {
		c.mu.Unlock()
		info, err := cdp.Call(ctx, c.session(), target.GetTargetInfo, target.GetTargetInfoParams{TargetID: target.ID(id)})
		if err != nil || info.TargetInfo == nil || info.TargetInfo.Type != "page" {
			if err := c.wrap(err); errors.Is(err, ErrClosed) {
				return nil, err
			}
			return nil, ErrNoTab
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if t = c.tabs[id]; t == nil {
			// Ending the context detaches from the tab and leaves it
			// open: boxd closes tabs with CloseTab only.
			tctx, cancel := chromedp.NewContext(c.root, chromedp.WithTargetID(target.ID(id)), chromedp.WithDetachOnCancel())
			t = &tab{id: id, ctx: tctx, cancel: cancel, ready: make(chan struct{})}
			c.tabs[id] = t
			go func() {
				// The attach binds the target's event loop to the
				// context it runs with, so it runs with the tab's own
				// context; a watchdog ends it if the browser hangs.
				dog := time.AfterFunc(30*time.Second, func() { go cancel() })
				t.err = chromedp.Do(tctx)
				dog.Stop()
				close(t.ready)
			}()
		}
	}
	c.mu.Unlock()
	select {
	case <-t.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if t.err != nil {
		c.mu.Lock()
		if c.tabs[id] == t {
			delete(c.tabs, id)
		}
		c.mu.Unlock()
		go t.cancel()
		if ctx.Err() == nil && c.root.Err() == nil && !c.exists(ctx, id) {
			return nil, ErrNoTab // closed while boxd attached to it
		}
		return nil, c.wrap(t.err)
	}
	return t, nil
}

// begin starts an operation on tab id. From now until end, boxd dismisses
// the JavaScript dialogs (alert, confirm, prompt, beforeunload) that block
// the tab, those of the tab and of the pages that share its renderer, and
// first those that stand open: a dialog blocks every page of its renderer,
// boxd's attach to the tab included. Dialogs that open while boxd does not
// use a page are left to the CDP client that caused them.
//
// begin attaches to the tab the first time, brings it to the foreground if
// front is set, and waits for the operation that runs on it. It returns
// the context to run the operation with: ctx, which also ends, with the
// cause ErrNoTab, when boxd's attach to the tab does, as it does when the
// tab closes. A command on a tab boxd has detached from would wait for an
// answer that never comes. opErr gives the operation's error.
func (c *Controller) begin(ctx context.Context, id string, front bool) (*tab, context.Context, error) {
	t, err := c.attachHeld(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if front {
		c.Touch(id)
	}
	t.op.Lock()
	octx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(t.ctx, func() { cancel(ErrNoTab) })
	t.stopOp = func() {
		stop()
		cancel(nil)
	}
	return t, octx, nil
}

// attachHeld is attach under a hold of the tab's dialogs (see begin), so
// that a dialog standing open in the tab, or in a page that shares its
// renderer, does not block the attach. Unless it fails, the caller ends
// the hold with c.dialogs.release(id).
func (c *Controller) attachHeld(ctx context.Context, id string) (*tab, error) {
	c.dialogs.hold(id)
	t, err := c.attach(ctx, id)
	if err != nil {
		c.dialogs.release(id)
		return nil, err
	}
	return t, nil
}

// end ends the operation begun on t and returns the dialogs dismissed
// meanwhile.
func (c *Controller) end(t *tab) []Dialog {
	t.stopOp()
	d := c.dialogs.release(t.id)
	t.op.Unlock()
	return d
}

// opErr is wrap for the error of an operation begun with ctx (see begin).
// An operation whose tab closed meanwhile fails with ErrNoTab, whichever
// way its commands learnt it: the end of ctx, the browser detaching
// boxd's session, or the end of the tab's events.
func (c *Controller) opErr(ctx context.Context, err error) error {
	err = c.wrap(err)
	switch {
	case err == nil, errors.Is(err, ErrClosed), errors.Is(err, ErrNoTab):
		return err
	case errors.Is(context.Cause(ctx), ErrNoTab), errors.Is(err, chromedp.ErrTargetDetached):
		return ErrNoTab
	}
	return err
}

// opContext is the context of one operation on t: it carries t's
// chromedp context and ends with ctx.
func (t *tab) opContext(ctx context.Context) context.Context { return withValues(ctx, t.ctx) }

// NewTab opens a tab and navigates it to url; see Goto for waitUntil and
// timeout. A tab whose navigation fails is closed again.
func (c *Controller) NewTab(ctx context.Context, url, waitUntil string, timeout time.Duration) (Tab, error) {
	res, err := cdp.Call(ctx, c.session(), target.CreateTarget, target.CreateTargetParams{URL: "about:blank", NewWindow: ptr(true)})
	if err != nil {
		return Tab{}, c.wrap(err)
	}
	id := string(res.TargetID)
	t, octx, err := c.begin(ctx, id, true)
	if err != nil {
		_ = c.CloseTab(context.WithoutCancel(ctx), id)
		return Tab{}, err
	}
	defer c.end(t)
	if url != "" && url != "about:blank" {
		if err := t.navigate(octx, url, waitUntil, timeout); err != nil {
			// The navigation's error, told before the close below ends
			// the operation's context, which would make it ErrNoTab.
			err = c.opErr(octx, err)
			_ = c.CloseTab(context.WithoutCancel(ctx), id)
			return Tab{}, err
		}
	}
	var cur struct {
		URL   string `json:"url"`
		Title string `json:"title"`
	}
	if err := t.eval(octx, `({url: location.href, title: document.title})`, &cur); err != nil {
		return Tab{}, c.opErr(octx, err)
	}
	return Tab{ID: id, URL: cur.URL, Title: cur.Title}, nil
}

// Raise brings tab id's window to the front of the screen, for a browser
// with a display (a desktop's): a window it opens may be stacked under
// the ones it had.
func (c *Controller) Raise(ctx context.Context, id string) error {
	if _, err := cdp.Call(ctx, c.session(), target.ActivateTarget, target.ActivateTargetParams{TargetID: target.ID(id)}); err != nil {
		if err := c.wrap(err); errors.Is(err, ErrClosed) {
			return err
		}
		return ErrNoTab
	}
	return nil
}

// CloseTab closes a tab.
func (c *Controller) CloseTab(ctx context.Context, id string) error {
	res, err := cdp.Call(ctx, c.session(), target.GetTargetInfo, target.GetTargetInfoParams{TargetID: target.ID(id)})
	if err != nil || res.TargetInfo == nil || res.TargetInfo.Type != "page" {
		if err := c.wrap(err); errors.Is(err, ErrClosed) {
			return err
		}
		return ErrNoTab
	}
	c.forget(id)
	if _, err := cdp.Call(ctx, c.session(), target.CloseTarget, target.CloseTargetParams{TargetID: target.ID(id)}); err != nil {
		return c.wrap(err)
	}
	// Chromium answers before the target is gone: wait (briefly) until it
	// is, so that the tab is not found right after.
	for range 50 {
		if !c.exists(ctx, id) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// exists reports whether a page target id exists.
func (c *Controller) exists(ctx context.Context, id string) bool {
	res, err := cdp.Call(ctx, c.session(), target.GetTargetInfo, target.GetTargetInfoParams{TargetID: target.ID(id)})
	return err == nil && res.TargetInfo != nil && res.TargetInfo.Type == "page"
}

// Goto navigates a tab to url and returns the page's content. waitUntil is
// one of the Wait constants ("" means load); timeout bounds the wait (0
// means none beyond ctx).
func (c *Controller) Goto(ctx context.Context, id, url, waitUntil string, timeout time.Duration) (*Content, error) {
	t, ctx, err := c.begin(ctx, id, true)
	if err != nil {
		return nil, err
	}
	defer c.end(t)
	if err := t.navigate(ctx, url, waitUntil, timeout); err != nil {
		return nil, c.opErr(ctx, err)
	}
	out, err := t.content(ctx)
	return out, c.opErr(ctx, err)
}

// navigate loads url in t and waits for waitUntil.
func (t *tab) navigate(ctx context.Context, url, waitUntil string, timeout time.Duration) error {
	if waitUntil == "" {
		waitUntil = WaitLoad
	}
	want, ok := lifecycleName[waitUntil]
	if !ok {
		return fmt.Errorf("wait_until must be load, domcontentloaded or networkidle, not %q", waitUntil)
	}
	octx, cancel := context.WithCancel(t.opContext(ctx))
	defer cancel()
	if timeout > 0 {
		octx, cancel = context.WithTimeout(octx, timeout)
		defer cancel()
	}
	events := chromedp.Events(octx, page.LifecycleEvent)
	res, err := chromedp.Call(octx, page.Navigate, page.NavigateParams{URL: url})
	if err != nil {
		return t.timeoutErr(ctx, octx, err, url, waitUntil, timeout)
	}
	if res.ErrorText != "" {
		return &NavigationError{URL: url, Text: res.ErrorText}
	}
	if res.LoaderID == "" {
		return nil // within the document (a fragment)
	}
	if err := reached(octx, events, res.FrameID, res.LoaderID, want); err != nil {
		return t.timeoutErr(ctx, octx, err, url, waitUntil, timeout)
	}
	return nil
}

// reached follows the lifecycle events of a frame until the document of a
// navigation reaches the event want (Chromium's name, such as "load").
// loader is the navigation's document, or "" for the next document the
// frame starts. A script may send the page on before the event (with
// location.replace, or a redirect on DOMContentLoaded): that document
// never reaches it, and the navigation ends when the document that
// replaced it does.
//
// It returns the error of events, which end with ctx, their context. When
// they end without one, it returns the cause of ctx's end if it ended (the
// subscription ends with ctx, a moment before the iterator may see it),
// and else ErrNoTab: a tab's events end when boxd's attach to it does, as
// it does when the tab closes (or when the connection to the browser
// ends, which wrap tells).
func reached(ctx context.Context, events iter.Seq2[page.EventLifecycleEvent, error], frame cdp.FrameID, loader cdp.LoaderID, want string) error {
	for ev, err := range events {
		if err != nil {
			return err
		}
		if ev.FrameID != frame {
			continue
		}
		switch {
		case ev.Name == "init" && ev.LoaderID != loader:
			loader = ev.LoaderID
		case loader != "" && ev.LoaderID == loader && ev.Name == want:
			return nil
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return ErrNoTab
}

func (t *tab) timeoutErr(ctx, octx context.Context, err error, url, wait string, timeout time.Duration) error {
	if ctx.Err() == nil && errors.Is(octx.Err(), context.DeadlineExceeded) {
		return &TimeoutError{URL: url, Wait: wait, Timeout: timeout}
	}
	return err
}

// eval evaluates a JavaScript expression in t and decodes its JSON value
// into dst. Promises are awaited.
func (t *tab) eval(ctx context.Context, expr string, dst any) error {
	raw, err := chromedp.Run(t.opContext(ctx), chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return err
	}
	if dst == nil {
		return nil
	}
	return json.Unmarshal(raw, dst)
}

// Content returns a tab's readable content.
func (c *Controller) Content(ctx context.Context, id string) (*Content, error) {
	t, ctx, err := c.begin(ctx, id, true)
	if err != nil {
		return nil, err
	}
	defer c.end(t)
	out, err := t.content(ctx)
	return out, c.opErr(ctx, err)
}

// contentJS reads the title, URL, visible text and links (deduplicated, at
// most maxLinks) of the page.
const contentJS = `(() => {
	const links = [], seen = new Set();
	for (const a of document.querySelectorAll('a[href]')) {
		const href = a.href;
		if (!href || href.startsWith('javascript:')) continue;
		const text = (a.innerText || a.textContent || '').replace(/\s+/g, ' ').trim();
		const key = text + '\n' + href;
		if (seen.has(key)) continue;
		seen.add(key);
		links.push({text, href});
		if (links.length >= 1000) break;
	}
	return {title: document.title, url: location.href, text: document.body ? document.body.innerText : '', links};
})()`

func (t *tab) content(ctx context.Context) (*Content, error) {
	var out Content
	if err := t.eval(ctx, contentJS, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Screenshot returns a PNG of a tab's viewport, or of the whole page when
// fullPage is set, in CSS pixels.
func (c *Controller) Screenshot(ctx context.Context, id string, fullPage bool) ([]byte, error) {
	t, ctx, err := c.begin(ctx, id, true)
	if err != nil {
		return nil, err
	}
	defer c.end(t)
	octx := t.opContext(ctx)
	p := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng, FromSurface: ptr(true)}
	if fullPage {
		m, err := chromedp.Call(octx, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return nil, c.opErr(ctx, err)
		}
		if m.CSSContentSize == nil {
			return nil, errors.New("the browser did not report the page's size")
		}
		w, h := math.Ceil(m.CSSContentSize.Width), math.Ceil(m.CSSContentSize.Height)
		p.CaptureBeyondViewport = ptr(true)
		p.Clip = &page.Viewport{X: 0, Y: 0, Width: w, Height: h, Scale: 1}
	}
	res, err := chromedp.Call(octx, page.CaptureScreenshot, p)
	if err != nil {
		return nil, c.opErr(ctx, err)
	}
	return res.Data, nil
}

func ptr[T any](v T) *T { return &v }
