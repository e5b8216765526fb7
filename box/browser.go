package box

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/upstash/box-go/gen"
)

// ErrNoBrowser is returned, before any request, by every browser call on a
// box that was created with neither [CreateParams].Browser nor
// [CreateParams].Desktop.
var ErrNoBrowser = errors.New("box: this box has no browser; create it with Browser: true, or with Desktop: true to drive the desktop's Chromium")

// ErrNoSelector is returned, before any request, by [Tab.ActOn] for an
// action without a selector: only a resolved action can be replayed.
// Like every error of a call's arguments it matches ErrInvalid too.
var ErrNoSelector = invalidSentinel("box: the action has no Selector, so it cannot be replayed; use Tab.Act with an instruction")

// Browser is the headless Chromium of a box created with Browser: true,
// or, on a box created with Desktop: true (and not Browser), the desktop's
// own Chromium, once [Desktop.Start] has started it: its calls then fail
// with a 409 [*Error] while the desktop is stopped. Recordings are of a
// Browser: true box's Chromium only. Tab management lives here; page
// operations live on [Tab].
type Browser struct {
	b *Box
	// Tabs opens tabs.
	Tabs *Tabs
	// Recordings records videos of the browser.
	Recordings *Recordings
}

func newBrowser(b *Box) *Browser {
	br := &Browser{b: b}
	br.Tabs = &Tabs{br: br}
	br.Recordings = &Recordings{br: br}
	return br
}

// check refuses a box without a browser before any request.
func (br *Browser) check() error {
	if info := br.b.Info(); !info.Browser && !info.Desktop {
		return ErrNoBrowser
	}
	return nil
}

// WaitUntil is the point of a page load that a navigation waits for.
type WaitUntil string

// Navigation wait conditions.
const (
	WaitLoad             WaitUntil = "load"
	WaitDOMContentLoaded WaitUntil = "domcontentloaded"
	WaitNetworkIdle      WaitUntil = "networkidle"
)

// NoTimeout as TabParams.Timeout lets a navigation wait as long as ctx
// allows.
const NoTimeout time.Duration = -1

// TabParams configures the first navigation of a new tab; nil means load
// and 30 seconds.
type TabParams struct {
	// WaitUntil is what to wait for (default WaitLoad).
	WaitUntil WaitUntil
	// Timeout bounds the navigation (0: the server's 30 s; NoTimeout:
	// none). It is sent in milliseconds.
	Timeout time.Duration
}

// Tabs opens tabs in a box's browser.
type Tabs struct{ br *Browser }

// Create opens a tab at url (POST /v2/box/{id}/browser/tabs) and waits for
// the page as p says. The tab is in the foreground: it is what a
// recording or a live view without a tab shows.
func (ts *Tabs) Create(ctx context.Context, url string, p *TabParams, opts ...Option) (*Tab, error) {
	ctx = withCallOptions(ctx, opts)
	br := ts.br
	if err := br.check(); err != nil {
		return nil, err
	}
	body := gen.CreateBrowserTabRequest{URL: url}
	if p != nil {
		if p.WaitUntil != "" {
			body.WaitUntil = ptr(gen.CreateBrowserTabRequestWaitUntil(p.WaitUntil))
		}
		switch {
		case p.Timeout == NoTimeout:
			body.Timeout = ptr(int64(0))
		case p.Timeout < 0:
			return nil, invalidf("box: TabParams.Timeout must not be negative (use NoTimeout for none)")
		case p.Timeout > 0:
			body.Timeout = ptr(max(1, p.Timeout.Milliseconds()))
		}
	}
	r, err := call[gen.BrowserTab](br.b.c.api.CreateBrowserTab(ctx, br.b.id, body))
	if err != nil {
		return nil, err
	}
	return &Tab{br: br, id: r.ID, url: deref(r.URL), title: deref(r.Title)}, nil
}

// NewTab is Tabs.Create.
func (br *Browser) NewTab(ctx context.Context, url string, p *TabParams, opts ...Option) (*Tab, error) {
	ctx = withCallOptions(ctx, opts)
	return br.Tabs.Create(ctx, url, p)
}

// ListTabs returns the browser's open tabs, including those a CDP client
// opened.
func (br *Browser) ListTabs(ctx context.Context, opts ...Option) ([]*Tab, error) {
	ctx = withCallOptions(ctx, opts)
	if err := br.check(); err != nil {
		return nil, err
	}
	r, err := call[gen.BrowserTabsResponse](br.b.c.api.ListBrowserTabs(ctx, br.b.id))
	if err != nil {
		return nil, err
	}
	out := make([]*Tab, len(r.Tabs))
	for i, t := range r.Tabs {
		out[i] = &Tab{br: br, id: t.ID, url: deref(t.URL), title: deref(t.Title)}
	}
	return out, nil
}

