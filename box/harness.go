package box

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/upstash/box-go/gen"
)

// HarnessOptions are options for the box's harness, sent as the run's
// agent_options. Use ClaudeCodeOptions, CodexOptions or OpenCodeOptions,
// whose fields go out in the casing each harness expects, or RawOptions
// for Cursor, a custom harness, or keys the typed structs do not have.
type HarnessOptions interface {
	// agentOptions returns the wire object and the harness the options
	// are for ("" for any).
	agentOptions() (map[string]any, Harness, error)
}

// Thinking configures extended thinking.
type Thinking struct {
	// Type is "adaptive", "enabled" or "disabled".
	Type string `json:"type"`
	// BudgetTokens is used with "enabled".
	BudgetTokens int `json:"budgetTokens,omitempty"`
}

// ClaudeCodeOptions are options of the Claude Code harness.
type ClaudeCodeOptions struct {
	MaxTurns     int     `json:"maxTurns,omitempty"`
	MaxBudgetUSD float64 `json:"maxBudgetUsd,omitempty"`
	// Effort is "low", "medium", "high" or "max".
	Effort   string    `json:"effort,omitempty"`
	Thinking *Thinking `json:"thinking,omitempty"`
	// DisallowedTools names tools the agent may not use, e.g. "Bash".
	DisallowedTools []string `json:"disallowedTools,omitempty"`
	// Agents defines subagents by name.
	Agents            map[string]any `json:"agents,omitempty"`
	PromptSuggestions *bool          `json:"promptSuggestions,omitempty"`
	FallbackModel     string         `json:"fallbackModel,omitempty"`
	// SystemPrompt is a string, or an object as the harness documents.
	SystemPrompt any `json:"systemPrompt,omitempty"`
}

func (o ClaudeCodeOptions) agentOptions() (map[string]any, Harness, error) {
	if err := oneOf("Effort", o.Effort, "low", "medium", "high", "max"); err != nil {
		return nil, "", err
	}
	if o.Thinking != nil {
		if err := oneOf("Thinking.Type", o.Thinking.Type, "adaptive", "enabled", "disabled"); err != nil {
			return nil, "", err
		}
	}
	m, err := toMap(o)
	return m, HarnessClaudeCode, err
}

// CodexOptions are options of the Codex harness.
type CodexOptions struct {
	// ModelReasoningEffort is "none", "minimal", "low", "medium", "high"
	// or "xhigh".
	ModelReasoningEffort string `json:"model_reasoning_effort,omitempty"`
	// ModelReasoningSummary is "auto", "concise", "detailed" or "none".
	ModelReasoningSummary string `json:"model_reasoning_summary,omitempty"`
	// Personality is "friendly", "pragmatic" or "none".
	Personality string `json:"personality,omitempty"`
	// WebSearch is true, false or "live"; nil leaves the default.
	WebSearch any `json:"web_search,omitempty"`
}

func (o CodexOptions) agentOptions() (map[string]any, Harness, error) {
	if err := oneOf("ModelReasoningEffort", o.ModelReasoningEffort, "none", "minimal", "low", "medium", "high", "xhigh"); err != nil {
		return nil, "", err
	}
	if err := oneOf("ModelReasoningSummary", o.ModelReasoningSummary, "auto", "concise", "detailed", "none"); err != nil {
		return nil, "", err
	}
	if err := oneOf("Personality", o.Personality, "friendly", "pragmatic", "none"); err != nil {
		return nil, "", err
	}
	switch v := o.WebSearch.(type) {
	case nil, bool:
	case string:
		if v != "live" {
			return nil, "", invalidf("box: CodexOptions.WebSearch must be true, false or \"live\", not %q", v)
		}
	default:
		return nil, "", invalidf("box: CodexOptions.WebSearch must be true, false or \"live\", not %T", v)
	}
	m, err := toMap(o)
	return m, HarnessCodex, err
}

// OpenCodeOptions are options of the OpenCode harness.
type OpenCodeOptions struct {
	// ReasoningEffort and TextVerbosity are "low", "medium" or "high".
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
	TextVerbosity   string `json:"textVerbosity,omitempty"`
	// ReasoningSummary is "auto", "concise", "detailed" or "none".
	ReasoningSummary string `json:"reasoningSummary,omitempty"`
	// Thinking applies to Anthropic-backed models.
	Thinking *Thinking `json:"thinking,omitempty"`
}

