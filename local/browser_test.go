package local_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"github.com/coder/websocket"

	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/browsertest"
	"github.com/upstash/box-go/local"
)

// browserSlots bounds the browser tests that run at once: each runs a
// Chromium, and CI machines have two cores.
var browserSlots = make(chan struct{}, 2)

// needBrowser skips a test where Chromium is not installed, and takes a
// slot.
func needBrowser(t *testing.T) {
	t.Helper()
	if !browsertest.Installed() {
		t.Skip("Chromium is not installed (apt-get install chromium)")
	}
	browserSlots <- struct{}{}
	t.Cleanup(func() { <-browserSlots })
}

// browserServer is a boxd with its own Config, on a loopback port.
type browserServer struct {
	url   string
	key   string
	srv   *local.Server
	close func()
}

func newBrowserServer(t *testing.T, dir string, cfg func(*local.Config)) *browserServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	key := "box_test_" + randHex(16)
	c := local.Config{DataDir: dir, APIKey: key, Isolation: isolation(t), AllowHostLoopback: true}
	if cfg != nil {
		cfg(&c)
	}
	srv, err := local.New(c)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(l) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = hs.Shutdown(ctx)
			_ = hs.Close()
			_ = srv.Close()
		})
	}
	t.Cleanup(stop)
	return &browserServer{url: "http://" + l.Addr().String(), key: key, srv: srv, close: stop}
}

func (s *browserServer) raw(t *testing.T) *rawClient { return newRaw(t, s.url, s.key) }

func decodeJSON[T any](t *testing.T, what string, r response) T {
	t.Helper()
	var v T
	if r.status != http.StatusOK {
		t.Fatalf("%s: %s", what, r)
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%s: %v in %s", what, err, r.body)
	}
	return v
}

type wireTab struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	Title string `json:"title"`
}

type wireContent struct {
	Title string `json:"title"`
	URL   string `json:"url"`
	Text  string `json:"text"`
	Links []struct {
		Text string `json:"text"`
		Href string `json:"href"`
	} `json:"links"`
}

// createBrowserBox creates a box with a browser and returns its id.
func createBrowserBox(t *testing.T, c *rawClient, extra map[string]any) string {
	t.Helper()
	body := map[string]any{"browser": true}
	for k, v := range extra {
		body[k] = v
	}
	b := decodeJSON[struct {
		ID      string `json:"id"`
		Browser bool   `json:"browser"`
	}](t, "create", c.do("POST", "/v2/box", body, nil))
	if !b.Browser {
		t.Fatalf("created box does not report browser: true")
	}
	return b.ID
}

