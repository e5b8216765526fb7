package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/stream"
)

// Handler serves the agent's part of the Box API: the same paths and wire
// as the public API, reached through boxd's proxy.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not found")
	})
	mux.HandleFunc("POST "+ProcessPath, a.serveProcess)
	mux.HandleFunc("PUT "+EnvPath, a.serveEnv)
	mux.Handle(SessionPath, a.sessionHandler())
	strict := gen.NewStrictHandlerWithOptions(&api{a: a}, nil, gen.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			status := http.StatusBadRequest
			if errors.As(err, new(*http.MaxBytesError)) {
				status = http.StatusRequestEntityTooLarge
			}
			writeError(w, status, err.Error())
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, statusOf(err), err.Error())
		},
	})
	return gen.HandlerWithOptions(strict, gen.StdHTTPServerOptions{
		BaseRouter: mux,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadRequest, err.Error())
		},
	})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(gen.ErrorResponse{Error: msg})
}

// api implements the data-plane operations of gen.StrictServerInterface.
// boxd routes only those operations to the agent; the embedded nil
// interface stands for the control-plane ones, which boxd answers itself.
type api struct {
	gen.StrictServerInterface
	a *Agent
}

func ok(msg string) gen.MessageResponse { return gen.MessageResponse{Message: &msg} }

// execResponse is the result of exec and code. Besides the JSON body it
// reports the exit code and CPU time in headers, which boxd reads to record
// the run without parsing the body, and removes.
type execResponse struct {
	res gen.ExecResult
	cpu time.Duration
}

func (e execResponse) visit(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Box-Exit-Code", strconv.Itoa(e.res.ExitCode))
	w.Header().Set("X-Box-Cpu-Ns", strconv.FormatInt(e.cpu.Nanoseconds(), 10))
	w.WriteHeader(http.StatusOK)
	return json.NewEncoder(w).Encode(e.res)
}

func (e execResponse) VisitExecCommandResponse(w http.ResponseWriter) error { return e.visit(w) }
func (e execResponse) VisitExecCodeResponse(w http.ResponseWriter) error    { return e.visit(w) }

