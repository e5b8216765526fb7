package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startChromium runs a headless Chromium on this machine for a test and
// connects a Controller to it.
func startChromium(t *testing.T) *Controller {
	t.Helper()
	c, _ := launchChromium(t)
	return c
}

// launchChromium is startChromium that also returns the browser's
// DevTools WebSocket URL, for a test that drives it as a CDP client.
func launchChromium(t *testing.T) (*Controller, string) {
	t.Helper()
	bin := "/usr/lib/chromium/chromium"
	if _, err := os.Stat(bin); err != nil {
		t.Skip("Chromium is not installed")
	}
	profile, err := os.MkdirTemp("", "browser-test-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--window-size=1280,720", "--remote-debugging-port=0", "--user-data-dir="+profile, "about:blank")
	ownGroup(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`DevTools listening on (ws://\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var ws string
	select {
	case ws = <-found:
	case <-time.After(20 * time.Second):
		t.Fatal("Chromium did not start")
	}
	u, _ := url.Parse(ws)
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", u.Host)
	}
	c, err := Connect(t.Context(), dial, u.Host, u.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		// The whole process group: Chromium's helpers too.
		killGroup(cmd)
		_ = cmd.Wait()
		_ = os.RemoveAll(profile)
	})
	return c, ws
}

func site(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/anim", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Anim</title><div id=b style="width:100px;height:100px;background:red;position:absolute"></div>
<script>let i=0;setInterval(()=>{i++;document.getElementById('b').style.left=(i*5%500)+'px'},50)</script>`)
	})
	mux.HandleFunc("/still", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Still</title><h1>Still page</h1>`)
	})
	mux.HandleFunc("/jsredirect", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Going</title><script>location.replace('/still')</script>`)
	})
	mux.HandleFunc("/dclredirect", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Going</title><script>addEventListener('DOMContentLoaded', () => location.replace('/still'))</script>`)
	})
	mux.HandleFunc("/chain", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Chain</title><script>location.replace('/jsredirect')</script>`)
	})
	mux.HandleFunc("/alert-on-load", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Alerting</title><script>alert('loading now')</script><p>after the alert</p>`)
	})
	mux.HandleFunc("/opener", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Opener</title><button id="open" onclick="window.open('/alert-on-load')">Open</button>`)
	})
	mux.HandleFunc("/link-to-redirect", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Link</title><a id="go" href="/replace-to-end">Go</a>`)
	})
	mux.HandleFunc("/replace-to-end", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Going</title><script>location.replace('/end')</script>`)
	})
	mux.HandleFunc("/end", func(w http.ResponseWriter, r *http.Request) {
		// The image holds the load event back, so that an action that
		// returned before the load would see the title unchanged.
		io.WriteString(w, `<!doctype html><title>End</title><img src="/slow.gif">
<script>addEventListener('load', () => { document.title = 'End loaded' })</script>`)
	})
	mux.HandleFunc("/slow.gif", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(500 * time.Millisecond)
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
	})
	mux.HandleFunc("/dialogs", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Dialogs</title>
<button id="alert" onclick="alert('hello ' + 1)">Alert</button>
<button id="confirm" onclick="document.getElementById('out').textContent = 'confirm=' + confirm('sure?')">Confirm</button>
<button id="prompt" onclick="document.getElementById('out').textContent = 'prompt=' + prompt('name?', 'def')">Prompt</button>
<div id="out"></div>`)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestWatchNewTab watches a tab from the moment it is created, as a
// recording does when a new tab comes to the foreground: frames must come
// once its page has loaded.
func TestWatchNewTab(t *testing.T) {
	c := startChromium(t)
	base := site(t)
	ctx := t.Context()
	if _, err := c.NewTab(ctx, base+"/anim", WaitLoad, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	created := make(chan string, 1)
	go func() {
		tab, err := c.NewTab(ctx, base+"/still", WaitLoad, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		created <- tab.ID
	}()
	// The new tab comes to the foreground as soon as it exists.
	var fg string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		tabs, _ := c.Tabs(ctx)
		if f := c.Foreground(ctx); len(tabs) >= 3 && f != "" {
			fg = f
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	began := time.Now()
	frames, stop, err := c.Watch(ctx, fg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	id := <-created
	if id != fg {
		t.Logf("foreground %s, created %s", fg, id)
	}
	n := 0
	timeout := time.After(5 * time.Second)
	for n < 1 {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("frames closed")
			}
			n++
			t.Logf("frame of %d bytes after %v", len(f.JPEG), time.Since(began))
		case <-timeout:
			t.Fatalf("no frame of the new tab in 5s")
		}
	}
}

// TestWatchAcrossSites keeps the frames of a tab coming after it navigates
// to another site (another renderer process).
func TestWatchAcrossSites(t *testing.T) {
	c := startChromium(t)
	base := site(t)
	ctx := t.Context()
	tab, err := c.NewTab(ctx, base+"/still", WaitLoad, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	frames, stop, err := c.Watch(ctx, tab.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case <-frames:
	case <-time.After(5 * time.Second):
		t.Fatal("no first frame")
	}
	other := strings.Replace(base, "127.0.0.1", "localhost", 1) + "/anim"
	if _, err := c.Goto(ctx, tab.ID, other, WaitLoad, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	n := 0
	timeout := time.After(5 * time.Second)
	for n < 10 {
		select {
		case _, ok := <-frames:
			if !ok {
				t.Fatal("the screencast ended")
			}
			n++
		case <-timeout:
			t.Fatalf("%d frames in 5s after going to another site", n)
		}
	}
}

// TestRecorderStops records a still page: with nothing changing on
// screen the recording stops as idle; a short maximum stops it first.
// Then the HLS segments alone make an MP4, as after boxd was killed.
func TestRecorderStops(t *testing.T) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is not installed")
	}
	c := startChromium(t)
	base := site(t)
	if _, err := c.NewTab(t.Context(), base+"/still", WaitLoad, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r, err := StartRecorder(c, RecorderConfig{FFmpeg: ffmpeg, Dir: dir + "/idle", MaxDuration: time.Minute, IdleTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
	case <-time.After(20 * time.Second):
		r.Stop(StopRequested)
		t.Fatal("a still page's recording did not stop as idle")
	}
	res := r.Result()
	if res.Reason != StopIdle || res.Err != nil || res.MP4Bytes == 0 || res.Duration < 1500*time.Millisecond || res.Duration > 4*time.Second {
		t.Errorf("idle recording = %+v", res)
	}
	if len(res.Markers) != 1 || res.Markers[0].Label != "Still" || res.Markers[0].End != res.Duration {
		t.Errorf("markers = %+v", res.Markers)
	}

	r, err = StartRecorder(c, RecorderConfig{FFmpeg: ffmpeg, Dir: dir + "/max", MaxDuration: 2 * time.Second, IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	res = r.Result()
	if res.Reason != StopMaxDuration || res.Duration != 2*time.Second {
		t.Errorf("2s recording = %+v", res)
	}
	if again := r.Stop(StopRequested); again.Reason != StopMaxDuration {
		t.Errorf("Stop after the end changed the reason to %q", again.Reason)
	}

	// What a killed boxd leaves: segments and a playlist without its end.
	crashed := dir + "/crashed"
	if err := os.MkdirAll(crashed, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir + "/max")
	for _, e := range ents {
		raw, _ := os.ReadFile(dir + "/max/" + e.Name())
		if e.Name() == PlaylistName {
			raw = []byte(strings.ReplaceAll(string(raw), "#EXT-X-ENDLIST\n", ""))
		}
		if strings.HasSuffix(e.Name(), ".ts") || e.Name() == PlaylistName {
			_ = os.WriteFile(crashed+"/"+e.Name(), raw, 0o600)
		}
	}
	if n, err := Remux(ffmpeg, crashed); err != nil || n == 0 {
		t.Errorf("Remux = %d, %v", n, err)
	}
}

// TestClientRedirects navigates to pages that redirect from script, while
// they load and once their DOM is ready: the navigation ends on the page
// they lead to, as it would in a browser a person uses.
func TestClientRedirects(t *testing.T) {
	c := startChromium(t)
	base := site(t)
	ctx := t.Context()
	for _, path := range []string{"/jsredirect", "/dclredirect", "/chain"} {
		for _, wait := range []string{WaitLoad, WaitDOMContentLoaded} {
			tab, err := c.NewTab(ctx, base+path, wait, 10*time.Second)
			if err != nil {
				t.Errorf("NewTab %s (%s): %v", path, wait, err)
				continue
			}
			if wait == WaitLoad && tab.URL != base+"/still" {
				t.Errorf("NewTab %s (%s) ended at %s", path, wait, tab.URL)
			}
			got, err := c.Goto(ctx, tab.ID, base+path, wait, 10*time.Second)
			if err != nil {
				t.Errorf("Goto %s (%s): %v", path, wait, err)
			} else if wait == WaitLoad && (got.URL != base+"/still" || got.Title != "Still") {
				t.Errorf("Goto %s (%s) ended at %s %q", path, wait, got.URL, got.Title)
			}
			_ = c.CloseTab(ctx, tab.ID)
		}
	}
}

// TestDialogs opens pages whose dialogs would block the tab: boxd
// dismisses them, and an action reports the ones it caused.
func TestDialogs(t *testing.T) {
	c := startChromium(t)
	base := site(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tab, err := c.NewTab(ctx, base+"/alert-on-load", WaitLoad, 10*time.Second)
	if err != nil {
		t.Fatalf("a page that alerts while it loads: %v", err)
	}
	if got, err := c.Content(ctx, tab.ID); err != nil || !strings.Contains(got.Text, "after the alert") {
		t.Errorf("content after the alert: %v, %v", got, err)
	}
	if _, err := c.Goto(ctx, tab.ID, base+"/dialogs", WaitLoad, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ button, typ, message, out string }{
		{"#alert", "alert", "hello 1", ""},
		{"#confirm", "confirm", "sure?", "confirm=false"},
		{"#prompt", "prompt", "name?", "prompt=null"},
	} {
		dialogs, err := c.Perform(ctx, tab.ID, Action{Selector: tc.button})
		if err != nil {
			t.Fatalf("click %s: %v", tc.button, err)
		}
		if len(dialogs) != 1 || dialogs[0].Type != tc.typ || dialogs[0].Message != tc.message {
			t.Errorf("click %s: dialogs %+v", tc.button, dialogs)
		}
		got, err := c.Content(ctx, tab.ID)
		if err != nil || !strings.Contains(got.Text, tc.out) {
			t.Errorf("after %s: %+v, %v", tc.button, got, err)
		}
	}
	if _, err := c.Screenshot(ctx, tab.ID, false); err != nil {
		t.Errorf("screenshot after the dialogs: %v", err)
	}
	if dialogs, err := c.Perform(ctx, tab.ID, Action{Selector: "#out"}); err != nil || len(dialogs) != 0 {
		t.Errorf("a click without a dialog: %+v, %v", dialogs, err)
	}
}

// TestDialogBeforeAttach opens pages that alert while they load where
// boxd is not attached yet: a target a CDP client creates, and a popup.
// The dialog blocks the page, and the popup's its opener too (they share
// a renderer); boxd's calls on them dismiss it, and an action reports it.
func TestDialogBeforeAttach(t *testing.T) {
	c, ws := launchChromium(t)
	base := site(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// A CDP client of its own creates the target; boxd has not seen it.
	client := dialCDP(t, ws)
	id := client.createTarget(ctx, base+"/alert-on-load")
	waitTab(t, c, func(tab Tab) bool { return tab.ID == id && tab.Title == "Alerting" })
	opCtx, opCancel := context.WithTimeout(ctx, 10*time.Second)
	dialogs, err := c.Perform(opCtx, id, Action{Selector: "p"})
	opCancel()
	if err != nil {
		t.Fatalf("an action on a tab whose dialog opened before boxd attached: %v", err)
	}
	if len(dialogs) != 1 || dialogs[0] != (Dialog{Type: "alert", Message: "loading now"}) {
		t.Errorf("the action reports the dialogs %+v, want the alert it dismissed", dialogs)
	}
	if got, err := c.Content(ctx, id); err != nil || !strings.Contains(got.Text, "after the alert") {
		t.Errorf("content after the alert: %+v, %v", got, err)
	}

	// A popup that alerts while it loads blocks its opener as well.
	opener, err := c.NewTab(ctx, base+"/opener", WaitLoad, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Perform(ctx, opener.ID, Action{Selector: "#open"}); err != nil {
		t.Fatal(err)
	}
	popup := waitTab(t, c, func(tab Tab) bool { return tab.URL == base+"/alert-on-load" && tab.ID != id })
	for _, tc := range []struct{ name, id, text string }{{"the opener", opener.ID, "Open"}, {"the popup", popup.ID, "after the alert"}} {
		opCtx, opCancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := c.Content(opCtx, tc.id)
		opCancel()
		if err != nil || !strings.Contains(got.Text, tc.text) {
			t.Errorf("content of %s while the popup alerts: %+v, %v", tc.name, got, err)
		}
	}
}

// TestWatchDialogBeforeAttach watches a tab whose page alerts while it
// loads, created by a CDP client before boxd attached to it, as the live
// view and a recording do when such a page comes to the foreground. The
// dialog blocks the tab, boxd's attach included: the watch dismisses it,
// as boxd's other calls do, and the frames come.
func TestWatchDialogBeforeAttach(t *testing.T) {
	c, ws := launchChromium(t)
	base := site(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	id := dialCDP(t, ws).createTarget(ctx, base+"/alert-on-load")
	waitTab(t, c, func(tab Tab) bool { return tab.ID == id && tab.Title == "Alerting" })

	// An attach the dialog blocks waits for its 30 s watchdog.
	start := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	frames, stop, err := c.Watch(wctx, id)
	wcancel()
	if err != nil {
		t.Fatalf("watching a tab whose dialog opened before boxd attached: %v after %v", err, time.Since(start))
	}
	defer stop()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatal("the screencast ended")
		}
		t.Logf("first frame of %d bytes after %v", len(f.JPEG), time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("no frame within 10s of the watch")
	}
}

// TestCloseTabWhileNavigating closes a tab while a navigation waits on it,
// boxd's CloseTab or a CDP client closing it: before its document
// answers, and while a subresource holds its load event back. The
// navigation fails as one on a tab that does not exist does, with ErrNoTab
// (a 404 of the API), once the tab is gone, and does not wait for its
// timeout.
func TestCloseTabWhileNavigating(t *testing.T) {
	c, ws := launchChromium(t)
	requested := make(chan string, 16)
	release := make(chan struct{})
	mux := http.NewServeMux()
	hang := func(w http.ResponseWriter, r *http.Request) {
		requested <- r.URL.Path
		select { // until the browser gives up on it
		case <-r.Context().Done():
		case <-release:
		}
	}
	mux.HandleFunc("/hang", hang)
	mux.HandleFunc("/hang.gif", hang)
	mux.HandleFunc("/held-load", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><title>Held</title><img src="/hang.gif">`)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		close(release)
		ts.Close()
	})
	client := dialCDP(t, ws)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for _, tc := range []struct{ name, path, held string }{
		{"document", "/hang", "/hang"},
		{"load", "/held-load", "/hang.gif"},
	} {
		for _, closer := range []string{"CloseTab", "CDP"} {
			tab, err := c.NewTab(ctx, "about:blank", WaitLoad, 0)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.Goto(ctx, tab.ID, ts.URL+tc.path, WaitLoad, 2*time.Minute)
				done <- err
			}()
			select {
			case path := <-requested:
				if path != tc.held {
					t.Fatalf("%s: the browser asked for %s first, want %s", tc.name, path, tc.held)
				}
			case err := <-done:
				t.Fatalf("%s: Goto returned before the server answered: %v", tc.name, err)
			}
			if closer == "CloseTab" {
				if err := c.CloseTab(ctx, tab.ID); err != nil {
					t.Fatal(err)
				}
			} else {
				client.call(ctx, "Target.closeTarget", map[string]any{"targetId": tab.ID}, nil)
				// Chromium answers before the tab is gone, and can keep a
				// tab that loads a while longer (seen under load): boxd
				// learns that it closed when the browser does.
				client.waitGone(ctx, tab.ID, time.Minute)
			}
			start := time.Now()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNoTab) {
					t.Errorf("%s closed by %s: Goto = %v, want ErrNoTab", tc.name, closer, err)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("%s closed by %s: Goto still waits %v after the tab closed", tc.name, closer, time.Since(start))
			}
		}
	}
}