// TestBrowserPages drives a box's browser over the wire: tabs, navigation,
// content and links, screenshots, replayed actions and their errors.
func TestBrowserPages(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	site := browsertest.NewSite(t)
	s := newBrowserServer(t, "", nil)
	c := s.raw(t)

	plain := decodeJSON[wireTab](t, "create plain box", c.do("POST", "/v2/box", map[string]any{}, nil)).ID
	wantError(t, "tabs of a box without a browser", c.do("GET", "/v2/box/"+plain+"/browser/tabs", nil, nil), http.StatusConflict, "browser: true")

	id := createBrowserBox(t, c, nil)
	base := "/v2/box/" + id + "/browser"

	start := time.Now()
	tab := decodeJSON[wireTab](t, "create tab", c.do("POST", base+"/tabs", map[string]any{"url": site + "/"}, nil))
	first := time.Since(start)
	if tab.ID == "" || tab.Title != "Fixture page" || tab.URL != site+"/" {
		t.Fatalf("tab = %+v", tab)
	}
	start = time.Now()
	content := decodeJSON[wireContent](t, "content", c.do("GET", base+"/content?tab="+tab.ID, nil, nil))
	t.Logf("first tab (browser start included): %v; content: %v", first, time.Since(start))
	if content.Title != "Fixture page" || !strings.Contains(content.Text, "The answer is 42 apples.") {
		t.Errorf("content = %+v", content)
	}
	var hrefs []string
	for _, l := range content.Links {
		hrefs = append(hrefs, l.Text+" "+l.Href)
	}
	if want := []string{"Second page " + site + "/second", "Third page " + site + "/third"}; strings.Join(hrefs, "|") != strings.Join(want, "|") {
		t.Errorf("links = %q, want %q", hrefs, want)
	}

	// Full-page screenshot: a PNG of the page's scroll size.
	m := browsertest.SizeRE.FindStringSubmatch(content.Text)
	if m == nil {
		t.Fatalf("the page did not report its size: %q", content.Text)
	}
	wantW, _ := strconv.Atoi(m[1])
	wantH, _ := strconv.Atoi(m[2])
	start = time.Now()
	shot := decodeJSON[struct {
		Data string `json:"data"`
	}](t, "full screenshot", c.do("GET", base+"/screenshot?encoding=base64&full_page=true&tab="+tab.ID, nil, nil))
	t.Logf("full-page screenshot: %v", time.Since(start))
	raw, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
		t.Errorf("full screenshot is %dx%d, the page %dx%d", b.Dx(), b.Dy(), wantW, wantH)
	}
	start = time.Now()
	shot = decodeJSON[struct {
		Data string `json:"data"`
	}](t, "viewport screenshot", c.do("GET", base+"/screenshot?encoding=base64&tab="+tab.ID, nil, nil))
	t.Logf("viewport screenshot: %v", time.Since(start))
	raw, _ = base64.StdEncoding.DecodeString(shot.Data)
	if img, err := png.Decode(bytes.NewReader(raw)); err != nil || img.Bounds().Dy() >= wantH {
		t.Errorf("viewport screenshot: %v, %v", err, img.Bounds())
	}

	// Replayed actions change the page.
	act := func(action map[string]any) map[string]any {
		return decodeJSON[map[string]any](t, "act", c.do("POST", base+"/act", map[string]any{"tab": tab.ID, "action": action}, nil))
	}
	for range 2 {
		if r := act(map[string]any{"selector": "#add", "description": "Add item button", "method": "click"}); r["success"] != true {
			t.Errorf("click: %v", r)
		}
	}
	if r := act(map[string]any{"selector": "xpath=//input[@id='name']", "description": "name field", "method": "fill", "arguments": []string{"Ada"}}); r["success"] != true {
		t.Errorf("fill: %v", r)
	}
	content = decodeJSON[wireContent](t, "content after actions", c.do("GET", base+"/content?tab="+tab.ID, nil, nil))
	if !strings.Contains(content.Text, "Items: 2") || !strings.Contains(content.Text, "Hi Ada") {
		t.Errorf("after two clicks and a fill, the page reads %q", content.Text)
	}
	if r := act(map[string]any{"selector": "#missing", "description": "nothing"}); r["success"] != false || !strings.Contains(fmt.Sprint(r["message"]), "no element") {
		t.Errorf("act on a missing element = %v", r)
	}
	wantError(t, "action without selector", c.do("POST", base+"/act", map[string]any{"tab": tab.ID, "action": map[string]any{"selector": "", "description": "x"}}, nil), 400, "selector")
	wantError(t, "unknown method", c.do("POST", base+"/act", map[string]any{"tab": tab.ID, "action": map[string]any{"selector": "#add", "description": "x", "method": "teleport"}}, nil), 400, "teleport")
	wantError(t, "both", c.do("POST", base+"/act", map[string]any{"tab": tab.ID, "instruction": "x", "action": map[string]any{"selector": "#add", "description": "x"}}, nil), 400, "not both")

	// A click on a link navigates; goto navigates.
	if r := act(map[string]any{"selector": "a[href='/second']", "description": "Second page link"}); r["success"] != true {
		t.Errorf("click link: %v", r)
	}
	content = decodeJSON[wireContent](t, "content after link", c.do("GET", base+"/content?tab="+tab.ID, nil, nil))
	if content.Title != "Second page" {
		t.Errorf("after clicking the link the tab shows %q", content.Title)
	}
	content = decodeJSON[wireContent](t, "goto", c.do("POST", base+"/goto", map[string]any{"tab": tab.ID, "url": site + "/third"}, nil))
	if content.Title != "Third page" || content.URL != site+"/third" {
		t.Errorf("goto = %+v", content)
	}

	// A second tab, the list, and closing.
	tab2 := decodeJSON[wireTab](t, "second tab", c.do("POST", base+"/tabs", map[string]any{"url": site + "/second", "wait_until": "domcontentloaded", "timeout": 10000}, nil))
	list := decodeJSON[struct{ Tabs []wireTab }](t, "list", c.do("GET", base+"/tabs", nil, nil))
	seen := map[string]bool{}
	for _, lt := range list.Tabs {
		seen[lt.ID] = true
	}
	if !seen[tab.ID] || !seen[tab2.ID] {
		t.Errorf("tabs = %+v, want %s and %s among them", list.Tabs, tab.ID, tab2.ID)
	}
	wantOK(t, "close", c.do("DELETE", base+"/tabs/"+tab2.ID, nil, nil))
	wantError(t, "closed tab", c.do("GET", base+"/content?tab="+tab2.ID, nil, nil), 404, tab2.ID)
	wantError(t, "close again", c.do("DELETE", base+"/tabs/"+tab2.ID, nil, nil), 404, tab2.ID)
	// No tab named: the foreground tab, the one the test used last.
	if content = decodeJSON[wireContent](t, "content without a tab", c.do("GET", base+"/content", nil, nil)); content.Title != "Third page" {
		t.Errorf("content without a tab shows %q, want the foreground tab's Third page", content.Title)
	}
	wantError(t, "bad wait", c.do("POST", base+"/tabs", map[string]any{"url": site, "wait_until": "soon"}, nil), 400, "wait_until")
	wantError(t, "unreachable", c.do("POST", base+"/tabs", map[string]any{"url": "http://127.0.0.1:1/"}, nil), 502, "ERR_")
}

