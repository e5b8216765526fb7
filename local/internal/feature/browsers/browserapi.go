package browsers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/browser"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/harnesses"
	"github.com/upstash/box-go/local/internal/respschema"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// Bounds of browser operations that carry no timeout of their own.
const (
	pageOpTimeout  = 60 * time.Second
	aiOpTimeout    = 3 * time.Minute
	defaultNavWait = 30 * time.Second
)

// browserOf returns the box and its running browser.
func (bs *Browsers) browserOf(ctx context.Context, id string) (*store.Box, *browser.Controller, error) {
	b, err := bs.host.Box(id)
	if err != nil {
		return nil, nil, err
	}
	_, ctl, err := bs.ensure(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	bs.touch(b.ID)
	return b, ctl, nil
}

// aiBrowserOf is browserOf for an AI operation: the provider and its key
// are checked before the browser is started.
func (bs *Browsers) aiBrowserOf(ctx context.Context, id string, model *string) (*store.Box, *browser.Controller, browser.Provider, string, error) {
	b, err := bs.host.Box(id)
	if err != nil {
		return nil, nil, nil, "", err
	}
	if !b.Browser && !b.Desktop {
		return nil, nil, nil, "", noBrowser(b)
	}
	p, m, err := bs.provider(b, model)
	if err != nil {
		return nil, nil, nil, "", err
	}
	b, ctl, err := bs.browserOf(ctx, id)
	if err != nil {
		return nil, nil, nil, "", err
	}
	return b, ctl, p, m, nil
}

// browserError gives an error of the browser package its status.
func browserError(err error, tab string) error {
	var (
		nav     *browser.NavigationError
		timeout *browser.TimeoutError
		unsup   *browser.UnsupportedError
		prov    *browser.ProviderError
	)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, browser.ErrNoTab):
		return errdefs.NotFound("tab %s not found", tab)
	case errors.As(err, &nav):
		return errdefs.Upstream("%s", nav.Error())
	case errors.As(err, &timeout):
		return errdefs.UpstreamTimeout("%s", timeout.Error())
	case errors.As(err, &unsup):
		return errdefs.Invalid("%s", unsup.Error())
	case errors.As(err, &prov):
		return errdefs.Upstream("model provider %s", prov.Error())
	case errors.Is(err, browser.ErrClosed):
		return errdefs.Unavailable("the box's browser stopped; try again")
	case errors.Is(err, context.DeadlineExceeded):
		return errdefs.UpstreamTimeout("the browser did not answer in time")
	}
	if errdefs.Of(err) != nil {
		return err
	}
	return fmt.Errorf("browser: %w", err)
}

func needTab(tab string) error {
	if strings.TrimSpace(tab) == "" {
		return errdefs.Invalid("tab is required")
	}
	return nil
}

// tabOr returns the tab a request names, or, when it names none, the
// browser's foreground tab: the desktop branch of the official SDK drives
// the browser with no tab (goto, content, extract, observe). named says
// which it was.
func tabOr(ctx context.Context, boxID string, ctl *browser.Controller, tab *string) (id string, named bool, err error) {
	if t := wire.Deref(tab); strings.TrimSpace(t) != "" {
		return t, true, nil
	}
	if fg := ctl.Foreground(ctx); fg != "" {
		return fg, false, nil
	}
	if _, err := ctl.Tabs(ctx); err != nil {
		return "", false, browserError(err, "")
	}
	return "", false, errdefs.Conflict("the browser of box %s has no open tab to use when the request names none: open one with POST /v2/box/%s/browser/tabs", boxID, boxID)
}

func needURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errdefs.Invalid("url is required")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return errdefs.Invalid("url %q is not an absolute URL", raw)
	}
	return nil
}

