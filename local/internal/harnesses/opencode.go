package harnesses

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// OpenCode runs as
//
//	opencode run --format json --thinking [--model PROVIDER/MODEL] [--session ID]
//
// with the prompt always on standard input: opencode run joins its
// message arguments and wraps each one that contains a space in double
// quotes, so a prompt given as an argument would not reach the model
// verbatim, while piped input is used as it is. --thinking makes the JSON
// stream include reasoning parts.
//
// OpenCode asks for permission for some tools, and run rejects every
// request it cannot ask about; OPENCODE_PERMISSION={"*":"allow"} allows
// them all (rules the CLI itself hard-codes as "ask" still end up
// rejected). The --dangerously-skip-permissions/--auto flags are not used
// because their name changed between releases and the CLI rejects
// unknown flags.
//
// Models are provider/model ids, which Box ids already are:
// anthropic/claude-sonnet-4-5, openai/gpt-5.3-codex, opencode/big-pickle
// (OpenCode Zen), openrouter/anthropic/claude-sonnet-4, vercel/openai/gpt-5.5
// pass unchanged. The key goes in the provider's variable
// (opencodeKeyEnv); without a model, in OPENCODE_API_KEY.
//
// agent_options (box-api §16.4) are provider options of the model and
// go into OPENCODE_CONFIG_CONTENT, a config OpenCode merges over its own:
//
//	{"provider": {PROVIDER: {"models": {MODEL: {"options": {
//	    "reasoningEffort": …, "textVerbosity": …, "reasoningSummary": …, "thinking": {…}}}}}}}
//
// They are passed to the provider's SDK as given. Without a model there
// is nothing to attach them to and they are ignored, as are unknown keys.
// MCP servers go into the same config's "mcp" object (opencodeMCP).
type opencode struct{}

func init() { register(opencode{}) }

func (opencode) Name() string   { return "opencode" }
func (opencode) Binary() string { return "opencode" }

func (opencode) KeyEnv() []string {
	return []string{"OPENCODE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", openRouterKeyEnv, vercelKeyEnv}
}

func (opencode) KeyEnvFor(model string) []string {
	provider, _ := splitModel(model)
	if provider == "" {
		return nil
	}
	return []string{opencodeKeyEnv(provider)}
}

var opencodeKeys = map[string]string{
	"anthropic":  "ANTHROPIC_API_KEY",
	"openai":     "OPENAI_API_KEY",
	"opencode":   "OPENCODE_API_KEY",
	"openrouter": openRouterKeyEnv,
	"vercel":     vercelKeyEnv,
	"google":     "GOOGLE_GENERATIVE_AI_API_KEY",
	"xai":        "XAI_API_KEY",
	"groq":       "GROQ_API_KEY",
	"deepseek":   "DEEPSEEK_API_KEY",
	"mistral":    "MISTRAL_API_KEY",
}

// opencodeKeyEnv is the variable OpenCode reads a provider's key from:
// the one its provider catalog (models.dev) names for the well-known
// providers, PROVIDER_API_KEY otherwise.
func opencodeKeyEnv(provider string) string {
	if k, ok := opencodeKeys[provider]; ok {
		return k
	}
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(provider)) + "_API_KEY"
}

// opencodeOptionKeys are the agent_options OpenCode passes to the model.
var opencodeOptionKeys = []string{"reasoningEffort", "textVerbosity", "reasoningSummary", "thinking"}

func (opencode) Command(spec Spec) ([]string, map[string]string, string, error) {
	spec.Prompt = withSchema(spec.Prompt, spec.Schema)
	provider, model := splitModel(spec.Model)
	if spec.Model != "" && (provider == "" || model == "") {
		return nil, nil, "", fmt.Errorf("opencode needs a provider/model id, not %q", spec.Model)
	}
	switch provider {
	case "cursor", "custom":
		return nil, nil, "", fmt.Errorf("opencode cannot run %s models (model %q)", provider, spec.Model)
	}
	argv := []string{"opencode", "run", "--format", "json", "--thinking"}
	if spec.Model != "" {
		argv = append(argv, "--model", spec.Model)
	}
	if spec.SessionID != "" {
		if err := checkSessionID(spec.SessionID); err != nil {
			return nil, nil, "", err
		}
		argv = append(argv, "--session", spec.SessionID)
	}
	env := map[string]string{"OPENCODE_PERMISSION": `{"*":"allow"}`}
	if spec.APIKey != "" {
		// Without a model OpenCode picks its default one; the key goes
		// where KeyEnv looks first, OpenCode Zen's variable.
		name := "OPENCODE_API_KEY"
		if provider != "" {
			name = opencodeKeyEnv(provider)
		}
		env[name] = spec.APIKey
	}
	options := map[string]any{}
	for _, k := range opencodeOptionKeys {
		v, ok := spec.Options[k]
		if !ok || v == nil {
			continue
		}
		if _, isMap := v.(map[string]any); k == "thinking" && !isMap {
			return nil, nil, "", errors.New("agent_options.thinking must be an object")
		}
		if _, isString := v.(string); k != "thinking" && !isString {
			return nil, nil, "", fmt.Errorf("agent_options.%s must be a string", k)
		}
		options[k] = v
	}
	pcfg := map[string]any{}
	if len(options) > 0 && provider != "" {
		pcfg["models"] = map[string]any{model: map[string]any{"options": options}}
	}
	if u := spec.BaseURLs[provider]; u != "" {
		// The operator's endpoint for the provider. OpenCode's provider
		// SDKs take the URL with /v1, Anthropic's too; its model catalog
		// is not fetched from models.dev then.
		if provider == "anthropic" && !strings.HasSuffix(u, "/v1") {
			u += "/v1"
		}
		pcfg["options"] = map[string]any{"baseURL": u}
		env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
	}
	config := map[string]any{}
	if len(pcfg) > 0 {
		config["provider"] = map[string]any{provider: pcfg}
	}
	if len(spec.MCPServers) > 0 {
		config["mcp"] = opencodeMCP(spec.MCPServers)
	}
	if len(config) > 0 {
		env["OPENCODE_CONFIG_CONTENT"] = string(encode(config))
	}
	if err := checkCommand(argv, env); err != nil {
		return nil, nil, "", err
	}
	return argv, env, spec.Prompt, nil
}

