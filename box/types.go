package box

import (
	"time"

	"github.com/upstash/box-go/gen"
)

// Status is the lifecycle state of a box.
type Status string

// Box statuses.
const (
	StatusCreating Status = "creating"
	StatusIdle     Status = "idle"
	StatusRunning  Status = "running"
	StatusPaused   Status = "paused"
	StatusError    Status = "error"
	StatusDeleted  Status = "deleted"
)

// Size is a box's machine size.
type Size string

// Box sizes: small is 2 CPU / 4 GB, medium 4 / 8, large 8 / 16.
const (
	SizeSmall  Size = "small"
	SizeMedium Size = "medium"
	SizeLarge  Size = "large"
)

// Runtime is the language image a box starts from.
type Runtime string

// Runtimes.
const (
	RuntimeNode         Runtime = "node"
	RuntimePython       Runtime = "python"
	RuntimeGolang       Runtime = "golang"
	RuntimeRuby         Runtime = "ruby"
	RuntimeRust         Runtime = "rust"
	RuntimeNodeAlpine   Runtime = "node-alpine"
	RuntimePythonAlpine Runtime = "python-alpine"
	RuntimeGolangAlpine Runtime = "golang-alpine"
	RuntimeRubyAlpine   Runtime = "ruby-alpine"
	RuntimeRustAlpine   Runtime = "rust-alpine"
)

// Harness is the coding agent that runs a box's agent calls.
type Harness string

// Harnesses.
const (
	HarnessClaudeCode Harness = "claude-code"
	HarnessCodex      Harness = "codex"
	HarnessOpenCode   Harness = "opencode"
	HarnessCursor     Harness = "cursor"
	HarnessCustom     Harness = "custom"
)

// NetworkMode is the outbound network policy of a box.
type NetworkMode string

// Network modes.
const (
	NetworkAllowAll NetworkMode = "allow-all"
	NetworkDenyAll  NetworkMode = "deny-all"
	NetworkCustom   NetworkMode = "custom"
)

// NetworkPolicy controls a box's outbound traffic. With NetworkCustom, the
// box reaches only AllowedDomains and AllowedCIDRs, never DeniedCIDRs.
type NetworkPolicy struct {
	Mode           NetworkMode
	AllowedDomains []string
	AllowedCIDRs   []string
	DeniedCIDRs    []string
}

// MCPServer is an MCP server attached to the box's agent: either an npm
// Package (run with Args) or a remote URL (called with Headers). Set
// exactly one of Package and URL.
type MCPServer struct {
	Name    string
	Package string
	Args    []string
	URL     string
	Headers map[string]string
}

// GitOptions configures git in a box. Token authenticates clone, push and
// pull requests; it is sent to the server once and never returned.
type GitOptions struct {
	Token     string
	UserName  string
	UserEmail string
}

// AgentOptions configures a box's coding agent.
type AgentOptions struct {
	// Harness is required.
	Harness Harness
	// Model is required except for HarnessCustom, where it is a label
	// passed to the process (default "custom").
	Model Model
	// APIKey selects the provider key: BoxAPIKeyUpstash, BoxAPIKeyStored,
	// a raw provider key, or empty to let the server decide. Not used with
	// HarnessCustom.
	APIKey string
	// CustomHarness is required with HarnessCustom.
	CustomHarness *CustomHarness
}

// Provider key choices for AgentOptions.APIKey.
const (
	BoxAPIKeyUpstash = "UPSTASH_KEY"
	BoxAPIKeyStored  = "STORED_KEY"
)

// CustomHarness is the command a custom-harness box runs for each agent
// call: an executable on PATH, or an absolute path under /workspace/home
// or /home/boxuser.
type CustomHarness struct {
	Command  string
	Args     []string
	Protocol string // default "box-sse-v1"
}

// Info is what the API reports about a box.
type Info struct {
	ID            string
	Name          string
	Status        Status
	Labels        []string
	Size          Size
	KeepAlive     bool
	Runtime       Runtime
	Harness       Harness
	Model         Model
	NetworkPolicy NetworkPolicy
	EnabledSkills []string
	Browser       bool
	// Desktop: the box has a desktop (see [Desktop]).
	Desktop   bool
	Ephemeral bool
	// ExpiresAt is when an ephemeral box is deleted; zero otherwise.
	ExpiresAt time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	// Usage totals as reported by the server.
	TotalInputTokens  int64
	TotalOutputTokens int64
	TotalPrompts      int64
	TotalCPU          time.Duration
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func unixTime(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	// The API reports seconds; a value this large can only be milliseconds.
	if s >= 1e12 {
		return time.UnixMilli(s)
	}
	return time.Unix(s, 0)
}

func infoFrom(d *gen.BoxData) Info {
	in := Info{
		ID:                d.ID,
		Name:              deref(d.Name),
		Status:            Status(d.Status),
		Labels:            d.Labels,
		Size:              Size(deref(d.Size)),
		KeepAlive:         deref(d.KeepAlive),
		Runtime:           Runtime(deref(d.Runtime)),
		Harness:           Harness(deref(d.Agent)),
		Model:             Model(deref(d.Model)),
		EnabledSkills:     d.EnabledSkills,
		Browser:           deref(d.Browser),
		Desktop:           deref(d.Desktop),
		Ephemeral:         deref(d.Ephemeral),
		ExpiresAt:         unixTime(deref(d.ExpiresAt)),
		CreatedAt:         unixTime(d.CreatedAt),
		UpdatedAt:         unixTime(d.UpdatedAt),
		TotalInputTokens:  deref(d.TotalInputTokens),
		TotalOutputTokens: deref(d.TotalOutputTokens),
		TotalPrompts:      deref(d.TotalPrompts),
		TotalCPU:          time.Duration(deref(d.TotalCPUNs)),
	}
	if in.Size == "" {
		in.Size = SizeSmall
	}
	if in.Labels == nil {
		in.Labels = []string{}
	}
	if in.EnabledSkills == nil {
		in.EnabledSkills = []string{}
	}
	in.NetworkPolicy = NetworkPolicy{Mode: NetworkAllowAll}
	if np := d.NetworkPolicy; np != nil {
		in.NetworkPolicy = NetworkPolicy{Mode: NetworkMode(np.Mode), AllowedDomains: np.AllowedDomains, AllowedCIDRs: np.AllowedCidrs, DeniedCIDRs: np.DeniedCidrs}
	}
	return in
}

func (p NetworkPolicy) wire() *gen.NetworkPolicy {
	return &gen.NetworkPolicy{Mode: gen.NetworkPolicyMode(p.Mode), AllowedDomains: p.AllowedDomains, AllowedCidrs: p.AllowedCIDRs, DeniedCidrs: p.DeniedCIDRs}
}
