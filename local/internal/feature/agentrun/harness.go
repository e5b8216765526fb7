package agentrun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/egress"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/harnesses"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// maxArgPrompt bounds a prompt passed as a command-line argument (the
// kernel refuses single arguments over 128 KiB).
const maxArgPrompt = 100 << 10

// invocation is how one run starts its harness in the box.
type invocation struct {
	name   string // for messages, e.g. "custom harness python3"
	binary string
	argv   []string
	env    map[string]string
	stdin  string
	// mapper turns a managed CLI's JSON lines into events; nil for a
	// custom harness, which speaks box-sse-v1 itself.
	mapper harnesses.Mapper
	// sessionTotals: the CLI reports a resumed session's whole usage
	// (harnesses.ReportsSessionTotals).
	sessionTotals bool
}

// notRunnable explains a harness that could not be started.
func (inv *invocation) notRunnable(msg string) string {
	if strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory") {
		return fmt.Sprintf("%s: `%s` is not installed in the box (%s)", inv.name, inv.binary, msg)
	}
	return fmt.Sprintf("%s could not start: %s", inv.name, msg)
}

// harnessInput is what one run gives its harness.
type harnessInput struct {
	prompt     string
	options    map[string]any
	schema     []byte // the response schema, JSON; nil for none
	mcpServers []harnesses.MCPServer
	mcpConfig  string // the file of mcpServers, "" for none
}

// harnessCommand builds the invocation of box b's harness for a run.
func harnessCommand(b *store.Box, in harnessInput, boxEnv map[string]string, baseURLs map[string]string) (*invocation, error) {
	prompt, options := in.prompt, in.options
	if b.Agent == "custom" || (b.Agent == "" && len(b.CustomRunner) > 0) {
		var cr gen.CustomRunner
		if err := json.Unmarshal(b.CustomRunner, &cr); err != nil || cr.Command == "" {
			return nil, errdefs.Conflict("the box's custom harness has no command: configure it with PUT /config/custom-runner")
		}
		if cr.Protocol != nil && *cr.Protocol != gen.CustomRunnerProtocolBoxSseV1 {
			return nil, errdefs.Invalid("custom harness protocol %q is not supported (want box-sse-v1)", *cr.Protocol)
		}
		if len(prompt) > maxArgPrompt {
			return nil, errdefs.TooLarge("a custom harness takes the prompt as an argument; at most %d bytes", maxArgPrompt)
		}
		model := b.Model
		if model == "" {
			model = "custom"
		}
		argv := append([]string{cr.Command}, cr.Args...)
		argv = append(argv, "-p", prompt, "--model", model, "--stream")
		if b.SessionID != "" {
			argv = append(argv, "--session", b.SessionID)
		}
		inv := &invocation{name: "custom harness " + cr.Command, binary: cr.Command, argv: argv, env: map[string]string{}}
		if len(options) > 0 {
			raw, _ := json.Marshal(options)
			inv.env["BOX_AGENT_OPTIONS"] = string(raw)
		}
		return inv, nil
	}
	h, ok := harnesses.Get(b.Agent)
	if !ok {
		if b.Agent == "" {
			return nil, errdefs.Conflict("the box has no agent: create it with an agent, or set a model with PUT /config/model")
		}
		return nil, errdefs.Invalid("unknown harness %q", b.Agent)
	}
	key, err := providerKey(b, h, boxEnv)
	if err != nil {
		return nil, err
	}
	argv, env, stdin, err := h.Command(harnesses.Spec{Model: b.Model, Prompt: prompt, SessionID: b.SessionID, Options: options, APIKey: key, MCPServers: in.mcpServers, MCPConfig: in.mcpConfig, BaseURLs: baseURLs, Schema: in.schema})
	if err != nil {
		return nil, errdefs.Invalid("%s: %v", h.Name(), err)
	}
	return &invocation{name: h.Name() + " harness", binary: h.Binary(), argv: argv, env: env, stdin: stdin, mapper: h.NewMapper(), sessionTotals: harnesses.ReportsSessionTotals(h)}, nil
}

