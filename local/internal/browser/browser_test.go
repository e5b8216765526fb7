package browser

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startChromium runs a headless Chromium on this machine for a test and
// connects a Controller to it.
func startChromium(t *testing.T) *Controller {
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = os.RemoveAll(profile)
	})
	return c
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
