package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/upstash/box-go/gen"
)

// MaxRecordingDuration is the longest a recording runs; it stops by
// itself then, or after about three minutes without anything changing on
// screen.
const MaxRecordingDuration = 600 * time.Second

// RecordingStatus is the state of a recording.
type RecordingStatus string

// Recording statuses.
const (
	RecordingActive    RecordingStatus = "recording"
	RecordingCompleted RecordingStatus = "completed"
	RecordingFailed    RecordingStatus = "failed"
	// RecordingDeleted is a recording whose video has expired (videos are
	// kept 14 days).
	RecordingDeleted RecordingStatus = "deleted"
)

// Reasons a recording stopped (Recording.StoppedReason).
const (
	StoppedRequested           = "requested"
	StoppedMaxDuration         = "max_duration"
	StoppedIdle                = "idle"
	StoppedBrowserDisconnected = "browser_disconnected"
	StoppedLost                = "lost"
)

// Recording is a video of a box's browser: it follows the tab in the
// foreground, with a chapter marker at every switch.
type Recording struct {
	ID        string
	BoxID     string
	Status    RecordingStatus
	StartedAt time.Time
	EndedAt   time.Time // zero while recording
	Duration  time.Duration
	// SizeBytes is the size of the HLS segments, MP4SizeBytes of the MP4.
	SizeBytes     int64
	MP4SizeBytes  int64
	SegmentCount  int64
	StoppedReason string
	MaxDuration   time.Duration
	// ExpiresAt is when the video is deleted.
	ExpiresAt time.Time
	Markers   []RecordingMarker
	// PlaylistURL is the recording's HLS playlist. It and its segments
	// need the API key in the X-Box-Api-Key header.
	PlaylistURL string
}

// RecordingMarker is a chapter of a recording: from At to End (zero while
// it is the current one), the tab TabID was in the foreground.
type RecordingMarker struct {
	Type  string // tab_switch
	At    time.Duration
	End   time.Duration
	Label string
	TabID string
}

// Recordings records a box's browser. A box has at most one active
// recording.
type Recordings struct{ br *Browser }

func (rs *Recordings) recording(r *gen.Recording) *Recording {
	out := &Recording{
		ID: r.ID, BoxID: r.BoxID, Status: RecordingStatus(r.Status), StartedAt: unixTime(r.StartedAt),
		EndedAt: unixTime(deref(r.EndedAt)), Duration: time.Duration(deref(r.DurationMs)) * time.Millisecond,
		SizeBytes: deref(r.SizeBytes), MP4SizeBytes: deref(r.Mp4SizeBytes), SegmentCount: deref(r.SegmentCount),
		MaxDuration: time.Duration(deref(r.MaxDurationSeconds)) * time.Second, ExpiresAt: unixTime(deref(r.ExpiresAt)),
		Markers:     make([]RecordingMarker, len(r.Markers)),
		PlaylistURL: rs.br.b.c.BaseURL() + "/v2/box/" + encodeURIComponent(rs.br.b.id) + "/browser/recordings/" + encodeURIComponent(r.ID) + "/playlist",
	}
	if r.StoppedReason != nil {
		out.StoppedReason = string(*r.StoppedReason)
	}
	for i, m := range r.Markers {
		out.Markers[i] = RecordingMarker{Type: string(m.Type), At: time.Duration(m.AtMs) * time.Millisecond,
			End: time.Duration(deref(m.EndMs)) * time.Millisecond, Label: deref(m.Label), TabID: deref(m.TabID)}
	}
	return out
}

// RecordingHandle is a recording that Start started.
type RecordingHandle struct {
	rs *Recordings
	// Recording is the recording as it started.
	Recording Recording
}

// Stop stops this recording, waits until its video is final and returns
// it. A recording that already stopped by itself is returned as it ended.
func (h *RecordingHandle) Stop(ctx context.Context, opts ...Option) (*Recording, error) {
	ctx = withCallOptions(ctx, opts)
	cur, err := h.rs.Get(ctx, h.Recording.ID)
	if err != nil {
		return nil, err
	}
	if cur.Status != RecordingActive {
		return cur, nil
	}
	r, err := h.rs.Stop(ctx)
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusConflict {
		// It stopped by itself in the meantime.
		return h.rs.Get(ctx, h.Recording.ID)
	}
	return r, err
}

