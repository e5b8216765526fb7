package store

import (
	"encoding/json"
	"sort"
)

// Box is a box record. Secrets (AgentAPIKey, GitHubToken, env values,
// attach headers) are stored here and never returned by the API.
type Box struct {
	ID            string                       `json:"id"`
	Name          string                       `json:"name,omitempty"`
	Labels        []string                     `json:"labels,omitempty"`
	Size          string                       `json:"size,omitempty"`
	KeepAlive     bool                         `json:"keep_alive,omitempty"`
	InitCommand   string                       `json:"init_command,omitempty"`
	Model         string                       `json:"model,omitempty"`
	Agent         string                       `json:"agent,omitempty"`
	AgentAPIKey   string                       `json:"agent_api_key,omitempty"`
	CustomRunner  json.RawMessage              `json:"custom_runner,omitempty"`
	Runtime       string                       `json:"runtime,omitempty"`
	GitHubToken   string                       `json:"github_token,omitempty"`
	GitUserName   string                       `json:"git_user_name,omitempty"`
	GitUserEmail  string                       `json:"git_user_email,omitempty"`
	EnvVars       map[string]string            `json:"env_vars,omitempty"`
	AttachHeaders map[string]map[string]string `json:"attach_headers,omitempty"`
	NetworkPolicy json.RawMessage              `json:"network_policy,omitempty"`
	Skills        []string                     `json:"skills,omitempty"`
	MCPServers    json.RawMessage              `json:"mcp_servers,omitempty"`
	Ephemeral     bool                         `json:"ephemeral,omitempty"`
	ExpiresAt     int64                        `json:"expires_at,omitempty"`
	Browser       bool                         `json:"browser,omitempty"`
	Desktop       bool                         `json:"desktop,omitempty"`
	// Image is the id of the runtime image that is the box's root; empty
	// is the host's /usr.
	Image        string `json:"image,omitempty"`
	Status       string `json:"status"`
	CreatedAt    int64  `json:"created_at"`
	UpdatedAt    int64  `json:"updated_at"`
	LastActivity int64  `json:"last_activity_at,omitempty"`
	TotalCPUNs   int64  `json:"total_cpu_ns,omitempty"`
	// Agent usage totals and the session later runs resume.
	TotalInputTokens  int64   `json:"total_input_tokens,omitempty"`
	TotalOutputTokens int64   `json:"total_output_tokens,omitempty"`
	TotalPrompts      int64   `json:"total_prompts,omitempty"`
	TotalTokenCostUSD float64 `json:"total_token_cost_usd,omitempty"`
	SessionID         string  `json:"session_id,omitempty"`
	// SessionUsage is what the harness last reported for SessionID when
	// its CLI reports a resumed session's whole usage (Codex): the base
	// from which the next run's own usage is counted. Nil otherwise.
	SessionUsage *Usage `json:"session_usage,omitempty"`
	// Seq orders boxes created in the same second.
	Seq int64 `json:"seq"`
}

// Usage is token usage as an agent CLI reports it.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
}

// Run is a run record (an exec, code or agent run).
type Run struct {
	ID           string  `json:"id"`
	BoxID        string  `json:"box_id"`
	Type         string  `json:"type"` // agent | shell
	Status       string  `json:"status"`
	ScheduleID   string  `json:"schedule_id,omitempty"`
	Prompt       string  `json:"prompt,omitempty"`
	Model        string  `json:"model,omitempty"`
	Output       string  `json:"output,omitempty"`
	ErrorMessage string  `json:"error_message,omitempty"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CachedTokens int64   `json:"cached_input_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
	CPUNs        int64   `json:"cpu_ns,omitempty"`
	MemoryPeak   int64   `json:"memory_peak_bytes,omitempty"`
	SessionID    string  `json:"session_id,omitempty"`
	DurationMs   int64   `json:"duration_ms"`
	CreatedAt    int64   `json:"created_at"`
	CompletedAt  int64   `json:"completed_at,omitempty"`
	// Seq orders runs created in the same second.
	Seq int64 `json:"seq"`
}

// LogEntry is one line of a box's log.
type LogEntry struct {
	Timestamp int64  `json:"timestamp"`
	Level     string `json:"level"`
	Source    string `json:"source"`
	Message   string `json:"message"`
}

func sortBoxes(b []*Box) {
	sort.SliceStable(b, func(i, j int) bool {
		if b[i].CreatedAt != b[j].CreatedAt {
			return b[i].CreatedAt < b[j].CreatedAt
		}
		return b[i].Seq < b[j].Seq
	})
}

func sortRuns(r []*Run) {
	sort.SliceStable(r, func(i, j int) bool {
		if r[i].CreatedAt != r[j].CreatedAt {
			return r[i].CreatedAt > r[j].CreatedAt
		}
		return r[i].Seq > r[j].Seq
	})
}
