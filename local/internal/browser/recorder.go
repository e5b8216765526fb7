package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Reasons a recording stops (the API's stopped_reason values).
const (
	StopRequested           = "requested"
	StopMaxDuration         = "max_duration"
	StopIdle                = "idle"
	StopBrowserDisconnected = "browser_disconnected"
	StopLost                = "lost"
)

// Files of a recording in its directory.
const (
	PlaylistName = "playlist.m3u8"
	MP4Name      = "video.mp4"
)

// RecorderConfig configures a recording.
type RecorderConfig struct {
	// FFmpeg is the ffmpeg binary.
	FFmpeg string
	// Dir receives the HLS playlist, its segments and the MP4.
	Dir string
	// MaxDuration stops the recording; IdleTimeout stops it after that long
	// without a change on screen or a browser operation.
	MaxDuration time.Duration
	IdleTimeout time.Duration
	// FPS is the video's frame rate (default 10).
	FPS int

	// beforeFollow, in tests, runs before each look for the foreground.
	beforeFollow func()
}

// Marker is a chapter of a recording: a time when another tab came to the
// foreground.
type Marker struct {
	TabID string
	Label string
	At    time.Duration
	End   time.Duration // 0 while it is the current chapter
}

// Result is what a finished recording produced.
type Result struct {
	Reason       string
	Duration     time.Duration
	Segments     int
	SegmentBytes int64
	MP4Bytes     int64 // 0 when no MP4 could be made
	Markers      []Marker
	// CPU is the CPU time ffmpeg used, encoding and making the MP4.
	CPU time.Duration
	// Err is set when the video could not be produced.
	Err error
}

// Recorder records a browser's foreground tab: screencast frames, repeated
// at a constant frame rate, encoded by ffmpeg into HLS segments, and made
// into an MP4 when it stops.
type Recorder struct {
	cfg   RecorderConfig
	ctl   *Controller
	start time.Time

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer

	activity atomic.Int64 // unix nanoseconds of the last activity
	stopReq  chan string
	stopOnce sync.Once
	// stopAt is when Stop was first called: the recording ends there,
	// however long its loop takes to notice (it may be attaching to a tab).
	stopAt atomic.Pointer[time.Time]
	done   chan struct{}
	result Result

	mu      sync.Mutex
	markers []Marker
}

// StartRecorder starts recording ctl's foreground tab.
func StartRecorder(ctl *Controller, cfg RecorderConfig) (*Recorder, error) {
	if cfg.FPS <= 0 {
		cfg.FPS = 10
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	gop := strconv.Itoa(2 * cfg.FPS)
	fps := strconv.Itoa(cfg.FPS)
	args := []string{
		"-hide_banner", "-loglevel", "error",
		"-f", "image2pipe", "-framerate", fps, "-c:v", "mjpeg", "-i", "pipe:0",
		"-vf", fmt.Sprintf("scale=w=%d:h=%d:force_original_aspect_ratio=decrease:force_divisible_by=2,pad=%d:%d:(ow-iw)/2:(oh-ih)/2:color=white,format=yuv420p", castWidth, castHeight, castWidth, castHeight),
		"-c:v", "libx264", "-preset", "ultrafast", "-tune", "stillimage", "-crf", "30",
		"-r", fps, "-g", gop, "-keyint_min", gop, "-sc_threshold", "0",
		"-f", "hls", "-hls_time", "2", "-hls_list_size", "0", "-hls_playlist_type", "event",
		"-hls_segment_filename", filepath.Join(cfg.Dir, "seg%05d.ts"),
		filepath.Join(cfg.Dir, PlaylistName),
	}
	cmd := exec.Command(cfg.FFmpeg, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting ffmpeg: %w", err)
	}
	r := &Recorder{cfg: cfg, ctl: ctl, start: time.Now(), cmd: cmd, stdin: stdin, stderr: &stderr,
		stopReq: make(chan string, 1), done: make(chan struct{})}
	r.Touch()
	go r.run()
	return r, nil
}

// Started is when the recording started.
func (r *Recorder) Started() time.Time { return r.start }

// Touch records activity, which keeps the recording from stopping as idle.
func (r *Recorder) Touch() { r.activity.Store(time.Now().UnixNano()) }

// Done is closed when the recording has stopped and its files are final.
func (r *Recorder) Done() <-chan struct{} { return r.done }

// Result is the outcome; valid once Done is closed.
func (r *Recorder) Result() Result { <-r.done; return r.result }

// Markers returns the chapters so far.
func (r *Recorder) Markers() []Marker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Marker(nil), r.markers...)
}

// Stop stops the recording with reason (unless it already stopped), and
// waits until its files are final.
func (r *Recorder) Stop(reason string) Result {
	r.stopOnce.Do(func() {
		now := time.Now()
		r.stopAt.Store(&now)
		r.stopReq <- reason
	})
	return r.Result()
}

