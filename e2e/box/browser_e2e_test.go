package box_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"github.com/coder/websocket"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/internal/browsertest"
	"github.com/upstash/box-go/local"
)

// browserSlots bounds the browser tests that run at once: each runs a
// Chromium, and CI machines have two cores.
var browserSlots = make(chan struct{}, 2)

func needBrowser(t *testing.T) {
	t.Helper()
	if !browsertest.Installed() {
		t.Skip("Chromium is not installed (apt-get install chromium)")
	}
	browserSlots <- struct{}{}
	t.Cleanup(func() { <-browserSlots })
}

// counter counts the requests a client sends.
type counter struct{ n atomic.Int64 }

// browserBoxd runs a boxd whose AI operations call models, and returns a
// client for it and the client's request counter.
func browserBoxd(t *testing.T, models *browsertest.Models) (*box.Client, *counter) {
	t.Helper()
	isolation := local.IsolationBwrap
	if local.CheckIsolation() != nil {
		isolation = local.IsolationNone
	}
	key := "box_test_browser"
	srv, err := local.New(local.Config{
		AllowHostLoopback: true, // the test servers on 127.0.0.1 stand in for the network
		DataDir:           t.TempDir(), APIKey: key, Isolation: isolation,
		ModelProviderURLs: map[string]string{"anthropic": models.URL, "openai": models.URL + "/v1"},
	})
	if errors.Is(err, local.ErrUnsupportedOS) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		_ = hs.Close()
		_ = srv.Close()
	})
	cnt := &counter{}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := box.NewClient(box.WithAPIKey(key), box.WithBaseURL("http://"+l.Addr().String()), box.WithTelemetry(false),
		box.WithHTTPClient(&http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			cnt.n.Add(1)
			return tr.RoundTrip(r)
		})}))
	if err != nil {
		t.Fatal(err)
	}
	return c, cnt
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Fruit is what the test extracts from the page.
type Fruit struct {
	Fruit string `json:"fruit" jsonschema:"the fruit the page counts"`
	Count int    `json:"count"`
}