// cdpClient is a test's own CDP client of the browser, as a program that
// drives it over CDP (Playwright, Puppeteer) is.
type cdpClient struct {
	t    *testing.T
	conn *websocket.Conn
	next int
}

// dialCDP connects a CDP client to the browser's DevTools WebSocket URL.
func dialCDP(t *testing.T, ws string) *cdpClient {
	t.Helper()
	conn, _, err := websocket.Dial(t.Context(), ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &cdpClient{t: t, conn: conn}
}

// call sends a command of the browser's session, waits for its answer
// (skipping the events before it) and decodes its result into res, unless
// res is nil.
func (cl *cdpClient) call(ctx context.Context, method string, params, res any) {
	cl.t.Helper()
	if errMsg := cl.do(ctx, method, params, res); errMsg != nil {
		cl.t.Fatalf("%s: %s", method, errMsg)
	}
}

// do is call that returns the browser's error, if it answers with one.
func (cl *cdpClient) do(ctx context.Context, method string, params, res any) json.RawMessage {
	cl.t.Helper()
	cl.next++
	id := cl.next
	if err := wsjson.Write(ctx, cl.conn, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		cl.t.Fatal(err)
	}
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := wsjson.Read(ctx, cl.conn, &msg); err != nil {
			cl.t.Fatalf("%s: %v", method, err)
		}
		if msg.ID != id {
			continue
		}
		if msg.Error != nil {
			return msg.Error
		}
		if res != nil {
			if err := json.Unmarshal(msg.Result, res); err != nil {
				cl.t.Fatalf("%s: %v", method, err)
			}
		}
		return nil
	}
}