func (r *Recorder) run() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fps := r.cfg.FPS
	tick := time.NewTicker(time.Second / time.Duration(fps))
	defer tick.Stop()

	// The encoder is fed by a goroutine of its own: an encoder that is
	// slow to start, or to keep up, must not keep this loop from
	// following the foreground.
	fw := newFrameWriter(r.stdin, fps, blankFrame())
	var (
		cur     string
		frames  <-chan *Frame
		unwatch = func() {}
		ticks   int
		reason  string
	)
	defer func() { unwatch() }()
loop:
	for {
		select {
		case reason = <-r.stopReq:
			break loop
		case <-r.ctl.Done():
			reason = StopBrowserDisconnected
			break loop
		case f, ok := <-frames:
			if !ok {
				frames, cur = nil, ""
				continue
			}
			fw.frame(f.JPEG)
			r.Touch()
		case <-tick.C:
			if r.stopAt.Load() != nil {
				continue // the stop is on its way: record nothing past it
			}
			// Now, not the tick's time: a tick can wait in its channel.
			now := time.Now()
			el := now.Sub(r.start)
			if r.cfg.MaxDuration > 0 && el >= r.cfg.MaxDuration {
				fw.advance(r.cfg.MaxDuration)
				reason = StopMaxDuration
				break loop
			}
			if r.cfg.IdleTimeout > 0 && now.Sub(time.Unix(0, r.activity.Load())) >= r.cfg.IdleTimeout {
				reason = StopIdle
				break loop
			}
			// Follow the foreground tab; look for one at most twice a
			// second while there is none.
			ticks++
			if cur != "" || ticks%5 == 1 {
				if r.cfg.beforeFollow != nil {
					r.cfg.beforeFollow()
				}
				r.follow(ctx, &cur, &frames, &unwatch, el)
			}
			if cur != "" && ticks%fps == 0 {
				r.relabel(ctx, cur)
			}
			fw.advance(el)
			if fw.failed() {
				reason = StopLost
				break loop
			}
		}
	}
	unwatch()
	unwatch = func() {}
	if reason != StopMaxDuration {
		end := time.Now()
		if at := r.stopAt.Load(); at != nil {
			end = *at
		}
		fw.advance(end.Sub(r.start))
	}
	written, werr := fw.close()
	r.result = r.finish(reason, written, werr)
}

// frameWriter writes the recording's frames to the encoder: the latest
// frame, repeated as often as needed to cover the time recorded so far.
type frameWriter struct {
	w    io.Writer
	fps  int
	done chan struct{}

	mu      sync.Mutex
	wake    *sync.Cond
	last    []byte
	want    int // frames that cover the time so far
	written int
	closed  bool
	err     error
}

func newFrameWriter(w io.Writer, fps int, first []byte) *frameWriter {
	fw := &frameWriter{w: w, fps: fps, last: first, done: make(chan struct{})}
	fw.wake = sync.NewCond(&fw.mu)
	go fw.run()
	return fw
}

// frame makes f the frame written from now on.
func (fw *frameWriter) frame(f []byte) {
	fw.mu.Lock()
	fw.last = f
	fw.mu.Unlock()
}

// advance asks for frames enough to cover upTo: frames cover
// [i/fps, (i+1)/fps).
func (fw *frameWriter) advance(upTo time.Duration) {
	want := max(1, int(math.Ceil(upTo.Seconds()*float64(fw.fps))))
	fw.mu.Lock()
	if want > fw.want {
		fw.want = want
		fw.wake.Signal()
	}
	fw.mu.Unlock()
}

// failed reports whether the encoder refused a frame.
func (fw *frameWriter) failed() bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.err != nil
}

// close waits until every frame asked for is written, or the encoder
// failed, and returns how many were written.
func (fw *frameWriter) close() (int, error) {
	fw.mu.Lock()
	fw.closed = true
	fw.wake.Signal()
	fw.mu.Unlock()
	<-fw.done
	return fw.written, fw.err
}

func (fw *frameWriter) run() {
	defer close(fw.done)
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for {
		for fw.written >= fw.want && !fw.closed {
			fw.wake.Wait()
		}
		if fw.written >= fw.want || fw.err != nil {
			return
		}
		f := fw.last
		fw.mu.Unlock()
		_, err := fw.w.Write(f)
		fw.mu.Lock()
		if err != nil {
			fw.err = err
			return
		}
		fw.written++
	}
}

// follow switches the recording to the foreground tab when it changed.
func (r *Recorder) follow(ctx context.Context, cur *string, frames *<-chan *Frame, unwatch *func(), el time.Duration) {
	fg := r.ctl.Foreground(ctx)
	if fg == "" || fg == *cur {
		return
	}
	(*unwatch)()
	ch, stop, err := r.ctl.Watch(ctx, fg)
	if err != nil {
		*frames, *unwatch, *cur = nil, func() {}, ""
		return
	}
	*frames, *unwatch, *cur = ch, stop, fg
	r.mark(ctx, fg, el)
}

