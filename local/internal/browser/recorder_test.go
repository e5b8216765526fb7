package browser

import (
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

// TestRecordingEndsWhenStopped: a recording is as long as the time from
// its start to the call of Stop, also when its loop is busy then (here
// held for 2 s, as an attach to a tab can take under load).
func TestRecordingEndsWhenStopped(t *testing.T) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is not installed")
	}
	c := startChromium(t)
	if _, err := c.NewTab(t.Context(), site(t)+"/anim", WaitLoad, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var hold atomic.Bool
	entered := make(chan struct{}, 1)
	cfg := RecorderConfig{FFmpeg: ffmpeg, Dir: t.TempDir(), MaxDuration: time.Minute, IdleTimeout: time.Minute,
		beforeFollow: func() {
			if hold.Load() {
				select {
				case entered <- struct{}{}:
					time.Sleep(2 * time.Second)
				default:
				}
			}
		}}
	start := time.Now()
	r, err := StartRecorder(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	hold.Store(true)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the recorder never looked for the foreground")
	}
	stopped := time.Now()
	res := r.Stop(StopRequested)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	// At most the time from before StartRecorder to Stop, and a frame.
	if limit := stopped.Sub(start) + 100*time.Millisecond; res.Duration > limit || res.Duration < stopped.Sub(start)-time.Second {
		t.Errorf("the recording lasts %v, though Stop came %v after its start", res.Duration, stopped.Sub(start))
	}
}
