package harnesses

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Claude Code runs as
//
//	claude -p --output-format stream-json --verbose --include-partial-messages
//	  --permission-mode bypassPermissions [--model M] [--resume=ID] [options…] [PROMPT]
//
// With MCP servers, --mcp-config=FILE is added and MCP_CONNECTION_NONBLOCKING=0
// set, so that the first turn has their tools.
//
// The prompt is the last argument, or standard input when it is longer
// than maxArgBytes or starts with a dash (print mode reads the prompt
// from standard input when none is given). IS_SANDBOX=1 is set because
// the CLI refuses bypassPermissions as root unless told it runs in a
// sandbox, which a box is.
//
// agent_options (box-api §16.4) map onto the flags the Claude Agent SDK
// passes for the same options:
//
//	maxTurns          --max-turns N
//	maxBudgetUsd      --max-budget-usd X
//	effort            --effort low|medium|high|xhigh|max
//	thinking          {"type":"adaptive"} → --thinking adaptive;
//	                  {"type":"disabled"} → --thinking disabled;
//	                  {"type":"enabled","budgetTokens":N} → --max-thinking-tokens N
//	disallowedTools   --disallowedTools=T once per tool (the = form, because
//	                  the flag takes a variable number of values and would
//	                  otherwise swallow the prompt)
//	agents            --agents JSON
//	fallbackModel     --fallback-model M (translated like the model)
//	systemPrompt      a string → --system-prompt S (replaces the default);
//	                  {"type":"preset","preset":"claude_code","append":S} →
//	                  --append-system-prompt S
//	promptSuggestions ignored: suggestions are an interactive feature with
//	                  no print-mode flag and no run-stream event
//
// Unknown keys are ignored.
//
// Models: anthropic/claude-sonnet-4-5 runs as claude-sonnet-4-5 against
// Anthropic with ANTHROPIC_API_KEY. openrouter/… and vercel/… models run
// through those gateways' Anthropic-compatible endpoints: the CLI gets
// ANTHROPIC_BASE_URL, the key as ANTHROPIC_AUTH_TOKEN (a bearer token)
// and an empty ANTHROPIC_API_KEY, which would otherwise take precedence.
type claudeCode struct{}

func init() { register(claudeCode{}) }

func (claudeCode) Name() string   { return "claude-code" }
func (claudeCode) Binary() string { return "claude" }

func (claudeCode) KeyEnv() []string {
	return []string{"ANTHROPIC_API_KEY", openRouterKeyEnv, vercelKeyEnv}
}

func (claudeCode) KeyEnvFor(model string) []string {
	r, _, err := claudeModel(model)
	if err != nil {
		return nil
	}
	if r.keyEnv != "" {
		return []string{r.keyEnv}
	}
	return []string{"ANTHROPIC_API_KEY"}
}

// claudeRoute is where Claude Code sends its requests.
type claudeRoute struct {
	name    string // "anthropic", "openrouter" or "vercel"
	baseURL string // empty for Anthropic itself
	keyEnv  string // the gateway's own key variable
}

var (
	claudeAnthropic  = claudeRoute{name: "anthropic"}
	claudeOpenRouter = claudeRoute{name: "openrouter", baseURL: "https://openrouter.ai/api", keyEnv: openRouterKeyEnv}
	claudeVercel     = claudeRoute{name: "vercel", baseURL: "https://ai-gateway.vercel.sh", keyEnv: vercelKeyEnv}
)

// claudeAliases maps Box model names that are not Anthropic API model
// ids onto the API's aliases.
var claudeAliases = map[string]string{
	"claude-sonnet-4": "claude-sonnet-4-0",
	"claude-opus-4":   "claude-opus-4-0",
}

// claudeModel translates a Box model id into the route and the --model
// value: anthropic/claude-sonnet-4-5 → claude-sonnet-4-5;
// openrouter/anthropic/claude-sonnet-4 → anthropic/claude-sonnet-4 on
// OpenRouter; vercel/anthropic/claude-sonnet-4.5 → anthropic/claude-sonnet-4.5
// on the Vercel AI Gateway. Ids without a known prefix pass unchanged.
func claudeModel(model string) (claudeRoute, string, error) {
	provider, rest := splitModel(model)
	switch provider {
	case "anthropic":
		if a, ok := claudeAliases[rest]; ok {
			rest = a
		}
		return claudeAnthropic, rest, nil
	case "openrouter":
		return claudeOpenRouter, rest, nil
	case "vercel":
		return claudeVercel, rest, nil
	case "openai", "opencode", "cursor", "custom":
		return claudeRoute{}, "", fmt.Errorf("claude-code cannot run %s models (model %q)", provider, model)
	}
	return claudeAnthropic, model, nil
}

