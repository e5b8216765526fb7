package browsers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/browser"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// A recording follows the box's foreground tab (the one the API used
// last, or the newest one a CDP client opened) through its screencast;
// boxd repeats the latest frame at recordingFPS and ffmpeg, on the host,
// encodes it into 2-second HLS segments (H.264) that the playlist serves
// while it records. When it stops, the segments are copied into an MP4.
// The files live in the box's directory on the host (not in the box), and
// go with the box; the records are in boxd's store.
const (
	maxRecordingSeconds = 600
	recordingRetention  = 14 * 24 * time.Hour
	recordingFPS        = 10
)

// recordingIdle stops a recording after this long without a change on
// screen or a browser call (a variable for tests).
var recordingIdle = 3 * time.Minute

// recordings manages the boxes' recordings: one active per box.
type recordings struct {
	bs        *Browsers
	ffmpeg    string
	ffmpegErr error

	mu        sync.Mutex
	active    map[string]*activeRecording // by box id
	closed    bool
	stopSweep func() bool
}

type activeRecording struct {
	rec  store.Recording // as it started
	r    *browser.Recorder
	done chan struct{} // closed once the record is final
}

func newRecordings(bs *Browsers) *recordings {
	rs := &recordings{bs: bs, active: map[string]*activeRecording{}}
	rs.ffmpeg, rs.ffmpegErr = exec.LookPath("ffmpeg")
	if rs.ffmpegErr != nil {
		rs.ffmpegErr = errors.New("ffmpeg is not installed on this machine (on Debian: apt-get install ffmpeg)")
	}
	rs.upkeep(true)
	return rs
}

func (rs *recordings) dir(boxID, id string) string {
	return filepath.Join(rs.bs.host.Layout(boxID).Root, "recordings", id)
}