// waitGone waits until the browser no longer has target id, at most
// limit.
func (cl *cdpClient) waitGone(ctx context.Context, id string, limit time.Duration) {
	cl.t.Helper()
	deadline := time.Now().Add(limit)
	for cl.do(ctx, "Target.getTargetInfo", map[string]any{"targetId": id}, nil) == nil {
		if time.Now().After(deadline) {
			cl.t.Fatalf("the browser still has the target %s %v after it was closed", id, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createTarget opens a page at url, as a CDP client does, and returns its
// target id.
func (cl *cdpClient) createTarget(ctx context.Context, url string) string {
	cl.t.Helper()
	var res struct {
		TargetID string `json:"targetId"`
	}
	cl.call(ctx, "Target.createTarget", map[string]any{"url": url}, &res)
	return res.TargetID
}

// waitTab waits up to 10 s for a tab that ok accepts.
func waitTab(t *testing.T, c *Controller, ok func(Tab) bool) Tab {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		tabs, err := c.Tabs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, tab := range tabs {
			if ok(tab) {
				return tab
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the tab did not appear within 10s")
	return Tab{}
}

// TestActFollowsRedirect clicks a link to a page that sends the browser on
// with location.replace: the action waits for the page it leads to, to
// its load event, and no longer.
func TestActFollowsRedirect(t *testing.T) {
	c := startChromium(t)
	base := site(t)
	ctx := t.Context()
	tab, err := c.NewTab(ctx, base+"/link-to-redirect", WaitLoad, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Perform(ctx, tab.ID, Action{Selector: "#go"}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	got, err := c.Content(ctx, tab.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The title changes on /end's load event: the action returned after it.
	if got.URL != base+"/end" || got.Title != "End loaded" {
		t.Errorf("after the click the tab shows %s %q, want /end once loaded", got.URL, got.Title)
	}
	// Waiting for the first page's load, which never comes, took 15 s.
	if took > 5*time.Second {
		t.Errorf("the click took %v", took)
	}
}

// TestForgetLeavesTab forgets a tab boxd is attached to, as CloseTab does
// before it closes the tab: boxd detaches, and the tab stays open. (The
// detach closed it too, which raced with CloseTab's close and failed it.)
func TestForgetLeavesTab(t *testing.T) {
	c := startChromium(t)
	base := site(t)
	ctx := t.Context()
	tab, err := c.NewTab(ctx, base+"/still", WaitLoad, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.forget(tab.ID)
	time.Sleep(time.Second) // the detach runs in the background
	if !c.exists(ctx, tab.ID) {
		t.Fatal("detaching from the tab closed it")
	}
	if got, err := c.Content(ctx, tab.ID); err != nil || got.Title != "Still" {
		t.Errorf("content after boxd attached anew: %+v, %v", got, err)
	}
	if err := c.CloseTab(ctx, tab.ID); err != nil {
		t.Errorf("close: %v", err)
	}
}

// TestForegroundHistory closes the tab in the foreground: the one used
// before it comes back, not whichever the browser lists first.
func TestForegroundHistory(t *testing.T) {
	c := startChromium(t)
	base := site(t)
	ctx := t.Context()
	var ids []string
	for range 3 {
		tab, err := c.NewTab(ctx, base+"/still", WaitLoad, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tab.ID)
	}
	// Use 0, then 2, then 1: closing 1 brings back 2, closing 2 brings
	// back 0.
	for _, i := range []int{0, 2, 1} {
		if _, err := c.Content(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct{ close, want int }{{1, 2}, {2, 0}} {
		if err := c.CloseTab(ctx, ids[step.close]); err != nil {
			t.Fatal(err)
		}
		if fg := c.Foreground(ctx); fg != ids[step.want] {
			t.Errorf("after closing tab %d the foreground is %s, want tab %d (%s)", step.close, fg, step.want, ids[step.want])
		}
	}
}

// TestClientWatch feeds the messages of CDP clients: each way a client
// brings a tab to the front moves the foreground there, and ids the
// browser does not have are ignored.
func TestClientWatch(t *testing.T) {
	c := startChromium(t)
	base := site(t)
	ctx := t.Context()
	var ids []string
	for range 3 {
		tab, err := c.NewTab(ctx, base+"/still", WaitLoad, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tab.ID)
	}
	fg := func(want int, after string) {
		t.Helper()
		if got := c.Foreground(ctx); got != ids[want] {
			t.Errorf("after %s the foreground is %s, want tab %d", after, got, want)
		}
	}
	w := c.WatchClient("")
	w.Event([]byte(`{"method":"Target.attachedToTarget","params":{"sessionId":"S0","targetInfo":{"targetId":"` + ids[0] + `","type":"page"},"waitingForDebugger":false}}`))
	w.Command([]byte(`{"id":7,"method":"Page.bringToFront","sessionId":"S0"}`))
	fg(0, "bringToFront on a flat session")
	w.Command([]byte(`{"id":8,"method":"Target.activateTarget","params":{"targetId":"` + ids[1] + `"}}`))
	fg(1, "activateTarget")
	w.Command([]byte(`{"id":9,"method":"Target.sendMessageToTarget","params":{"targetId":"` + ids[2] + `","message":"{\"id\":1,\"method\":\"Page.bringToFront\"}"}}`))
	fg(2, "bringToFront inside sendMessageToTarget")
	w.Event([]byte(`{"method":"Target.detachedFromTarget","params":{"sessionId":"S0"}}`))
	w.Command([]byte(`{"id":10,"method":"Page.bringToFront","sessionId":"S0"}`))
	fg(2, "bringToFront on a detached session")
	w.Command([]byte(`{"id":11,"method":"Target.activateTarget","params":{"targetId":"NOSUCHTARGET"}}`))
	w.Command([]byte(`{"method":"Page.bringToFront",`))
	fg(2, "an unknown target and a broken message")
	page := c.WatchClient(ids[0])
	page.Command([]byte(`{"id":1,"method":"Page.bringToFront"}`))
	fg(0, "bringToFront on a page's own endpoint")
}

// TestRecorderFollowsWhileEncoderIsSlow records with an encoder that
// takes three seconds to start reading its frames (ffmpeg on a busy
// machine): the foreground changes meanwhile are chapters all the same,
// at the times they happened.
func TestRecorderFollowsWhileEncoderIsSlow(t *testing.T) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is not installed")
	}
	slow := filepath.Join(t.TempDir(), "ffmpeg")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\n# a first run that is slow to start reading, as under load\ncase \"$*\" in *image2pipe*) sleep 3 ;; esac\nexec "+ffmpeg+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startChromium(t)
	base := site(t)
	ctx := t.Context()
	a, err := c.NewTab(ctx, base+"/anim", WaitLoad, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.NewTab(ctx, base+"/still", WaitLoad, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Content(ctx, a.ID); err != nil { // A in front
		t.Fatal(err)
	}
	r, err := StartRecorder(c, RecorderConfig{FFmpeg: slow, Dir: t.TempDir(), MaxDuration: time.Minute, IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := c.Content(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := c.Content(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	res := r.Stop(StopRequested)
	if res.Err != nil || res.MP4Bytes == 0 {
		t.Fatalf("recording = %+v", res)
	}
	var got []string
	for _, m := range res.Markers {
		got = append(got, m.TabID)
	}
	if !slices.Equal(got, []string{a.ID, b.ID, a.ID}) {
		t.Fatalf("chapters %+v, want A, B, A", res.Markers)
	}
	if at := res.Markers[1].At; at < 700*time.Millisecond || at > 1800*time.Millisecond {
		t.Errorf("B's chapter starts at %v, want about 1s", at)
	}
	if at := res.Markers[2].At; at < 1700*time.Millisecond || at > 2800*time.Millisecond {
		t.Errorf("A's second chapter starts at %v, want about 2s", at)
	}
}