// TestBrowser drives a box's browser through the SDK: tabs, content,
// screenshots, AI operations against a stand-in provider, replays,
// chromedp over the CDP URL, and the live view.
func TestBrowser(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	site := browsertest.NewSite(t)
	models := browsertest.NewModels(t)
	c, sent := browserBoxd(t, models)
	ctx := t.Context()

	plain, err := c.Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := sent.n.Load()
	if _, err := plain.Browser.ListTabs(ctx); !errors.Is(err, box.ErrNoBrowser) {
		t.Errorf("ListTabs on a box without a browser = %v", err)
	}
	if _, err := plain.Browser.Tabs.Create(ctx, site, nil); !errors.Is(err, box.ErrNoBrowser) {
		t.Errorf("Tabs.Create on a box without a browser = %v", err)
	}
	if _, err := plain.Browser.Recordings.Start(ctx, 0); !errors.Is(err, box.ErrNoBrowser) {
		t.Errorf("Recordings.Start on a box without a browser = %v", err)
	}
	if sent.n.Load() != n {
		t.Errorf("browser calls on a box without a browser sent %d requests", sent.n.Load()-n)
	}

	b, err := c.Create(ctx, &box.CreateParams{Browser: true, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test"}})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Info().Browser {
		t.Fatal("Info().Browser is false")
	}
	start := time.Now()
	tab, err := b.Browser.Tabs.Create(ctx, site+"/", &box.TabParams{WaitUntil: box.WaitLoad, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Tabs.Create with the browser's start: %v", time.Since(start))
	if tab.Title() != "Fixture page" || tab.URL() != site+"/" || tab.ID() == "" {
		t.Errorf("tab = %s %q %q", tab.ID(), tab.Title(), tab.URL())
	}

	n = sent.n.Load()
	again := b.Browser.GetTab(tab.ID())
	if sent.n.Load() != n || again.Title() != "" {
		t.Errorf("GetTab sent a request or knows a title")
	}
	start = time.Now()
	content, err := again.Content(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Content: %v", time.Since(start))
	if content.Title != "Fixture page" || again.Title() != "Fixture page" || !strings.Contains(content.Text, "42 apples") || len(content.Links) != 2 || content.Links[0].Href != site+"/second" {
		t.Errorf("content = %+v", content)
	}

	start = time.Now()
	shot, err := tab.Screenshot(ctx, &box.ScreenshotParams{FullPage: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full-page Screenshot: %v", time.Since(start))
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	m := browsertest.SizeRE.FindStringSubmatch(content.Text)
	if m == nil {
		t.Fatalf("no size in %q", content.Text)
	}
	w, _ := strconv.Atoi(m[1])
	h, _ := strconv.Atoi(m[2])
	if img.Bounds().Dx() != w || img.Bounds().Dy() != h {
		t.Errorf("full-page screenshot %v, page %dx%d", img.Bounds(), w, h)
	}
	if b64, err := tab.ScreenshotBase64(ctx, nil); err != nil || !strings.HasPrefix(b64, "iVBORw0KGgo") {
		t.Errorf("ScreenshotBase64 = %.20q, %v", b64, err)
	}

	// AI operations through the stand-in provider.
	fruit, err := box.Extract[Fruit](ctx, tab, "the fruit and how many", nil)
	if err != nil || fruit != (Fruit{"apples", 42}) {
		t.Errorf("Extract[Fruit] = %+v, %v", fruit, err)
	}
	last := models.Calls()[len(models.Calls())-1]
	if last.Key != "sk-ant-test" || last.Model != "claude-sonnet-4-5" || !strings.Contains(last.Prompt, `"fruit"`) {
		t.Errorf("provider call = %+v", last)
	}
	raw, err := tab.Extract(ctx, "the fruit and how many", map[string]any{
		"type": "object", "properties": map[string]any{"fruit": map[string]any{"type": "string"}, "count": map[string]any{"type": "integer"}},
	}, &box.AIParams{Model: box.ClaudeCodeHaiku4_5})
	if got, _ := json.Marshal(raw); err != nil || string(got) != `{"count":42,"fruit":"apples"}` {
		t.Errorf("Extract raw = %s, %v", got, err)
	}
	if last := models.Calls()[len(models.Calls())-1]; last.Model != "claude-haiku-4-5" {
		t.Errorf("the model asked for was %q", last.Model)
	}
	var apiErr *box.Error
	if _, err := box.Extract[Fruit](ctx, tab, "count the pears", nil); !errors.As(err, &apiErr) || apiErr.StatusCode != 502 {
		t.Errorf("Extract with a wrong answer = %v", err)
	}

	elements, err := tab.Observe(ctx, "the add buttons", nil)
	if err != nil || len(elements) != 1 || elements[0].Selector == "" {
		t.Fatalf("Observe = %+v, %v", elements, err)
	}
	calls := len(models.Calls())
	res, err := tab.ActOn(ctx, elements[0])
	if err != nil || !res.Success || res.InputTokens != 0 || res.CacheStatus != "" {
		t.Errorf("ActOn(element) = %+v, %v", res, err)
	}
	res, err = tab.ActOn(ctx, res.Actions[0])
	if err != nil || !res.Success {
		t.Errorf("ActOn(action) = %+v, %v", res, err)
	}
	if len(models.Calls()) != calls {
		t.Errorf("replays called the model")
	}
	n = sent.n.Load()
	if _, err := tab.ActOn(ctx, box.BrowserAction{Description: "no selector", Method: "click"}); !errors.Is(err, box.ErrNoSelector) || sent.n.Load() != n {
		t.Errorf("ActOn without a selector = %v (%d requests)", err, sent.n.Load()-n)
	}
	res, err = tab.Act(ctx, "Type Grace into the name field", nil)
	if err != nil || !res.Success || res.CacheStatus != "MISS" || res.InputTokens == 0 || len(res.Actions) != 1 || res.Actions[0].Method != "fill" {
		t.Errorf("Act = %+v, %v", res, err)
	}
	content, err = tab.Content(ctx)
	if err != nil || !strings.Contains(content.Text, "Items: 2") || !strings.Contains(content.Text, "Hi Grace") {
		t.Errorf("after the replays and Act: %q, %v", content.Text, err)
	}

	// A dialog that an action opens is dismissed, and reported.
	ask, err := b.Browser.NewTab(ctx, site+"/confirm", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = ask.ActOn(ctx, box.BrowserAction{Selector: "#del", Description: "delete"})
	if err != nil || !res.Success || len(res.Dialogs) != 1 || res.Dialogs[0] != (box.Dialog{Type: "confirm", Message: "Delete it?"}) {
		t.Errorf("ActOn a button that asks = %+v, %v", res, err)
	}
	if c, err := ask.Content(ctx); err != nil || !strings.Contains(c.Text, "answer false") {
		t.Errorf("after the dismissed confirm: %+v, %v", c, err)
	}
	if err := ask.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Navigation, a second tab, the list, closing.
	if content, err := tab.Goto(ctx, site+"/second"); err != nil || content.Title != "Second page" || tab.URL() != site+"/second" {
		t.Errorf("Goto = %+v, %v", content, err)
	}
	tab2, err := b.Browser.NewTab(ctx, site+"/third", nil)
	if err != nil {
		t.Fatal(err)
	}
	tabs, err := b.Browser.ListTabs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, tb := range tabs {
		ids[tb.ID()] = tb.Title()
	}
	if ids[tab.ID()] != "Second page" || ids[tab2.ID()] != "Third page" {
		t.Errorf("ListTabs = %v", ids)
	}
	if err := tab2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tab2.Content(ctx); !box.IsNotFound(err) {
		t.Errorf("Content of a closed tab = %v", err)
	}

	// chromedp over the CDP URL.
	cdpURL, err := b.Browser.CDPURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := remote.NewAllocator(ctx, cdpURL)
	defer cancel()
	cctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(cctx, chromedp.Navigate(site+"/"), chromedp.Click(chromedp.CSS("#add"))); err != nil {
		t.Fatalf("chromedp over the CDP URL: %v", err)
	}
	if count, err := chromedp.Run(cctx, chromedp.Text(chromedp.CSS("#count"))); err != nil || count != "1" {
		t.Errorf("chromedp click: count %q, %v", count, err)
	}

	// The live view.
	live, err := tab.LiveViewURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(wctx, strings.Replace(strings.Replace(live, "/live?", "/live/ws?", 1), "http://", "ws://", 1), nil)
	if err != nil {
		t.Fatalf("live view: %v", err)
	}
	if typ, frame, err := ws.Read(wctx); err != nil || typ != websocket.MessageBinary || !bytes.HasPrefix(frame, []byte{0xff, 0xd8}) {
		t.Errorf("live view frame: %v", err)
	}
	ws.Close(websocket.StatusNormalClosure, "")
}

// TestBrowserRecording records ten seconds of a box's browser through the
// SDK, downloads the MP4 and checks it with ffprobe.
func TestBrowserRecording(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("ffmpeg is not installed (apt-get install ffmpeg)")
	}
	site := browsertest.NewSite(t)
	c, _ := browserBoxd(t, browsertest.NewModels(t))
	ctx := t.Context()
	b, err := c.Create(ctx, &box.CreateParams{Browser: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Browser.Recordings.Start(ctx, 601*time.Second); err == nil {
		t.Error("a recording longer than 600s was accepted")
	}
	tab, err := b.Browser.NewTab(ctx, site+"/animated", nil)
	if err != nil {
		t.Fatal(err)
	}
	calledStart := time.Now()
	h, err := b.Browser.Recordings.Start(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if h.Recording.Status != box.RecordingActive || h.Recording.MaxDuration != box.MaxRecordingDuration {
		t.Errorf("started = %+v", h.Recording)
	}
	var apiErr *box.Error
	if _, err := b.Browser.Recordings.Start(ctx, time.Minute); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Errorf("a second Start = %v", err)
	}
	time.Sleep(time.Until(began.Add(10 * time.Second)))
	calledStop := time.Now()
	rec, err := h.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The recording covers the time from its start to the stop: at least
	// from Start's answer to the call of Stop, at most from the call of
	// Start to Stop's answer (and a frame).
	least, most := calledStop.Sub(began)-100*time.Millisecond, time.Since(calledStart)+100*time.Millisecond
	if rec.Status != box.RecordingCompleted || rec.StoppedReason != box.StoppedRequested || rec.Duration < least ||
		rec.Duration > most || len(rec.Markers) != 1 || rec.Markers[0].TabID != tab.ID() || rec.ExpiresAt.Before(time.Now().Add(13*24*time.Hour)) {
		t.Errorf("stopped = %+v, want a duration in [%v, %v]", rec, least, most)
	}
	if again, err := h.Stop(ctx); err != nil || again.ID != rec.ID || again.Status != box.RecordingCompleted {
		t.Errorf("Stop again = %+v, %v", again, err)
	}
	if _, err := b.Browser.Recordings.Stop(ctx); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Errorf("Recordings.Stop with none = %v", err)
	}
	all, err := b.Browser.Recordings.List(ctx)
	if err != nil || len(all) != 1 || all[0].ID != rec.ID {
		t.Errorf("List = %+v, %v", all, err)
	}
	got, err := b.Browser.Recordings.Get(ctx, rec.ID)
	if err != nil || got.Duration != rec.Duration || got.MP4SizeBytes != rec.MP4SizeBytes {
		t.Errorf("Get = %+v, %v", got, err)
	}

	// The playlist is served with the API key.
	req, _ := http.NewRequestWithContext(ctx, "GET", rec.PlaylistURL, nil)
	req.Header.Set("X-Box-Api-Key", "box_test_browser")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("playlist: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	path := filepath.Join(t.TempDir(), "out", "demo.mp4")
	written, err := b.Browser.Recordings.Download(ctx, rec.ID, path)
	if err != nil || written != path {
		t.Fatalf("Download = %q, %v", written, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != rec.MP4SizeBytes {
		t.Fatalf("downloaded %v, %v; want %d bytes", fi, err, rec.MP4SizeBytes)
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_name", "-of", "json", path).Output()
	if err != nil {
		t.Fatalf("ffprobe: %v", err)
	}
	var p struct {
		Format  struct{ Duration string }
		Streams []struct {
			CodecName string `json:"codec_name"`
		}
	}
	_ = json.Unmarshal(out, &p)
	secs, _ := strconv.ParseFloat(p.Format.Duration, 64)
	if secs < least.Seconds()-0.1 || secs > most.Seconds()+0.1 || len(p.Streams) != 1 || p.Streams[0].CodecName != "h264" {
		t.Errorf("ffprobe: %s", out)
	}
	if _, err := b.Browser.Recordings.Download(ctx, "rec-nope", filepath.Join(t.TempDir(), "x.mp4")); !box.IsNotFound(err) {
		t.Errorf("Download of an unknown recording = %v", err)
	}
}