func (claudeCode) Command(spec Spec) ([]string, map[string]string, string, error) {
	route, model, err := claudeModel(spec.Model)
	if err != nil {
		return nil, nil, "", err
	}
	argv := []string{"claude", "-p",
		"--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--permission-mode", "bypassPermissions"}
	if model != "" {
		argv = append(argv, "--model", model)
	}
	if spec.SessionID != "" {
		if err := checkSessionID(spec.SessionID); err != nil {
			return nil, nil, "", err
		}
		// --resume takes an optional value: the = form binds it.
		argv = append(argv, "--resume="+spec.SessionID)
	}
	opts, err := claudeOptions(spec.Options, route)
	if err != nil {
		return nil, nil, "", err
	}
	argv = append(argv, opts...)
	if spec.MCPConfig != "" {
		argv = append(argv, "--mcp-config="+spec.MCPConfig)
	}
	if len(spec.Schema) > 0 {
		// The CLI gives the model a StructuredOutput tool of that schema
		// and reports its input as the result's structured_output.
		argv = append(argv, "--json-schema="+string(spec.Schema))
	}
	stdin := ""
	if promptOnStdin(spec.Prompt) {
		stdin = spec.Prompt
	} else {
		argv = append(argv, spec.Prompt)
	}
	// Nothing but the model's requests: no telemetry, error reports or
	// update checks through the box's network.
	env := map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
	if spec.MCPConfig != "" {
		// Print mode connects MCP servers in the background and gives
		// the model only those ready by its first turn; a server that
		// takes a few seconds to start (Chrome DevTools' does) would be
		// missing. The run waits for them instead.
		env["MCP_CONNECTION_NONBLOCKING"] = "0"
	}
	switch u := spec.BaseURLs[route.name]; {
	case u != "" && route.name == "anthropic":
		// The operator's Anthropic-compatible endpoint takes the key as
		// Anthropic does.
		env["ANTHROPIC_BASE_URL"] = u
		if spec.APIKey != "" {
			env["ANTHROPIC_API_KEY"] = spec.APIKey
		}
	case u != "" || route.baseURL != "":
		// A gateway's URL is its OpenAI-compatible one (…/v1); its
		// Anthropic-compatible root is the same without /v1.
		env["ANTHROPIC_BASE_URL"] = cmp.Or(strings.TrimSuffix(u, "/v1"), route.baseURL)
		env["ANTHROPIC_API_KEY"] = ""
		if spec.APIKey != "" {
			env["ANTHROPIC_AUTH_TOKEN"] = spec.APIKey
		}
	case spec.APIKey != "":
		env["ANTHROPIC_API_KEY"] = spec.APIKey
	}
	if err := checkCommand(argv, env); err != nil {
		return nil, nil, "", err
	}
	return argv, env, stdin, nil
}

var claudeEfforts = map[string]bool{"low": true, "medium": true, "high": true, "xhigh": true, "max": true}

func claudeOptions(opts map[string]any, route claudeRoute) ([]string, error) {
	var args []string
	if n, ok, err := optInt(opts, "maxTurns"); err != nil {
		return nil, err
	} else if ok && n > 0 {
		args = append(args, "--max-turns", strconv.FormatInt(n, 10))
	}
	if f, ok, err := optNumber(opts, "maxBudgetUsd"); err != nil {
		return nil, err
	} else if ok {
		if f <= 0 {
			return nil, errors.New("agent_options.maxBudgetUsd must be positive")
		}
		args = append(args, "--max-budget-usd", formatNumber(f))
	}
	if s, ok, err := optString(opts, "effort"); err != nil {
		return nil, err
	} else if ok && s != "" {
		if !claudeEfforts[s] {
			return nil, fmt.Errorf("agent_options.effort must be low, medium, high, xhigh or max, not %q", s)
		}
		args = append(args, "--effort", s)
	}
	if t, ok, err := optObject(opts, "thinking"); err != nil {
		return nil, err
	} else if ok {
		a, err := claudeThinking(t)
		if err != nil {
			return nil, err
		}
		args = append(args, a...)
	}
	if tools, ok, err := optStrings(opts, "disallowedTools"); err != nil {
		return nil, err
	} else if ok {
		for _, t := range tools {
			if t = strings.TrimSpace(t); t != "" {
				args = append(args, "--disallowedTools="+t)
			}
		}
	}
	if a, ok, err := optObject(opts, "agents"); err != nil {
		return nil, err
	} else if ok && len(a) > 0 {
		args = append(args, "--agents", string(encode(a)))
	}
	if s, ok, err := optString(opts, "fallbackModel"); err != nil {
		return nil, err
	} else if ok && s != "" {
		r, m, err := claudeModel(s)
		if err != nil {
			return nil, fmt.Errorf("agent_options.fallbackModel: %w", err)
		}
		if r.name != route.name {
			return nil, fmt.Errorf("agent_options.fallbackModel %q must use the same provider as the model", s)
		}
		args = append(args, "--fallback-model", m)
	}
	switch sp := opts["systemPrompt"].(type) {
	case nil:
	case string:
		if sp != "" {
			args = append(args, "--system-prompt", sp)
		}
	case map[string]any:
		if typ, _ := sp["type"].(string); typ != "preset" {
			return nil, errors.New(`agent_options.systemPrompt must be a string or {"type":"preset","preset":"claude_code","append":"…"}`)
		}
		if app, _ := sp["append"].(string); app != "" {
			args = append(args, "--append-system-prompt", app)
		}
	default:
		return nil, errors.New("agent_options.systemPrompt must be a string or an object")
	}
	return args, nil
}