func toExecResponse(r result) execResponse {
	res := gen.ExecResult{ExitCode: r.ExitCode, Output: r.Stdout}
	if r.Stderr != "" {
		res.Error = &r.Stderr
	}
	return execResponse{res: res, cpu: r.CPU}
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// execCommand prepares the command of an exec or exec-stream request.
func (a *Agent) execCommand(body *gen.ExecRequest) (*exec.Cmd, error) {
	if body == nil {
		return nil, errorf(http.StatusBadRequest, "request body is required")
	}
	dir, err := folderPath(deref(body.Folder))
	if err != nil {
		return nil, err
	}
	return a.command(body.Command, dir)
}

// codeRun prepares the command of a code or code-stream request, with
// the cleanup to run after it and its time limit. A snippet that does not
// compile becomes a command that reports it as the interpreter would: on
// stderr, with exit code 1.
func (a *Agent) codeRun(body *gen.CodeRequest) (*exec.Cmd, func(), time.Duration, error) {
	if body == nil {
		return nil, nil, 0, errorf(http.StatusBadRequest, "request body is required")
	}
	dir, err := folderPath(deref(body.Folder))
	if err != nil {
		return nil, nil, 0, err
	}
	timeout := time.Duration(deref(body.Timeout)) * time.Millisecond
	if timeout < 0 {
		return nil, nil, 0, errorf(http.StatusBadRequest, "timeout must not be negative")
	}
	cmd, cleanup, err := a.codeCommand(body.Code, string(body.Language), dir)
	var ce *compileError
	if errors.As(err, &ce) {
		cmd, err = a.command([]string{"sh", "-c", `printf '%s\n' "$0" >&2; exit 1`, ce.msg}, dir)
		cleanup = func() {}
	}
	if err != nil {
		return nil, nil, 0, err
	}
	return cmd, cleanup, timeout, nil
}

func (s *api) ExecCommand(ctx context.Context, req gen.ExecCommandRequestObject) (gen.ExecCommandResponseObject, error) {
	cmd, err := s.a.execCommand(req.Body)
	if err != nil {
		return nil, err
	}
	res, err := s.a.run(ctx, cmd, 0)
	if err != nil {
		return nil, err
	}
	return toExecResponse(res), nil
}

func (s *api) ExecCode(ctx context.Context, req gen.ExecCodeRequestObject) (gen.ExecCodeResponseObject, error) {
	cmd, cleanup, timeout, err := s.a.codeRun(req.Body)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res, err := s.a.run(ctx, cmd, timeout)
	if err != nil {
		return nil, err
	}
	if res.TimedOut {
		res.Stderr += fmt.Sprintf("\n[boxd: timed out after %s]\n", timeout)
	}
	return toExecResponse(res), nil
}

// streamResponse streams a command's output followed by the exec-stream
// terminator. The exit code and CPU time are also sent as trailers, for
// boxd to record the run.
type streamResponse struct {
	a       *Agent
	ctx     context.Context
	cmd     *exec.Cmd
	timeout time.Duration
	cleanup func()
}

func (s streamResponse) visit(w http.ResponseWriter) error {
	defer s.cleanup()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Trailer", "X-Box-Exit-Code, X-Box-Cpu-Ns")
	w.WriteHeader(http.StatusOK)
	fw := &flushWriter{w: w}
	fw.flush()
	res, err := s.a.runStreaming(s.ctx, s.cmd, fw, nil, s.timeout)
	if err != nil {
		return stream.WriteExecError(fw, err.Error())
	}
	if res.TimedOut {
		_, _ = fmt.Fprintf(fw, "\n[boxd: timed out after %s]\n", s.timeout)
	}
	w.Header().Set("X-Box-Exit-Code", strconv.Itoa(res.ExitCode))
	w.Header().Set("X-Box-Cpu-Ns", strconv.FormatInt(res.CPU.Nanoseconds(), 10))
	return stream.WriteExit(fw, res.ExitCode, res.CPU.Nanoseconds())
}

func (s streamResponse) VisitExecStreamResponse(w http.ResponseWriter) error { return s.visit(w) }
func (s streamResponse) VisitCodeStreamResponse(w http.ResponseWriter) error { return s.visit(w) }

func (s *api) ExecStream(ctx context.Context, req gen.ExecStreamRequestObject) (gen.ExecStreamResponseObject, error) {
	cmd, err := s.a.execCommand(req.Body)
	if err != nil {
		return nil, err
	}
	return streamResponse{a: s.a, ctx: ctx, cmd: cmd, cleanup: func() {}}, nil
}

func (s *api) CodeStream(ctx context.Context, req gen.CodeStreamRequestObject) (gen.CodeStreamResponseObject, error) {
	cmd, cleanup, timeout, err := s.a.codeRun(req.Body)
	if err != nil {
		return nil, err
	}
	return streamResponse{a: s.a, ctx: ctx, cmd: cmd, timeout: timeout, cleanup: cleanup}, nil
}

func (s *api) ReadFile(ctx context.Context, req gen.ReadFileRequestObject) (gen.ReadFileResponseObject, error) {
	b64 := req.Params.Encoding != nil && *req.Params.Encoding == gen.ReadFileParamsEncodingBase64
	content, err := s.a.readFile(req.Params.Path, b64, deref(req.Params.Offset), req.Params.Length)
	if err != nil {
		return nil, err
	}
	return gen.ReadFile200JSONResponse{Content: content}, nil
}

func (s *api) WriteFile(ctx context.Context, req gen.WriteFileRequestObject) (gen.WriteFileResponseObject, error) {
	if req.Body == nil {
		return nil, errorf(http.StatusBadRequest, "request body is required")
	}
	b64 := req.Body.Encoding != nil && *req.Body.Encoding == gen.WriteFileRequestEncodingBase64
	if err := s.a.writeFile(req.Body.Path, req.Body.Content, b64); err != nil {
		return nil, err
	}
	return gen.WriteFile200JSONResponse(ok("File written")), nil
}

func (s *api) ListFiles(ctx context.Context, req gen.ListFilesRequestObject) (gen.ListFilesResponseObject, error) {
	entries, err := s.a.listFiles(string(deref(req.Params.Folder)))
	if err != nil {
		return nil, err
	}
	files := make([]gen.FileEntry, len(entries))
	for i, e := range entries {
		files[i] = gen.FileEntry{Name: e.Name, Path: e.Path, Size: e.Size, IsDir: e.IsDir, ModTime: e.ModTime.UTC().Format(time.RFC3339), Type: ptr(gen.FileEntryType(e.Type))}
		if e.Type == "symlink" {
			files[i].Target = ptr(e.Target)
		}
	}
	return gen.ListFiles200JSONResponse{Files: files}, nil
}

func (s *api) StatFile(ctx context.Context, req gen.StatFileRequestObject) (gen.StatFileResponseObject, error) {
	st, err := s.a.statFile(req.Params.Path, deref(req.Params.Follow))
	if err != nil {
		return nil, err
	}
	return gen.StatFile200JSONResponse{Type: gen.FileStatType(st.Type), Size: st.Size, ModTime: st.ModTime.UTC(), Inode: int64(st.Inode), Version: st.Version}, nil
}

func (s *api) MakeDirectory(ctx context.Context, req gen.MakeDirectoryRequestObject) (gen.MakeDirectoryResponseObject, error) {
	if req.Body == nil {
		return nil, errorf(http.StatusBadRequest, "request body is required")
	}
	if err := s.a.mkdir(req.Body.Path, deref(req.Body.Parents)); err != nil {
		return nil, err
	}
	return gen.MakeDirectory200JSONResponse(ok("Directory created")), nil
}

func (s *api) RenameFile(ctx context.Context, req gen.RenameFileRequestObject) (gen.RenameFileResponseObject, error) {
	if req.Body == nil {
		return nil, errorf(http.StatusBadRequest, "request body is required")
	}
	if err := s.a.rename(req.Body.From, req.Body.To); err != nil {
		return nil, err
	}
	return gen.RenameFile200JSONResponse(ok("Renamed")), nil
}

func (s *api) RemoveFile(ctx context.Context, req gen.RemoveFileRequestObject) (gen.RemoveFileResponseObject, error) {
	if req.Body == nil {
		return nil, errorf(http.StatusBadRequest, "request body is required")
	}
	if err := s.a.remove(req.Body.Path, deref(req.Body.Recursive)); err != nil {
		return nil, err
	}
	return gen.RemoveFile200JSONResponse(ok("Removed")), nil
}

// UploadFiles stores the parts of a multipart upload: the n-th `files`
// part goes to the n-th `paths` value (part file names are ignored: they
// are the destination as the client typed it, possibly relative).
func (s *api) UploadFiles(ctx context.Context, req gen.UploadFilesRequestObject) (gen.UploadFilesResponseObject, error) {
	if req.Body == nil {
		return nil, errorf(http.StatusBadRequest, "multipart body is required")
	}
	var paths []string
	n := 0
	for {
		part, err := req.Body.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, uploadError(err)
		}
		switch part.FormName() {
		case "paths":
			v, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err != nil {
				return nil, uploadError(err)
			}
			paths = append(paths, string(v))
		case "files":
			if n >= len(paths) {
				return nil, errorf(http.StatusBadRequest, "files part %d has no paths value before it", n+1)
			}
			p, err := boxPath(paths[n])
			if err != nil {
				return nil, err
			}
			if err := s.a.writeStream(p, part); err != nil {
				return nil, uploadError(err)
			}
			n++
		}
		part.Close()
	}
	if n != len(paths) {
		return nil, errorf(http.StatusBadRequest, "%d paths values but %d files parts", len(paths), n)
	}
	if n == 0 {
		return nil, errorf(http.StatusBadRequest, "no files to upload")
	}
	return gen.UploadFiles200JSONResponse(ok(fmt.Sprintf("%d files uploaded", n))), nil
}

func uploadError(err error) error {
	if errors.As(err, new(*http.MaxBytesError)) {
		return errorf(http.StatusRequestEntityTooLarge, "upload is too large")
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	if diskFull(err) {
		return errorf(http.StatusInsufficientStorage, "writing upload: %v", unwrapPath(err))
	}
	return errorf(http.StatusBadRequest, "reading upload: %v", err)
}

// fileResponse streams an open file and closes it.
type fileResponse struct {
	f    *os.File
	size int64
}

func (r fileResponse) VisitDownloadFileResponse(w http.ResponseWriter) error {
	defer r.f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(r.size, 10))
	w.WriteHeader(http.StatusOK)
	_, err := io.Copy(w, r.f)
	return err
}

func (s *api) DownloadFile(ctx context.Context, req gen.DownloadFileRequestObject) (gen.DownloadFileResponseObject, error) {
	f, size, err := s.a.openDownload(req.Params.Folder)
	if err != nil {
		return nil, err
	}
	return fileResponse{f: f, size: size}, nil
}
