package harnesses

import (
	"cmp"
	"encoding/json"
	"fmt"
)

// Codex runs as
//
//	codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check
//	  -c features.plugins=false -c analytics.enabled=false
//	  [--model M] [-c key=value…] [resume ID] PROMPT|-
//
// The prompt is the last argument, or "-" with the prompt on standard
// input when it is longer than maxArgBytes or starts with a dash. The
// box is the sandbox, so Codex's own sandbox and approvals are off (its
// Landlock sandbox often cannot start inside a container anyway), and the
// workspace need not be a Git repository. A session resumes with the
// exec resume subcommand; the exec flags stay before it.
//
// agent_options (box-api §16.4, snake_case) become -c config overrides,
// each value a TOML string:
//
//	model_reasoning_effort   -c model_reasoning_effort="…"  (none|minimal|low|medium|high|xhigh)
//	model_reasoning_summary  -c model_reasoning_summary="…" (auto|concise|detailed|none)
//	personality              -c personality="…"             (friendly|pragmatic|none)
//	web_search               -c web_search="…"              ("live", "cached", "indexed",
//	                                                         "disabled"; true is "live",
//	                                                         false "disabled")
//
// The camelCase spellings (modelReasoningEffort, modelReasoningSummary,
// webSearch) are accepted when the snake_case key is absent. Unknown keys
// are ignored.
//
// MCP servers are -c overrides of the mcp_servers table (codexMCPArgs).
//
// Models: openai/gpt-5.3-codex runs as gpt-5.3-codex with the key in
// CODEX_API_KEY (what codex exec reads) and OPENAI_API_KEY (what older
// versions read). openrouter/… and vercel/… models run through those
// gateways' OpenAI-compatible Responses endpoints, declared as a model
// provider with -c overrides; the key goes in OPENROUTER_API_KEY or
// AI_GATEWAY_API_KEY.
type codex struct{}

func init() { register(codex{}) }

func (codex) Name() string   { return "codex" }
func (codex) Binary() string { return "codex" }

func (codex) KeyEnv() []string {
	return []string{"OPENAI_API_KEY", "CODEX_API_KEY", openRouterKeyEnv, vercelKeyEnv}
}

func (codex) KeyEnvFor(model string) []string {
	p, _, err := codexModel(model)
	if err != nil {
		return nil
	}
	if p != nil {
		return []string{p.keyEnv}
	}
	return []string{"OPENAI_API_KEY", "CODEX_API_KEY"}
}

// codexProvider is a gateway declared to Codex as a model provider.
type codexProvider struct {
	id, name, baseURL, keyEnv string
}

var (
	codexOpenRouter = &codexProvider{id: "openrouter", name: "OpenRouter", baseURL: "https://openrouter.ai/api/v1", keyEnv: openRouterKeyEnv}
	codexVercel     = &codexProvider{id: "vercel", name: "Vercel AI Gateway", baseURL: "https://ai-gateway.vercel.sh/v1", keyEnv: vercelKeyEnv}
)

// codexModel translates a Box model id: openai/gpt-5.3-codex →
// gpt-5.3-codex on OpenAI (nil provider); openrouter/openai/o3 → openai/o3
// on OpenRouter; vercel/openai/gpt-5.5 → openai/gpt-5.5 on Vercel.
func codexModel(model string) (*codexProvider, string, error) {
	provider, rest := splitModel(model)
	switch provider {
	case "openai":
		return nil, rest, nil
	case "openrouter":
		return codexOpenRouter, rest, nil
	case "vercel":
		return codexVercel, rest, nil
	case "anthropic", "opencode", "cursor", "custom":
		return nil, "", fmt.Errorf("codex cannot run %s models (model %q)", provider, model)
	}
	return nil, model, nil
}

var codexOptionValues = map[string]map[string]bool{
	"model_reasoning_effort":  {"none": true, "minimal": true, "low": true, "medium": true, "high": true, "xhigh": true},
	"model_reasoning_summary": {"auto": true, "concise": true, "detailed": true, "none": true},
	"personality":             {"friendly": true, "pragmatic": true, "none": true},
	"web_search":              {"live": true, "cached": true, "indexed": true, "disabled": true},
}

var codexCamel = map[string]string{
	"model_reasoning_effort":  "modelReasoningEffort",
	"model_reasoning_summary": "modelReasoningSummary",
	"personality":             "personality",
	"web_search":              "webSearch",
}