// Start starts recording the browser (POST
// /v2/box/{id}/browser/recordings) for at most maxDuration (0 means
// MaxRecordingDuration; it is sent in whole seconds, rounded up). A box
// that is already recording is a 409 *Error.
func (rs *Recordings) Start(ctx context.Context, maxDuration time.Duration, opts ...Option) (*RecordingHandle, error) {
	ctx = withCallOptions(ctx, opts)
	if err := rs.br.check(); err != nil {
		return nil, err
	}
	if maxDuration < 0 || maxDuration > MaxRecordingDuration {
		return nil, invalidf("box: a recording lasts at most %v, not %v", MaxRecordingDuration, maxDuration)
	}
	var body gen.StartRecordingRequest
	if maxDuration > 0 {
		body.MaxDurationSeconds = ptr(int((maxDuration + time.Second - 1) / time.Second))
	}
	r, err := call[gen.Recording](rs.br.b.c.api.StartBrowserRecording(ctx, rs.br.b.id, body))
	if err != nil {
		return nil, err
	}
	return &RecordingHandle{rs: rs, Recording: *rs.recording(r)}, nil
}

// Stop stops whatever the box is recording (POST
// /v2/box/{id}/browser/recordings/stop), waits until the video is final
// and returns it. With no active recording it is a 409 *Error.
func (rs *Recordings) Stop(ctx context.Context, opts ...Option) (*Recording, error) {
	ctx = withCallOptions(ctx, opts)
	if err := rs.br.check(); err != nil {
		return nil, err
	}
	r, err := call[gen.Recording](rs.br.b.c.api.StopBrowserRecording(ctx, rs.br.b.id))
	if err != nil {
		return nil, err
	}
	return rs.recording(r), nil
}

// Get returns one recording.
func (rs *Recordings) Get(ctx context.Context, id string, opts ...Option) (*Recording, error) {
	ctx = withCallOptions(ctx, opts)
	if err := rs.br.check(); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, invalidf("box: the recording id is empty")
	}
	r, err := call[gen.Recording](rs.br.b.c.api.GetBrowserRecording(ctx, rs.br.b.id, id))
	if err != nil {
		return nil, err
	}
	return rs.recording(r), nil
}

// List returns the box's recordings, newest first, following the pages.
func (rs *Recordings) List(ctx context.Context, opts ...Option) ([]Recording, error) {
	ctx = withCallOptions(ctx, opts)
	if err := rs.br.check(); err != nil {
		return nil, err
	}
	var out []Recording
	p := &gen.ListBrowserRecordingsParams{Limit: ptr(100)}
	for {
		r, err := call[gen.RecordingsResponse](rs.br.b.c.api.ListBrowserRecordings(ctx, rs.br.b.id, p))
		if err != nil {
			return nil, err
		}
		for i := range r.Recordings {
			out = append(out, *rs.recording(&r.Recordings[i]))
		}
		if r.NextCursor == nil || *r.NextCursor == "" {
			return out, nil
		}
		if p.Cursor != nil && *p.Cursor == *r.NextCursor {
			return nil, errors.New("box: the server repeated a page cursor")
		}
		p.Cursor = r.NextCursor
	}
}

// Download writes a recording's video to path and returns the path
// written. An empty path means ./box-recording-<id>.mp4, or .ts for a
// recording that has only MPEG-TS. The file appears complete or not at
// all.
func (rs *Recordings) Download(ctx context.Context, id, path string, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	if err := rs.br.check(); err != nil {
		return "", err
	}
	if id == "" {
		return "", invalidf("box: the recording id is empty")
	}
	resp, err := rs.br.b.c.api.DownloadBrowserRecording(ctx, rs.br.b.id, id)
	if err != nil {
		return "", err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", newAPIError(resp)
	}
	defer drainAndClose(resp.Body)
	ext := ""
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case "video/mp4":
		ext = ".mp4"
	case "video/mp2t":
		ext = ".ts"
	default:
		return "", fmt.Errorf("box: download of recording %s: unexpected content type %q", id, resp.Header.Get("Content-Type"))
	}
	if path == "" {
		path = "box-recording-" + id + ext
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("box: %w", err)
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".box-recording-*")
	if err != nil {
		return "", fmt.Errorf("box: %w", err)
	}
	_ = f.Chmod(0o644)
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		if ctx.Err() != nil {
			return "", fmt.Errorf("box: download of recording %s: %w", id, ctx.Err())
		}
		return "", fmt.Errorf("box: download of recording %s: %w", id, err)
	}
	return path, nil
}
