package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/egress"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/session"
)

// The client side of the agent: how boxd reaches the agent of one box.
// Every request boxd makes to an agent is built here, and every answer is
// read here, through a size limit and into one error type; API clients'
// own data-plane requests are forwarded unchanged through Transport.

// Bounds of what the client reads from an agent's answer.
const (
	// maxErrorBody bounds the body of an error answer, and maxQuoted
	// what an error's message quotes of a body that is not the API's.
	maxErrorBody = 1 << 20
	maxQuoted    = 1 << 10
	// maxExecAnswer bounds the answer of Exec: Exec is for commands
	// whose output is small; Process streams.
	maxExecAnswer = 4 << 20
	// maxListAnswer bounds the answer of ListFiles.
	maxListAnswer = 16 << 20
	// bridgeHandshake bounds DialPort's handshake.
	bridgeHandshake = 30 * time.Second
	// healthTimeout bounds Health: the time the agent has to answer.
	healthTimeout = 10 * time.Second
)

// Error is an answer of the agent other than success. Callers reach it with
// errors.As and branch on its kind (package errdefs) with errors.Is: the
// agent's statuses stay in this package. A missing path also matches
// fs.ErrNotExist, and a refused one fs.ErrPermission.
type Error struct {
	// Status is the HTTP status the agent answered with. A process that
	// the agent accepted but could not start or wait for, which it reports
	// after the output (TrailerError), has 500, the status the agent's
	// exec route answers it with. It is the client's own concern: callers
	// ask for a kind (Kind, errors.Is) instead.
	Status int
	// Message is the agent's own message, or, when its answer had none,
	// one that names the status. It is never empty.
	Message string
}

// Error returns the agent's message as it is: callers say what they were
// doing.
func (e *Error) Error() string { return e.Message }

// Kind is the kind of the agent's answer. A refusal of the request has the
// kind of the refusal: errdefs.ErrNotFound, ErrPermission, ErrConflict,
// ErrTooLarge, and ErrInvalidArgument for any other; a box whose disk is
// full has errdefs.ErrNoSpace. Any other failure is the agent's own, not
// the request's, and has errdefs.ErrUpstream: to boxd, the agent is a
// service it relies on.
func (e *Error) Kind() error {
	switch s := e.Status; {
	case s == http.StatusNotFound:
		return errdefs.ErrNotFound
	case s == http.StatusForbidden:
		return errdefs.ErrPermission
	case s == http.StatusConflict:
		return errdefs.ErrConflict
	case s == http.StatusRequestEntityTooLarge:
		return errdefs.ErrTooLarge
	case s >= 400 && s < 500:
		return errdefs.ErrInvalidArgument
	case s == http.StatusInsufficientStorage:
		return errdefs.ErrNoSpace
	}
	return errdefs.ErrUpstream
}

// Is reports whether target is e's kind (Kind), fs.ErrNotExist for a
// missing path, fs.ErrPermission for a refused one, or ErrNotListening
// for DialPort's answer that nothing listens on the port.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Status == http.StatusNotFound
	case fs.ErrPermission:
		return e.Status == http.StatusForbidden
	case ErrNotListening:
		// The agent answers 502 to a bridge request alone (DialPort).
		return e.Status == http.StatusBadGateway
	}
	return target == e.Kind()
}

// ErrNotListening is matched (errors.Is) by DialPort's *Error when nothing
// listens on the port in the box.
var ErrNotListening = errors.New("agent: nothing listens on the port")

// ErrExitUnknown is returned by Process.Wait when the process's output
// ended without its exit status: the agent went away before it could send
// it.
var ErrExitUnknown = errors.New("agent: the process's exit status was not reported")

// ErrTooLarge is returned (wrapped) by ReadFile for a file larger than the
// caller's limit, and by ListFiles for a listing too long to read.
var ErrTooLarge = errors.New("agent: the answer is larger than its limit")

// DialFunc connects to an agent's socket.
type DialFunc func(ctx context.Context) (net.Conn, error)