// branchLink is a link as either generation of the official SDK reads
// it: {text, href}, or the desktop branch's {t, h}.
type branchLink struct {
	Text string  `json:"text"`
	Href string  `json:"href"`
	T    *string `json:"t"`
	H    *string `json:"h"`
}

type branchContent struct {
	Title string       `json:"title"`
	URL   string       `json:"url"`
	Links []branchLink `json:"links"`
}

// wantBranchLinks checks a page's links: text and href as ever, and t and
// h, the same values, exactly when the request named no tab.
func wantBranchLinks(t *testing.T, what string, c branchContent, named bool, want ...string) {
	t.Helper()
	var got []string
	for _, l := range c.Links {
		got = append(got, l.Text+" "+l.Href)
		switch {
		case named && (l.T != nil || l.H != nil):
			t.Errorf("%s: link %q carries t/h, but the request named its tab", what, l.Text)
		case !named && (l.T == nil || l.H == nil || *l.T != l.Text || *l.H != l.Href):
			t.Errorf("%s: link %+v, want t and h equal to text and href", what, l)
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s: links = %q, want %q", what, got, want)
	}
}

// TestBrowserWithoutTab drives a browser: true box's browser as the
// official SDK's desktop branch does, naming no tab: goto and content use
// the foreground tab (the last one used, else the one Chromium starts
// with), links carry t and h beside text and href, and a browser with no
// tab at all answers 409.
func TestBrowserWithoutTab(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	site := browsertest.NewSite(t)
	s := newBrowserServer(t, "", nil)
	c := s.raw(t)
	id := createBrowserBox(t, c, nil)
	base := "/v2/box/" + id + "/browser"
	fixtureLinks := []string{"Second page " + site + "/second", "Third page " + site + "/third"}

	// The tab Chromium starts with.
	got := decodeJSON[branchContent](t, "goto without a tab", c.do("POST", base+"/goto", map[string]any{"url": site + "/"}, nil))
	if got.Title != "Fixture page" || got.URL != site+"/" {
		t.Fatalf("goto without a tab = %+v", got)
	}
	wantBranchLinks(t, "goto without a tab", got, false, fixtureLinks...)
	got = decodeJSON[branchContent](t, "content without a tab", c.do("GET", base+"/content", nil, nil))
	if got.Title != "Fixture page" {
		t.Fatalf("content without a tab = %+v", got)
	}
	wantBranchLinks(t, "content without a tab", got, false, fixtureLinks...)
	tabs := decodeJSON[struct{ Tabs []wireTab }](t, "tabs", c.do("GET", base+"/tabs", nil, nil)).Tabs
	if len(tabs) != 1 || tabs[0].URL != site+"/" {
		t.Fatalf("tabs = %+v, want the one tab Chromium started with, on the page", tabs)
	}
	first := tabs[0].ID
	got = decodeJSON[branchContent](t, "content of the named tab", c.do("GET", base+"/content?tab="+first, nil, nil))
	wantBranchLinks(t, "content of the named tab", got, true, fixtureLinks...)
	got = decodeJSON[branchContent](t, "content with an empty tab", c.do("GET", base+"/content?tab=", nil, nil))
	wantBranchLinks(t, "content with an empty tab", got, false, fixtureLinks...)

	// A new tab comes to the foreground; when it closes, the one used
	// before it is back.
	second := decodeJSON[wireTab](t, "second tab", c.do("POST", base+"/tabs", map[string]any{"url": site + "/second"}, nil))
	got = decodeJSON[branchContent](t, "content after a new tab", c.do("GET", base+"/content", nil, nil))
	if got.Title != "Second page" {
		t.Errorf("content without a tab after a new tab shows %q, want Second page", got.Title)
	}
	wantBranchLinks(t, "content after a new tab", got, false, "Back home "+site+"/")
	got = decodeJSON[branchContent](t, "goto a named tab", c.do("POST", base+"/goto", map[string]any{"tab": first, "url": site + "/third"}, nil))
	if got.Title != "Third page" {
		t.Errorf("goto of the first tab = %+v", got)
	}
	if got = decodeJSON[branchContent](t, "content after goto", c.do("GET", base+"/content", nil, nil)); got.Title != "Third page" {
		t.Errorf("content without a tab after a goto of the first shows %q, want its Third page", got.Title)
	}
	wantOK(t, "close the first", c.do("DELETE", base+"/tabs/"+first, nil, nil))
	if got = decodeJSON[branchContent](t, "content after close", c.do("GET", base+"/content", nil, nil)); got.Title != "Second page" {
		t.Errorf("content without a tab after closing the first shows %q, want the second tab's Second page", got.Title)
	}

	// No tab at all.
	wantOK(t, "close the second", c.do("DELETE", base+"/tabs/"+second.ID, nil, nil))
	wantError(t, "content of a browser without tabs", c.do("GET", base+"/content", nil, nil), http.StatusConflict, "no open tab", base+"/tabs")
	wantError(t, "goto in a browser without tabs", c.do("POST", base+"/goto", map[string]any{"url": site + "/"}, nil), http.StatusConflict, "no open tab")
	wantError(t, "goto without a url", c.do("POST", base+"/goto", map[string]any{}, nil), http.StatusBadRequest, "url is required")
}

// TestBrowserCDP drives the box's browser from outside with chromedp over
// the CDP URL, which needs no API key, and sees the tab it opens through
// the API.
func TestBrowserCDP(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	site := browsertest.NewSite(t)
	clock := boxtest.NewFakeClock(time.Now())
	s := newBrowserServer(t, "", func(c *local.Config) { c.Clock = clock })
	c := s.raw(t)
	id := createBrowserBox(t, c, nil)

	conn := decodeJSON[struct {
		CDPURL string `json:"cdp_url"`
	}](t, "connect", c.do("POST", "/v2/box/"+id+"/browser/connect", nil, nil))
	if !strings.HasPrefix(conn.CDPURL, "ws://") || !strings.Contains(conn.CDPURL, "token=") {
		t.Fatalf("cdp_url = %q", conn.CDPURL)
	}

	actx, cancel := remote.NewAllocator(t.Context(), conn.CDPURL)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site+"/second")); err != nil {
		t.Fatalf("chromedp over the CDP URL: %v", err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil || title != "Second page" {
		t.Fatalf("title = %q, %v", title, err)
	}
	list := decodeJSON[struct{ Tabs []wireTab }](t, "list", c.do("GET", "/v2/box/"+id+"/browser/tabs", nil, nil))
	found := false
	for _, tb := range list.Tabs {
		found = found || tb.Title == "Second page"
	}
	if !found {
		t.Errorf("the tab chromedp opened is not listed: %+v", list.Tabs)
	}

	// Tools that start from an http URL find the WebSocket there.
	u := strings.Replace(conn.CDPURL, "ws://", "http://", 1)
	i := strings.Index(u, "/devtools/")
	versionURL := u[:i] + "/json/version" + u[strings.Index(u, "?"):]
	version := decodeJSON[map[string]string](t, "json/version", c.do("GET", strings.TrimPrefix(versionURL, s.url), nil, map[string]string{"X-Box-Api-Key": ""}))
	if version["webSocketDebuggerUrl"] != conn.CDPURL {
		t.Errorf("json/version = %v, want the CDP URL", version)
	}

	// The live view of the tab: a page, and its frames over a WebSocket.
	tabID := ""
	for _, tb := range list.Tabs {
		if tb.Title == "Second page" {
			tabID = tb.ID
		}
	}
	live := decodeJSON[struct {
		URL string `json:"screencast_url"`
	}](t, "screencast", c.do("POST", "/v2/box/"+id+"/browser/screencast", map[string]any{"tab": tabID}, nil))
	page := c.do("GET", strings.TrimPrefix(live.URL, s.url), nil, map[string]string{"X-Box-Api-Key": ""})
	if page.status != 200 || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") || !strings.Contains(string(page.body), "<img") {
		t.Errorf("live view page: %s", page)
	}
	wctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(wctx, strings.Replace(strings.Replace(live.URL, "/live?", "/live/ws?", 1), "http://", "ws://", 1), nil)
	if err != nil {
		t.Fatalf("live view socket: %v", err)
	}
	typ, frame, err := ws.Read(wctx)
	if err != nil || typ != websocket.MessageBinary || !bytes.HasPrefix(frame, []byte{0xff, 0xd8}) {
		t.Errorf("live view frame: %v %v %x", err, typ, frame[:min(4, len(frame))])
	}
	ws.Close(websocket.StatusNormalClosure, "")
	wantError(t, "screencast of a missing tab", c.do("POST", "/v2/box/"+id+"/browser/screencast", map[string]any{"tab": "nope"}, nil), 404, "nope")

	// Without the token, with a wrong one, or once it has expired: nothing.
	noTok := u[:strings.Index(u, "?")]
	get := func(u string) int {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, bad := range []string{noTok, noTok + "?token=nope", strings.Replace(live.URL, "token=", "token=x", 1)} {
		if code := get(bad); code != http.StatusUnauthorized {
			t.Errorf("GET %s = %d, want 401", bad, code)
		}
	}
	clock.Advance(11 * time.Minute)
	if _, err := chromedp.Run(ctx, chromedp.Title()); err != nil {
		t.Errorf("an open CDP connection broke when its token expired: %v", err)
	}
	actx2, cancel := remote.NewAllocator(t.Context(), conn.CDPURL)
	defer cancel()
	ectx, cancel := chromedp.NewContext(actx2) // a new connection
	defer cancel()
	if err := chromedp.Do(ectx); err == nil {
		t.Error("a new connection with an expired token was accepted")
	}
	if code := get(versionURL); code != http.StatusUnauthorized {
		t.Errorf("expired CDP token: %d, want 401", code)
	}
	if code := get(live.URL); code != 200 {
		t.Errorf("live view token (an hour) after 11 minutes: %d", code)
	}
	clock.Advance(time.Hour)
	if code := get(live.URL); code != http.StatusUnauthorized {
		t.Errorf("expired live view token: %d, want 401", code)
	}
}

// TestBrowserAI runs extract, observe and act against a stand-in of the
// model providers, which answers from the page text and the numbered
// elements in the prompt; the replay of what observe found uses no model.
func TestBrowserAI(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	site := browsertest.NewSite(t)
	models := browsertest.NewModels(t)
	s := newBrowserServer(t, "", func(c *local.Config) {
		c.ModelProviderURLs = map[string]string{"anthropic": models.URL, "openai": models.URL + "/v1"}
	})
	c := s.raw(t)
	schema := map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"fruit", "count"},
		"properties": map[string]any{"fruit": map[string]any{"type": "string"}, "count": map[string]any{"type": "integer"}},
	}

	// No key anywhere: refused, and the provider is not called.
	bare := createBrowserBox(t, c, nil)
	tab := wireTab{ID: "any"} // the key is checked before the browser starts
	wantError(t, "extract without a key", c.do("POST", "/v2/box/"+bare+"/browser/extract", map[string]any{"tab": tab.ID, "instruction": "x", "schema": schema}, nil),
		400, "no API key for anthropic", "ANTHROPIC_API_KEY")
	wantError(t, "act without a key", c.do("POST", "/v2/box/"+bare+"/browser/act", map[string]any{"tab": tab.ID, "instruction": "click"}, nil), 400, "no API key")
	if n := len(models.Calls()); n != 0 {
		t.Fatalf("the provider was called %d times without a key", n)
	}

	// The key in the box's env; the default model.
	id := createBrowserBox(t, c, map[string]any{"env_vars": map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env"}})
	base := "/v2/box/" + id + "/browser"
	start := time.Now()
	tab = decodeJSON[wireTab](t, "tab", c.do("POST", base+"/tabs", map[string]any{"url": site + "/"}, nil))
	t.Logf("browser start and first tab: %v", time.Since(start))
	got := decodeJSON[struct{ Data map[string]any }](t, "extract", c.do("POST", base+"/extract", map[string]any{"tab": tab.ID, "instruction": "the fruit and how many", "schema": schema}, nil))
	if got.Data["fruit"] != "apples" || got.Data["count"] != float64(42) {
		t.Errorf("extract = %v", got.Data)
	}
	calls := models.Calls()
	if len(calls) != 1 || calls[0].API != "anthropic" || calls[0].Key != "sk-ant-env" || calls[0].Model != "claude-sonnet-4-5" {
		t.Fatalf("provider calls = %+v", calls)
	}
	wantError(t, "an answer off the schema", c.do("POST", base+"/extract", map[string]any{"tab": tab.ID, "instruction": "count the pears", "schema": schema}, nil), 502, "does not match the schema")
	if n := len(models.Calls()); n != 3 {
		t.Errorf("an answer off the schema was asked again: %d calls, want 3", n)
	}
	wantError(t, "bad schema", c.do("POST", base+"/extract", map[string]any{"tab": tab.ID, "instruction": "x", "schema": map[string]any{"type": 5}}, nil), 400, "schema")
	// The desktop branch's wire names no tab: the foreground tab is read.
	got = decodeJSON[struct{ Data map[string]any }](t, "extract without a tab", c.do("POST", base+"/extract", map[string]any{"instruction": "the fruit and how many", "schema": schema}, nil))
	if got.Data["fruit"] != "apples" || got.Data["count"] != float64(42) {
		t.Errorf("extract without a tab = %v", got.Data)
	}
	if last := models.Calls()[len(models.Calls())-1]; !strings.Contains(last.Prompt, "The answer is 42 apples.") {
		t.Errorf("extract without a tab did not show the provider the foreground page: %q", last.Prompt)
	}

	// Observe, then replay what it found: no model call.
	obs := decodeJSON[struct {
		Elements []struct {
			Description string   `json:"description"`
			Selector    string   `json:"selector"`
			Method      string   `json:"method"`
			Arguments   []string `json:"arguments"`
		}
	}](t, "observe", c.do("POST", base+"/observe", map[string]any{"tab": tab.ID, "instruction": "the add buttons"}, nil))
	if len(obs.Elements) != 1 || obs.Elements[0].Selector != "#add" || obs.Elements[0].Method != "click" {
		t.Fatalf("observe = %+v", obs.Elements)
	}
	obsNoTab := decodeJSON[struct {
		Elements []struct {
			Selector string `json:"selector"`
		}
	}](t, "observe without a tab", c.do("POST", base+"/observe", map[string]any{"instruction": "the add buttons"}, nil))
	if len(obsNoTab.Elements) != 1 || obsNoTab.Elements[0].Selector != "#add" {
		t.Errorf("observe without a tab = %+v", obsNoTab.Elements)
	}
	n := len(models.Calls())
	e := obs.Elements[0]
	r := decodeJSON[map[string]any](t, "replay", c.do("POST", base+"/act", map[string]any{"tab": tab.ID,
		"action": map[string]any{"selector": e.Selector, "description": e.Description, "method": e.Method, "arguments": e.Arguments}}, nil))
	if r["success"] != true || r["input_tokens"] != float64(0) || len(models.Calls()) != n {
		t.Errorf("replay = %v (model calls %d -> %d)", r, n, len(models.Calls()))
	}

	// Act with an instruction, then the same again: answered from the cache.
	r = decodeJSON[map[string]any](t, "act", c.do("POST", base+"/act", map[string]any{"tab": tab.ID, "instruction": "Type Grace into the name field"}, nil))
	if r["success"] != true || r["cache_status"] != "MISS" || r["input_tokens"] == float64(0) {
		t.Errorf("act = %v", r)
	}
	content := decodeJSON[wireContent](t, "content", c.do("GET", base+"/content?tab="+tab.ID, nil, nil))
	if !strings.Contains(content.Text, "Hi Grace") || !strings.Contains(content.Text, "Items: 1") {
		t.Errorf("after observe+replay and act the page reads %q", content.Text)
	}
	n = len(models.Calls())
	r = decodeJSON[map[string]any](t, "act again", c.do("POST", base+"/act", map[string]any{"tab": tab.ID, "instruction": "Type Grace into the name field"}, nil))
	if r["success"] != true || r["cache_status"] != "HIT" || len(models.Calls()) != n {
		t.Errorf("act again = %v (model calls %d -> %d)", r, n, len(models.Calls()))
	}
	r = decodeJSON[map[string]any](t, "impossible act", c.do("POST", base+"/act", map[string]any{"tab": tab.ID, "instruction": "fly to the moon"}, nil))
	if r["success"] != false {
		t.Errorf("impossible act = %v", r)
	}
	last := models.Calls()[len(models.Calls())-1]
	if !strings.Contains(last.Prompt, "fly to the moon") || !strings.Contains(last.Prompt, "The answer is 42 apples.") {
		t.Errorf("the provider did not get the instruction and the page: %q", last.Prompt)
	}

	// The box's own model and raw key, through the OpenAI API.
	oid := createBrowserBox(t, c, map[string]any{"agent": "codex", "model": "openai/gpt-5.6", "agent_api_key": "sk-raw-openai"})
	otab := decodeJSON[wireTab](t, "tab", c.do("POST", "/v2/box/"+oid+"/browser/tabs", map[string]any{"url": site + "/"}, nil))
	obs.Elements = nil
	decodeJSON[map[string]any](t, "observe openai", c.do("POST", "/v2/box/"+oid+"/browser/observe", map[string]any{"tab": otab.ID, "instruction": "the add buttons"}, nil))
	last = models.Calls()[len(models.Calls())-1]
	if last.API != "openai" || last.Key != "sk-raw-openai" || last.Model != "gpt-5.6" {
		t.Errorf("openai call = %+v", last)
	}
	// A model named in the request wins; a provider's refusal is passed on.
	wantError(t, "no key for anthropic here", c.do("POST", "/v2/box/"+oid+"/browser/observe", map[string]any{"tab": otab.ID, "instruction": "x", "model": "anthropic/claude-haiku-4-5"}, nil), 400, "no API key for anthropic")
	badID := createBrowserBox(t, c, map[string]any{"env_vars": map[string]string{"ANTHROPIC_API_KEY": browsertest.BadKey}})
	btab := decodeJSON[wireTab](t, "tab", c.do("POST", "/v2/box/"+badID+"/browser/tabs", map[string]any{"url": site + "/"}, nil))
	wantError(t, "provider refuses", c.do("POST", "/v2/box/"+badID+"/browser/observe", map[string]any{"tab": btab.ID, "instruction": "x"}, nil), 502, "anthropic answered 401: invalid x-api-key")
	wantError(t, "unknown provider", c.do("POST", "/v2/box/"+badID+"/browser/observe", map[string]any{"tab": btab.ID, "instruction": "x", "model": "google/gemini"}, nil), 400, "google/gemini")
}

type wireRecording struct {
	ID                 string `json:"id"`
	BoxID              string `json:"box_id"`
	Status             string `json:"status"`
	StartedAt          int64  `json:"started_at"`
	EndedAt            int64  `json:"ended_at"`
	DurationMs         int64  `json:"duration_ms"`
	SizeBytes          int64  `json:"size_bytes"`
	SegmentCount       int64  `json:"segment_count"`
	MP4SizeBytes       int64  `json:"mp4_size_bytes"`
	StoppedReason      string `json:"stopped_reason"`
	MaxDurationSeconds int    `json:"max_duration_seconds"`
	ExpiresAt          int64  `json:"expires_at"`
	Markers            []struct {
		Type  string `json:"type"`
		AtMs  int64  `json:"at_ms"`
		EndMs int64  `json:"end_ms"`
		Label string `json:"label"`
		TabID string `json:"tab_id"`
	} `json:"markers"`
}

// probe reads a video's duration, codec and size with ffprobe.
func probe(t *testing.T, path string) (seconds float64, codec string, w, h int) {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_name,width,height", "-of", "json", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var p struct {
		Format  struct{ Duration string }
		Streams []struct {
			CodecName string `json:"codec_name"`
			Width     int
			Height    int
		}
	}
	if err := json.Unmarshal(out, &p); err != nil || len(p.Streams) == 0 {
		t.Fatalf("ffprobe %s: %v %s", path, err, out)
	}
	seconds, _ = strconv.ParseFloat(p.Format.Duration, 64)
	return seconds, p.Streams[0].CodecName, p.Streams[0].Width, p.Streams[0].Height
}

