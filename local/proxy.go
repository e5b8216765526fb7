package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/local/internal/store"
)

// dataPlane lists the routes that the in-box agent serves. boxd checks the
// key, finds the box, starts or resumes it, and proxies the request.
var dataPlane = []string{
	"POST /v2/box/{id}/exec",
	"POST /v2/box/{id}/code",
	"POST /v2/box/{id}/exec-stream",
	"POST /v2/box/{id}/code-stream",
	"GET /v2/box/{id}/files/read",
	"POST /v2/box/{id}/files/write",
	"GET /v2/box/{id}/files/list",
	"POST /v2/box/{id}/files/upload",
	"GET /v2/box/{id}/files/download",
	"GET /v2/box/{id}/files/stat",
	"POST /v2/box/{id}/files/mkdir",
	"POST /v2/box/{id}/files/rename",
	"POST /v2/box/{id}/files/remove",
	"GET /v2/box/{id}/exec-session",
}

// Headers in which the agent reports an exec's outcome to boxd. They are
// removed before the response reaches the client.
const (
	headerExitCode = "X-Box-Exit-Code"
	headerCPU      = "X-Box-Cpu-Ns"
)

// proxy forwards a data-plane request to the box's agent.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request) {
	b, err := s.db.Box(r.PathValue("id"))
	if err != nil {
		s.storeError(w, err)
		return
	}
	limit := s.cfg.MaxBodyBytes
	if strings.HasSuffix(r.URL.Path, "/files/upload") {
		limit = s.cfg.MaxUploadBytes
	}
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)

	var rec *execRecord
	streaming := strings.HasSuffix(r.Pattern, "-stream")
	if strings.HasSuffix(r.Pattern, "/exec") || strings.HasSuffix(r.Pattern, "/code") || streaming {
		if rec, err = newExecRecord(r); err != nil {
			if errors.As(err, new(*http.MaxBytesError)) {
				writeError(w, http.StatusRequestEntityTooLarge, err.Error())
				return
			}
			writeError(w, http.StatusBadRequest, "cannot read request body: "+err.Error())
			return
		}
	}

	rt, err := s.boxes.ensureRunning(r.Context(), b)
	if err != nil {
		if errors.Is(err, errBoxNotFound) {
			writeError(w, http.StatusNotFound, "box not found")
			return
		}
		if r.Context().Err() != nil {
			return
		}
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer s.boxes.busy(b.ID)()
	rp := &httputil.ReverseProxy{
		Transport:     rt.agent.Transport(),
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "box"
			pr.Out.Host = "box"
			// The credential is boxd's; the agent has no use for it.
			pr.Out.Header.Del(headerAPIKey)
			pr.Out.Header.Del("Authorization")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.As(err, new(*http.MaxBytesError)) {
				writeError(w, http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
				return
			}
			if r.Context().Err() != nil {
				return
			}
			if statusOf(err) == http.StatusNotFound {
				// The box was deleted since it was found.
				writeError(w, http.StatusNotFound, "box not found")
				return
			}
			s.log.Warn("box agent unreachable", "box", b.ID, "err", err)
			writeError(w, http.StatusBadGateway, "box agent unreachable: "+err.Error())
		},
	}
	if rec != nil {
		rp.ModifyResponse = func(resp *http.Response) error {
			if resp.StatusCode != http.StatusOK {
				return nil
			}
			if streaming {
				// The outcome arrives in trailers after the output.
				resp.Body = &onEOF{ReadCloser: resp.Body, fn: func() { s.recordExec(b, rec, resp.Trailer) }}
				return nil
			}
			s.recordExec(b, rec, resp.Header)
			resp.Header.Del(headerExitCode)
			resp.Header.Del(headerCPU)
			return nil
		}
	}
	rp.ServeHTTP(w, r)
}

// execRecord is what boxd keeps of an exec or code call to record it as a
// run.
type execRecord struct {
	start  time.Time
	prompt string
}

func newExecRecord(r *http.Request) (*execRecord, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	var req struct {
		Command  []string `json:"command"`
		Code     string   `json:"code"`
		Language string   `json:"language"`
	}
	_ = json.Unmarshal(body, &req)
	prompt := strings.Join(req.Command, " ")
	if req.Language != "" {
		prompt = req.Language + ": " + req.Code
	}
	return &execRecord{start: time.Now(), prompt: prompt}, nil
}

// recordExec stores a shell run for a finished exec or code call. The
// agent reports the outcome in headers (or trailers, for streams) so that
// boxd need not read the possibly large body.
func (s *Server) recordExec(b *store.Box, rec *execRecord, h http.Header) {
	exit, err := strconv.Atoi(h.Get(headerExitCode))
	if err != nil {
		return // the stream was cut off before the command ended
	}
	cpu, _ := strconv.ParseInt(h.Get(headerCPU), 10, 64)
	now := time.Now()
	status := "completed"
	if exit != 0 {
		status = "failed"
	}
	run := &store.Run{
		ID:          newID("run-"),
		BoxID:       b.ID,
		Type:        "shell",
		Status:      status,
		Prompt:      rec.prompt,
		CPUNs:       cpu,
		DurationMs:  now.Sub(rec.start).Milliseconds(),
		CreatedAt:   rec.start.Unix(),
		CompletedAt: now.Unix(),
		Seq:         rec.start.UnixNano(),
	}
	if err := s.db.PutRun(run); err != nil && !errors.Is(err, store.ErrNotFound) { // not found: the box was deleted
		s.log.Warn("cannot record run", "box", b.ID, "err", err)
	}
}

// onEOF calls fn once when the body has been read to its end.
type onEOF struct {
	io.ReadCloser
	fn   func()
	once sync.Once
}

func (o *onEOF) Read(p []byte) (int, error) {
	n, err := o.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		o.once.Do(o.fn)
	}
	return n, err
}
