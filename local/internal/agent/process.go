package agent

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// ProcessPath is the agent's internal route that boxd uses to run a
// process whose standard output it consumes as a stream: agent harnesses
// and scheduled jobs. It is not part of the public API; boxd never proxies
// client requests to it.
const ProcessPath = "/internal/process"

// ProcessRequest is the body of a ProcessPath request.
type ProcessRequest struct {
	Argv   []string          `json:"argv"`
	Folder string            `json:"folder,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Stdin is given to the process, then its standard input is closed.
	Stdin string `json:"stdin,omitempty"`
	// MergeStderr sends standard error into the body with standard
	// output, in the order written, instead of only its tail in a trailer.
	MergeStderr bool `json:"merge_stderr,omitempty"`
	// FollowJobs reads the output on after the process exits, for as long
	// as a background job it started holds it open (until the request
	// ends); the trailers come then. Without it, the output is read for a
	// moment after the exit, and a job that writes later finds it closed.
	FollowJobs bool `json:"follow_jobs,omitempty"`
}

// Trailers of a ProcessPath response, set when the process has ended.
const (
	TrailerExitCode   = "X-Box-Exit-Code"
	TrailerCPU        = "X-Box-Cpu-Ns"
	TrailerMemoryPeak = "X-Box-Memory-Peak"
	// TrailerStderr is the base64 of the last bytes the process wrote to
	// standard error.
	TrailerStderr = "X-Box-Stderr-Tail"
	// TrailerError is set when the process could not be started or
	// waited for; the other trailers are then absent.
	TrailerError = "X-Box-Error"
)

const stderrTail = 4096

// serveProcess runs a process and streams its standard output as the
// response body; the outcome follows in trailers. Cancelling the request
// kills the process and everything it started (killTree).
func (a *Agent) serveProcess(w http.ResponseWriter, r *http.Request) {
	var req ProcessRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad process request: "+err.Error())
		return
	}
	dir, err := folderPath(req.Folder)
	if err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	cmd, err := a.command(req.Argv, dir)
	if err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if req.Stdin != "" {
		cmd.Stdin = strings.NewReader(req.Stdin)
	}
	fw := &flushWriter{w: w}
	tail := &tailBuffer{max: stderrTail}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Trailer", strings.Join([]string{TrailerExitCode, TrailerCPU, TrailerMemoryPeak, TrailerStderr, TrailerError}, ", "))
	w.WriteHeader(http.StatusOK)
	fw.flush()
	var errOut io.Writer = tail
	if req.MergeStderr {
		errOut = nil
	}
	res, err := a.runOutput(r.Context(), cmd, fw, errOut, 0, req.FollowJobs)
	if err != nil {
		w.Header().Set(TrailerError, err.Error())
		return
	}
	peak := memoryPeak(cmd.ProcessState)
	w.Header().Set(TrailerExitCode, strconv.Itoa(res.ExitCode))
	w.Header().Set(TrailerCPU, strconv.FormatInt(res.CPU.Nanoseconds(), 10))
	w.Header().Set(TrailerMemoryPeak, strconv.FormatInt(peak, 10))
	w.Header().Set(TrailerStderr, base64.StdEncoding.EncodeToString(tail.bytes()))
}

// flushWriter writes through to an http.ResponseWriter and flushes, so
// output reaches boxd as it is produced. The process's stdout copier is
// the only writer, but flush is also called from the handler.
type flushWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.w.Write(p)
	if err == nil {
		_ = http.NewResponseController(f.w).Flush()
	}
	return n, err
}

func (f *flushWriter) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = http.NewResponseController(f.w).Flush()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}