// contentOf is a page on the wire. When the request named no tab, as the
// desktop branch of the official SDK sends it, each link also carries the
// names that branch reads, t and h.
func contentOf(c *browser.Content, named bool) gen.BrowserContent {
	out := gen.BrowserContent{Title: c.Title, URL: c.URL, Text: c.Text}
	for _, l := range c.Links {
		link := gen.BrowserLink{Text: l.Text, Href: l.Href}
		if !named {
			link.T, link.H = wire.Ptr(l.Text), wire.Ptr(l.Href)
		}
		out.Links = append(out.Links, link)
	}
	return out
}

func (bs *Browsers) CreateBrowserTab(ctx context.Context, req gen.CreateBrowserTabRequestObject) (gen.CreateBrowserTabResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	u := req.Body.URL
	if u == "" {
		u = "about:blank"
	} else if err := needURL(u); err != nil {
		return nil, err
	}
	wait := string(wire.DerefOr(req.Body.WaitUntil, gen.CreateBrowserTabRequestWaitUntilLoad))
	if wait != browser.WaitLoad && wait != browser.WaitDOMContentLoaded && wait != browser.WaitNetworkIdle {
		return nil, errdefs.Invalid("wait_until must be load, domcontentloaded or networkidle, not %q", wait)
	}
	timeout := defaultNavWait
	if req.Body.Timeout != nil {
		if *req.Body.Timeout < 0 {
			return nil, errdefs.Invalid("timeout must not be negative")
		}
		timeout = time.Duration(*req.Body.Timeout) * time.Millisecond
	}
	b, ctl, err := bs.browserOf(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	t, err := ctl.NewTab(ctx, u, wait, timeout)
	if err != nil {
		return nil, browserError(err, "")
	}
	if onDesktop(b) {
		// A desktop's window manager may stack the new window under the
		// one it had: the tab opened is the one the screen shows.
		if err := ctl.Raise(ctx, t.ID); err != nil {
			return nil, browserError(err, t.ID)
		}
	}
	out := gen.BrowserTab{ID: t.ID}
	if t.URL != "" {
		out.URL = wire.Ptr(t.URL)
	}
	if t.Title != "" {
		out.Title = wire.Ptr(t.Title)
	}
	return gen.CreateBrowserTab200JSONResponse(out), nil
}

func (bs *Browsers) ListBrowserTabs(ctx context.Context, req gen.ListBrowserTabsRequestObject) (gen.ListBrowserTabsResponseObject, error) {
	_, ctl, err := bs.browserOf(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	tabs, err := ctl.Tabs(ctx)
	if err != nil {
		return nil, browserError(err, "")
	}
	out := gen.ListBrowserTabs200JSONResponse{Tabs: []gen.BrowserTab{}}
	for _, t := range tabs {
		bt := gen.BrowserTab{ID: t.ID}
		if t.URL != "" {
			bt.URL = wire.Ptr(t.URL)
		}
		if t.Title != "" {
			bt.Title = wire.Ptr(t.Title)
		}
		out.Tabs = append(out.Tabs, bt)
	}
	return out, nil
}

func (bs *Browsers) CloseBrowserTab(ctx context.Context, req gen.CloseBrowserTabRequestObject) (gen.CloseBrowserTabResponseObject, error) {
	_, ctl, err := bs.browserOf(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	if err := ctl.CloseTab(ctx, req.TabID); err != nil {
		return nil, browserError(err, req.TabID)
	}
	return gen.CloseBrowserTab200JSONResponse(wire.Message("Tab closed")), nil
}

func (bs *Browsers) BrowserGoto(ctx context.Context, req gen.BrowserGotoRequestObject) (gen.BrowserGotoResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	if err := needURL(req.Body.URL); err != nil {
		return nil, err
	}
	b, ctl, err := bs.browserOf(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	tab, named, err := tabOr(ctx, b.ID, ctl, req.Body.Tab)
	if err != nil {
		return nil, err
	}
	content, err := ctl.Goto(ctx, tab, req.Body.URL, browser.WaitLoad, defaultNavWait)
	if err != nil {
		return nil, browserError(err, tab)
	}
	return gen.BrowserGoto200JSONResponse(contentOf(content, named)), nil
}

func (bs *Browsers) GetBrowserContent(ctx context.Context, req gen.GetBrowserContentRequestObject) (gen.GetBrowserContentResponseObject, error) {
	ctx, cancel := context.WithTimeout(ctx, pageOpTimeout)
	defer cancel()
	b, ctl, err := bs.browserOf(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	tab, named, err := tabOr(ctx, b.ID, ctl, req.Params.Tab)
	if err != nil {
		return nil, err
	}
	content, err := ctl.Content(ctx, tab)
	if err != nil {
		return nil, browserError(err, tab)
	}
	return gen.GetBrowserContent200JSONResponse(contentOf(content, named)), nil
}

func (bs *Browsers) BrowserScreenshot(ctx context.Context, req gen.BrowserScreenshotRequestObject) (gen.BrowserScreenshotResponseObject, error) {
	if err := needTab(req.Params.Tab); err != nil {
		return nil, err
	}
	if e := req.Params.Encoding; e != nil && *e != gen.BrowserScreenshotParamsEncodingBase64 {
		return nil, errdefs.Invalid("encoding must be base64")
	}
	ctx, cancel := context.WithTimeout(ctx, pageOpTimeout)
	defer cancel()
	_, ctl, err := bs.browserOf(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	png, err := ctl.Screenshot(ctx, req.Params.Tab, wire.Deref(req.Params.FullPage))
	if err != nil {
		return nil, browserError(err, req.Params.Tab)
	}
	return gen.BrowserScreenshot200JSONResponse{Data: png}, nil
}

func (bs *Browsers) BrowserConnect(ctx context.Context, req gen.BrowserConnectRequestObject) (gen.BrowserConnectResponseObject, error) {
	b, _, err := bs.browserOf(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	bb := bs.box(b.ID)
	bb.mu.Lock()
	path := bb.path
	bb.mu.Unlock()
	tok := bs.mint(b.ID, "cdp", "", cdpTokenTTL)
	u := baseURL(ctx, "ws") + "/v2/box/" + b.ID + "/browser/cdp" + path + "?token=" + tok
	return gen.BrowserConnect200JSONResponse{CDPURL: u}, nil
}

func (bs *Browsers) BrowserScreencast(ctx context.Context, req gen.BrowserScreencastRequestObject) (gen.BrowserScreencastResponseObject, error) {
	tab := ""
	if req.Body != nil {
		tab = wire.Deref(req.Body.Tab)
	}
	b, ctl, err := bs.browserOf(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	if tab != "" {
		tabs, err := ctl.Tabs(ctx)
		if err != nil {
			return nil, browserError(err, tab)
		}
		found := false
		for _, t := range tabs {
			found = found || t.ID == tab
		}
		if !found {
			return nil, errdefs.NotFound("tab %s not found", tab)
		}
	}
	tok := bs.mint(b.ID, "live", tab, liveTokenTTL)
	u := baseURL(ctx, "http") + "/v2/box/" + b.ID + "/browser/live?token=" + tok
	return gen.BrowserScreencast200JSONResponse{ScreencastURL: u}, nil
}

// modelProvider is how boxd reaches one provider of models.
type modelProvider struct {
	name    string
	openAI  bool   // speaks the OpenAI chat API (else Anthropic Messages)
	baseURL string // default base URL
	envKey  string // where a box's env holds its key
}

// checkProviderURLs refuses what Config.ModelProviderURLs cannot mean.
// Errors show a URL without its password.
func checkProviderURLs(urls map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(urls)) {
		if _, ok := modelProviders[name]; !ok {
			return fmt.Errorf("boxd: model provider %q is unknown (want one of %s)", name, strings.Join(slices.Sorted(maps.Keys(modelProviders)), ", "))
		}
		u, err := url.Parse(urls[name])
		if err != nil {
			return fmt.Errorf("boxd: the URL of model provider %s does not parse", name)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("boxd: the URL of model provider %s must be http:// or https:// with a host, not %q", name, u.Redacted())
		}
	}
	return nil
}

var modelProviders = map[string]modelProvider{
	"anthropic":  {name: "anthropic", baseURL: "https://api.anthropic.com", envKey: "ANTHROPIC_API_KEY"},
	"openai":     {name: "openai", openAI: true, baseURL: "https://api.openai.com/v1", envKey: "OPENAI_API_KEY"},
	"openrouter": {name: "openrouter", openAI: true, baseURL: "https://openrouter.ai/api/v1", envKey: "OPENROUTER_API_KEY"},
	"vercel":     {name: "vercel", openAI: true, baseURL: "https://ai-gateway.vercel.sh/v1", envKey: "AI_GATEWAY_API_KEY"},
}

// splitModel returns a model's provider and the model's id at that
// provider: "anthropic/claude-sonnet-4-5" is anthropic's
// "claude-sonnet-4-5". A bare Claude or GPT id is accepted too.
func splitModel(model string) (string, string, error) {
	model = harnesses.CanonicalModel(model)
	if p, id, ok := strings.Cut(model, "/"); ok {
		if _, known := modelProviders[p]; known && id != "" {
			return p, id, nil
		}
		return "", "", errdefs.Invalid("model %q: boxd's browser reaches anthropic/, openai/, openrouter/ and vercel/ models", model)
	}
	switch {
	case strings.HasPrefix(model, "claude"):
		return "anthropic", model, nil
	case strings.HasPrefix(model, "gpt") || strings.HasPrefix(model, "o1") || strings.HasPrefix(model, "o3") || strings.HasPrefix(model, "o4"):
		return "openai", model, nil
	}
	return "", "", errdefs.Invalid("model %q: name it with its provider, e.g. anthropic/claude-sonnet-4-5", model)
}

// provider returns the provider and model id of an AI operation on b: the
// requested model, else the box's, else defaultBrowserModel. The key is
// the box's agent_api_key when it is a raw key for that provider (the
// provider of the box's own model), else the provider's variable in the
// box's env.
func (bs *Browsers) provider(b *store.Box, requested *string) (browser.Provider, string, error) {
	model := wire.Deref(requested)
	if model == "" {
		model = b.Model
	}
	if model == "" {
		model = defaultBrowserModel
	}
	name, id, err := splitModel(model)
	if err != nil {
		return nil, "", err
	}
	mp := modelProviders[name]
	key := ""
	if raw := b.AgentAPIKey; raw != "" && raw != "UPSTASH_KEY" && raw != "STORED_KEY" {
		owner := ""
		if b.Model != "" {
			owner, _, _ = splitModel(b.Model)
		} else {
			owner = keyProvider(raw)
		}
		if owner == name {
			key = raw
		}
	}
	if key == "" {
		key = b.EnvVars[mp.envKey]
	}
	if key == "" {
		return nil, "", errdefs.Invalid(
			"no API key for %s (model %s): create the box with agent_api_key set to a %s key, or set %s in the box's env",
			name, model, name, mp.envKey)
	}
	base := mp.baseURL
	if u := bs.cfg.ProviderURLs[name]; u != "" {
		base = u
	}
	if mp.openAI {
		return &browser.OpenAI{Provider: name, BaseURL: base, Key: key, Client: bs.models}, id, nil
	}
	return &browser.Anthropic{BaseURL: base, Key: key, Client: bs.models}, id, nil
}

// keyProvider guesses the provider of a raw key from its prefix.
func keyProvider(key string) string {
	switch {
	case strings.HasPrefix(key, "sk-ant-"):
		return "anthropic"
	case strings.HasPrefix(key, "sk-or-"):
		return "openrouter"
	}
	return "openai"
}

func (bs *Browsers) BrowserExtract(ctx context.Context, req gen.BrowserExtractRequestObject) (gen.BrowserExtractResponseObject, error) {
	body := req.Body
	if body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	if strings.TrimSpace(body.Instruction) == "" {
		return nil, errdefs.Invalid("instruction is required")
	}
	if body.Schema == nil {
		return nil, errdefs.Invalid("schema is required")
	}
	sch, err := respschema.Compile(body.Schema)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, aiOpTimeout)
	defer cancel()
	b, ctl, p, model, err := bs.aiBrowserOf(ctx, req.ID, body.Model)
	if err != nil {
		return nil, err
	}
	tab, _, err := tabOr(ctx, b.ID, ctl, body.Tab)
	if err != nil {
		return nil, err
	}
	snap, err := ctl.Snapshot(ctx, tab)
	if err != nil {
		return nil, browserError(err, tab)
	}
	validate := func(v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return respschema.Validate(sch, string(raw))
	}
	data, usage, err := browser.Extract(ctx, p, model, snap, body.Instruction, body.Schema, validate)
	bs.meter(b.ID, "extract", usage)
	if err != nil {
		return nil, browserError(err, tab)
	}
	return gen.BrowserExtract200JSONResponse{Data: data}, nil
}

func (bs *Browsers) BrowserObserve(ctx context.Context, req gen.BrowserObserveRequestObject) (gen.BrowserObserveResponseObject, error) {
	body := req.Body
	if body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	if strings.TrimSpace(body.Instruction) == "" {
		return nil, errdefs.Invalid("instruction is required")
	}
	ctx, cancel := context.WithTimeout(ctx, aiOpTimeout)
	defer cancel()
	b, ctl, p, model, err := bs.aiBrowserOf(ctx, req.ID, body.Model)
	if err != nil {
		return nil, err
	}
	tab, _, err := tabOr(ctx, b.ID, ctl, body.Tab)
	if err != nil {
		return nil, err
	}
	snap, err := ctl.Snapshot(ctx, tab)
	if err != nil {
		return nil, browserError(err, tab)
	}
	found, usage, err := browser.Observe(ctx, p, model, snap, body.Instruction, false)
	bs.meter(b.ID, "observe", usage)
	if err != nil {
		return nil, browserError(err, tab)
	}
	out := gen.BrowserObserveResponse{Elements: []gen.BrowserElement{}}
	for _, f := range found {
		e := gen.BrowserElement{Description: f.Description, Selector: wire.Ptr(f.Selector), Method: wire.Ptr(f.Method), Arguments: f.Arguments}
		if f.URL != "" {
			e.URL = wire.Ptr(f.URL)
		}
		out.Elements = append(out.Elements, e)
	}
	return gen.BrowserObserve200JSONResponse(out), nil
}

// meter notes an AI operation's tokens in the box's log.
func (bs *Browsers) meter(boxID, op string, u browser.Usage) {
	if u.InputTokens == 0 && u.OutputTokens == 0 {
		return
	}
	bs.host.Logf(boxID, "info", "system", fmt.Sprintf("browser %s used %d input and %d output tokens", op, u.InputTokens, u.OutputTokens))
}

func actionOf(a *gen.BrowserAction) browser.Action {
	return browser.Action{Selector: a.Selector, Description: a.Description, Method: wire.Deref(a.Method), Arguments: a.Arguments}
}

func wireAction(a browser.Action) gen.BrowserAction {
	out := gen.BrowserAction{Selector: a.Selector, Description: a.Description, Arguments: a.Arguments}
	if a.Method != "" {
		out.Method = wire.Ptr(a.Method)
	}
	return out
}

func (bs *Browsers) BrowserAct(ctx context.Context, req gen.BrowserActRequestObject) (gen.BrowserActResponseObject, error) {
	body := req.Body
	if body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	if err := needTab(body.Tab); err != nil {
		return nil, err
	}
	instruction := strings.TrimSpace(wire.Deref(body.Instruction))
	switch {
	case body.Action != nil && instruction != "":
		return nil, errdefs.Invalid("send either instruction or action, not both")
	case body.Action == nil && instruction == "":
		return nil, errdefs.Invalid("instruction or action is required")
	case body.Action != nil:
		if err := browser.CheckAction(actionOf(body.Action)); err != nil {
			return nil, errdefs.Invalid("action: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, aiOpTimeout)
	defer cancel()
	if body.Action != nil {
		// Replay: no model, no tokens.
		_, ctl, err := bs.browserOf(ctx, req.ID)
		if err != nil {
			return nil, err
		}
		a := actionOf(body.Action)
		res, err := perform(ctx, ctl, body.Tab, a)
		if err != nil {
			return nil, err
		}
		return gen.BrowserAct200JSONResponse(res), nil
	}
	b, ctl, p, model, err := bs.aiBrowserOf(ctx, req.ID, body.Model)
	if err != nil {
		return nil, err
	}
	cacheKey := ""
	if tabs, err := ctl.Tabs(ctx); err == nil {
		for _, t := range tabs {
			if t.ID == body.Tab {
				cacheKey = b.ID + "\x00" + t.URL + "\x00" + instruction
			}
		}
	}
	bs.mu.Lock()
	cached, hit := bs.cache[cacheKey]
	bs.mu.Unlock()
	if hit && cacheKey != "" {
		if ok, err := ctl.Exists(ctx, body.Tab, cached.Selector); err == nil && ok {
			res, err := perform(ctx, ctl, body.Tab, cached)
			if err != nil {
				return nil, err
			}
			res.CacheStatus = wire.Ptr(gen.BrowserActResponseCacheStatusHIT)
			return gen.BrowserAct200JSONResponse(res), nil
		}
	}
	snap, err := ctl.Snapshot(ctx, body.Tab)
	if err != nil {
		return nil, browserError(err, body.Tab)
	}
	found, usage, err := browser.Observe(ctx, p, model, snap, instruction, true)
	bs.meter(b.ID, "act", usage)
	if err != nil {
		return nil, browserError(err, body.Tab)
	}
	var res gen.BrowserActResponse
	if len(found) == 0 {
		res = gen.BrowserActResponse{Success: false, Message: "no element on the page can carry out the instruction", Actions: []gen.BrowserAction{}}
	} else {
		a := found[0].Action
		if res, err = perform(ctx, ctl, body.Tab, a); err != nil {
			return nil, err
		}
		if res.Success && cacheKey != "" {
			bs.mu.Lock()
			if len(bs.cache) > 10000 {
				clear(bs.cache)
			}
			bs.cache[cacheKey] = a
			bs.mu.Unlock()
		}
	}
	res.CacheStatus = wire.Ptr(gen.BrowserActResponseCacheStatusMISS)
	res.InputTokens, res.OutputTokens = usage.InputTokens, usage.OutputTokens
	return gen.BrowserAct200JSONResponse(res), nil
}

// perform replays a in tab. An element that is not there is an
// unsuccessful act, not an error.
func perform(ctx context.Context, ctl *browser.Controller, tab string, a browser.Action) (gen.BrowserActResponse, error) {
	res := gen.BrowserActResponse{ActionDescription: a.Description, Actions: []gen.BrowserAction{wireAction(a)}}
	if res.ActionDescription == "" {
		res.ActionDescription = a.Selector
	}
	dialogs, err := ctl.Perform(ctx, tab, a)
	if len(dialogs) > 0 {
		res.Dialogs = make([]gen.BrowserDialog, len(dialogs))
		for i, d := range dialogs {
			res.Dialogs[i] = gen.BrowserDialog{Type: gen.BrowserDialogType(d.Type), Message: d.Message}
		}
	}
	switch {
	case errors.Is(err, browser.ErrNoElement):
		res.Message = err.Error()
		return res, nil
	case err != nil:
		return res, browserError(err, tab)
	}
	m := a.Method
	if m == "" {
		m = "click"
	}
	res.Success = true
	res.Message = fmt.Sprintf("%s on %s done", m, a.Selector)
	return res, nil
}