func claudeThinking(t map[string]any) ([]string, error) {
	switch typ, _ := t["type"].(string); typ {
	case "adaptive", "disabled":
		return []string{"--thinking", typ}, nil
	case "enabled":
		key := "budgetTokens"
		if _, ok := t[key]; !ok {
			key = "budget_tokens"
		}
		n, ok, err := optInt(t, key)
		if err != nil || !ok || n <= 0 {
			return nil, errors.New("agent_options.thinking.budgetTokens must be a positive integer")
		}
		return []string{"--max-thinking-tokens", strconv.FormatInt(n, 10)}, nil
	default:
		return nil, errors.New(`agent_options.thinking.type must be "adaptive", "enabled" or "disabled"`)
	}
}

func (claudeCode) NewMapper() Mapper {
	return &claudeMapper{current: map[string]string{}, streamed: map[string]uint8{}}
}

// claudeMapper maps Claude Code's stream-json output:
//
//	system/init                        remembered session id, no event
//	stream_event text_delta            text (live, token by token)
//	stream_event thinking_delta        thinking
//	assistant text block               text, unless its message already streamed text deltas
//	assistant thinking block           thinking, likewise
//	assistant tool_use/server_tool_use tool {toolCallId: id, name, input}
//	user tool_result block             tool_result {toolCallId: tool_use_id, output: content, is_error}
//	result success                     done {output: result, usage, total_cost_usd, session_id}
//	result is_error or error_* subtype error {error}
//
// --include-partial-messages makes the CLI stream each message's deltas
// before the complete message; the mapper notes which messages streamed
// text and thinking (by message id) and skips those blocks of the
// complete message, so nothing is emitted twice and a CLI that sends no
// deltas still has its text relayed. Messages of subagents (those with a
// parent_tool_use_id) are not the answer: their text is relayed as
// thinking, their tool calls as tool events.
//
// Usage: input_tokens is input_tokens + cache_creation_input_tokens +
// cache_read_input_tokens of the result, cached_input_tokens is
// cache_read_input_tokens (see usage); the cost is total_cost_usd.
type claudeMapper struct {
	sessionID string
	current   map[string]string // parent_tool_use_id ("" for the main agent) → message id being streamed
	streamed  map[string]uint8  // message id → claudeStreamedText|claudeStreamedThinking
	final     finalText
	finished  bool
}

const (
	claudeStreamedText = 1 << iota
	claudeStreamedThinking
)

type claudeLine struct {
	Type            string  `json:"type"`
	Subtype         string  `json:"subtype"`
	SessionID       string  `json:"session_id"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	Message         *struct {
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	Event *struct {
		Type    string `json:"type"`
		Message *struct {
			ID string `json:"id"`
		} `json:"message"`
		Delta *struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"delta"`
	} `json:"event"`
	IsError          bool            `json:"is_error"`
	Result           string          `json:"result"`
	StructuredOutput json.RawMessage `json:"structured_output"`
	Errors           json.RawMessage `json:"errors"`
	TotalCostUSD     float64         `json:"total_cost_usd"`
	Usage            *struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	} `json:"usage"`
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (m *claudeMapper) Line(line []byte, emit Emit) bool {
	var l claudeLine
	if !decodeLine(line, &l) {
		return true
	}
	if l.SessionID != "" {
		m.sessionID = l.SessionID
	}
	parent := ""
	if l.ParentToolUseID != nil {
		parent = *l.ParentToolUseID
	}
	switch l.Type {
	case "stream_event":
		return m.streamEvent(&l, parent, emit)
	case "assistant":
		return m.assistant(&l, parent, emit)
	case "user":
		return m.user(&l, emit)
	case "result":
		return m.result(&l, emit)
	}
	return true
}

