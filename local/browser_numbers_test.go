package local_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/internal/browsertest"
)

// TestBrowserNumbers measures the browser: a tab with its first content,
// cold (the browser starting) and warm, screenshots, and what recording
// costs in CPU. It takes about two minutes, so it runs only with
// BOXD_BROWSER_NUMBERS=1:
//
//	BOXD_BROWSER_NUMBERS=1 go test -run TestBrowserNumbers -v ./local/
func TestBrowserNumbers(t *testing.T) {
	if os.Getenv("BOXD_BROWSER_NUMBERS") == "" {
		t.Skip("set BOXD_BROWSER_NUMBERS=1 to measure the browser")
	}
	needBrowser(t)
	site := browsertest.NewSite(t)
	s := newBrowserServer(t, "", nil)
	c := s.raw(t)

	stats := func(what string, ds []time.Duration) {
		slices.Sort(ds)
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		t.Logf("%-44s n=%2d  median %7.1fms  mean %7.1fms  max %7.1fms", what, len(ds),
			ms(ds[len(ds)/2]), ms(sum/time.Duration(len(ds))), ms(ds[len(ds)-1]))
	}

	var cold []time.Duration
	var id string
	for range 3 {
		id = createBrowserBox(t, c, nil)
		start := time.Now()
		tab := decodeJSON[wireTab](t, "tab", c.do("POST", "/v2/box/"+id+"/browser/tabs", map[string]any{"url": site + "/"}, nil))
		decodeJSON[wireContent](t, "content", c.do("GET", "/v2/box/"+id+"/browser/content?tab="+tab.ID, nil, nil))
		cold = append(cold, time.Since(start))
	}
	stats("cold: browser start + tab + first content", cold)

	base := "/v2/box/" + id + "/browser"
	var warm, create, viewport, full []time.Duration
	for range 10 {
		start := time.Now()
		tab := decodeJSON[wireTab](t, "tab", c.do("POST", base+"/tabs", map[string]any{"url": site + "/"}, nil))
		create = append(create, time.Since(start))
		decodeJSON[wireContent](t, "content", c.do("GET", base+"/content?tab="+tab.ID, nil, nil))
		warm = append(warm, time.Since(start))
		start = time.Now()
		wantOK(t, "screenshot", c.do("GET", base+"/screenshot?encoding=base64&tab="+tab.ID, nil, nil))
		viewport = append(viewport, time.Since(start))
		start = time.Now()
		wantOK(t, "full screenshot", c.do("GET", base+"/screenshot?encoding=base64&full_page=true&tab="+tab.ID, nil, nil))
		full = append(full, time.Since(start))
		wantOK(t, "close", c.do("DELETE", base+"/tabs/"+tab.ID, nil, nil))
	}
	stats("warm: tab create", create)
	stats("warm: tab create + first content", warm)
	stats("screenshot, viewport (1280x720)", viewport)
	stats("screenshot, full page (1500x2755)", full)

	// Recording: CPU over a minute of a page that changes 20 times a
	// second, against the same page not recorded.
	decodeJSON[wireTab](t, "animated", c.do("POST", base+"/tabs", map[string]any{"url": site + "/animated"}, nil))
	const span = 60 * time.Second
	cpu := func() (self, chromium time.Duration) { return procCPU("self"), chromiumCPU() }
	s0, c0 := cpu()
	time.Sleep(span)
	s1, c1 := cpu()
	t.Logf("not recording, per minute: boxd %.2fs CPU, Chromium %.2fs CPU", perMin(s1-s0, span), perMin(c1-c0, span))
	rec := decodeJSON[wireRecording](t, "start", c.do("POST", base+"/recordings", map[string]any{}, nil))
	s0, c0 = cpu()
	time.Sleep(span)
	s1, c1 = cpu()
	done := decodeJSON[wireRecording](t, "stop", c.do("POST", base+"/recordings/stop", nil, nil))
	logs := decodeJSON[struct{ Logs []struct{ Message string } }](t, "logs", c.do("GET", "/v2/box/"+id+"/logs", nil, nil))
	ffmpeg := 0.0
	re := regexp.MustCompile(regexp.QuoteMeta(rec.ID) + `.*ffmpeg used ([0-9.]+)s of CPU`)
	for _, l := range logs.Logs {
		if m := re.FindStringSubmatch(l.Message); m != nil {
			ffmpeg, _ = strconv.ParseFloat(m[1], 64)
		}
	}
	t.Logf("recording, per minute: boxd %.2fs CPU, Chromium %.2fs CPU, ffmpeg %.2fs CPU (video %.1fs, %d segments, %.1f MB HLS, %.1f MB MP4)",
		perMin(s1-s0, span), perMin(c1-c0, span), ffmpeg*60000/float64(done.DurationMs),
		float64(done.DurationMs)/1000, done.SegmentCount, float64(done.SizeBytes)/1e6, float64(done.MP4SizeBytes)/1e6)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func perMin(d, span time.Duration) float64 { return d.Seconds() * float64(time.Minute) / float64(span) }

// procCPU is the CPU time (user + system) of a process, from /proc.
func procCPU(pid string) time.Duration {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	k, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(u+k) * (time.Second / 100) // USER_HZ
}

// chromiumCPU adds up the CPU time of the boxes' Chromium processes.
func chromiumCPU() time.Duration {
	var total time.Duration
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmd), ".boxd-chromium") {
			total += procCPU(e.Name())
		}
	}
	return total
}