// UnixDialer returns a DialFunc that connects to the unix socket at path.
func UnixDialer(path string) DialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
}

// ClientConfig says how a Client reaches its agent.
type ClientConfig struct {
	// BoxID is the id of the agent's box, which the paths of the public
	// routes carry. It is required.
	BoxID string
	// Dial connects to the agent. It is required.
	Dial DialFunc
	// NoKeepAlive closes each connection once its request ends, for a
	// client that must keep nothing open to its agent.
	NoKeepAlive bool
}

// Client calls one box's agent: the typed counterpart of Handler. It is
// safe for concurrent use.
type Client struct {
	boxID string
	dial  DialFunc
	tr    *http.Transport
	held  *heldTransport
}

// NewClient returns a client for the agent that cfg reaches.
func NewClient(cfg ClientConfig) *Client {
	c := &Client{boxID: cfg.BoxID, dial: cfg.Dial}
	if c.dial == nil {
		c.dial = func(context.Context) (net.Conn, error) { return nil, errors.New("agent: the client has no dialer") }
	}
	c.tr = &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return c.dial(ctx) },
		MaxIdleConnsPerHost: 64,
		// Trailers carry a process's stderr tail (base64): more than the
		// default 4 KiB buffer allows a trailer block to be.
		ReadBufferSize:     64 << 10,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
		DisableKeepAlives:  cfg.NoKeepAlive,
	}
	c.held = &heldTransport{dial: c.dial, noKeepAlive: cfg.NoKeepAlive}
	return c
}

// Transport is the client's round tripper, for boxd's proxy, which
// forwards API clients' data-plane requests to the agent as they are.
func (c *Client) Transport() http.RoundTripper { return c.tr }

// ExecTransport is the round tripper for boxd's proxy of exec, code and
// their streams: calls whose small body the agent reads whole, and whose
// answer waits on a command. It spends no goroutine of its own on a call
// (see heldTransport).
func (c *Client) ExecTransport() http.RoundTripper { return c.held }

// CloseIdleConnections closes the kept connections to the agent: they
// lead to an agent that has gone (its sandbox was replaced or paused).
func (c *Client) CloseIdleConnections() {
	c.tr.CloseIdleConnections()
	c.held.CloseIdleConnections()
}

// route is the URL of the public route /v2/box/{id}/name, with the box id
// escaped, and the query q.
func (c *Client) route(name string, q url.Values) (string, error) {
	if c.boxID == "" {
		return "", errors.New("agent: the client has no box id")
	}
	u := "http://box/v2/box/" + url.PathEscape(c.boxID) + "/" + name
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u, nil
}

// do sends req and returns the answer when its status is want. Any other
// answer is an *Error, and a request that got no answer fails with the
// transport's error, wrapped.
func (c *Client) do(req *http.Request, want int) (*http.Response, error) {
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("box agent: %w", err)
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// readError reads the error answer resp, through maxErrorBody: the API's
// {"error": "..."}, or any other body, which its message quotes.
func readError(resp *http.Response) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := "the box's agent answered " + resp.Status
	var e gen.ErrorResponse
	switch {
	case json.Unmarshal(raw, &e) == nil:
		if strings.TrimSpace(e.Error) != "" {
			msg = e.Error
		}
	case len(bytes.TrimSpace(raw)) > 0:
		text := bytes.TrimSpace(raw)
		if len(text) > maxQuoted {
			text = append(text[:maxQuoted:maxQuoted], "..."...)
		}
		msg += ": " + strings.ToValidUTF8(string(text), "")
	}
	return &Error{Status: resp.StatusCode, Message: msg}
}

func (c *Client) newRequest(ctx context.Context, method, name string, q url.Values, body io.Reader) (*http.Request, error) {
	u, err := c.route(name, q)
	if err != nil {
		return nil, err
	}
	return http.NewRequestWithContext(ctx, method, u, body)
}

// postJSON sends in as the JSON body of a POST to the public route name
// and returns the answer, of status 200.
func (c *Client) postJSON(ctx context.Context, name string, in any) (*http.Response, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := c.newRequest(ctx, http.MethodPost, name, nil, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, http.StatusOK)
}

