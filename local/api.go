package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/boxes"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/feature/agentrun"
	"github.com/upstash/box-go/local/internal/feature/browsers"
	"github.com/upstash/box-go/local/internal/feature/desktop"
	"github.com/upstash/box-go/local/internal/feature/git"
	"github.com/upstash/box-go/local/internal/feature/previews"
	"github.com/upstash/box-go/local/internal/feature/schedules"
	"github.com/upstash/box-go/local/internal/feature/snapshots"
	"github.com/upstash/box-go/local/internal/feature/ssh"
)

// access says what lets a request through to a route.
type access int

const (
	// byAPIKey routes need boxd's API key (X-Box-Api-Key, or the bearer
	// token of Authorization).
	byAPIKey access = iota
	// byCDPToken and byLiveToken routes are opened by a browser tool or a
	// viewer that holds only a URL: they need the unexpired token of that
	// kind, for that box, in the URL's query, and no API key.
	byCDPToken
	byLiveToken
	// byDesktopGrant routes are a desktop's viewer: the grant in the path
	// (and its user name and password, for basic auth) lets a request
	// through, checked by the desktop feature.
	byDesktopGrant
)

// route is one entry of boxd's route table.
type route struct {
	pattern string
	access  access
	handler http.HandlerFunc
}

// routeTable is every route boxd serves by path, with what lets a request
// through to it. Public URLs are served before it, by Host (withPreviews),
// with the auth each URL was created with.
func (s *Server) routeTable() []route {
	bs := s.browsers
	table := []route{
		{"GET /v2/box/{id}/browser/cdp/{rest...}", byCDPToken, bs.ServeCDP},
		{"GET /v2/box/{id}/browser/live", byLiveToken, bs.ServeLive},
		{"GET /v2/box/{id}/browser/live/ws", byLiveToken, bs.ServeLiveWS},
		{"GET /v2/box/{id}/browser/recordings/{rid}/segments/{name}", byAPIKey, bs.ServeSegment},
		{"GET /v2/box/{id}/desktop/view/{grant}/{rest...}", byDesktopGrant, s.desktops.ServeView},
	}
	// The data plane goes to the box's agent as it is.
	for _, p := range dataPlane {
		table = append(table, route{p, byAPIKey, s.proxy})
	}
	// Everything else is the control plane's: the generated strict server.
	return append(table, route{"/", byAPIKey, s.controlPlaneHandler().ServeHTTP})
}

// routes builds boxd's handler from its route table.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routeTable() {
		mux.Handle(rt.pattern, s.guard(rt.access, rt.handler))
	}
	return mux
}

// guard lets through to next the requests that access allows.
func (s *Server) guard(a access, next http.HandlerFunc) http.Handler {
	switch a {
	case byCDPToken:
		return s.browsers.TokenGuard("cdp", "the CDP URL's token is invalid or has expired; get a new URL", next)
	case byLiveToken:
		return s.browsers.TokenGuard("live", "the live view URL's token is invalid or has expired; get a new URL", next)
	case byDesktopGrant:
		return next
	}
	return s.authenticate(next)
}

// controlPlaneHandler serves the operations boxd answers itself, through
// the generated strict server, with request bodies bounded.
func (s *Server) controlPlaneHandler() http.Handler {
	base := http.NewServeMux()
	base.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, http.StatusNotFound, "not found")
	})
	strict := gen.NewStrictHandlerWithOptions(&controlPlane{Boxes: s.boxes, Runs: s.runs, Schedules: s.schedules, Snapshots: s.snapshots, Git: s.git, Browsers: s.browsers, Previews: s.previews, SSH: s.ssh, Desktops: s.desktops, s: s}, nil, gen.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.As(err, new(*http.MaxBytesError)) {
				api.WriteError(w, http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+" bytes")
				return
			}
			api.WriteError(w, http.StatusBadRequest, err.Error())
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			status := api.Status(err)
			if status >= 500 {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			msg := err.Error()
			if status == http.StatusInsufficientStorage && errdefs.Of(err) == nil {
				msg = "boxd's data directory is full: " + msg
			}
			api.WriteError(w, status, msg)
		},
	})
	ops := gen.HandlerWithOptions(strict, gen.StdHTTPServerOptions{
		BaseRouter: base,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			api.WriteError(w, http.StatusBadRequest, err.Error())
		},
	})
	limit := s.cfg.MaxBodyBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			api.WriteError(w, http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if !refuseNullIDs(w, r) {
			return
		}
		ops.ServeHTTP(w, r)
	})
}

// controlPlane implements the operations boxd answers itself, and, through
// agentOperations, stands in for those of the data plane, which reach the
// box's agent before this handler.
type controlPlane struct {
	agentOperations
	*boxes.Boxes
	*agentrun.Runs
	*schedules.Schedules
	*snapshots.Snapshots
	*git.Git
	*browsers.Browsers
	*previews.Previews
	*ssh.SSH
	*desktop.Desktops
	s *Server
}

// controlPlane answers every operation of the API: a missing one is a
// compile error, not a 501 at run time.
var _ gen.StrictServerInterface = (*controlPlane)(nil)

// refuseNullIDs answers 400 to DELETE /v2/box/snapshots with "ids": null.
// The generated decoder reads null as a missing key, which means "delete
// every snapshot"; a client that serialises an empty list as null (a nil
// Go slice does) must not get that. It reports whether to go on; the body
// is left readable.
func refuseNullIDs(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodDelete || r.URL.Path != "/v2/box/snapshots" || r.Body == nil {
		return true
	}
	raw, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	if errors.As(err, new(*http.MaxBytesError)) {
		api.WriteError(w, http.StatusRequestEntityTooLarge, err.Error())
		return false
	}
	if err != nil {
		return true // the decoder answers the truncated body
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(raw, &body) == nil {
		if v, ok := body["ids"]; ok && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			api.WriteError(w, http.StatusBadRequest, "ids must be a list of snapshot ids; leave it out (or use all=true) to delete every snapshot")
			return false
		}
	}
	return true
}
