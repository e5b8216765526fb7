package box

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
)

// Errors of box creation. The server's own refusals are *Error.
var (
	// ErrCreateFailed is returned when a box (or a box from a snapshot)
	// ends its creation in the error state.
	ErrCreateFailed = errors.New("box: box creation failed")
	// ErrCreateTimeout is returned when a box is still being created after
	// the five minutes the API allows.
	ErrCreateTimeout = errors.New("box: box creation timed out")
)

// createTimeout bounds the wait for a box in the creating state.
const createTimeout = 5 * time.Minute

// CreateParams configures a new box. The zero value (or nil) creates a
// small box with no agent.
type CreateParams struct {
	Name string
	// Labels: at most 5, each at most 20 characters from letters, digits
	// and . _ - :
	Labels    []string
	Size      Size
	Runtime   Runtime
	KeepAlive bool
	// InitCommand runs once, in the background, each time the box's
	// sandbox starts (see Box.SetInitCommand). Any box may have one. A box
	// restored from a snapshot runs only the one given here: it does not
	// inherit the snapshot's.
	InitCommand string
	// Agent configures the box's coding agent; nil creates a box without
	// one.
	Agent *AgentOptions
	Git   *GitOptions
	// Env is set in every process of the box.
	Env map[string]string
	// AttachHeaders adds headers to the box's outbound HTTPS requests to
	// matching hosts ("api.example.com" or "*.example.com"). Write-only:
	// never returned.
	AttachHeaders map[string]map[string]string
	NetworkPolicy *NetworkPolicy
	// Skills are agent skills as owner/repo/skill-name.
	Skills     []string
	MCPServers []MCPServer
	// Browser provisions a headless browser for the box.
	Browser bool
	// Desktop provisions a desktop for the box: an X display, a window
	// manager, Chromium and a live viewer (see [Desktop]).
	Desktop bool
}

var labelRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,20}$`)

// ValidateLabel reports whether label is acceptable: 1 to 20 characters
// from letters, digits and . _ - :
func ValidateLabel(label string) error {
	if !labelRE.MatchString(label) {
		return invalidf("box: invalid label %q: use 1 to 20 letters, digits, '.', '_', '-' or ':'", label)
	}
	return nil
}

func validateLabels(labels []string) error {
	if len(labels) > 5 {
		return invalidf("box: at most 5 labels, got %d", len(labels))
	}
	for _, l := range labels {
		if err := ValidateLabel(l); err != nil {
			return err
		}
	}
	return nil
}

// request turns p into the create body, checking what the API would
// refuse.
func (p *CreateParams) request() (gen.CreateBoxRequest, error) {
	var r gen.CreateBoxRequest
	if p == nil {
		return r, nil
	}
	if err := validateLabels(p.Labels); err != nil {
		return r, err
	}
	if p.Name != "" {
		r.Name = &p.Name
	}
	r.Labels = p.Labels
	if p.Size != "" {
		s := gen.BoxSize(p.Size)
		r.Size = &s
	}
	if p.Runtime != "" {
		rt := string(p.Runtime)
		r.Runtime = &rt
	}
	if p.KeepAlive {
		r.KeepAlive = ptr(true)
	}
	if p.InitCommand != "" {
		r.InitCommand = &p.InitCommand
	}
	if a := p.Agent; a != nil {
		if err := a.apply(&r); err != nil {
			return r, err
		}
	}
	if g := p.Git; g != nil {
		r.GithubToken = nonEmpty(g.Token)
		r.GitUserName = nonEmpty(g.UserName)
		r.GitUserEmail = nonEmpty(g.UserEmail)
	}
	r.EnvVars = p.Env
	r.AttachHeaders = p.AttachHeaders
	if p.NetworkPolicy != nil {
		r.NetworkPolicy = p.NetworkPolicy.wire()
	}
	r.Skills = p.Skills
	for _, m := range p.MCPServers {
		s, err := m.wire()
		if err != nil {
			return r, err
		}
		r.McpServers = append(r.McpServers, s)
	}
	if p.Browser {
		r.Browser = ptr(true)
	}
	if p.Desktop {
		r.Desktop = ptr(true)
	}
	return r, nil
}

func (a *AgentOptions) apply(r *gen.CreateBoxRequest) error {
	if a.Harness == "" {
		return invalidf("box: Agent.Harness is required")
	}
	h := string(a.Harness)
	r.Agent = &h
	if a.Harness == HarnessCustom {
		if a.CustomHarness == nil || a.CustomHarness.Command == "" {
			return invalidf("box: Agent.CustomHarness with a Command is required when the harness is custom")
		}
		model := string(a.Model)
		if model == "" {
			model = "custom"
		}
		r.Model = &model
		r.CustomRunner = a.CustomHarness.wire()
		return nil
	}
	if a.Model == "" {
		return invalidf("box: Agent.Model is required when an agent is configured")
	}
	r.Model = ptr(string(a.Model))
	r.AgentAPIKey = nonEmpty(a.APIKey)
	return nil
}

func (h *CustomHarness) wire() *gen.CustomRunner {
	cr := &gen.CustomRunner{Command: h.Command, Args: h.Args}
	if h.Protocol != "" {
		p := gen.CustomRunnerProtocol(h.Protocol)
		cr.Protocol = &p
	}
	return cr
}

func (m MCPServer) wire() (gen.McpServer, error) {
	switch {
	case m.Name == "":
		return gen.McpServer{}, invalidf("box: MCPServer.Name is required")
	case (m.Package == "") == (m.URL == ""):
		return gen.McpServer{}, invalidf("box: MCP server %q: set exactly one of Package and URL", m.Name)
	case m.Package != "":
		return gen.McpServer{Name: m.Name, Source: gen.McpServerSourceNpm, PackageOrURL: m.Package, Args: m.Args}, nil
	default:
		return gen.McpServer{Name: m.Name, Source: gen.McpServerSourceURL, PackageOrURL: m.URL, Headers: m.Headers}, nil
	}
}

func ptr[T any](v T) *T { return &v }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// call reads a JSON response into a T, or turns a non-2xx response into an
// *Error. It takes a generated client call's results directly:
//
//	d, err := call[gen.BoxData](c.api.GetBox(ctx, id))
func call[T any](resp *http.Response, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newAPIError(resp)
	}
	defer drainAndClose(resp.Body)
	v := new(T)
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return nil, fmt.Errorf("box: %s %s: decoding response: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return v, nil
}

// none checks a response whose body is not needed.
func none(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newAPIError(resp)
	}
	drainAndClose(resp.Body)
	return nil
}

// checkID rejects an empty path parameter before a request is built.
func checkID(what, id string) error {
	if strings.TrimSpace(id) == "" {
		return invalidf("box: %s is required", what)
	}
	return nil
}

// Create creates a box and waits until it is ready. When the server
// answers that the box is still being created, Create polls it every two
// seconds until it is ready, ctx ends, or five minutes pass
// (ErrCreateTimeout); a box that ends in the error state gives
// ErrCreateFailed.
func (c *Client) Create(ctx context.Context, params *CreateParams, opts ...Option) (*Box, error) {
	ctx = withCallOptions(ctx, opts)
	body, err := params.request()
	if err != nil {
		return nil, err
	}
	d, err := call[gen.BoxData](c.api.CreateBox(ctx, body))
	if err != nil {
		return nil, err
	}
	return c.ready(ctx, d, params)
}

// ready waits while d is creating and returns the Box.
func (c *Client) ready(ctx context.Context, d *gen.BoxData, params *CreateParams) (*Box, error) {
	if err := c.waitCreated(ctx, d); err != nil {
		return nil, err
	}
	b := c.newBox(d)
	if params != nil && params.Git != nil {
		b.st.gitToken = params.Git.Token
	}
	return b, nil
}

func (c *Client) waitCreated(ctx context.Context, d *gen.BoxData) error {
	start := time.Now()
	for d.Status == gen.BoxStatusCreating {
		if time.Since(start) > createTimeout {
			return ErrCreateTimeout
		}
		if err := sleepCtx(ctx, c.cfg.pollInterval); err != nil {
			return err
		}
		resp, err := c.api.GetBox(ctx, d.ID)
		if err != nil {
			return err
		}
		// As in the official SDKs, a failed poll is skipped, not fatal.
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			var next gen.BoxData
			err := json.NewDecoder(resp.Body).Decode(&next)
			drainAndClose(resp.Body)
			if err == nil {
				*d = next
			}
		} else {
			drainAndClose(resp.Body)
		}
	}
	if d.Status == gen.BoxStatusError {
		return ErrCreateFailed
	}
	return nil
}

// GetParams configures Get.
type GetParams struct {
	// GitToken is kept by the returned Box and sent with git clone and
	// push, as Git.Token is for a box created by this client.
	GitToken string
}

// Get returns the box with the given id or name.
func (c *Client) Get(ctx context.Context, idOrName string, params *GetParams, opts ...Option) (*Box, error) {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("box id or name", idOrName); err != nil {
		return nil, err
	}
	d, err := call[gen.BoxData](c.api.GetBox(ctx, idOrName))
	if err != nil {
		return nil, err
	}
	b := c.newBox(d)
	if params != nil {
		b.st.gitToken = params.GitToken
	}
	return b, nil
}

// GetByName returns the box with the given name. The API resolves ids and
// names through the same call, so this is Get under a clearer name.
func (c *Client) GetByName(ctx context.Context, name string, params *GetParams, opts ...Option) (*Box, error) {
	ctx = withCallOptions(ctx, opts)
	return c.Get(ctx, name, params)
}

// ListParams filters List.
type ListParams struct {
	// Label keeps only boxes carrying this label.
	Label string
}

// List returns the account's boxes.
func (c *Client) List(ctx context.Context, params *ListParams, opts ...Option) ([]Info, error) {
	ctx = withCallOptions(ctx, opts)
	var p gen.ListBoxesParams
	if params != nil && params.Label != "" {
		p.Label = &params.Label
	}
	list, err := call[[]gen.BoxData](c.api.ListBoxes(ctx, &p))
	if err != nil {
		return nil, err
	}
	out := make([]Info, len(*list))
	for i := range *list {
		out[i] = infoFrom(&(*list)[i])
	}
	return out, nil
}

// DeleteBoxes deletes the boxes with the given ids in one request. An
// empty list, or a blank id, is an error: it is never read as "all boxes".
func (c *Client) DeleteBoxes(ctx context.Context, ids []string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if len(ids) == 0 {
		return invalidf("box: DeleteBoxes needs at least one box id")
	}
	for _, id := range ids {
		if strings.TrimSpace(id) == "" {
			return invalidf("box: DeleteBoxes: blank box id")
		}
	}
	return none(c.api.DeleteBoxes(ctx, gen.DeleteBoxesRequest{IDs: ids}))
}
