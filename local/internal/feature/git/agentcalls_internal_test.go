package git

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
)

// fakeAgent serves h on a unix socket, as a box's agent would be, and
// returns a client of it for box id.
func fakeAgent(t *testing.T, id string, h http.HandlerFunc) *agent.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	c := agent.NewClient(agent.ClientConfig{BoxID: id, Dial: agent.UnixDialer(sock)})
	t.Cleanup(func() {
		c.CloseIdleConnections()
		srv.Close()
		<-done
	})
	return c
}

// answer is a handler that answers every request with status and body.
func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// TestAttachmentAgentFailure: an attachment the box's agent could not
// read because the agent failed (5xx) is the agent's failure (upstream,
// answered 502), not the client's mistake (invalid, 400), which a file
// that is not there is.
func TestAttachmentAgentFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
		want   error
	}{
		{http.StatusInternalServerError, `{"error": "the agent broke"}`, errdefs.ErrUpstream},
		{http.StatusBadGateway, ``, errdefs.ErrUpstream},
		{http.StatusServiceUnavailable, `busy`, errdefs.ErrUpstream},
		{http.StatusNotFound, `{"error": "no such file or directory: /workspace/home/shot.png"}`, errdefs.ErrInvalidArgument},
		{http.StatusForbidden, `{"error": "permission denied: /workspace/home/shot.png"}`, errdefs.ErrInvalidArgument},
	} {
		g := &gitBox{b: &store.Box{ID: "box-test"}, rt: fakeAgent(t, "box-test", answer(tc.status, tc.body))}
		_, err := g.readFile(t.Context(), "/workspace/home/shot.png")
		if got := errdefs.Of(err); got != tc.want || !strings.Contains(err.Error(), "attachment /workspace/home/shot.png cannot be read") {
			t.Errorf("agent answered %d %q: %v %v, want %v", tc.status, tc.body, got, err, tc.want)
		}
	}
}

// TestAgentFailure checks how an agent's refusal reaches the API: a 4xx
// keeps its kind, anything else is boxd's own failure (of no kind).
func TestAgentFailure(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]error{
		http.StatusBadRequest:            errdefs.ErrInvalidArgument,
		http.StatusNotFound:              errdefs.ErrNotFound,
		http.StatusForbidden:             errdefs.ErrPermission,
		http.StatusConflict:              errdefs.ErrConflict,
		http.StatusRequestEntityTooLarge: errdefs.ErrTooLarge,
		http.StatusUnprocessableEntity:   errdefs.ErrInvalidArgument,
		http.StatusInsufficientStorage:   errdefs.ErrNoSpace,
		http.StatusInternalServerError:   nil,
		http.StatusBadGateway:            nil,
	} {
		err := agentFailure((&agent.Error{Status: status, Message: "x"}).Kind(), "the agent said no")
		if got := errdefs.Of(err); got != want {
			t.Errorf("agent %d is of kind %v, want %v", status, got, want)
		}
		if err.Error() != "the agent said no" {
			t.Errorf("agent %d: message %q", status, err)
		}
	}
}