func (opencode) NewMapper() Mapper { return &opencodeMapper{} }

// opencodeMapper maps opencode run --format json output. Every line is
// {"type", "timestamp", "sessionID", …}; parts of subagent sessions are
// not printed by the CLI.
//
//	text {part.text}                      text (a part is printed once, when complete)
//	reasoning {part.text}                 thinking
//	tool_use {part: {callID, tool, state}} tool {toolCallId: callID, name: tool, input: state.input},
//	                                      then tool_result {output: state.output, or state.error
//	                                      with is_error when state.status is "error"}
//	step_finish {part: {cost, tokens}}    adds to the usage, no event
//	error {error: {name, data.message}}   error {error}
//	done                                  done (newer versions print it when the session is idle)
//	step_start and anything else          nothing
//
// Older versions end without a done line; End then emits done when the
// run produced text or finished a step. The output is the text written
// after the last tool call; usage sums the steps: input_tokens is
// tokens.input + cache.read + cache.write, cached_input_tokens
// cache.read, output_tokens tokens.output + tokens.reasoning, and the
// cost is the sum of the steps' cost.
type opencodeMapper struct {
	sessionID string
	final     finalText
	usage     usage
	steps     int
	finished  bool
}

type opencodeLine struct {
	Type      string          `json:"type"`
	SessionID string          `json:"sessionID"`
	Part      *opencodePart   `json:"part"`
	Error     json.RawMessage `json:"error"`
}

type opencodePart struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	CallID string `json:"callID"`
	Tool   string `json:"tool"`
	State  *struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Output json.RawMessage `json:"output"`
		Error  json.RawMessage `json:"error"`
	} `json:"state"`
	Cost   float64 `json:"cost"`
	Tokens *struct {
		Input     int64 `json:"input"`
		Output    int64 `json:"output"`
		Reasoning int64 `json:"reasoning"`
		Cache     struct {
			Read  int64 `json:"read"`
			Write int64 `json:"write"`
		} `json:"cache"`
	} `json:"tokens"`
}

func (m *opencodeMapper) Line(line []byte, emit Emit) bool {
	var l opencodeLine
	if !decodeLine(line, &l) {
		return true
	}
	if l.SessionID != "" {
		m.sessionID = l.SessionID
	}
	if m.finished {
		return true
	}
	p := l.Part
	switch l.Type {
	case "text":
		if p != nil {
			m.final.add(p.Text)
			return emitText(emit, "text", p.Text)
		}
	case "reasoning":
		if p != nil {
			return emitText(emit, "thinking", strings.TrimSpace(p.Text))
		}
	case "tool_use":
		if p != nil {
			return m.tool(p, emit)
		}
	case "step_finish":
		if p != nil {
			m.steps++
			m.usage.TotalCostUSD += p.Cost
			if t := p.Tokens; t != nil {
				m.usage.InputTokens += t.Input + t.Cache.Read + t.Cache.Write
				m.usage.CachedInputTokens += t.Cache.Read
				m.usage.OutputTokens += t.Output + t.Reasoning
			}
		}
	case "error":
		m.finished = true
		return emit("error", encode(errorData{Error: "opencode: " + opencodeError(l.Error), usage: m.total(), SessionID: m.sessionID}))
	case "done":
		m.finished = true
		return emit("done", encode(doneData{Output: m.final.String(), usage: m.total(), SessionID: m.sessionID}))
	}
	return true
}

func (m *opencodeMapper) tool(p *opencodePart, emit Emit) bool {
	m.final.tool()
	var in, out json.RawMessage
	failed := false
	if s := p.State; s != nil {
		in, out = s.Input, s.Output
		if s.Status == "error" {
			failed = true
			out = s.Error
		}
	}
	if !emit("tool", encode(toolData{ToolCallID: p.CallID, Name: p.Tool, Input: object(in)})) {
		return false
	}
	return emit("tool_result", encode(toolResultData{ToolCallID: p.CallID, Output: value(out), IsError: failed}))
}

// opencodeError reads a session error: {"name": …, "data": {"message": …}}.
func opencodeError(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
		return "run failed"
	}
	for _, s := range []string{e.Data.Message, e.Message, e.Name} {
		if s != "" {
			return s
		}
	}
	return "run failed"
}

func (m *opencodeMapper) End(emit Emit) {
	if m.finished || (!m.final.written && m.steps == 0) {
		return
	}
	emit("done", encode(doneData{Output: m.final.String(), usage: m.total(), SessionID: m.sessionID}))
}

// total is the usage with the summed cost rounded to 1e-10 USD, so float
// noise from the sum does not show.
func (m *opencodeMapper) total() usage {
	u := m.usage
	u.TotalCostUSD = math.Round(u.TotalCostUSD*1e10) / 1e10
	return u
}