// TestBrowserRecording records about ten seconds of a box's browser across
// two tabs, downloads the MP4 and checks it with ffprobe, serves the HLS
// playlist and its segments with the API key only, and finds the
// recordings again after boxd restarts.
func TestBrowserRecording(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg is not installed (apt-get install ffmpeg)")
	}
	site := browsertest.NewSite(t)
	dir := t.TempDir()
	s := newBrowserServer(t, dir, nil)
	c := s.raw(t)

	plain := decodeJSON[wireTab](t, "plain box", c.do("POST", "/v2/box", map[string]any{}, nil)).ID
	wantError(t, "record without a browser", c.do("POST", "/v2/box/"+plain+"/browser/recordings", map[string]any{}, nil), 409, "browser: true")
	id := createBrowserBox(t, c, nil)
	base := "/v2/box/" + id + "/browser"
	wantError(t, "too long", c.do("POST", base+"/recordings", map[string]any{"max_duration_seconds": 601}, nil), 400, "600")
	wantError(t, "stop without one", c.do("POST", base+"/recordings/stop", nil, nil), 409, "no active recording")

	tab := decodeJSON[wireTab](t, "tab", c.do("POST", base+"/tabs", map[string]any{"url": site + "/animated"}, nil))
	asked := time.Now()
	rec := decodeJSON[wireRecording](t, "start", c.do("POST", base+"/recordings", map[string]any{}, nil))
	began := time.Now()
	if rec.Status != "recording" || rec.MaxDurationSeconds != 600 || rec.BoxID != id {
		t.Fatalf("started = %+v", rec)
	}
	// The playlist is served from the start: live, before any segment.
	if pl := c.do("GET", base+"/recordings/"+rec.ID+"/playlist", nil, nil); pl.status != 200 || !strings.HasPrefix(string(pl.body), "#EXTM3U\n") ||
		strings.Contains(string(pl.body), "#EXT-X-ENDLIST") || !strings.Contains(string(pl.body), "#EXT-X-TARGETDURATION:2") {
		t.Errorf("the playlist right after the start: %s", pl)
	}
	wantError(t, "a second recording", c.do("POST", base+"/recordings", map[string]any{}, nil), 409, rec.ID)
	time.Sleep(4 * time.Second)
	tab2 := decodeJSON[wireTab](t, "second tab", c.do("POST", base+"/tabs", map[string]any{"url": site + "/"}, nil))
	time.Sleep(3 * time.Second)
	live := decodeJSON[wireRecording](t, "get while recording", c.do("GET", base+"/recordings/"+rec.ID, nil, nil))
	if live.Status != "recording" || live.DurationMs < 6000 {
		t.Errorf("while recording = %+v", live)
	}
	pl := c.do("GET", base+"/recordings/"+rec.ID+"/playlist", nil, nil)
	if pl.status != 200 || !strings.Contains(string(pl.body), "segments/seg00000.ts") {
		t.Errorf("live playlist = %s", pl)
	}
	wantError(t, "download while recording", c.do("GET", base+"/recordings/"+rec.ID+"/download", nil, nil), 409, "in progress")
	time.Sleep(time.Until(began.Add(10 * time.Second)))

	start := time.Now()
	done := decodeJSON[wireRecording](t, "stop", c.do("POST", base+"/recordings/stop", nil, nil))
	stopped := time.Now()
	t.Logf("stop (finishing the video): %v", stopped.Sub(start))
	// The recording lasted from its start to its stop, as seen from here:
	// at least from the start's answer to the stop's request, at most
	// from the start's request to the stop's answer. The calls between
	// take what they take on a busy machine.
	least, most := start.Sub(began), stopped.Sub(asked)
	if done.ID != rec.ID || done.Status != "completed" || done.StoppedReason != "requested" || done.MP4SizeBytes == 0 || done.SegmentCount < 4 || done.ExpiresAt < time.Now().Add(13*24*time.Hour).Unix() {
		t.Errorf("stopped = %+v", done)
	}
	const slack = 500 * time.Millisecond
	dur := time.Duration(done.DurationMs) * time.Millisecond
	if dur < least-slack || dur > most+slack {
		t.Errorf("duration = %v, want between %v and %v", dur, least, most)
	}
	if len(done.Markers) != 2 || done.Markers[0].TabID != tab.ID || done.Markers[0].AtMs != 0 || done.Markers[1].TabID != tab2.ID ||
		done.Markers[0].EndMs != done.Markers[1].AtMs || done.Markers[1].AtMs < 3500 || done.Markers[1].Label != "Fixture page" || done.Markers[1].Type != "tab_switch" {
		t.Errorf("markers = %+v", done.Markers)
	}

	dl := c.do("GET", base+"/recordings/"+rec.ID+"/download", nil, nil)
	if dl.status != 200 || dl.header.Get("Content-Type") != "video/mp4" || int64(len(dl.body)) != done.MP4SizeBytes {
		t.Fatalf("download: %d %s, %d bytes", dl.status, dl.header.Get("Content-Type"), len(dl.body))
	}
	mp4 := t.TempDir() + "/rec.mp4"
	if err := os.WriteFile(mp4, dl.body, 0o600); err != nil {
		t.Fatal(err)
	}
	secs, codec, w, h := probe(t, mp4)
	if math.Abs(secs-dur.Seconds()) > 0.6 || codec != "h264" || w != 1280 || h != 720 {
		t.Errorf("ffprobe: %.2fs %s %dx%d, want %.2fs of h264 1280x720", secs, codec, w, h, dur.Seconds())
	}

	pl = c.do("GET", base+"/recordings/"+rec.ID+"/playlist", nil, nil)
	if pl.status != 200 || !strings.Contains(string(pl.body), "#EXT-X-ENDLIST") || !strings.HasPrefix(pl.header.Get("Content-Type"), "application/vnd.apple.mpegurl") {
		t.Errorf("playlist = %s", pl)
	}
	seg := c.do("GET", base+"/recordings/"+rec.ID+"/segments/seg00001.ts", nil, nil)
	if seg.status != 200 || seg.header.Get("Content-Type") != "video/mp2t" || len(seg.body) == 0 {
		t.Errorf("segment: %d %s", seg.status, seg.header.Get("Content-Type"))
	}
	wantError(t, "segment without key", c.do("GET", base+"/recordings/"+rec.ID+"/segments/seg00001.ts", nil, map[string]string{"X-Box-Api-Key": ""}), 401, "unauthorized")
	wantError(t, "playlist without key", c.do("GET", base+"/recordings/"+rec.ID+"/playlist", nil, map[string]string{"X-Box-Api-Key": ""}), 401, "unauthorized")
	wantError(t, "unknown recording", c.do("GET", base+"/recordings/rec-nope", nil, nil), 404, "rec-nope")

	// A short one stops by itself; the list pages through both.
	short := decodeJSON[wireRecording](t, "short", c.do("POST", base+"/recordings", map[string]any{"max_duration_seconds": 2}, nil))
	var got wireRecording
	if !waitFor(20*time.Second, func() bool {
		got = decodeJSON[wireRecording](t, "get short", c.do("GET", base+"/recordings/"+short.ID, nil, nil))
		return got.Status != "recording"
	}) {
		t.Fatalf("a 2s recording is still recording: %+v", got)
	}
	if got.StoppedReason != "max_duration" || got.DurationMs < 1900 || got.DurationMs > 2200 {
		t.Errorf("short = %+v", got)
	}
	page1 := decodeJSON[struct {
		Recordings []wireRecording
		NextCursor string `json:"next_cursor"`
	}](t, "list 1", c.do("GET", base+"/recordings?limit=1", nil, nil))
	if len(page1.Recordings) != 1 || page1.Recordings[0].ID != short.ID || page1.NextCursor == "" {
		t.Fatalf("page 1 = %+v", page1)
	}
	page2 := decodeJSON[struct {
		Recordings []wireRecording
		NextCursor string `json:"next_cursor"`
	}](t, "list 2", c.do("GET", base+"/recordings?limit=1&cursor="+page1.NextCursor, nil, nil))
	if len(page2.Recordings) != 1 || page2.Recordings[0].ID != rec.ID || page2.NextCursor != "" {
		t.Fatalf("page 2 = %+v", page2)
	}

	// One left running when boxd stops is finished with what it has.
	third := decodeJSON[wireRecording](t, "third", c.do("POST", base+"/recordings", map[string]any{}, nil))
	time.Sleep(3 * time.Second)
	s.close()
	s2 := newBrowserServer(t, dir, nil)
	c2 := newRaw(t, s2.url, s2.key)
	c2.key = s2.key
	again := decodeJSON[wireRecording](t, "after restart", c2.do("GET", base+"/recordings/"+rec.ID, nil, nil))
	if again.Status != "completed" || again.DurationMs != done.DurationMs || again.MP4SizeBytes != done.MP4SizeBytes {
		t.Errorf("after restart = %+v, was %+v", again, done)
	}
	lost := decodeJSON[wireRecording](t, "third after restart", c2.do("GET", base+"/recordings/"+third.ID, nil, nil))
	if lost.Status != "completed" || lost.StoppedReason != "lost" || lost.DurationMs < 2500 || lost.MP4SizeBytes == 0 {
		t.Errorf("recording running at shutdown = %+v", lost)
	}
	if dl := c2.do("GET", base+"/recordings/"+third.ID+"/download", nil, nil); dl.status != 200 || len(dl.body) == 0 {
		t.Errorf("download after restart: %d", dl.status)
	}
}