// GetTab returns a handle to the tab with id, without a request: its URL
// and title are empty until Goto or Content.
func (br *Browser) GetTab(id string) *Tab { return &Tab{br: br, id: id} }

// CDPURL returns a WebSocket URL of the Chrome DevTools Protocol for the
// box's browser (POST /v2/box/{id}/browser/connect), to drive it with
// Playwright's connectOverCDP, chromedp or Puppeteer. The URL carries its
// own short-lived token and needs no API key: treat it as a secret.
func (br *Browser) CDPURL(ctx context.Context, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	if err := br.check(); err != nil {
		return "", err
	}
	r, err := call[gen.BrowserConnectResponse](br.b.c.api.BrowserConnect(withIdempotent(ctx), br.b.id))
	if err != nil {
		return "", err
	}
	return r.CDPURL, nil
}

// Tab is a handle to one tab of a box's browser. Its methods are safe for
// concurrent use; the browser runs the operations of one tab one at a
// time.
type Tab struct {
	br *Browser
	id string

	mu         sync.Mutex
	url, title string
}

// ID returns the tab's id (a CDP target id).
func (t *Tab) ID() string { return t.id }

// URL returns the tab's URL as last reported (at creation, listing, Goto
// or Content). It makes no request.
func (t *Tab) URL() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.url
}

// Title returns the tab's title as last reported. It makes no request.
func (t *Tab) Title() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.title
}

func (t *Tab) check() error {
	if err := t.br.check(); err != nil {
		return err
	}
	if t.id == "" {
		return invalidf("box: the tab id is empty")
	}
	return nil
}

// BrowserContent is a page's readable content.
type BrowserContent struct {
	Title string
	URL   string
	// Text is the page's visible text.
	Text string
	// Links are the page's links, with absolute URLs.
	Links []BrowserLink
}

// BrowserLink is a link of a page.
type BrowserLink struct {
	Text string
	Href string
}

func (t *Tab) content(c *gen.BrowserContent) *BrowserContent {
	out := &BrowserContent{Title: c.Title, URL: c.URL, Text: c.Text, Links: make([]BrowserLink, len(c.Links))}
	for i, l := range c.Links {
		// A server of the desktop branch's wire names a link {t, h}.
		text, href := l.Text, l.Href
		if text == "" {
			text = deref(l.T)
		}
		if href == "" {
			href = deref(l.H)
		}
		out.Links[i] = BrowserLink{Text: text, Href: href}
	}
	t.mu.Lock()
	t.url, t.title = c.URL, c.Title
	t.mu.Unlock()
	return out
}

// Goto navigates the tab to url, waits for its load event (at most 30 s)
// and returns the page's content (POST /v2/box/{id}/browser/goto).
func (t *Tab) Goto(ctx context.Context, url string, opts ...Option) (*BrowserContent, error) {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return nil, err
	}
	r, err := call[gen.BrowserContent](t.br.b.c.api.BrowserGoto(ctx, t.br.b.id, gen.BrowserGotoRequest{Tab: ptr(t.id), URL: url}))
	if err != nil {
		return nil, err
	}
	return t.content(r), nil
}

// Content returns the page's content (GET /v2/box/{id}/browser/content).
func (t *Tab) Content(ctx context.Context, opts ...Option) (*BrowserContent, error) {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return nil, err
	}
	r, err := call[gen.BrowserContent](t.br.b.c.api.GetBrowserContent(ctx, t.br.b.id, &gen.GetBrowserContentParams{Tab: ptr(t.id)}))
	if err != nil {
		return nil, err
	}
	return t.content(r), nil
}

// ScreenshotParams configures a screenshot; nil means the viewport.
type ScreenshotParams struct {
	// FullPage captures the whole scrollable page.
	FullPage bool
}

// Screenshot returns a PNG of the tab (GET /v2/box/{id}/browser/screenshot).
func (t *Tab) Screenshot(ctx context.Context, p *ScreenshotParams, opts ...Option) ([]byte, error) {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return nil, err
	}
	params := &gen.BrowserScreenshotParams{Tab: t.id, Encoding: ptr(gen.BrowserScreenshotParamsEncodingBase64)}
	if p != nil && p.FullPage {
		params.FullPage = ptr(true)
	}
	r, err := call[gen.BrowserScreenshot](t.br.b.c.api.BrowserScreenshot(ctx, t.br.b.id, params))
	if err != nil {
		return nil, err
	}
	return r.Data, nil
}