// boxProviderURLs are the operator's model provider URLs
// (Config.ModelProviderURLs) as a box reaches them: one on this
// machine's loopback is host.boxd.internal there, which the egress proxy
// takes to the host's loopback when boxes may reach it
// (AllowHostLoopback).
func (rs *Runs) boxProviderURLs() map[string]string {
	if len(rs.cfg.ProviderURLs) == 0 {
		return nil
	}
	out := make(map[string]string, len(rs.cfg.ProviderURLs))
	for name, raw := range rs.cfg.ProviderURLs {
		u, err := url.Parse(raw)
		if err != nil {
			continue // New refused it
		}
		if ip, err := netip.ParseAddr(u.Hostname()); (err == nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			u.Host = net.JoinHostPort(egress.HostAlias, cmp.Or(u.Port(), map[string]string{"http": "80", "https": "443"}[u.Scheme]))
		}
		out[name] = strings.TrimSuffix(u.String(), "/")
	}
	return out
}

// providerKey finds the key a managed harness runs with: a raw key given
// as agent_api_key, else one of the harness's key variables in the box's
// environment. boxd has no Upstash-provided or stored keys.
func providerKey(b *store.Box, h harnesses.Harness, env map[string]string) (string, error) {
	switch b.AgentAPIKey {
	case "", "UPSTASH_KEY", "STORED_KEY":
	default:
		return b.AgentAPIKey, nil
	}
	names := harnesses.KeyEnvFor(h, b.Model)
	for _, name := range names {
		if v := env[name]; v != "" {
			return v, nil
		}
	}
	why := "no provider key"
	if b.AgentAPIKey != "" {
		why = b.AgentAPIKey + " is not available on boxd (it has no Upstash-provided or stored keys)"
	}
	return "", errdefs.MissingDependency("%s harness: %s: pass the provider key as the agent API key, or set %s in the box's env", h.Name(), why, strings.Join(names, " or "))
}

// prepareRun resolves the box and checks that its harness can run.
func (rs *Runs) prepareRun(ctx context.Context, id string, spec *runSpec) (*store.Box, error) {
	b, err := rs.host.Box(id)
	if err != nil {
		return nil, err
	}
	if b.Ephemeral {
		return nil, errdefs.Invalid("ephemeral boxes have no agent")
	}
	inv, err := harnessCommand(b, harnessInput{prompt: spec.prompt, options: spec.options, schema: spec.schemaDoc}, core.Env(b), rs.boxProviderURLs())
	if err != nil {
		return nil, err
	}
	// A managed CLI that is not installed fails now, not mid-stream.
	if inv.mapper != nil {
		rt, err := rs.host.EnsureRunning(ctx, b)
		if err != nil {
			return nil, err
		}
		res, err := rt.Exec(ctx, []string{"sh", "-c", `command -v "$0" >/dev/null`, inv.binary}, "")
		var ae *agent.Error
		switch {
		case errors.As(err, &ae) && errors.Is(ae, errdefs.ErrUpstream):
			return nil, errdefs.Upstream("%s: cannot check for `%s` in the box: %s", inv.name, inv.binary, ae.Message)
		case errors.As(err, &ae):
			// The box is in no state to run the check (its home has gone,
			// say): nor to run the harness.
			return nil, errdefs.MissingDependency("%s: cannot check for `%s` in the box: %s", inv.name, inv.binary, ae.Message)
		case err != nil:
			return nil, fmt.Errorf("%s: cannot check for `%s` in the box: %w", inv.name, inv.binary, err)
		}
		if res.ExitCode != 0 {
			return nil, errdefs.MissingDependency("%s: `%s` is not installed in the box; install it (for example with npm in the box's init command) or use a custom harness", inv.name, inv.binary)
		}
	}
	return b, nil
}

func (rs *Runs) StreamAgentRun(ctx context.Context, req gen.StreamAgentRunRequestObject) (gen.StreamAgentRunResponseObject, error) {
	spec, err := runRequest(req.JSONBody, req.MultipartBody)
	if err != nil {
		return nil, err
	}
	if spec.webhook != nil {
		return nil, errdefs.Invalid("webhook runs go to POST /run, not /run/stream")
	}
	b, err := rs.prepareRun(ctx, req.ID, spec)
	if err != nil {
		return nil, err
	}
	run, err := rs.begin(b, spec)
	if err != nil {
		return nil, err
	}
	return sseResponse{ctx: ctx, run: run}, nil
}