// upkeep makes the records right: a recording that was running when boxd
// stopped (at start) is finished from the segments it has, a recording
// of a box that is gone is forgotten, and an expired recording's files
// are deleted. It runs again every hour.
func (rs *recordings) upkeep(atStart bool) {
	db := rs.bs.db
	all, err := db.AllRecordings()
	if err != nil {
		rs.bs.host.Logger().Warn("recordings: cannot read records", "err", err)
	}
	now := time.Now()
	for _, rec := range all {
		if _, err := rs.bs.host.Box(rec.BoxID); errors.Is(err, errdefs.ErrNotFound) {
			_ = db.DeleteRecording(rec.BoxID, rec.ID)
			continue
		}
		dir := rs.dir(rec.BoxID, rec.ID)
		switch {
		case rec.Status == "recording" && atStart:
			rs.recover(rec, dir)
		case (rec.Status == "completed" || rec.Status == "failed") && rec.ExpiresAt != 0 && now.Unix() >= rec.ExpiresAt:
			_ = os.RemoveAll(dir)
			rec.Status = "deleted"
			if err := db.PutRecording(rec); err != nil {
				rs.bs.host.Logger().Warn("recordings: cannot update a record", "err", err)
			}
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.closed {
		rs.stopSweep = time.AfterFunc(time.Hour, func() { rs.upkeep(false) }).Stop
	}
}

// recover finishes a recording that boxd did not get to stop.
func (rs *recordings) recover(rec *store.Recording, dir string) {
	rec.StoppedReason = browser.StopLost
	rec.EndedAt = time.Now().Unix()
	n, size := countSegments(dir)
	rec.SegmentCount, rec.SizeBytes = int64(n), size
	rec.DurationMs = playlistDuration(filepath.Join(dir, browser.PlaylistName)).Milliseconds()
	rec.Status = "failed"
	if n > 0 && rs.ffmpegErr == nil {
		if mp4, err := browser.Remux(rs.ffmpeg, dir); err == nil {
			rec.Status, rec.MP4SizeBytes = "completed", mp4
		} else {
			rec.Error = err.Error()
		}
	} else {
		rec.Error = "boxd stopped before the recording had any video"
	}
	rec.ExpiresAt = rec.EndedAt + int64(recordingRetention/time.Second)
	if err := rs.bs.db.PutRecording(rec); err != nil {
		rs.bs.host.Logger().Warn("recordings: cannot update a record", "err", err)
	}
}

func countSegments(dir string) (int, int64) {
	ents, _ := os.ReadDir(dir)
	var n int
	var size int64
	for _, e := range ents {
		if segmentName.MatchString(e.Name()) {
			if fi, err := e.Info(); err == nil {
				n++
				size += fi.Size()
			}
		}
	}
	return n, size
}

// playlistDuration adds up the segment durations of an HLS playlist.
func playlistDuration(path string) time.Duration {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var total float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "#EXTINF:"); ok {
			v, _, _ = strings.Cut(v, ",")
			if d, err := strconv.ParseFloat(v, 64); err == nil {
				total += d
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

var segmentName = regexp.MustCompile(`^seg[0-9]{5}\.ts$`)

// touch notes activity on box's active recording.
func (rs *recordings) touch(boxID string) {
	rs.mu.Lock()
	ar := rs.active[boxID]
	rs.mu.Unlock()
	if ar != nil {
		ar.r.Touch()
	}
}

// noRecorder is the answer for a recording of a box without a browser of
// its own: a desktop's Chromium is not recorded.
func noRecorder(b *store.Box) error {
	if b.Desktop {
		return errdefs.Conflict("box %s has no browser to record: recordings are of the Chromium of a box created with browser: true, not of a desktop's", b.ID)
	}
	return noBrowser(b)
}

// start starts a recording of b's browser.
func (rs *recordings) start(ctx context.Context, b *store.Box, maxSeconds int) (*store.Recording, error) {
	if !b.Browser {
		return nil, noRecorder(b)
	}
	if rs.ffmpegErr != nil {
		return nil, errdefs.NotImplemented("boxd cannot record here: %v", rs.ffmpegErr)
	}
	_, ctl, err := rs.bs.ensure(ctx, b)
	if err != nil {
		return nil, err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return nil, core.ErrClosing
	}
	if ar := rs.active[b.ID]; ar != nil {
		return nil, errdefs.Conflict("box %s is already recording (%s); stop it first", b.ID, ar.rec.ID)
	}
	now := time.Now()
	rec := &store.Recording{
		ID: core.NewID("rec-"), BoxID: b.ID, Status: "recording", StartedAt: now.Unix(), StartedAtNs: now.UnixNano(),
		MaxDurationSeconds: maxSeconds,
	}
	r, err := browser.StartRecorder(ctl, browser.RecorderConfig{
		FFmpeg: rs.ffmpeg, Dir: rs.dir(b.ID, rec.ID), FPS: recordingFPS,
		MaxDuration: time.Duration(maxSeconds) * time.Second, IdleTimeout: recordingIdle,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the recording: %w", err)
	}
	if err := rs.bs.db.PutRecording(rec); err != nil {
		r.Stop(browser.StopLost)
		return nil, err
	}
	ar := &activeRecording{rec: *rec, r: r, done: make(chan struct{})}
	inUse := rs.bs.host.Busy(b.ID) // a recording box stays awake
	// close marks rs closed (under rs.mu, held here) before it waits, so
	// Go refuses nothing while rs is open.
	if !rs.bs.host.Go(func(context.Context) {
		<-r.Done()
		inUse()
		rs.finish(ar)
	}) {
		inUse()
		r.Stop(browser.StopLost)
		return nil, core.ErrClosing
	}
	rs.active[b.ID] = ar
	rs.bs.host.Logf(b.ID, "info", "system", "browser recording "+rec.ID+" started")
	return rec, nil
}

// finish writes the final record of a recording that stopped.
func (rs *recordings) finish(ar *activeRecording) {
	res := ar.r.Result()
	rec := ar.rec
	rec.EndedAt = time.Now().Unix()
	rec.DurationMs = res.Duration.Milliseconds()
	rec.SegmentCount, rec.SizeBytes, rec.MP4SizeBytes = int64(res.Segments), res.SegmentBytes, res.MP4Bytes
	rec.StoppedReason = res.Reason
	rec.CPUNs = res.CPU.Nanoseconds()
	rec.Markers = storeMarkers(res.Markers)
	rec.Status = "completed"
	if res.Err != nil {
		rec.Error = res.Err.Error()
		if res.MP4Bytes == 0 {
			rec.Status = "failed"
		}
	}
	rec.ExpiresAt = rec.EndedAt + int64(recordingRetention/time.Second)
	db := rs.bs.db
	if _, err := rs.bs.host.Box(rec.BoxID); errors.Is(err, errdefs.ErrNotFound) {
		_ = os.RemoveAll(rs.dir(rec.BoxID, rec.ID))
	} else if err := db.PutRecording(&rec); err != nil {
		rs.bs.host.Logger().Error("recordings: cannot store a record", "box", rec.BoxID, "recording", rec.ID, "err", err)
	} else {
		msg := fmt.Sprintf("browser recording %s stopped (%s): %.1fs of video, ffmpeg used %.2fs of CPU", rec.ID, rec.StoppedReason, res.Duration.Seconds(), res.CPU.Seconds())
		if rec.Error != "" {
			msg += "; " + rec.Error
		}
		rs.bs.host.Logf(rec.BoxID, "info", "system", msg)
	}
	rs.mu.Lock()
	if rs.active[rec.BoxID] == ar {
		delete(rs.active, rec.BoxID)
	}
	rs.mu.Unlock()
	close(ar.done)
}

func storeMarkers(ms []browser.Marker) []store.RecordingMarker {
	out := make([]store.RecordingMarker, 0, len(ms))
	for _, m := range ms {
		out = append(out, store.RecordingMarker{Type: "tab_switch", AtMs: m.At.Milliseconds(), EndMs: m.End.Milliseconds(), Label: m.Label, TabID: m.TabID})
	}
	return out
}

// view returns what is known of a recording now: the store's record, or
// the active recording's progress.
func (rs *recordings) view(boxID, id string) (*store.Recording, error) {
	rs.mu.Lock()
	ar := rs.active[boxID]
	rs.mu.Unlock()
	if ar != nil && ar.rec.ID == id {
		select {
		case <-ar.done:
		default:
			return ar.live(rs.dir(boxID, id)), nil
		}
	}
	rec, err := rs.bs.db.Recording(boxID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errdefs.NotFound("recording %s not found", id)
	}
	return rec, err
}

func (ar *activeRecording) live(dir string) *store.Recording {
	rec := ar.rec
	rec.DurationMs = time.Since(ar.r.Started()).Milliseconds()
	n, size := countSegments(dir)
	rec.SegmentCount, rec.SizeBytes = int64(n), size
	rec.Markers = storeMarkers(ar.r.Markers())
	return &rec
}

// stop stops box's active recording and returns its final record.
func (rs *recordings) stop(ctx context.Context, boxID string) (*store.Recording, error) {
	rs.mu.Lock()
	ar := rs.active[boxID]
	rs.mu.Unlock()
	if ar == nil {
		return nil, errdefs.Conflict("box %s has no active recording", boxID)
	}
	if !rs.bs.host.Go(func(context.Context) { ar.r.Stop(browser.StopRequested) }) {
		// boxd is closing, which stops every recording.
		return nil, core.ErrClosing
	}
	select {
	case <-ar.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return rs.view(boxID, ar.rec.ID)
}

// forgetBox ends the active recording of a deleted box and deletes the
// box's recording records (their files went with the box's).
func (rs *recordings) forgetBox(boxID string) {
	rs.mu.Lock()
	ar := rs.active[boxID]
	rs.mu.Unlock()
	if ar != nil {
		// Its browser went with the sandbox: what the recording
		// stores when it ends is deleted next.
		ar.r.Stop(browser.StopLost)
		<-ar.done
	}
	if err := rs.bs.db.DeleteRecordings(boxID); err != nil {
		rs.bs.host.Logger().Warn("recordings: cannot delete a deleted box's records", "box", boxID, "err", err)
	}
}

// close stops every active recording and waits for their files.
func (rs *recordings) close() {
	rs.mu.Lock()
	rs.closed = true
	if rs.stopSweep != nil {
		rs.stopSweep()
	}
	all := make([]*activeRecording, 0, len(rs.active))
	for _, ar := range rs.active {
		all = append(all, ar)
	}
	rs.mu.Unlock()
	for _, ar := range all {
		ar.r.Stop(browser.StopLost)
	}
	for _, ar := range all {
		<-ar.done
	}
}

func recordingData(r *store.Recording) gen.Recording {
	out := gen.Recording{
		ID: r.ID, BoxID: r.BoxID, Status: gen.RecordingStatus(r.Status), StartedAt: r.StartedAt,
		Markers: []gen.RecordingMarker{},
	}
	if r.EndedAt != 0 {
		out.EndedAt = wire.Ptr(r.EndedAt)
	}
	if r.DurationMs != 0 || r.Status != "recording" {
		out.DurationMs = wire.Ptr(r.DurationMs)
	}
	if r.SizeBytes != 0 {
		out.SizeBytes = wire.Ptr(r.SizeBytes)
	}
	if r.SegmentCount != 0 {
		out.SegmentCount = wire.Ptr(r.SegmentCount)
	}
	if r.MP4SizeBytes != 0 {
		out.Mp4SizeBytes = wire.Ptr(r.MP4SizeBytes)
	}
	if r.StoppedReason != "" {
		out.StoppedReason = wire.Ptr(gen.RecordingStoppedReason(r.StoppedReason))
	}
	if r.MaxDurationSeconds != 0 {
		out.MaxDurationSeconds = wire.Ptr(r.MaxDurationSeconds)
	}
	if r.ExpiresAt != 0 {
		out.ExpiresAt = wire.Ptr(r.ExpiresAt)
	}
	for _, m := range r.Markers {
		wm := gen.RecordingMarker{Type: gen.RecordingMarkerType(m.Type), AtMs: m.AtMs}
		if m.EndMs != 0 {
			wm.EndMs = wire.Ptr(m.EndMs)
		}
		if m.Label != "" {
			wm.Label = wire.Ptr(m.Label)
		}
		if m.TabID != "" {
			wm.TabID = wire.Ptr(m.TabID)
		}
		out.Markers = append(out.Markers, wm)
	}
	return out
}

func (bs *Browsers) StartBrowserRecording(ctx context.Context, req gen.StartBrowserRecordingRequestObject) (gen.StartBrowserRecordingResponseObject, error) {
	maxSeconds := maxRecordingSeconds
	if req.Body != nil && req.Body.MaxDurationSeconds != nil {
		maxSeconds = *req.Body.MaxDurationSeconds
		if maxSeconds < 1 || maxSeconds > maxRecordingSeconds {
			return nil, errdefs.Invalid("max_duration_seconds must be between 1 and %d, got %d", maxRecordingSeconds, maxSeconds)
		}
	}
	b, err := bs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	rec, err := bs.recs.start(ctx, b, maxSeconds)
	if err != nil {
		return nil, err
	}
	return gen.StartBrowserRecording200JSONResponse(recordingData(rec)), nil
}

func (bs *Browsers) StopBrowserRecording(ctx context.Context, req gen.StopBrowserRecordingRequestObject) (gen.StopBrowserRecordingResponseObject, error) {
	b, err := bs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if !b.Browser {
		return nil, noRecorder(b)
	}
	rec, err := bs.recs.stop(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	return gen.StopBrowserRecording200JSONResponse(recordingData(rec)), nil
}

func (bs *Browsers) GetBrowserRecording(ctx context.Context, req gen.GetBrowserRecordingRequestObject) (gen.GetBrowserRecordingResponseObject, error) {
	b, err := bs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	rec, err := bs.recs.view(b.ID, req.RecordingID)
	if err != nil {
		return nil, err
	}
	return gen.GetBrowserRecording200JSONResponse(recordingData(rec)), nil
}

// ListBrowserRecordings pages through a box's recordings, newest first;
// the cursor is the id of the last recording of the previous page.
func (bs *Browsers) ListBrowserRecordings(ctx context.Context, req gen.ListBrowserRecordingsRequestObject) (gen.ListBrowserRecordingsResponseObject, error) {
	b, err := bs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	limit := wire.DerefOr(req.Params.Limit, 100)
	if limit < 1 || limit > 100 {
		return nil, errdefs.Invalid("limit must be between 1 and 100, got %d", limit)
	}
	all, err := bs.db.Recordings(b.ID)
	if err != nil {
		return nil, err
	}
	start := 0
	if cur := wire.Deref(req.Params.Cursor); cur != "" {
		i := slices.IndexFunc(all, func(r *store.Recording) bool { return r.ID == cur })
		if i < 0 {
			return nil, errdefs.Invalid("cursor %q is not valid", cur)
		}
		start = i + 1
	}
	out := gen.ListBrowserRecordings200JSONResponse{Recordings: []gen.Recording{}}
	end := min(start+limit, len(all))
	for _, r := range all[start:end] {
		if r.Status == "recording" {
			if v, err := bs.recs.view(b.ID, r.ID); err == nil {
				r = v
			}
		}
		out.Recordings = append(out.Recordings, recordingData(r))
	}
	if end < len(all) {
		out.NextCursor = wire.Ptr(all[end-1].ID)
	}
	return out, nil
}

// multiFile reads files one after another and closes them all.
type multiFile struct {
	io.Reader
	files []*os.File
}

func (m *multiFile) Close() error {
	for _, f := range m.files {
		f.Close()
	}
	return nil
}

func (bs *Browsers) DownloadBrowserRecording(ctx context.Context, req gen.DownloadBrowserRecordingRequestObject) (gen.DownloadBrowserRecordingResponseObject, error) {
	b, err := bs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	rs := bs.recs
	rec, err := rs.view(b.ID, req.RecordingID)
	if err != nil {
		return nil, err
	}
	switch rec.Status {
	case "recording":
		return nil, errdefs.Conflict("recording %s is still in progress; stop it first", rec.ID)
	case "deleted":
		return nil, errdefs.NotFound("recording %s has expired and its video was deleted", rec.ID)
	}
	dir := rs.dir(b.ID, rec.ID)
	if f, err := os.Open(filepath.Join(dir, browser.MP4Name)); err == nil {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		return gen.DownloadBrowserRecording200VideoMp4Response{Body: f, ContentLength: fi.Size()}, nil
	}
	// No MP4: the segments, one after another, are an MPEG-TS stream.
	ents, _ := os.ReadDir(dir)
	m := &multiFile{}
	var readers []io.Reader
	var size int64
	for _, e := range ents {
		if !segmentName.MatchString(e.Name()) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			m.Close()
			return nil, err
		}
		if fi, err := f.Stat(); err == nil {
			size += fi.Size()
		}
		m.files = append(m.files, f)
		readers = append(readers, f)
	}
	if len(readers) == 0 {
		msg := fmt.Sprintf("recording %s has no video", rec.ID)
		if rec.Error != "" {
			msg += ": " + rec.Error
		}
		return nil, errdefs.NotFound("%s", msg)
	}
	m.Reader = io.MultiReader(readers...)
	return gen.DownloadBrowserRecording200VideoMp2TResponse{Body: m, ContentLength: size}, nil
}

// emptyLivePlaylist is the playlist of a recording before its first
// segment: the header the encoder writes (2-second segments, an event
// playlist that only grows), and no segment.
const emptyLivePlaylist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:EVENT\n"

// GetBrowserRecordingPlaylist serves the HLS playlist with its segments at
// segments/<name>, relative to the playlist's URL (served with the API
// key, like the playlist).
func (bs *Browsers) GetBrowserRecordingPlaylist(ctx context.Context, req gen.GetBrowserRecordingPlaylistRequestObject) (gen.GetBrowserRecordingPlaylistResponseObject, error) {
	b, err := bs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	rs := bs.recs
	rec, err := rs.view(b.ID, req.RecordingID)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(rs.dir(b.ID, rec.ID), browser.PlaylistName))
	switch {
	case errors.Is(err, fs.ErrNotExist) && rec.Status == "recording":
		// The first segment is still being encoded: a live playlist
		// without segments yet, which players poll until they come.
		raw = []byte(emptyLivePlaylist)
	case err != nil:
		return nil, errdefs.NotFound("recording %s has no playlist", rec.ID)
	}
	var out strings.Builder
	for line := range strings.Lines(string(raw)) {
		l := strings.TrimRight(line, "\r\n")
		if l != "" && !strings.HasPrefix(l, "#") {
			l = "segments/" + filepath.Base(l)
		}
		out.WriteString(l + "\n")
	}
	s := out.String()
	return gen.GetBrowserRecordingPlaylist200ApplicationVndAppleMpegurlResponse{Body: strings.NewReader(s), ContentLength: int64(len(s))}, nil
}

// serveSegment serves one HLS segment of a recording.
func (rs *recordings) serveSegment(w http.ResponseWriter, r *http.Request) {
	id, rid, name := r.PathValue("id"), r.PathValue("rid"), r.PathValue("name")
	if !segmentName.MatchString(name) {
		api.Error(w, errdefs.NotFound("no such segment"))
		return
	}
	b, err := rs.bs.host.Box(id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		api.Error(w, err)
		return
	case err != nil:
		api.StoreError(rs.bs.host.Logger(), w, err)
		return
	}
	if _, err := rs.view(b.ID, rid); err != nil {
		api.Error(w, err)
		return
	}
	f, err := os.Open(filepath.Join(rs.dir(b.ID, rid), name))
	if err != nil {
		api.Error(w, errdefs.NotFound("no such segment"))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		api.Error(w, err)
		return
	}
	w.Header().Set("Content-Type", "video/mp2t")
	http.ServeContent(w, r, name, fi.ModTime(), f)
}