// ScreenshotBase64 is Screenshot, with the PNG base64-encoded.
func (t *Tab) ScreenshotBase64(ctx context.Context, p *ScreenshotParams, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	png, err := t.Screenshot(ctx, p)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(png), nil
}

// AIParams configures an AI operation (Extract, Observe, Act); nil means
// the box's model, else anthropic/claude-sonnet-4-5.
type AIParams struct {
	Model Model
}

func (p *AIParams) model() *string {
	if p == nil || p.Model == "" {
		return nil
	}
	return ptr(string(p.Model))
}

// Extract asks the model for data from the page that matches a raw JSON
// schema (POST /v2/box/{id}/browser/extract) and returns it as decoded
// JSON (a map for an object), checked against the schema here too. For a
// Go type, use the function [Extract]. It is metered.
func (t *Tab) Extract(ctx context.Context, instruction string, schema map[string]any, p *AIParams, opts ...Option) (any, error) {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return nil, err
	}
	if schema == nil {
		return nil, invalidf("box: Extract needs a schema")
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, invalidf("box: schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, invalidf("box: schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, invalidf("box: invalid JSON schema: %w", err)
	}
	var out any
	if err := t.extract(ctx, instruction, schema, rs, &out, p); err != nil {
		return nil, err
	}
	return out, nil
}

// Extract asks the model for data from the tab's page as a T: the JSON
// schema sent is derived from T as [SchemaFor] does, and the answer is
// checked against it and decoded here (a mismatch is an *OutputError). It
// is metered.
func Extract[T any](ctx context.Context, t *Tab, instruction string, p *AIParams, opts ...Option) (T, error) {
	ctx = withCallOptions(ctx, opts)
	var zero T
	if err := t.check(); err != nil {
		return zero, err
	}
	schema, rs, err := schemaFor(reflect.TypeFor[T]())
	if err != nil {
		return zero, err
	}
	var v T
	if err := t.extract(ctx, instruction, schema, rs, &v, p); err != nil {
		return zero, err
	}
	return v, nil
}

func (t *Tab) extract(ctx context.Context, instruction string, schema map[string]any, rs *jsonschema.Resolved, dst any, p *AIParams) error {
	r, err := call[gen.BrowserExtractResponse](t.br.b.c.api.BrowserExtract(ctx, t.br.b.id, gen.BrowserExtractRequest{
		Tab: ptr(t.id), Instruction: instruction, Schema: schema, Model: p.model(),
	}))
	if err != nil {
		return err
	}
	data, err := json.Marshal(r.Data)
	if err != nil {
		return fmt.Errorf("box: extract: %w", err)
	}
	return decodeOutput(string(data), rs, dst)
}

// BrowserAction is a resolved step on a page that [Tab.ActOn] replays
// without a model: Method (click by default, or fill, type, press,
// hover, selectOption, check, uncheck, focus, doubleClick,
// scrollIntoView) on the element Selector finds (CSS, or XPath with the
// prefix "xpath=").
type BrowserAction struct {
	Selector    string
	Description string
	Method      string
	Arguments   []string
}

// Action returns a itself, so that a BrowserAction is [Replayable].
func (a BrowserAction) Action() BrowserAction { return a }

// BrowserElement is an element [Tab.Observe] found, with the action it
// proposes.
type BrowserElement struct {
	Description string
	Selector    string
	// URL is the target of a link.
	URL       string
	Method    string
	Arguments []string
}

// Action returns the element's proposed action, to replay with
// [Tab.ActOn].
func (e BrowserElement) Action() BrowserAction {
	return BrowserAction{Selector: e.Selector, Description: e.Description, Method: e.Method, Arguments: e.Arguments}
}

// Replayable is what [Tab.ActOn] replays: a [BrowserAction] or a
// [BrowserElement].
type Replayable interface {
	Action() BrowserAction
}

// ActResult is what an act did.
type ActResult struct {
	Success           bool
	Message           string
	ActionDescription string
	// Actions are the steps taken, each replayable with ActOn.
	Actions []BrowserAction
	// CacheStatus is "HIT" when an instruction was answered from the
	// server's cache (no tokens), "MISS" when a model was asked, "" for a
	// replay.
	CacheStatus  string
	InputTokens  int64
	OutputTokens int64
	// Dialogs are the JavaScript dialogs that stood in the action's way
	// (at most 20): those the page opened while it ran, one already open
	// when it began, and those of a popup of the page or of its opener,
	// which block it too. The server dismissed them, as Playwright does
	// when nothing handles them: an alert is closed, a confirm answers
	// false, a prompt null, and a beforeunload keeps the page.
	Dialogs []Dialog
}