func (rs *Runs) RunAgent(ctx context.Context, req gen.RunAgentRequestObject) (gen.RunAgentResponseObject, error) {
	spec, err := runRequest(req.JSONBody, req.MultipartBody)
	if err != nil {
		return nil, err
	}
	if spec.webhook == nil {
		return nil, errdefs.Invalid("webhook is required: stream runs with POST /run/stream")
	}
	b, err := rs.prepareRun(ctx, req.ID, spec)
	if err != nil {
		return nil, err
	}
	run, err := rs.begin(b, spec)
	if err != nil {
		return nil, err
	}
	run.out.detach() // nobody reads the events of a webhook run
	return gen.RunAgent200JSONResponse{Status: "accepted", BoxID: b.ID, RunID: &run.id}, nil
}

// runRequest reads a run request, JSON or multipart.
func runRequest(jsonBody *gen.AgentRunRequest, mr *multipart.Reader) (*runSpec, error) {
	switch {
	case mr != nil:
		return parseRunMultipart(mr)
	case jsonBody != nil:
		return parseRunJSON(jsonBody)
	}
	return nil, errdefs.Invalid("the request body must be JSON or multipart/form-data")
}

func (rs *Runs) CancelRun(ctx context.Context, req gen.CancelRunRequestObject) (gen.CancelRunResponseObject, error) {
	b, err := rs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	rec, err := rs.db.Run(b.ID, req.RunID)
	if err != nil {
		return nil, errdefs.NotFound("run not found")
	}
	if !rs.cancelRun(rec.ID) {
		// A run that has just ended may not be recorded yet: its record
		// still says running.
		if rec.Status == "running" {
			return nil, errdefs.Conflict("run %s is not running (it has ended)", rec.ID)
		}
		return nil, errdefs.Conflict("run %s is not running (it is %s)", rec.ID, rec.Status)
	}
	return gen.CancelRun200JSONResponse(wire.Message("Run cancelled")), nil
}

