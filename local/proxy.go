package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/proxybuf"
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

// agentOperations stands for the operations of the data plane in the
// control plane's strict server. Their routes go to the box's agent
// (dataPlane) before the strict server sees them, so these methods answer
// only if a route and the table disagree.
type agentOperations struct{}

// errServedByAgent is the answer of an agentOperations method.
var errServedByAgent = errors.New("this operation is served by the box's agent, and its route did not reach it")

// ExecCommand is served by the box's agent.
func (agentOperations) ExecCommand(context.Context, gen.ExecCommandRequestObject) (gen.ExecCommandResponseObject, error) {
	return nil, errServedByAgent
}

// ExecCode is served by the box's agent.
func (agentOperations) ExecCode(context.Context, gen.ExecCodeRequestObject) (gen.ExecCodeResponseObject, error) {
	return nil, errServedByAgent
}

// ExecStream is served by the box's agent.
func (agentOperations) ExecStream(context.Context, gen.ExecStreamRequestObject) (gen.ExecStreamResponseObject, error) {
	return nil, errServedByAgent
}

// CodeStream is served by the box's agent.
func (agentOperations) CodeStream(context.Context, gen.CodeStreamRequestObject) (gen.CodeStreamResponseObject, error) {
	return nil, errServedByAgent
}

// ReadFile is served by the box's agent.
func (agentOperations) ReadFile(context.Context, gen.ReadFileRequestObject) (gen.ReadFileResponseObject, error) {
	return nil, errServedByAgent
}

// WriteFile is served by the box's agent.
func (agentOperations) WriteFile(context.Context, gen.WriteFileRequestObject) (gen.WriteFileResponseObject, error) {
	return nil, errServedByAgent
}

// ListFiles is served by the box's agent.
func (agentOperations) ListFiles(context.Context, gen.ListFilesRequestObject) (gen.ListFilesResponseObject, error) {
	return nil, errServedByAgent
}

// UploadFiles is served by the box's agent.
func (agentOperations) UploadFiles(context.Context, gen.UploadFilesRequestObject) (gen.UploadFilesResponseObject, error) {
	return nil, errServedByAgent
}

// DownloadFile is served by the box's agent.
func (agentOperations) DownloadFile(context.Context, gen.DownloadFileRequestObject) (gen.DownloadFileResponseObject, error) {
	return nil, errServedByAgent
}

// StatFile is served by the box's agent.
func (agentOperations) StatFile(context.Context, gen.StatFileRequestObject) (gen.StatFileResponseObject, error) {
	return nil, errServedByAgent
}

// MakeDirectory is served by the box's agent.
func (agentOperations) MakeDirectory(context.Context, gen.MakeDirectoryRequestObject) (gen.MakeDirectoryResponseObject, error) {
	return nil, errServedByAgent
}

// RenameFile is served by the box's agent.
func (agentOperations) RenameFile(context.Context, gen.RenameFileRequestObject) (gen.RenameFileResponseObject, error) {
	return nil, errServedByAgent
}

// RemoveFile is served by the box's agent.
func (agentOperations) RemoveFile(context.Context, gen.RemoveFileRequestObject) (gen.RemoveFileResponseObject, error) {
	return nil, errServedByAgent
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
		api.StoreError(s.log, w, err)
		return
	}
	limit := s.cfg.MaxBodyBytes
	if strings.HasSuffix(r.URL.Path, "/files/upload") {
		limit = s.cfg.MaxUploadBytes
	}
	if r.ContentLength > limit {
		api.WriteError(w, http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)

	var rec *execRecord
	streaming := strings.HasSuffix(r.Pattern, "-stream")
	if strings.HasSuffix(r.Pattern, "/exec") || strings.HasSuffix(r.Pattern, "/code") || streaming {
		if rec, err = newExecRecord(r); err != nil {
			if errors.As(err, new(*http.MaxBytesError)) {
				api.WriteError(w, http.StatusRequestEntityTooLarge, err.Error())
				return
			}
			api.WriteError(w, http.StatusBadRequest, "cannot read request body: "+err.Error())
			return
		}
	}

	rt, err := s.core.EnsureRunning(r.Context(), b)
	if err != nil {
		if errors.Is(err, core.ErrBoxNotFound) {
			api.WriteError(w, http.StatusNotFound, "box not found")
			return
		}
		if r.Context().Err() != nil {
			return
		}
		api.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer s.core.Busy(b.ID)()
	// FlushInterval is left at 0: ReverseProxy flushes each write of a
	// response of unknown length (exec-stream and code-stream, which the
	// agent sends chunked) and of text/event-stream, and an upgraded
	// connection (exec-session) is copied as it comes; an answer of known
	// length (exec's JSON, a download) goes out in the server's buffer
	// with no flush per write.
	tr := rt.Transport()
	if rec != nil {
		tr = rt.ExecTransport()
	}
	rp := &httputil.ReverseProxy{
		Transport:  tr,
		BufferPool: proxybuf.Pool,
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
				api.WriteError(w, http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
				return
			}
			if r.Context().Err() != nil {
				return
			}
			if api.Status(err) == http.StatusNotFound {
				// The box was deleted since it was found.
				api.WriteError(w, http.StatusNotFound, "box not found")
				return
			}
			s.log.Warn("box agent unreachable", "box", b.ID, "err", err)
			api.WriteError(w, http.StatusBadGateway, "box agent unreachable: "+err.Error())
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
		ID:          core.NewID("run-"),
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