func (m *claudeMapper) streamEvent(l *claudeLine, parent string, emit Emit) bool {
	ev := l.Event
	if ev == nil {
		return true
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			m.current[parent] = ev.Message.ID
		}
	case "content_block_delta":
		if ev.Delta == nil {
			return true
		}
		id := m.current[parent]
		switch ev.Delta.Type {
		case "text_delta":
			m.streamed[id] |= claudeStreamedText
			return m.text(parent, ev.Delta.Text, emit)
		case "thinking_delta":
			m.streamed[id] |= claudeStreamedThinking
			return emitText(emit, "thinking", ev.Delta.Thinking)
		}
	}
	return true
}

// text relays the main agent's text as text and a subagent's as thinking.
func (m *claudeMapper) text(parent, s string, emit Emit) bool {
	if parent != "" {
		return emitText(emit, "thinking", s)
	}
	m.final.add(s)
	return emitText(emit, "text", s)
}

func (m *claudeMapper) assistant(l *claudeLine, parent string, emit Emit) bool {
	if l.Message == nil {
		return true
	}
	var blocks []claudeBlock
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return true
	}
	streamed := m.streamed[l.Message.ID]
	if l.Message.ID == "" {
		streamed = 0
	}
	for _, b := range blocks {
		ok := true
		switch {
		case b.Type == "text":
			if streamed&claudeStreamedText == 0 {
				ok = m.text(parent, b.Text, emit)
			}
		case b.Type == "thinking":
			if streamed&claudeStreamedThinking == 0 {
				ok = emitText(emit, "thinking", b.Thinking)
			}
		case b.Type == "tool_use" || b.Type == "server_tool_use":
			if parent == "" {
				m.final.tool()
			}
			ok = emit("tool", encode(toolData{ToolCallID: b.ID, Name: b.Name, Input: object(b.Input)}))
		case strings.HasSuffix(b.Type, "_tool_result") && b.ToolUseID != "":
			// Results of server-side tools (web search) come in the
			// assistant's own message.
			ok = emit("tool_result", encode(toolResultData{ToolCallID: b.ToolUseID, Output: contentText(b.Content), IsError: b.IsError}))
		}
		if !ok {
			return false
		}
	}
	return true
}

func (m *claudeMapper) user(l *claudeLine, emit Emit) bool {
	if l.Message == nil {
		return true
	}
	var blocks []claudeBlock
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return true // a plain-string user message: the prompt echoed
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		if !emit("tool_result", encode(toolResultData{ToolCallID: b.ToolUseID, Output: contentText(b.Content), IsError: b.IsError})) {
			return false
		}
	}
	return true
}

var claudeFailures = map[string]string{
	"error_max_turns":                     "reached the maximum number of turns",
	"error_max_budget_usd":                "reached the maximum budget",
	"error_during_execution":              "failed during execution",
	"error_max_structured_output_retries": "could not produce valid structured output",
}

func (m *claudeMapper) result(l *claudeLine, emit Emit) bool {
	m.finished = true
	var u usage
	if l.Usage != nil {
		u.InputTokens = l.Usage.InputTokens + l.Usage.CacheCreationInputTokens + l.Usage.CacheReadInputTokens
		u.CachedInputTokens = l.Usage.CacheReadInputTokens
		u.OutputTokens = l.Usage.OutputTokens
	}
	u.TotalCostUSD = l.TotalCostUSD
	if !l.IsError && (l.Subtype == "" || l.Subtype == "success") {
		out := l.Result
		if len(l.StructuredOutput) > 0 && string(l.StructuredOutput) != "null" {
			out = string(l.StructuredOutput) // a run with a response schema
		}
		return emit("done", encode(doneData{Output: out, usage: u, SessionID: m.sessionID}))
	}
	msg := claudeErrors(l.Errors)
	if msg == "" {
		msg = strings.TrimSpace(l.Result)
	}
	if why, ok := claudeFailures[l.Subtype]; ok {
		if msg != "" {
			msg = why + ": " + msg
		} else {
			msg = why
		}
	}
	if msg == "" {
		msg = "run failed (" + l.Subtype + ")"
	}
	return emit("error", encode(errorData{Error: "claude-code: " + msg, usage: u, SessionID: m.sessionID}))
}

// claudeErrors joins a result's errors, a list of strings (or objects
// with a message) in current CLI versions.
func claudeErrors(raw json.RawMessage) string {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return ""
	}
	var out []string
	for _, e := range list {
		var s string
		if json.Unmarshal(e, &s) == nil {
			out = append(out, s)
			continue
		}
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e, &o) == nil && o.Message != "" {
			out = append(out, o.Message)
		}
	}
	return strings.Join(out, "; ")
}

func (m *claudeMapper) End(emit Emit) {
	if m.finished || !m.final.written {
		return
	}
	emit("done", encode(doneData{Output: m.final.String(), SessionID: m.sessionID}))
}