func (rs *Runs) ConfigureModel(ctx context.Context, req gen.ConfigureModelRequestObject) (gen.ConfigureModelResponseObject, error) {
	if req.Body == nil || strings.TrimSpace(req.Body.Model) == "" {
		return nil, errdefs.Invalid("model is required")
	}
	b, err := rs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	err = rs.host.UpdateBox(b.ID, func(b *store.Box) error {
		b.Model = req.Body.Model
		if b.Agent == "" {
			b.Agent = inferHarness(b.Model)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gen.ConfigureModel200JSONResponse(wire.Message("Model configured")), nil
}

func (rs *Runs) ConfigureCustomRunner(ctx context.Context, req gen.ConfigureCustomRunnerRequestObject) (gen.ConfigureCustomRunnerResponseObject, error) {
	if req.Body == nil || req.Body.CustomRunner.Command == "" {
		return nil, errdefs.Invalid("custom_runner.command is required")
	}
	b, err := rs.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if b.Agent != "custom" {
		return nil, errdefs.Conflict("Custom harness can only be configured on custom agent boxes")
	}
	err = rs.host.UpdateBox(b.ID, func(b *store.Box) error {
		b.CustomRunner = wire.Raw(req.Body.CustomRunner)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gen.ConfigureCustomRunner200JSONResponse(wire.Message("Custom harness configured")), nil
}

// inferHarness picks the harness a bare model string implies, by prefix,
// as the official SDKs do.
func inferHarness(model string) string {
	for _, p := range []struct{ prefix, harness string }{
		{"custom/", "custom"}, {"cursor/", "cursor"}, {"vercel/openai/", "codex"}, {"vercel/", "claude-code"}, {"claude/", "claude-code"},
		{"openrouter/", "claude-code"}, {"opencode/", "opencode"}, {"openai/", "codex"}, {"anthropic/", "claude-code"},
	} {
		if strings.HasPrefix(model, p.prefix) {
			return p.harness
		}
	}
	return "claude-code"
}

// mcpConfigPath is where boxd writes the MCP servers of a managed
// harness's run, in the {"mcpServers": ...} form Claude Code reads
// (harnesses.MCPConfigJSON).
const mcpConfigPath = "/home/boxuser/.config/boxd/mcp.json"

// boxMCPServers are a box's own MCP servers: npm packages run with npx,
// URLs as HTTP servers with their headers.
func boxMCPServers(b *store.Box) ([]harnesses.MCPServer, error) {
	if len(b.MCPServers) == 0 {
		return nil, nil
	}
	var servers []gen.McpServer
	if err := json.Unmarshal(b.MCPServers, &servers); err != nil {
		return nil, err
	}
	out := make([]harnesses.MCPServer, 0, len(servers))
	for _, m := range servers {
		if m.Source == gen.McpServerSourceNpm {
			out = append(out, harnesses.MCPServer{Name: m.Name, Command: "npx", Args: append([]string{"-y", m.PackageOrURL}, m.Args...)})
			continue
		}
		out = append(out, harnesses.MCPServer{Name: m.Name, URL: m.PackageOrURL, Headers: m.Headers})
	}
	return out, nil
}

// The Chrome DevTools MCP server of a browser box's coding agent, as on
// the cloud: chrome-devtools-mcp attached to the box's own Chromium.
const (
	// browserMCPName is the server's name; its tools reach the model as
	// mcp__chrome-devtools__navigate_page and the like.
	browserMCPName = "chrome-devtools"
	// browserMCPPackage is the release npx runs when the box has no
	// chrome-devtools-mcp of its own; scripts/deps.sh installs the same
	// one for the tests.
	browserMCPPackage = "chrome-devtools-mcp@1.11.0"
	// browserMCPLauncher runs the box's own chrome-devtools-mcp when one
	// is on its PATH (no download, works offline), else the pinned
	// release through npx and the box's egress.
	browserMCPLauncher = `command -v chrome-devtools-mcp >/dev/null 2>&1 && exec chrome-devtools-mcp "$@"; exec npx -y ` + browserMCPPackage + ` "$@"`
	// browserMCPTimeout bounds the server's start (npx may download it)
	// and each tool call (a navigation waits for the page).
	browserMCPTimeout = time.Minute
)

// browserMCP is the Chrome DevTools MCP server for a browser whose
// DevTools answer at devtools (http://127.0.0.1:port, as the box sees
// it). It attaches to that browser instead of launching one, and sends no
// usage statistics, CrUX lookups or update checks.
func browserMCP(devtools string) harnesses.MCPServer {
	return harnesses.MCPServer{
		Name:    browserMCPName,
		Command: "sh",
		Args:    []string{"-c", browserMCPLauncher, "chrome-devtools-mcp", "--browserUrl", devtools, "--no-usage-statistics", "--no-performance-crux"},
		Env:     map[string]string{"CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1", "CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1"},
		Timeout: browserMCPTimeout,
	}
}

// runMCPServers are the MCP servers a run of box b's managed harness
// gets: the box's own and, on a browser box, the Chrome DevTools server
// attached to its Chromium, which is started first when it is not
// running. A box server of the same name takes its place. A browser that
// cannot start does not fail the run: it goes on without the server, and
// the box's log says why.
func (rs *Runs) runMCPServers(ctx context.Context, b *store.Box) ([]harnesses.MCPServer, error) {
	servers, err := boxMCPServers(b)
	if err != nil {
		return nil, err
	}
	if !b.Browser || slices.ContainsFunc(servers, func(m harnesses.MCPServer) bool { return m.Name == browserMCPName }) {
		return servers, nil
	}
	devtools, err := rs.cfg.Browser.DevtoolsURL(ctx, b)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rs.host.Logf(b.ID, "warn", "system", "the agent runs without the browser's MCP server: "+err.Error())
		return servers, nil
	}
	return append(servers, browserMCP(devtools)), nil
}
