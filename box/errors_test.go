package box

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/gen"
)

func TestNewAPIError(t *testing.T) {
	t.Parallel()
	big := `{"error":"too big","pad":"` + strings.Repeat("x", 2<<20) + `"}`
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   Error
	}{
		{
			name: "json error", status: 404, body: `{"error":"box not found"}`,
			want: Error{StatusCode: 404, Message: "box not found"},
		},
		{
			name: "extra fields ignored", status: 409, body: `{"error":"Label already added","code":"x"}`,
			want: Error{StatusCode: 409, Message: "Label already added"},
		},
		{
			name: "empty error string", status: 400, body: `{"error":""}`,
			want: Error{StatusCode: 400, Message: "Request failed with status 400"},
		},
		{
			name: "null error", status: 500, body: `{"error":null}`,
			want: Error{StatusCode: 500, Message: "Request failed with status 500"},
		},
		{
			name: "non-string error", status: 500, body: `{"error":{"message":"nested"}}`,
			want: Error{StatusCode: 500, Message: "Request failed with status 500"},
		},
		{
			name: "no error field", status: 401, body: `{"message":"unauthorized"}`,
			want: Error{StatusCode: 401, Message: "Request failed with status 401"},
		},
		{
			name: "non-json 502", status: 502, body: "<html><body>502 Bad Gateway</body></html>",
			want: Error{StatusCode: 502, Message: "Request failed with status 502"},
		},
		{
			name: "empty body", status: 503,
			want: Error{StatusCode: 503, Message: "Request failed with status 503"},
		},
		{
			name: "oversized body", status: 500, body: big,
			want: Error{StatusCode: 500, Message: "Request failed with status 500"},
		},
		{
			name: "retry-after seconds", status: 429, header: map[string]string{"Retry-After": "5"},
			body: `{"error":"rate limited"}`,
			want: Error{StatusCode: 429, Message: "rate limited", RetryAfter: 5 * time.Second},
		},
		{
			name: "malformed retry-after", status: 429, header: map[string]string{"Retry-After": "later"},
			body: `{"error":"rate limited"}`,
			want: Error{StatusCode: 429, Message: "rate limited"},
		},
		{
			name: "request id", status: 502, header: map[string]string{"X-Request-Id": "req-7f3a"},
			body: "<html>bad gateway</html>",
			want: Error{StatusCode: 502, Message: "Request failed with status 502", RequestID: "req-7f3a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			c := newTestClient(t, srv.URL, WithMaxRetries(0))
			req, err := c.newRequest(t.Context(), http.MethodPost, "/v2/box/b1/exec?token=s3cr3t", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.send(req)
			if resp != nil {
				t.Fatalf("send returned a response for status %d", tt.status)
			}
			var got *Error
			if !errors.As(err, &got) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			want := tt.want
			want.Method, want.Path = "POST", "/v2/box/b1/exec"
			if tt.body != "" {
				want.Body = []byte(tt.body[:min(len(tt.body), MaxErrorBody)])
			}
			if diff := cmp.Diff(want, *got); diff != "" {
				t.Errorf("Error (-want +got):\n%s", diff)
			}
			if strings.Contains(got.Error(), "s3cr3t") || strings.Contains(got.Error(), testAPIKey) {
				t.Errorf("Error() leaks the query or key: %q", got.Error())
			}
		})
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestNewAPIErrorReadsAtMostOneMiB(t *testing.T) {
	t.Parallel()
	body := &countingReader{r: strings.NewReader(strings.Repeat(" ", 8<<20))}
	req, _ := http.NewRequest(http.MethodGet, "https://box.example.com/v2/box/b%201?x=1", nil)
	e := newAPIError(&http.Response{StatusCode: 500, Header: http.Header{}, Body: io.NopCloser(body), Request: req})
	if body.n > maxErrorBody+64<<10 {
		t.Errorf("read %d bytes of the error body, want at most about 1 MiB", body.n)
	}
	if e.Message != "Request failed with status 500" || e.Path != "/v2/box/b%201" || e.Method != "GET" {
		t.Errorf("got %+v", e)
	}

	// A response without request or body still yields a usable error.
	e = newAPIError(&http.Response{StatusCode: 418, Header: http.Header{}})
	if e.Error() != "box: 418 Request failed with status 418" {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  Error
		want string
	}{
		{Error{StatusCode: 404, Message: "box not found", Method: "POST", Path: "/v2/box/x/exec"}, "box: POST /v2/box/x/exec: 404 box not found"},
		{Error{StatusCode: 500, Method: "GET", Path: "/v2/box"}, "box: GET /v2/box: 500"},
		{Error{StatusCode: 403, Message: "forbidden"}, "box: 403 forbidden"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestStatusCodeHelpers(t *testing.T) {
	t.Parallel()
	notFound := &Error{StatusCode: 404, Message: "box not found"}
	tests := []struct {
		name     string
		err      error
		code     int
		notFound bool
	}{
		{"nil", nil, 0, false},
		{"plain error", errors.New("dial tcp: refused"), 0, false},
		{"api error", notFound, 404, true},
		{"wrapped", fmt.Errorf("get box: %w", notFound), 404, true},
		{"joined", errors.Join(errors.New("other"), &Error{StatusCode: 500}), 500, false},
		{"conflict", &Error{StatusCode: 409}, 409, false},
	}
	for _, tt := range tests {
		if got := StatusCode(tt.err); got != tt.code {
			t.Errorf("%s: StatusCode = %d, want %d", tt.name, got, tt.code)
		}
		if got := IsNotFound(tt.err); got != tt.notFound {
			t.Errorf("%s: IsNotFound = %v, want %v", tt.name, got, tt.notFound)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"", 0, false},
		{"5", 5 * time.Second, true},
		{" 3 ", 3 * time.Second, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999999999", time.Duration(1<<63 - 1).Truncate(time.Second), true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{now.Add(2 * time.Second).Format(time.RFC850), 2 * time.Second, true},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.value != "" {
			h.Set("Retry-After", tt.value)
		}
		got, ok := parseRetryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSendReturnsSuccess(t *testing.T) {
	t.Parallel()
	srv := newAttemptServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"b1"}`)
	})
	c := newTestClient(t, srv.URL)
	req, err := c.newRequest(t.Context(), http.MethodPost, "/v2/box", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.send(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 || string(data) != `{"id":"b1"}` {
		t.Errorf("got %d %q", resp.StatusCode, data)
	}
}

// TestInvalidArgumentsSendNothing: errors of a call's own arguments are
// ErrInvalid, name what is wrong, and come before any request.
func TestInvalidArgumentsSendNothing(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer ts.Close()
	c, err := NewClient(WithAPIKey("k"), WithBaseURL(ts.URL), WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	b := c.newBox(&gen.BoxData{ID: "box-1", Status: gen.BoxStatusIdle})
	// A box with an agent and a browser, for the calls that need them.
	ab := c.newBox(&gen.BoxData{ID: "box-2", Status: gen.BoxStatusIdle, Agent: ptr("claude-code"), Model: ptr("anthropic/claude-sonnet-4-5"), Browser: ptr(true)})
	tab := &Tab{br: ab.Browser, id: "tab-1"}
	type badEnum struct {
		Level int `json:"level" enum:"1,high"`
	}
	type inner struct {
		Events chan int `json:"events"`
	}
	type badType struct {
		Name  string `json:"name"`
		Inner inner  `json:"inner"`
	}
	ctx := t.Context()
	for _, tc := range []struct {
		name, mention string
		err           error
	}{
		{"empty command", "command", func() error { _, err := b.Exec.Command(ctx, ""); return err }()},
		{"bad language", "Lang", func() error { _, err := b.Exec.Code(ctx, &CodeParams{Code: "1", Lang: "cobol"}); return err }()},
		{"bad label", "label", func() error { _, err := b.Labels.Add(ctx, "has space"); return err }()},
		{"empty bulk delete", "at least one", c.DeleteBoxes(ctx, nil)},
		{"blank snapshot id", "blank", func() error { _, err := c.DeleteSnapshots(ctx, []string{""}); return err }()},
		{"cron cleared", "Cron", func() error {
			_, err := b.Schedule.Update(ctx, "s", &ScheduleUpdate{Cron: Clear[string]()})
			return err
		}()},
		{"empty path", "path", func() error { _, err := b.Files.Read(ctx, ""); return err }()},
		{"bad range", "ReadRange", func() error { _, err := b.Files.ReadRange(ctx, "x", -1, 1); return err }()},
		{"bad port", "port", func() error { _, err := b.GetPublicURL(ctx, 70000, nil); return err }()},
		{"bad policy", "Mode", b.UpdateNetworkPolicy(ctx, NetworkPolicy{})},
		{"no session command", "Cmd or Argv", func() error { _, err := b.Exec.Session(ctx, &SessionParams{}); return err }()},
		{"no git repo", "Repo", b.Git.Clone(ctx, &CloneParams{})},
		{"no selector", "Selector", func() error { _, err := tab.ActOn(ctx, BrowserAction{Method: "click"}); return err }()},
		{"schedule type change", "Command is for exec schedules", func() error {
			_, err := b.Schedule.Update(ctx, "s", &ScheduleUpdate{Command: Set([]string{"true"}), Prompt: Set("p")})
			return err
		}()},
		{"bad enum tag", "field Level", func() error { _, err := SchemaFor[badEnum](); return err }()},
		{"bad enum tag in RunAs", "field Level", func() error {
			_, _, err := RunAs[badEnum](ctx, ab.Agent, &AgentParams{Prompt: "p"})
			return err
		}()},
		{"unsupported type", "field Inner.Events", func() error { _, err := SchemaFor[badType](); return err }()},
		{"unsupported type in RunAs", "field Inner.Events", func() error {
			_, _, err := RunAs[badType](ctx, ab.Agent, &AgentParams{Prompt: "p"})
			return err
		}()},
		{"logs of a zero Run", "Run.Logs", func() error { _, err := (&Run{}).Logs(ctx); return err }()},
	} {
		if !errors.Is(tc.err, ErrInvalid) || !strings.Contains(tc.err.Error(), tc.mention) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", tc.name, tc.err, tc.mention)
		}
	}
	// The sentinels of argument errors are themselves and ErrInvalid.
	for _, sentinel := range []error{ErrAuthConflict, ErrNoSelector, ErrScheduleTypeChange} {
		if !errors.Is(sentinel, ErrInvalid) || !errors.Is(fmt.Errorf("wrapped: %w", sentinel), sentinel) {
			t.Errorf("%v does not match ErrInvalid and itself", sentinel)
		}
	}
	if _, err := NewClient(WithAPIKey("k"), WithBaseURL("ftp://x")); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewClient with a bad base URL: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests were sent", n)
	}
}