// Health asks the agent whether it answers (HealthPath), over a kept
// connection of the client's. It returns nil once the agent has answered,
// as it does at once, from memory; an *Error when it answered otherwise;
// and the transport's error, wrapped, when it did not answer before ctx
// ended or within 10 seconds.
func (c *Client) Health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://box"+HealthPath, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusNoContent)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return resp.Body.Close()
}

// ExecResult is a command that Exec ran to its end.
type ExecResult struct {
	ExitCode int
	// Output is the command's standard output, Stderr its standard error.
	Output string
	Stderr string
	// CPU is the CPU time the command used.
	CPU time.Duration
}

// Exec runs argv in folder (a box path; empty is /workspace/home) to its
// end through the agent's exec route, POST /v2/box/{id}/exec. It is for
// commands whose output is small (at most a few MiB); Process streams.
// A command that ran has a result, whatever its exit code; an error means
// it did not run, or its result was lost.
func (c *Client) Exec(ctx context.Context, argv []string, folder string) (ExecResult, error) {
	body := gen.ExecRequest{Command: argv}
	if folder != "" {
		body.Folder = &folder
	}
	resp, err := c.postJSON(ctx, "exec", body)
	if err != nil {
		return ExecResult{}, err
	}
	defer resp.Body.Close()
	var res gen.ExecResult
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxExecAnswer))
	if err := dec.Decode(&res); err != nil {
		return ExecResult{}, fmt.Errorf("box agent: reading the result of exec: %w", err)
	}
	cpu, _ := strconv.ParseInt(resp.Header.Get(TrailerCPU), 10, 64)
	out := ExecResult{ExitCode: res.ExitCode, Output: res.Output, CPU: time.Duration(cpu)}
	if res.Error != nil {
		out.Stderr = *res.Error
	}
	return out, nil
}

// Process is a process started by Client.Process. Read its output from
// Output, then call Wait; or Close it to abandon it.
type Process struct {
	// Output is what the process writes to its standard output (and, with
	// ProcessRequest.MergeStderr, to its standard error), as it is written.
	// It ends once the process has ended (see ProcessRequest.FollowJobs).
	Output io.Reader

	resp *http.Response
}

// ProcessState is how a process ended.
type ProcessState struct {
	ExitCode int
	// CPU is the CPU time the process used, MemoryPeak the peak of its
	// memory in bytes (0 where the machine does not tell).
	CPU        time.Duration
	MemoryPeak int64
	// Stderr is the last 4 KiB the process wrote to its standard error
	// (nothing with ProcessRequest.MergeStderr).
	Stderr string
}

// Process starts req in the box through the agent's process route
// (ProcessPath) and returns once the agent has answered. The process is
// killed when ctx ends or the Process is closed before its end. An agent
// that refused to start it answers an *Error.
func (c *Client) Process(ctx context.Context, req ProcessRequest) (*Process, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://box"+ProcessPath, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.do(hreq, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return &Process{Output: resp.Body, resp: resp}, nil
}

// Wait reads and discards what is left of the output, closes the process's
// answer and returns how the process ended, from the trailers that follow
// the output. A process the agent could not start or wait for is an
// *Error; a state that never came is ErrExitUnknown.
func (p *Process) Wait() (ProcessState, error) {
	defer p.resp.Body.Close()
	if _, err := io.Copy(io.Discard, p.resp.Body); err != nil {
		return ProcessState{}, fmt.Errorf("box agent: reading the process's output: %w", err)
	}
	t := p.resp.Trailer
	if msg := t.Get(TrailerError); msg != "" {
		return ProcessState{}, &Error{Status: http.StatusInternalServerError, Message: msg}
	}
	code, err := strconv.Atoi(t.Get(TrailerExitCode))
	if err != nil {
		return ProcessState{}, ErrExitUnknown
	}
	st := ProcessState{ExitCode: code}
	cpu, _ := strconv.ParseInt(t.Get(TrailerCPU), 10, 64)
	st.CPU = time.Duration(cpu)
	st.MemoryPeak, _ = strconv.ParseInt(t.Get(TrailerMemoryPeak), 10, 64)
	if tail, err := base64.StdEncoding.DecodeString(t.Get(TrailerStderr)); err == nil {
		st.Stderr = string(tail)
	}
	return st, nil
}