func (o OpenCodeOptions) agentOptions() (map[string]any, Harness, error) {
	if err := oneOf("ReasoningEffort", o.ReasoningEffort, "low", "medium", "high"); err != nil {
		return nil, "", err
	}
	if err := oneOf("TextVerbosity", o.TextVerbosity, "low", "medium", "high"); err != nil {
		return nil, "", err
	}
	if err := oneOf("ReasoningSummary", o.ReasoningSummary, "auto", "concise", "detailed", "none"); err != nil {
		return nil, "", err
	}
	m, err := toMap(o)
	return m, HarnessOpenCode, err
}

// RawOptions are sent to the harness exactly as given: for Cursor, a
// custom harness (which receives them as JSON in BOX_AGENT_OPTIONS on
// boxd), or keys the typed options lack.
type RawOptions map[string]any

func (o RawOptions) agentOptions() (map[string]any, Harness, error) { return o, "", nil }

func oneOf(field, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return invalidf("box: %s must be one of %s, not %q", field, strings.Join(allowed, ", "), v)
}

func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	err = json.Unmarshal(raw, &m)
	return m, err
}

// InferHarness returns the harness a model id implies, by its prefix:
// custom/ → custom, cursor/ → cursor, vercel/openai/ → codex, vercel/ and
// openrouter/ → claude-code, opencode/ → opencode, openai/ → codex, and
// anything else (anthropic/ included) → claude-code.
func InferHarness(model Model) Harness {
	for _, p := range []struct {
		prefix  string
		harness Harness
	}{
		{"custom/", HarnessCustom}, {"cursor/", HarnessCursor}, {"vercel/openai/", HarnessCodex},
		{"vercel/", HarnessClaudeCode}, {"openrouter/", HarnessClaudeCode}, {"opencode/", HarnessOpenCode},
		{"openai/", HarnessCodex}, {"anthropic/", HarnessClaudeCode},
	} {
		if strings.HasPrefix(string(model), p.prefix) {
			return p.harness
		}
	}
	return HarnessClaudeCode
}

// ModelConfig is a box's harness and model.
type ModelConfig struct {
	Harness Harness
	Model   Model
}

// ModelConfig returns the box's harness and model as last reported.
func (b *Box) ModelConfig() ModelConfig {
	in := b.Info()
	return ModelConfig{Harness: in.Harness, Model: in.Model}
}

// ErrNoAgent is returned, before any request, by agent calls on a box
// that was created without an agent and has no model configured.
var ErrNoAgent = errors.New("box: no agent configured: create the box with CreateParams.Agent, or call Box.ConfigureModel, to use Box.Agent")

func (b *Box) hasAgent() bool {
	in := b.Info()
	return in.Harness != "" || in.Model != ""
}

// ConfigureModel changes the model the box's agent uses. On a box without
// an agent it configures one, with the harness the model implies.
func (b *Box) ConfigureModel(ctx context.Context, model Model, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if model == "" {
		return invalidf("box: model is required")
	}
	if err := none(b.c.api.ConfigureModel(withIdempotent(ctx), b.id, gen.ModelConfigRequest{Model: string(model)})); err != nil {
		return err
	}
	b.st.mu.Lock()
	b.st.info.Model = model
	if b.st.info.Harness == "" {
		b.st.info.Harness = InferHarness(model)
	}
	b.st.mu.Unlock()
	return nil
}

// ConfigureCustomHarness replaces the command of a custom-harness box.
// Other boxes refuse it before any request.
func (b *Box) ConfigureCustomHarness(ctx context.Context, h CustomHarness, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if b.Info().Harness != HarnessCustom {
		return invalidf("box: a custom harness can only be configured on a box whose harness is custom")
	}
	if h.Command == "" {
		return invalidf("box: CustomHarness.Command is required")
	}
	return none(b.c.api.ConfigureCustomRunner(withIdempotent(ctx), b.id, gen.CustomRunnerRequest{CustomRunner: *h.wire()}))
}