// Dialog is a JavaScript dialog that a page opened.
type Dialog struct {
	Type    string // alert, confirm, prompt or beforeunload
	Message string
}

// Observe asks the model for the elements of the page that match
// instruction (POST /v2/box/{id}/browser/observe); each carries an action
// that ActOn replays without a model. It is metered.
func (t *Tab) Observe(ctx context.Context, instruction string, p *AIParams, opts ...Option) ([]BrowserElement, error) {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return nil, err
	}
	r, err := call[gen.BrowserObserveResponse](t.br.b.c.api.BrowserObserve(ctx, t.br.b.id, gen.BrowserObserveRequest{
		Tab: ptr(t.id), Instruction: instruction, Model: p.model(),
	}))
	if err != nil {
		return nil, err
	}
	out := make([]BrowserElement, len(r.Elements))
	for i, e := range r.Elements {
		out[i] = BrowserElement{Description: e.Description, Selector: deref(e.Selector), URL: deref(e.URL), Method: deref(e.Method), Arguments: e.Arguments}
	}
	return out, nil
}

// Act has the model carry out instruction on the page (POST
// /v2/box/{id}/browser/act). It is metered, unless the server answers
// from its cache. An instruction no element can carry out is an ActResult
// with Success false, not an error.
func (t *Tab) Act(ctx context.Context, instruction string, p *AIParams, opts ...Option) (*ActResult, error) {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return nil, err
	}
	if instruction == "" {
		return nil, invalidf("box: Act needs an instruction")
	}
	return t.act(ctx, gen.BrowserActRequest{Tab: t.id, Instruction: &instruction, Model: p.model()})
}

// ActOn replays an action, one that Observe found or that an Act took,
// with no model and no tokens. An action without a selector is refused
// with ErrNoSelector before any request; an element that is not on the
// page is an ActResult with Success false.
func (t *Tab) ActOn(ctx context.Context, a Replayable, opts ...Option) (*ActResult, error) {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return nil, err
	}
	if a == nil {
		return nil, ErrNoSelector
	}
	act := a.Action()
	if act.Selector == "" {
		return nil, ErrNoSelector
	}
	body := gen.BrowserAction{Selector: act.Selector, Description: act.Description, Arguments: act.Arguments}
	if act.Method != "" {
		body.Method = &act.Method
	}
	return t.act(ctx, gen.BrowserActRequest{Tab: t.id, Action: &body})
}

func (t *Tab) act(ctx context.Context, body gen.BrowserActRequest) (*ActResult, error) {
	r, err := call[gen.BrowserActResponse](t.br.b.c.api.BrowserAct(ctx, t.br.b.id, body))
	if err != nil {
		return nil, err
	}
	out := &ActResult{
		Success: r.Success, Message: r.Message, ActionDescription: r.ActionDescription,
		Actions: make([]BrowserAction, len(r.Actions)), InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
	}
	if r.CacheStatus != nil {
		out.CacheStatus = string(*r.CacheStatus)
	}
	for i, a := range r.Actions {
		out.Actions[i] = BrowserAction{Selector: a.Selector, Description: a.Description, Method: deref(a.Method), Arguments: a.Arguments}
	}
	for _, d := range r.Dialogs {
		out.Dialogs = append(out.Dialogs, Dialog{Type: string(d.Type), Message: d.Message})
	}
	return out, nil
}

// LiveViewURL returns the URL of a view-only page that shows the tab live
// (POST /v2/box/{id}/browser/screencast), for a browser or an iframe. The
// URL carries its own token and needs no API key.
func (t *Tab) LiveViewURL(ctx context.Context, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return "", err
	}
	r, err := call[gen.BrowserScreencastResponse](t.br.b.c.api.BrowserScreencast(withIdempotent(ctx), t.br.b.id, gen.BrowserScreencastRequest{Tab: &t.id}))
	if err != nil {
		return "", err
	}
	return r.ScreencastURL, nil
}

// Close closes the tab (DELETE /v2/box/{id}/browser/tabs/{tabId}).
func (t *Tab) Close(ctx context.Context, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := t.check(); err != nil {
		return err
	}
	return none(t.br.b.c.api.CloseBrowserTab(ctx, t.br.b.id, t.id))
}