// Close ends the request of a process that has not been waited for: the
// agent then kills the process's group. After Wait it does nothing.
func (p *Process) Close() error { return p.resp.Body.Close() }

// ReadFile copies the regular file at path in the box (absolute, or
// relative to /workspace/home) to w, through the agent's download route,
// and returns the number of bytes copied. A file larger than limit bytes
// fails with an error that wraps ErrTooLarge: before anything is copied
// when the agent gives its size, as it does for a regular file, and after
// limit bytes otherwise.
func (c *Client) ReadFile(ctx context.Context, path string, w io.Writer, limit int64) (int64, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "files/download", url.Values{"folder": {path}}, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > limit {
		return 0, fmt.Errorf("%s is %d bytes, more than %d: %w", path, resp.ContentLength, limit, ErrTooLarge)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit))
	if err != nil {
		return n, fmt.Errorf("box agent: reading %s: %w", path, err)
	}
	if n == limit {
		// One byte more says whether the file went on.
		var b [1]byte
		if m, _ := io.ReadFull(resp.Body, b[:]); m > 0 {
			return n, fmt.Errorf("%s is larger than %d bytes: %w", path, limit, ErrTooLarge)
		}
	}
	return n, nil
}

// WriteFile writes what r yields to the file at path in the box (absolute,
// or relative to /workspace/home), making its directories, through the
// agent's upload route. The data is streamed; the file is replaced only
// once all of it has been written.
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		err := mw.WriteField("paths", path)
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("files", "file"); err == nil {
				_, err = io.Copy(part, r)
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	// The writer ends whatever the answer: an early one (a refusal) does
	// not wait for the rest of r.
	defer func() {
		pr.CloseWithError(errors.New("agent: the upload ended"))
		<-wrote
	}()
	req, err := c.newRequest(ctx, http.MethodPost, "files/upload", nil, pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return resp.Body.Close()
}

// ListFiles lists the directory folder in the box (absolute, or relative
// to /workspace/home) through the agent's list route. A listing too long
// to read fails with an error that wraps ErrTooLarge.
func (c *Client) ListFiles(ctx context.Context, folder string) ([]gen.FileEntry, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "files/list", url.Values{"folder": {folder}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list gen.ListFilesResponse
	lr := &io.LimitedReader{R: resp.Body, N: maxListAnswer}
	if err := json.NewDecoder(lr).Decode(&list); err != nil {
		if lr.N == 0 {
			return nil, fmt.Errorf("listing %s: %w", folder, ErrTooLarge)
		}
		return nil, fmt.Errorf("box agent: reading the listing of %s: %w", folder, err)
	}
	return list.Files, nil
}

// Session starts a live exec session in the box through the agent's
// session route.
func (c *Client) Session(ctx context.Context, start *session.Start) (*session.Session, error) {
	u, err := c.route("exec-session", nil)
	if err != nil {
		return nil, err
	}
	return session.Dial(ctx, "ws"+strings.TrimPrefix(u, "http"), start, &session.Options{HTTPClient: &http.Client{Transport: c.tr}})
}

// DialPort connects to TCP port inside the box: it asks the agent to turn
// a connection of its own into a relay to that port (BridgePath). The
// handshake is bounded by ctx and by 30 seconds; the connection it returns
// is not. When nothing listens there, the agent's answer is an *Error
// that matches ErrNotListening.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(bridgeHandshake)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	req, err := http.NewRequest(http.MethodGet, "http://box"+BridgePath+"?port="+strconv.Itoa(port), nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", BridgeProtocol)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		e := readError(resp)
		resp.Body.Close()
		conn.Close()
		return nil, e
	}
	if !stop() {
		conn.Close()
		return nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	return egress.WithBuffered(conn, br), nil
}