// mark starts a chapter for tab id at el; the first chapter starts at 0.
func (r *Recorder) mark(ctx context.Context, id string, el time.Duration) {
	label := r.label(ctx, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.markers)
	if n == 0 {
		el = 0
	} else if r.markers[n-1].End == 0 {
		r.markers[n-1].End = el
	}
	r.markers = append(r.markers, Marker{TabID: id, Label: label, At: el})
}

// label is what a chapter of tab id is called: the tab's title, else its
// URL.
func (r *Recorder) label(ctx context.Context, id string) string {
	tabs, err := r.ctl.Tabs(ctx)
	if err != nil {
		return ""
	}
	for _, t := range tabs {
		if t.ID == id {
			if t.Title != "" {
				return t.Title
			}
			return t.URL
		}
	}
	return ""
}

// relabel names the current chapter after what its tab shows now (a tab
// often comes to the foreground before its page has loaded).
func (r *Recorder) relabel(ctx context.Context, id string) {
	label := r.label(ctx, id)
	if label == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.markers); n > 0 && r.markers[n-1].TabID == id && r.markers[n-1].End == 0 {
		r.markers[n-1].Label = label
	}
}

// finish ends the encoding and makes the MP4.
func (r *Recorder) finish(reason string, frames int, werr error) Result {
	res := Result{Reason: reason, Duration: time.Duration(frames) * time.Second / time.Duration(r.cfg.FPS)}
	_ = r.stdin.Close()
	waited := make(chan error, 1)
	go func() { waited <- r.cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-time.After(2 * time.Minute):
		_ = r.cmd.Process.Kill()
		err = <-waited
	}
	if ps := r.cmd.ProcessState; ps != nil {
		res.CPU += ps.UserTime() + ps.SystemTime()
	}
	r.mu.Lock()
	if n := len(r.markers); n > 0 && r.markers[n-1].End == 0 {
		r.markers[n-1].End = res.Duration
	}
	res.Markers = append([]Marker(nil), r.markers...)
	r.mu.Unlock()
	res.Segments, res.SegmentBytes = segments(r.cfg.Dir)
	switch {
	case err != nil:
		res.Err = fmt.Errorf("ffmpeg: %v: %s", err, strings.TrimSpace(r.stderr.String()))
		return res
	case werr != nil:
		res.Err = fmt.Errorf("writing frames to ffmpeg: %v", werr)
	}
	if res.Segments == 0 {
		if res.Err == nil {
			res.Err = errors.New("ffmpeg wrote no video")
		}
		return res
	}
	mp4 := filepath.Join(r.cfg.Dir, MP4Name)
	cmd := exec.Command(r.cfg.FFmpeg, "-hide_banner", "-loglevel", "error", "-y",
		"-i", filepath.Join(r.cfg.Dir, PlaylistName), "-c", "copy", "-movflags", "+faststart", mp4)
	out, merr := cmd.CombinedOutput()
	if ps := cmd.ProcessState; ps != nil {
		res.CPU += ps.UserTime() + ps.SystemTime()
	}
	if merr != nil {
		_ = os.Remove(mp4)
		if res.Err == nil {
			res.Err = fmt.Errorf("making the MP4: %v: %s", merr, strings.TrimSpace(string(out)))
		}
		return res
	}
	if fi, err := os.Stat(mp4); err == nil {
		res.MP4Bytes = fi.Size()
	}
	return res
}

// segments counts a recording's HLS segments and their bytes.
func segments(dir string) (n int, size int64) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".ts") {
			if fi, err := e.Info(); err == nil {
				n++
				size += fi.Size()
			}
		}
	}
	return n, size
}

// Remux makes the MP4 of a recording from its HLS segments, for a
// recording that boxd did not get to finish (it was killed). It first
// closes the playlist if ffmpeg could not.
func Remux(ffmpeg, dir string) (mp4Bytes int64, err error) {
	pl := filepath.Join(dir, PlaylistName)
	raw, err := os.ReadFile(pl)
	if err != nil {
		return 0, err
	}
	if !bytes.Contains(raw, []byte("#EXT-X-ENDLIST")) {
		raw = append(bytes.TrimRight(raw, "\n"), []byte("\n#EXT-X-ENDLIST\n")...)
		if err := os.WriteFile(pl, raw, 0o600); err != nil {
			return 0, err
		}
	}
	mp4 := filepath.Join(dir, MP4Name)
	out, err := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-y", "-i", pl, "-c", "copy", "-movflags", "+faststart", mp4).CombinedOutput()
	if err != nil {
		_ = os.Remove(mp4)
		return 0, fmt.Errorf("making the MP4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	fi, err := os.Stat(mp4)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

var (
	blankOnce sync.Once
	blank     []byte
)

// blankFrame is a white frame, shown until the first screencast frame.
func blankFrame() []byte {
	blankOnce.Do(func() {
		img := image.NewRGBA(image.Rect(0, 0, castWidth, castHeight))
		draw.Draw(img, img.Bounds(), &image.Uniform{C: color.White}, image.Point{}, draw.Src)
		var b bytes.Buffer
		_ = jpeg.Encode(&b, img, &jpeg.Options{Quality: 50})
		blank = b.Bytes()
	})
	return blank
}