func (codex) Command(spec Spec) ([]string, map[string]string, string, error) {
	spec.Prompt = withSchema(spec.Prompt, spec.Schema)
	provider, model, err := codexModel(spec.Model)
	if err != nil {
		return nil, nil, "", err
	}
	// Nothing but the model's requests: no plugin sync, no metrics.
	argv := []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
		"-c", "features.plugins=false", "-c", "analytics.enabled=false"}
	if model != "" {
		argv = append(argv, "--model", model)
	}
	config := func(key, v string) { argv = append(argv, "-c", key+"="+tomlString(v)) }
	switch u := spec.BaseURLs[cmp.Or(providerName(provider), "openai")]; {
	case u == "":
	case provider == nil:
		// The operator's OpenAI-compatible endpoint, as a provider of its
		// own: Codex's built-in one tries WebSockets first.
		provider = &codexProvider{id: "boxd-openai", name: "OpenAI", baseURL: u, keyEnv: "CODEX_API_KEY"}
	default:
		p := *provider
		p.baseURL = u
		provider = &p
	}
	if provider != nil {
		config("model_provider", provider.id)
		prefix := "model_providers." + provider.id + "."
		config(prefix+"name", provider.name)
		config(prefix+"base_url", provider.baseURL)
		config(prefix+"env_key", provider.keyEnv)
		config(prefix+"wire_api", "responses")
	}
	for _, key := range []string{"model_reasoning_effort", "model_reasoning_summary", "personality", "web_search"} {
		v, ok := spec.Options[key]
		if !ok || v == nil {
			// The JS SDK leaves the keys camelCase when it does not know
			// the box's harness.
			v, ok = spec.Options[codexCamel[key]]
			if !ok || v == nil {
				continue
			}
		}
		s, isString := v.(string)
		if b, isBool := v.(bool); isBool && key == "web_search" {
			s, isString = "disabled", true
			if b {
				s = "live"
			}
		}
		if !isString || !codexOptionValues[key][s] {
			return nil, nil, "", fmt.Errorf("agent_options.%s: unsupported value %v", key, v)
		}
		config(key, s)
	}
	argv = append(argv, codexMCPArgs(spec.MCPServers)...)
	if spec.SessionID != "" {
		if err := checkSessionID(spec.SessionID); err != nil {
			return nil, nil, "", err
		}
		argv = append(argv, "resume", spec.SessionID)
	}
	stdin := ""
	if promptOnStdin(spec.Prompt) {
		argv = append(argv, "-")
		stdin = spec.Prompt
	} else {
		argv = append(argv, spec.Prompt)
	}
	env := map[string]string{}
	if spec.APIKey != "" {
		if provider != nil && provider.id == "boxd-openai" {
			env["CODEX_API_KEY"] = spec.APIKey
			env["OPENAI_API_KEY"] = spec.APIKey
		} else if provider != nil {
			env[provider.keyEnv] = spec.APIKey
		} else {
			env["CODEX_API_KEY"] = spec.APIKey
			env["OPENAI_API_KEY"] = spec.APIKey
		}
	}
	if err := checkCommand(argv, env); err != nil {
		return nil, nil, "", err
	}
	return argv, env, stdin, nil
}

// providerName is the Box provider a gateway is ("" for OpenAI itself).
func providerName(p *codexProvider) string {
	if p == nil {
		return ""
	}
	return p.id
}

// Codex counts a resumed session's usage from the session's start: its
// turn.completed carries the whole session's tokens.
func (codex) reportsSessionTotals() {}

func (codex) NewMapper() Mapper { return &codexMapper{started: map[string]bool{}} }

// codexMapper maps codex exec --json output:
//
//	thread.started {thread_id}                remembered session id, no event
//	item.completed agent_message              text {text}
//	item.completed reasoning                  thinking {text}
//	item.started command_execution            tool {toolCallId: item id, name: "command_execution", input: {command}}
//	item.completed command_execution          tool_result {output: aggregated_output, is_error: failed/declined}
//	item.started mcp_tool_call                tool {name: "mcp__SERVER__TOOL", input: arguments}
//	item.completed mcp_tool_call              tool_result {output: result text or error message}
//	item.started/completed web_search         tool {name: "web_search", input: {query, action}} / tool_result
//	item.started/completed file_change        tool {name: "file_change", input: {changes}} / tool_result {output: changes}
//	item.started/completed todo_list          tool {name: "todo_list", input: {items}} / tool_result {output: items}
//	item.started/completed collab_tool_call   tool {name: TOOL, input: {prompt, receiver_thread_ids}} / tool_result
//	turn.completed {usage}                    done {output: last agent_message, input_tokens,
//	                                          cached_input_tokens, output_tokens, cost 0, session_id}
//	turn.failed {error}                       error {error: message}
//
// An item completed without having started (file changes in older
// versions, declined commands) gets its tool event right before its
// tool_result. A top-level error event is not relayed at once: Codex also
// reports retried stream errors ("Reconnecting… 1/5") that way. It is
// the error of a turn.failed without a message, or of a run that ends
// with neither turn.completed nor turn.failed. item.updated and error
// items (warnings) are ignored. Codex reports no cost; usage follows
// the OpenAI convention already (input_tokens includes cached ones).
type codexMapper struct {
	sessionID string
	started   map[string]bool
	final     finalText
	lastError string
	finished  bool
}

type codexLine struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Item *codexItem `json:"item"`
}

type codexItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	Status           string          `json:"status"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           *struct {
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structured_content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Query             string          `json:"query"`
	Action            json.RawMessage `json:"action"`
	Changes           json.RawMessage `json:"changes"`
	Items             json.RawMessage `json:"items"`
	Prompt            string          `json:"prompt"`
	ReceiverThreadIDs json.RawMessage `json:"receiver_thread_ids"`
	AgentsStates      json.RawMessage `json:"agents_states"`
}

func (m *codexMapper) Line(line []byte, emit Emit) bool {
	var l codexLine
	if !decodeLine(line, &l) {
		return true
	}
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" {
			m.sessionID = l.ThreadID
		}
	case "item.started":
		if l.Item != nil {
			return m.itemStarted(l.Item, emit)
		}
	case "item.completed":
		if l.Item != nil {
			return m.itemCompleted(l.Item, emit)
		}
	case "turn.completed":
		m.finished = true
		var u usage
		if l.Usage != nil {
			u = usage{InputTokens: l.Usage.InputTokens, CachedInputTokens: l.Usage.CachedInputTokens, OutputTokens: l.Usage.OutputTokens}
		}
		return emit("done", encode(doneData{Output: m.final.String(), usage: u, SessionID: m.sessionID}))
	case "turn.failed":
		m.finished = true
		msg := m.lastError
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		if msg == "" {
			msg = "turn failed"
		}
		return emit("error", encode(errorData{Error: "codex: " + msg, SessionID: m.sessionID}))
	case "error":
		if l.Message != "" {
			m.lastError = l.Message
		}
	}
	return true
}

// codexTool returns the tool event of an item, if it is a tool call.
func codexTool(it *codexItem) (toolData, bool) {
	t := toolData{ToolCallID: it.ID}
	switch it.Type {
	case "command_execution":
		t.Name, t.Input = "command_execution", encode(map[string]string{"command": it.Command})
	case "mcp_tool_call":
		t.Name, t.Input = "mcp__"+it.Server+"__"+it.Tool, object(it.Arguments)
	case "web_search":
		in := map[string]any{"query": it.Query}
		if len(it.Action) > 0 {
			in["action"] = value(it.Action)
		}
		t.Name, t.Input = "web_search", encode(in)
	case "file_change":
		t.Name, t.Input = "file_change", encode(map[string]json.RawMessage{"changes": value(it.Changes)})
	case "todo_list":
		t.Name, t.Input = "todo_list", encode(map[string]json.RawMessage{"items": value(it.Items)})
	case "collab_tool_call":
		t.Name, t.Input = it.Tool, encode(map[string]any{"prompt": it.Prompt, "receiver_thread_ids": value(it.ReceiverThreadIDs)})
	default:
		return toolData{}, false
	}
	return t, true
}

// codexResult returns the tool_result event of a completed tool item.
func codexResult(it *codexItem) toolResultData {
	r := toolResultData{ToolCallID: it.ID}
	failed := it.Status == "failed" || it.Status == "declined"
	switch it.Type {
	case "command_execution":
		r.Output = encode(it.AggregatedOutput)
	case "mcp_tool_call":
		switch {
		case it.Error != nil:
			r.Output, failed = encode(it.Error.Message), true
		case it.Result != nil && len(it.Result.Content) > 0 && string(it.Result.Content) != "[]":
			r.Output = contentText(it.Result.Content)
		case it.Result != nil:
			r.Output = value(it.Result.StructuredContent)
		default:
			r.Output = value(nil)
		}
	case "web_search":
		if len(it.Action) > 0 {
			r.Output = value(it.Action)
		} else {
			r.Output = encode(it.Query)
		}
	case "file_change":
		r.Output = value(it.Changes)
	case "todo_list":
		r.Output = value(it.Items)
	case "collab_tool_call":
		r.Output = value(it.AgentsStates)
	}
	r.IsError = failed
	return r
}

func (m *codexMapper) itemStarted(it *codexItem, emit Emit) bool {
	t, ok := codexTool(it)
	if !ok || m.started[it.ID] {
		return true
	}
	m.started[it.ID] = true
	m.final.tool()
	return emit("tool", encode(t))
}

func (m *codexMapper) itemCompleted(it *codexItem, emit Emit) bool {
	switch it.Type {
	case "agent_message":
		// Each agent message is a whole message; the answer is the last.
		m.final.tool()
		m.final.add(it.Text)
		return emitText(emit, "text", it.Text)
	case "reasoning":
		return emitText(emit, "thinking", it.Text)
	}
	t, ok := codexTool(it)
	if !ok {
		return true
	}
	if !m.started[it.ID] {
		m.final.tool()
		if !emit("tool", encode(t)) {
			return false
		}
	}
	delete(m.started, it.ID)
	return emit("tool_result", encode(codexResult(it)))
}

func (m *codexMapper) End(emit Emit) {
	if m.finished {
		return
	}
	if m.lastError != "" {
		emit("error", encode(errorData{Error: "codex: " + m.lastError, SessionID: m.sessionID}))
		return
	}
	if m.final.written {
		emit("done", encode(doneData{Output: m.final.String(), SessionID: m.sessionID}))
	}
}
