package desktop_test

import (
	"errors"
	"image"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// magentaPage fills the window that shows it with magenta, a colour
// nothing else on the desktop has.
const magentaPage = `<!doctype html>
<html><head><title>magenta page</title></head>
<body style="margin:0;background:rgb(255,0,255)"><p>served in the desktop box</p></body></html>`

// TestDesktopBrowser drives the desktop's own Chromium through the browser
// API: it answers 409 while the desktop is stopped; once it runs, a tab
// opened through the SDK shows its page on the desktop's screen, a tab the
// desktop opens is among the browser's tabs, and Stop leaves no Chromium
// behind; after a new start the browser API attaches again.
func TestDesktopBrowser(t *testing.T) {
	t.Parallel()
	needDesktop(t)
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Desktop: true})
	if err := b.Files.Write(ctx, "site/magenta.html", []byte(magentaPage)); err != nil {
		t.Fatal(err)
	}
	if err := b.Files.Write(ctx, "site/other.html", []byte(`<!doctype html><title>opened by the desktop</title>`)); err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "cd site && (python3 -m http.server 8000 --bind 127.0.0.1 > ../server.log 2>&1 &) && sleep 0.5")
	const site = "http://127.0.0.1:8000/"

	var apiErr *box.Error
	stopped := func(when string) {
		t.Helper()
		_, err := b.Browser.ListTabs(ctx)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || !strings.Contains(err.Error(), "desktop/start") {
			t.Fatalf("ListTabs %s: %v, want a 409 that says to start the desktop", when, err)
		}
	}
	stopped("before the desktop starts")

	if _, err := b.Desktop.Start(ctx, nil); err != nil {
		t.Fatalf("Start: %v", err)
	}
	start := time.Now()
	tab, err := b.Browser.Tabs.Create(ctx, site+"magenta.html", nil)
	if err != nil {
		t.Fatalf("Tabs.Create on the desktop's Chromium: %v", err)
	}
	t.Logf("first tab %v after the desktop's start", time.Since(start).Round(time.Millisecond))
	c, err := tab.Content(ctx)
	if err != nil {
		t.Fatalf("Content: %v", err)
	}
	if c.Title != "magenta page" || !strings.Contains(c.Text, "served in the desktop box") {
		t.Fatalf("Content = %+v", c)
	}

	// The tab is on the desktop's screen: a headless Chromium's would not
	// be.
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
			// Which windows are there, top last.
			w := mustRun(t, b, "for w in $(DISPLAY=:1 xdotool search --onlyvisible --class chromium); do DISPLAY=:1 xdotool getwindowname $w; done")
			t.Logf("Chromium's windows: %q", w.Stdout)
			t.Fatalf("the tab's page does not show on the desktop: %.1f%% of the screen is magenta", share*100)
		}
	}

	// The CDP URL reaches the same tab; leaving it leaves the desktop's
	// Chromium running (the tab the desktop opens below shows it).
	cdpURL, err := b.Browser.CDPURL(ctx)
	if err != nil {
		t.Fatalf("CDPURL: %v", err)
	}
	actx, cancel := remote.NewAllocator(ctx, cdpURL)
	cctx, cancelTab := chromedp.NewContext(actx, chromedp.WithTargetID(target.ID(tab.ID())))
	if title, err := chromedp.Run(cctx, chromedp.Evaluate[string](`document.title`)); err != nil || title != "magenta page" {
		t.Errorf("document.title over the CDP URL = %q, %v", title, err)
	}
	cancelTab()
	cancel()

	// A tab the desktop opens is the browser API's too.
	if err := b.Desktop.Open(ctx, site+"other.html"); err != nil {
		t.Fatalf("Desktop.Open: %v", err)
	}
	var seen []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		tabs, err := b.Browser.ListTabs(ctx)
		if err != nil {
			t.Fatalf("ListTabs: %v", err)
		}
		seen = seen[:0]
		found := false
		for _, tb := range tabs {
			seen = append(seen, tb.URL())
			found = found || tb.URL() == site+"other.html"
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page the desktop opened is not among the browser's tabs %q", seen)
		}
	}

	// The desktop owns its Chromium: Stop ends it, and the browser API
	// answers 409 again.
	if err := b.Desktop.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	var left string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = mustRun(t, b, "pgrep -a chromium || pgrep -x Xvfb || echo none").Stdout
		if left == "none\n" || time.Now().After(deadline) {
			break
		}
	}
	if left != "none\n" {
		t.Errorf("processes of the desktop run after Stop: %q", left)
	}
	stopped("after the desktop stopped")

	// A new desktop is attached to anew.
	if _, err := b.Desktop.Start(ctx, nil); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	tab, err = b.Browser.NewTab(ctx, site+"magenta.html", nil)
	if err != nil {
		t.Fatalf("NewTab on the desktop started again: %v", err)
	}
	if c, err := tab.Content(ctx); err != nil || c.Title != "magenta page" {
		t.Fatalf("Content on the desktop started again = %+v, %v", c, err)
	}
}

// magentaShare is the share of img's pixels that are magenta.
func magentaShare(img image.Image) float64 {
	r := img.Bounds()
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y += 4 {
		for x := r.Min.X; x < r.Max.X; x += 4 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if cr>>8 > 230 && cg>>8 < 30 && cb>>8 > 230 {
				n++
			}
		}
	}
	return float64(n*16) / float64(r.Dx()*r.Dy())
}
