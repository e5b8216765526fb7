package box

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 1 << 20

// ErrInvalid is matched (errors.Is) by every error the SDK returns before
// it sends anything, because a parameter is missing or wrong; the error's
// text names the parameter.
var ErrInvalid = errors.New("box: invalid argument")

// invalidError is an error of a call's parameters: it matches ErrInvalid.
type invalidError struct{ err error }

func (e *invalidError) Error() string        { return e.err.Error() }
func (e *invalidError) Unwrap() error        { return e.err }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// invalidSentinel returns a sentinel error of a call's parameters: one
// that errors.Is finds as itself and as ErrInvalid.
func invalidSentinel(text string) error {
	return &invalidError{err: errors.New(text)}
}

// invalidf returns an error of a call's parameters; format starts with
// "box: " and names the parameter.
func invalidf(format string, args ...any) error {
	return &invalidError{err: fmt.Errorf(format, args...)}
}

// Error is the error returned for every non-2xx response of the Box API.
// Reach it with [errors.As], or use [StatusCode] and [IsNotFound]:
//
//	var apiErr *box.Error
//	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusConflict { ... }
//
// An *Error of a file call (an endpoint below /v2/box/{id}/files/) also
// matches, with [errors.Is], the io/fs error its status means: 404
// [fs.ErrNotExist], 409 [fs.ErrExist] and 403 [fs.ErrPermission].
//
// Errors raised before a response arrives (validation, cancellation,
// connection failures) are not *Error.
type Error struct {
	// StatusCode is the HTTP status of the response, e.g. 404.
	StatusCode int
	// Message is the server's "error" field, or "Request failed with
	// status <code>" when the body has none.
	Message string
	// RetryAfter is the wait the server asked for in a Retry-After header
	// (typically with 429 or 503), or 0 when it sent none.
	RetryAfter time.Duration
	// Method and Path identify the request, e.g. "POST" and
	// "/v2/box/abc/exec". Path is escaped and never includes the query.
	Method string
	Path   string
	// Body is the start of the response body, at most MaxErrorBody
	// bytes, for a body that says more than Message.
	Body []byte
	// RequestID is the request id the server sent back (X-Request-Id
	// and the like), if any: quote it when reporting a problem.
	RequestID string
}

// MaxErrorBody is how much of an error response's body Error.Body keeps.
const MaxErrorBody = 64 << 10

// requestIDHeaders are the headers a request id may come in, in the
// order they are looked for.
var requestIDHeaders = []string{"X-Request-Id", "Request-Id", "Upstash-Request-Id", "X-Amzn-Requestid", "X-Correlation-Id"}

// Error returns e.g. "box: POST /v2/box/abc/exec: 404 box not found".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("box: ")
	if e.Method != "" || e.Path != "" {
		b.WriteString(strings.TrimSpace(e.Method + " " + e.Path))
		b.WriteString(": ")
	}
	b.WriteString(strconv.Itoa(e.StatusCode))
	if e.Message != "" {
		b.WriteByte(' ')
		b.WriteString(e.Message)
	}
	return b.String()
}

// Is reports whether e, the answer to a file call, means target, one of
// fs.ErrNotExist, fs.ErrExist and fs.ErrPermission. An answer about the box
// rather than the path (the API's "box not found", or "forbidden" for a
// key without access) means none of them.
func (e *Error) Is(target error) bool {
	if !isFileCall(e.Path) {
		return false
	}
	switch e.StatusCode {
	case http.StatusNotFound:
		return target == fs.ErrNotExist && !strings.EqualFold(e.Message, "box not found")
	case http.StatusConflict:
		return target == fs.ErrExist
	case http.StatusForbidden:
		return target == fs.ErrPermission && !strings.EqualFold(e.Message, "forbidden")
	}
	return false
}

// isFileCall reports whether the escaped request path p is that of a file
// endpoint: /v2/box/{id}/files/..., below any prefix of the base URL.
func isFileCall(p string) bool {
	i := strings.Index(p, "/v2/box/")
	if i < 0 {
		return false
	}
	_, rest, ok := strings.Cut(p[i+len("/v2/box/"):], "/")
	return ok && strings.HasPrefix(rest, "files/")
}

// newAPIError turns a non-2xx response into an *Error. It reads at most
// 1 MiB of the body, keeps the first MaxErrorBody bytes, then closes it. The message is the body's "error"
// field when that is a non-empty string, else "Request failed with status
// <code>" (also for bodies that are not JSON or are too large to parse).
func newAPIError(resp *http.Response) *Error {
	e := &Error{
		StatusCode: resp.StatusCode,
		Message:    fmt.Sprintf("Request failed with status %d", resp.StatusCode),
	}
	if req := resp.Request; req != nil {
		e.Method = req.Method
		if req.URL != nil {
			e.Path = req.URL.EscapedPath()
		}
	}
	if ra, ok := parseRetryAfter(resp.Header, time.Now()); ok {
		e.RetryAfter = ra
	}
	for _, h := range requestIDHeaders {
		if v := resp.Header.Get(h); v != "" {
			e.RequestID = v
			break
		}
	}
	if resp.Body != nil {
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
		resp.Body.Close()
		if len(data) > 0 {
			e.Body = bytes.Clone(data[:min(len(data), MaxErrorBody)])
		}
		if err == nil && len(data) <= maxErrorBody {
			var body struct {
				Error json.RawMessage `json:"error"`
			}
			var msg string
			if json.Unmarshal(data, &body) == nil && json.Unmarshal(body.Error, &msg) == nil && msg != "" {
				e.Message = msg
			}
		}
	}
	return e
}

// parseRetryAfter reads a Retry-After header given as delay-seconds or as
// an HTTP date (relative to now). A date in the past yields 0. ok is false
// when the header is absent or malformed.
func parseRetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		const maxSecs = int64(1<<63-1) / int64(time.Second)
		if secs > maxSecs {
			secs = maxSecs
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// StatusCode returns the HTTP status of the *Error in err's chain, or 0 if
// there is none (for example a connection failure or a nil err).
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsNotFound reports whether err is, or wraps, an *Error with status 404.
func IsNotFound(err error) bool {
	return StatusCode(err) == http.StatusNotFound
}
