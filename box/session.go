package box

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/upstash/box-go/session"
)

// SessionParams describes the process of a live session (see
// [Exec.Session]). Exactly one of Cmd and Argv is needed; Argv wins when
// both are set.
type SessionParams struct {
	// Cmd is a shell command line, run with `bash -lc`. A login shell
	// reads the box's /etc/profile (which starts nothing) and the box
	// user's ~/.bash_profile; a signal sent while that file runs a
	// command of its own may be taken by that command, as in a terminal.
	// Argv starts no shell.
	Cmd string
	// Argv is a program and its arguments, run without a shell.
	Argv []string
	// Cwd is the working directory; relative to the box's tracked
	// working directory, which is the default.
	Cwd string
	// Env holds KEY=VALUE entries laid over the box's environment.
	Env []string
	// TTY runs the process on a pseudo-terminal of Rows×Cols (24×80 when
	// zero), as its controlling terminal. Its standard error then
	// arrives merged into standard output.
	TTY  bool
	Rows int
	Cols int
	// OnStdout and OnStderr, when set, receive the output instead of
	// the session's Stdout and Stderr readers; see
	// [session.Options.OnStdout].
	OnStdout func([]byte)
	OnStderr func([]byte)
}

// Session starts a process in the box and connects to it while it runs:
// a WebSocket to GET /v2/box/{id}/exec-session (the base URL with http
// replaced by ws), authenticated like every other call. Write to the
// returned session's Stdin, read its Stdout and Stderr, send signals and
// terminal sizes, and Wait for the exit code; Close hangs up and kills the
// process. Unlike [Exec.Command], the process does not outlive its
// session.
//
// Session returns once the server reports that the process started. The
// handshake goes through the Client's transport (API key, telemetry and
// WithHeader headers, retries of refused or failed handshakes, debug
// logging) and is bounded by the request timeout as well as ctx. A
// refused handshake is an *Error (401 for a wrong key, 404 for an unknown
// box); a process that cannot start is a *session.ServerError.
func (e *Exec) Session(ctx context.Context, params *SessionParams, opts ...Option) (*session.Session, error) {
	ctx = withCallOptions(ctx, opts)
	if params == nil || (len(params.Argv) == 0 && params.Cmd == "") {
		return nil, invalidf("box: session requires Cmd or Argv")
	}
	if e.b.id == "" {
		return nil, invalidf("box: box id is empty")
	}
	cwd := e.b.Cwd()
	if params.Cwd != "" {
		cwd = join(cwd, params.Cwd)
	}
	c := e.b.c
	start := &session.Start{
		Argv: params.Argv,
		Cmd:  params.Cmd,
		Cwd:  cwd,
		Env:  params.Env,
		TTY:  params.TTY,
		Rows: params.Rows,
		Cols: params.Cols,
	}
	s, err := session.Dial(ctx, wsURL(c.cfg.baseURL)+"/v2/box/"+encodeURIComponent(e.b.id)+"/exec-session", start, &session.Options{
		HTTPClient:       c.sessionHTTPClient(),
		HandshakeTimeout: c.cfg.requestTimeout,
		OnStdout:         params.OnStdout,
		OnStderr:         params.OnStderr,
	})
	if err != nil {
		var he *session.HandshakeError
		if errors.As(err, &he) && he.Response != nil {
			return nil, newAPIError(he.Response)
		}
		return nil, err
	}
	return s, nil
}

// wsURL turns the base URL into the WebSocket one: http becomes ws and
// https becomes wss.
func wsURL(base string) string {
	if rest, ok := strings.CutPrefix(base, "http"); ok {
		return "ws" + rest
	}
	return base
}

// sessionHTTPClient returns an *http.Client that sends a handshake
// through a copy of the Client's transport, so it carries the same headers
// and gets the same retries and logging. The copy's http.Client has no
// Timeout: once upgraded, the connection lives as long as the session.
func (c *Client) sessionHTTPClient() *http.Client {
	hc := *c.http
	hc.Timeout = 0
	t := *c.do
	t.client = &hc
	return &http.Client{Transport: roundTripperFunc(t.Do)}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
