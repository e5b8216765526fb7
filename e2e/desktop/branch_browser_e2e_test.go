package desktop_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/browsertest"
	"github.com/upstash/box-go/local"
)

// linkedPage is magenta, so that the screen shows whether it is the page
// on the desktop, and has a link, a button and a sentence that the
// browser stand-in model knows.
const linkedPage = `<!doctype html>
<html><head><title>linked page</title></head>
<body style="margin:0;background:rgb(255,0,255)">
<p>The answer is 42 apples.</p>
<a href="/other.html">Other page</a>
<button id="add">Add item</button>
</body></html>`

// branchCall sends one request as the official SDK's desktop branch sends
// it (no tab anywhere) and decodes the answer into out, or returns the
// status and body of an error.
func branchCall(t *testing.T, srv *boxtest.Server, method, path string, body any, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Box-Api-Key", srv.APIKey())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

// TestDesktopBrowserWithoutTab drives a desktop box's Chromium as the
// official SDK's desktop branch does, with no tab: goto {url}, content
// with no query, extract {instruction, schema} and observe {instruction}
// use the window the desktop shows, and a page's links carry that
// branch's {t, h} beside {text, href}.
func TestDesktopBrowserWithoutTab(t *testing.T) {
	t.Parallel()
	needDesktop(t)
	models := browsertest.NewModels(t)
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.ModelProviderURLs = map[string]string{"anthropic": models.URL}
	}))
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Desktop: true, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-desktop"}})
	if err := b.Files.Write(ctx, "site/linked.html", []byte(linkedPage)); err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "cd site && (python3 -m http.server 8000 --bind 127.0.0.1 > ../server.log 2>&1 &) && sleep 0.5")
	const site = "http://127.0.0.1:8000/"
	base := "/v2/box/" + b.ID() + "/browser"

	if code, body := branchCall(t, srv, "GET", base+"/content", nil, nil); code != http.StatusConflict || !strings.Contains(body, "desktop/start") {
		t.Fatalf("content before the desktop starts: %d %s, want a 409 that says to start the desktop", code, body)
	}
	if _, err := b.Desktop.Start(ctx, nil); err != nil {
		t.Fatalf("Start: %v", err)
	}

	type link struct {
		Text string  `json:"text"`
		Href string  `json:"href"`
		T    *string `json:"t"`
		H    *string `json:"h"`
	}
	type page struct {
		Title string `json:"title"`
		URL   string `json:"url"`
		Text  string `json:"text"`
		Links []link `json:"links"`
	}
	wantPage := func(what string, p page) {
		t.Helper()
		if p.Title != "linked page" || p.URL != site+"linked.html" || !strings.Contains(p.Text, "42 apples") {
			t.Errorf("%s = %+v", what, p)
		}
		if len(p.Links) != 1 {
			t.Fatalf("%s: links %+v, want the one link", what, p.Links)
		}
		l := p.Links[0]
		if l.T == nil || l.H == nil || *l.T != "Other page" || *l.H != site+"other.html" || l.Text != *l.T || l.Href != *l.H {
			t.Errorf("%s: link %+v, want t/h and text/href both Other page %s", what, l, site+"other.html")
		}
	}
	var p page
	start := time.Now()
	if code, body := branchCall(t, srv, "POST", base+"/goto", map[string]any{"url": site + "linked.html"}, &p); code != http.StatusOK {
		t.Fatalf("goto {url}: %d %s", code, body)
	}
	t.Logf("goto without a tab %v after the desktop's start", time.Since(start).Round(time.Millisecond))
	wantPage("goto {url}", p)
	p = page{}
	if code, body := branchCall(t, srv, "GET", base+"/content", nil, &p); code != http.StatusOK {
		t.Fatalf("content: %d %s", code, body)
	}
	wantPage("content", p)

	// The tab is the desktop's window: the screen shows the page.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		img, err := b.Desktop.Screenshot(ctx, &box.DesktopScreenshotParams{NoCursor: true})
		if err != nil {
			t.Fatalf("Screenshot: %v", err)
		}
		share := magentaShare(img)
		if share > 0.2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page reached without a tab does not show on the desktop: %.1f%% of the screen is magenta", share*100)
		}
	}

	var ex struct{ Data map[string]any }
	schema := map[string]any{
		"type": "object", "required": []string{"fruit", "count"},
		"properties": map[string]any{"fruit": map[string]any{"type": "string"}, "count": map[string]any{"type": "integer"}},
	}
	if code, body := branchCall(t, srv, "POST", base+"/extract", map[string]any{"instruction": "the fruit and how many", "schema": schema}, &ex); code != http.StatusOK {
		t.Fatalf("extract {instruction, schema}: %d %s", code, body)
	}
	if ex.Data["fruit"] != "apples" || ex.Data["count"] != float64(42) {
		t.Errorf("extract {instruction, schema} = %v", ex.Data)
	}
	var obs struct {
		Elements []struct {
			Selector string `json:"selector"`
		} `json:"elements"`
	}
	if code, body := branchCall(t, srv, "POST", base+"/observe", map[string]any{"instruction": "the add buttons", "model": "anthropic/claude-haiku-4-5"}, &obs); code != http.StatusOK {
		t.Fatalf("observe {instruction, model}: %d %s", code, body)
	}
	if len(obs.Elements) != 1 || obs.Elements[0].Selector != "#add" {
		t.Errorf("observe {instruction, model} = %+v", obs.Elements)
	}
	calls := models.Calls()
	if len(calls) != 2 || calls[0].Key != "sk-ant-desktop" || calls[1].Model != "claude-haiku-4-5" || !strings.Contains(calls[1].Prompt, "The answer is 42 apples.") {
		t.Errorf("model calls = %+v", calls)
	}
}
