package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/feature/agentrun"
	"github.com/upstash/box-go/local/internal/feature/browsers"
	"github.com/upstash/box-go/local/internal/feature/git"
	"github.com/upstash/box-go/local/internal/feature/previews"
	"github.com/upstash/box-go/local/internal/feature/schedules"
	"github.com/upstash/box-go/local/internal/feature/snapshots"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
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
	strict := gen.NewStrictHandlerWithOptions(&controlPlane{Runs: s.runs, Schedules: s.schedules, Snapshots: s.snapshots, Git: s.git, Browsers: s.browsers, Previews: s.previews, s: s}, nil, gen.StrictHTTPServerOptions{
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
	*agentrun.Runs
	*schedules.Schedules
	*snapshots.Snapshots
	*git.Git
	*browsers.Browsers
	*previews.Previews
	s *Server
}

// controlPlane answers every operation of the API: a missing one is a
// compile error, not a 501 at run time.
var _ gen.StrictServerInterface = (*controlPlane)(nil)

func (c *controlPlane) box(idOrName string) (*store.Box, error) {
	return c.s.core.Box(idOrName)
}

var (
	labelRE = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)
	envKey  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const maxTTL = 259200

var runtimes = []string{"node", "python", "golang", "ruby", "rust", "node-alpine", "python-alpine", "golang-alpine", "ruby-alpine", "rust-alpine"}

func validateLabels(labels []string) error {
	if len(labels) > 5 {
		return errdefs.Invalid("labels: at most 5 labels, got %d", len(labels))
	}
	seen := map[string]bool{}
	for _, l := range labels {
		switch {
		case l == "":
			return errdefs.Invalid("labels: empty label")
		case len(l) > 20:
			return errdefs.Invalid("labels: label %q is longer than 20 characters", l)
		case !labelRE.MatchString(l):
			return errdefs.Invalid("labels: label %q contains invalid characters", l)
		case seen[l]:
			return errdefs.Invalid("labels: label %q given twice", l)
		}
		seen[l] = true
	}
	return nil
}

func validateCreate(r *gen.CreateBoxRequest) error {
	if r.Name != nil {
		n := *r.Name
		if n == "" || len(n) > 64 || strings.ContainsAny(n, "/?#% \t\r\n") {
			return errdefs.Invalid("name must be 1 to 64 characters without spaces, '/', '?', '#' or '%%'")
		}
	}
	if err := validateLabels(r.Labels); err != nil {
		return err
	}
	if strings.ContainsAny(wire.Deref(r.GitUserName)+wire.Deref(r.GitUserEmail), "\x00\r\n") {
		return errdefs.Invalid("git_user_name and git_user_email must be one line")
	}
	if r.Size != nil && !slices.Contains([]gen.BoxSize{gen.BoxSizeSmall, gen.BoxSizeMedium, gen.BoxSizeLarge}, *r.Size) {
		return errdefs.Invalid("size must be small, medium or large, not %q", *r.Size)
	}
	if r.Runtime != nil && !slices.Contains(runtimes, *r.Runtime) {
		return errdefs.Invalid("runtime must be one of %s, not %q", strings.Join(runtimes, ", "), *r.Runtime)
	}
	if err := validateEnv(r.EnvVars); err != nil {
		return errdefs.Invalid("env_vars: %v", err)
	}
	if np := r.NetworkPolicy; np != nil {
		if err := validateNetworkPolicy(np); err != nil {
			return err
		}
	}
	if err := validateAttachHeaders(r.AttachHeaders); err != nil {
		return err
	}
	if r.Agent != nil && *r.Agent == "custom" && r.CustomRunner == nil {
		return errdefs.Invalid("custom_runner is required when agent is custom")
	}
	if r.CustomRunner != nil && r.CustomRunner.Command == "" {
		return errdefs.Invalid("custom_runner.command is required")
	}
	if r.InitCommand != nil {
		if err := validateInitCommand(*r.InitCommand); err != nil {
			return err
		}
	}
	if r.TTL != nil {
		if r.Ephemeral == nil || !*r.Ephemeral {
			return errdefs.Invalid("ttl is only for ephemeral boxes")
		}
		if *r.TTL < 1 || *r.TTL > maxTTL {
			return errdefs.Invalid("ttl must be between 1 and %d seconds, got %d", maxTTL, *r.TTL)
		}
	}
	return nil
}

func (c *controlPlane) CreateBox(ctx context.Context, req gen.CreateBoxRequestObject) (gen.CreateBoxResponseObject, error) {
	body := req.Body
	if body == nil {
		body = &gen.CreateBoxRequest{}
	}
	b, err := c.create(ctx, body, nil)
	if err != nil {
		return nil, err
	}
	return gen.CreateBox200JSONResponse(wire.BoxData(b)), nil
}

// create validates body and makes the box: its record, its directories,
// and its sandbox, started in the background. fill, when not nil, puts
// files into the directories before anything runs in the box (a restore
// from a snapshot); if it fails, the box is removed.
func (c *controlPlane) create(ctx context.Context, body *gen.CreateBoxRequest, fill func(*store.Box) error) (*store.Box, error) {
	if err := validateCreate(body); err != nil {
		return nil, err
	}
	if err := c.s.core.NeedDisk("create a box"); err != nil {
		return nil, err
	}
	imageID, release, err := c.s.images.forCreate(ctx, wire.Deref(body.Runtime), wire.Deref(body.Browser))
	if err != nil {
		return nil, err
	}
	defer release()
	now := time.Now()
	b := &store.Box{
		ID:            core.NewID("box-"),
		Name:          wire.Deref(body.Name),
		Labels:        body.Labels,
		Size:          string(wire.DerefOr(body.Size, gen.BoxSizeSmall)),
		KeepAlive:     wire.Deref(body.KeepAlive),
		InitCommand:   wire.Deref(body.InitCommand),
		Model:         wire.Deref(body.Model),
		Agent:         wire.Deref(body.Agent),
		AgentAPIKey:   wire.Deref(body.AgentAPIKey),
		Runtime:       wire.Deref(body.Runtime),
		GitHubToken:   wire.Deref(body.GithubToken),
		GitUserName:   wire.Deref(body.GitUserName),
		GitUserEmail:  wire.Deref(body.GitUserEmail),
		EnvVars:       c.s.withAccountEnv(body.EnvVars),
		AttachHeaders: body.AttachHeaders,
		Skills:        body.Skills,
		Ephemeral:     wire.Deref(body.Ephemeral),
		Browser:       wire.Deref(body.Browser),
		Image:         imageID,
		Status:        "idle",
		CreatedAt:     now.Unix(),
		UpdatedAt:     now.Unix(),
		Seq:           now.UnixNano(),
	}
	if b.Agent == "" && b.Model != "" && !b.Ephemeral {
		// The official SDKs' first releases (0.1.x) send a model and no
		// agent: the model names the harness, as on the cloud.
		b.Agent = agentrun.InferHarness(b.Model)
	}
	if body.CustomRunner != nil {
		b.CustomRunner = wire.Raw(body.CustomRunner)
	}
	if body.NetworkPolicy != nil {
		b.NetworkPolicy = wire.Raw(body.NetworkPolicy)
	}
	if len(body.McpServers) > 0 {
		b.MCPServers = wire.Raw(body.McpServers)
	}
	if b.Ephemeral {
		// On the server's clock, which also times the deletion.
		b.ExpiresAt = c.s.cfg.Clock.Now().Unix() + wire.DerefOr(body.TTL, maxTTL)
	}
	if err := c.s.core.Create(b, fill); err != nil {
		return nil, err
	}
	return b, nil
}

func (c *controlPlane) ListBoxes(ctx context.Context, req gen.ListBoxesRequestObject) (gen.ListBoxesResponseObject, error) {
	all, err := c.s.db.Boxes()
	if err != nil {
		return nil, err
	}
	out := gen.ListBoxes200JSONResponse{}
	for _, b := range all {
		if req.Params.Label != nil && !slices.Contains(b.Labels, *req.Params.Label) {
			continue
		}
		out = append(out, wire.BoxData(b))
	}
	return out, nil
}

func (c *controlPlane) GetBox(ctx context.Context, req gen.GetBoxRequestObject) (gen.GetBoxResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	return gen.GetBox200JSONResponse(wire.BoxData(b)), nil
}

func (c *controlPlane) DeleteBox(ctx context.Context, req gen.DeleteBoxRequestObject) (gen.DeleteBoxResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := c.s.core.Delete(b.ID); err != nil {
		return nil, err
	}
	return gen.DeleteBox200JSONResponse(wire.Message("Box deleted")), nil
}

// DeleteBoxes deletes the listed boxes. An empty list, or one with a blank
// id, is an error (it is never read as "all boxes"); so is an unknown id,
// in which case nothing is deleted.
func (c *controlPlane) DeleteBoxes(ctx context.Context, req gen.DeleteBoxesRequestObject) (gen.DeleteBoxesResponseObject, error) {
	if req.Body == nil || len(req.Body.IDs) == 0 {
		return nil, errdefs.Invalid("ids must contain at least one box id")
	}
	var ids []string
	for _, id := range req.Body.IDs {
		if strings.TrimSpace(id) == "" {
			return nil, errdefs.Invalid("ids must not contain blank ids")
		}
		b, err := c.box(id)
		if err != nil {
			if api.Status(err) == http.StatusNotFound {
				return nil, errdefs.NotFound("box not found: %s", id)
			}
			return nil, err
		}
		if !slices.Contains(ids, b.ID) {
			ids = append(ids, b.ID)
		}
	}
	for _, id := range ids {
		if err := c.s.core.Delete(id); err != nil {
			return nil, err
		}
	}
	return gen.DeleteBoxes200JSONResponse(wire.Message(fmt.Sprintf("%d boxes deleted", len(ids)))), nil
}

func (c *controlPlane) GetBoxStatus(ctx context.Context, req gen.GetBoxStatusRequestObject) (gen.GetBoxStatusResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	return gen.GetBoxStatus200JSONResponse{Status: gen.BoxStatus(b.Status)}, nil
}

func (c *controlPlane) PauseBox(ctx context.Context, req gen.PauseBoxRequestObject) (gen.PauseBoxResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	if b.KeepAlive {
		return nil, errdefs.Conflict("Keep-alive boxes cannot be paused")
	}
	if b.Status != "paused" {
		if err := c.s.core.Pause(ctx, b.ID); err != nil {
			return nil, err
		}
	}
	return gen.PauseBox200JSONResponse(wire.Message("Box paused")), nil
}

func (c *controlPlane) ResumeBox(ctx context.Context, req gen.ResumeBoxRequestObject) (gen.ResumeBoxResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	if b.Status == "paused" {
		if err := c.s.core.Resume(ctx, b.ID); err != nil {
			return nil, err
		}
	}
	return gen.ResumeBox200JSONResponse(wire.Message("Box resumed")), nil
}

func (c *controlPlane) GetBoxLogs(ctx context.Context, req gen.GetBoxLogsRequestObject) (gen.GetBoxLogsResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	offset, limit := wire.Deref(req.Params.Offset), wire.Deref(req.Params.Limit)
	if offset < 0 || limit < 0 {
		return nil, errdefs.Invalid("offset and limit must not be negative")
	}
	entries, err := c.s.db.Logs(b.ID, offset, limit)
	if err != nil {
		return nil, err
	}
	logs := make([]gen.LogEntry, len(entries))
	for i, e := range entries {
		logs[i] = gen.LogEntry{Timestamp: e.Timestamp, Level: gen.LogEntryLevel(e.Level), Source: gen.LogEntrySource(e.Source), Message: e.Message}
	}
	return gen.GetBoxLogs200JSONResponse{Logs: logs}, nil
}

func (c *controlPlane) ListBoxRuns(ctx context.Context, req gen.ListBoxRunsRequestObject) (gen.ListBoxRunsResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	runs, err := c.s.db.Runs(b.ID)
	if err != nil {
		return nil, err
	}
	out := make([]gen.RunRecord, len(runs))
	for i, r := range runs {
		out[i] = wire.RunRecord(r)
	}
	return gen.ListBoxRuns200JSONResponse{Runs: out}, nil
}

func (c *controlPlane) GetBoxRun(ctx context.Context, req gen.GetBoxRunRequestObject) (gen.GetBoxRunResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	r, err := c.s.db.Run(b.ID, req.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errdefs.NotFound("run not found")
	}
	if err != nil {
		return nil, err
	}
	return gen.GetBoxRun200JSONResponse{Status: gen.RunStatus(r.Status)}, nil
}

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
