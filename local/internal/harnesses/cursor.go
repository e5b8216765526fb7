package harnesses

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Cursor runs as
//
//	cursor-agent -p --output-format stream-json --force [--model M] [--resume ID]
//	  [--mode M] [--sandbox S] [--approve-mcps] PROMPT
//
// --force runs every tool call without asking (print mode also requires
// it, or --trust, to run in a directory it has not been told to trust).
// The prompt must be an argument: the CLI ignores piped standard input.
// A prompt longer than maxArgBytes is refused with an error, and one
// that starts with a dash gets a leading space so it is not read as a
// flag. --stream-partial-output is not used: its assistant events come in
// several undocumented forms that repeat text, while the plain stream
// has one assistant event per message.
//
// Models: cursor/claude-sonnet-4-5 runs as --model claude-sonnet-4-5;
// cursor/default (or no model) lets Cursor choose. The key goes in
// CURSOR_API_KEY.
//
// agent_options are free-form for Cursor (box-api §16.4). The keys with
// a print-mode flag are mapped; the rest are ignored:
//
//	mode                  --mode plan|ask
//	sandbox               --sandbox enabled|disabled (true/false accepted)
//	approveMcps           --approve-mcps when true (also approve_mcps)
type cursor struct{}

func init() { register(cursor{}) }

func (cursor) Name() string     { return "cursor" }
func (cursor) Binary() string   { return "cursor-agent" }
func (cursor) KeyEnv() []string { return []string{"CURSOR_API_KEY"} }

// cursorModel translates a Box model id into --model's value ("" for
// Cursor's default).
func cursorModel(model string) (string, error) {
	provider, rest := splitModel(model)
	switch provider {
	case "cursor":
		if rest == "default" {
			return "", nil
		}
		return rest, nil
	case "anthropic", "openai", "opencode", "openrouter", "vercel", "custom":
		return "", fmt.Errorf("cursor runs cursor/… models, not %q", model)
	}
	if model == "default" {
		return "", nil
	}
	return model, nil
}

func (cursor) Command(spec Spec) ([]string, map[string]string, string, error) {
	spec.Prompt = withSchema(spec.Prompt, spec.Schema)
	model, err := cursorModel(spec.Model)
	if err != nil {
		return nil, nil, "", err
	}
	if len(spec.Prompt) > maxArgBytes {
		return nil, nil, "", fmt.Errorf("cursor-agent takes the prompt as a command-line argument; at most %d bytes, not %d", maxArgBytes, len(spec.Prompt))
	}
	argv := []string{"cursor-agent", "-p", "--output-format", "stream-json", "--force"}
	if model != "" {
		argv = append(argv, "--model", model)
	}
	if spec.SessionID != "" {
		if err := checkSessionID(spec.SessionID); err != nil {
			return nil, nil, "", err
		}
		argv = append(argv, "--resume", spec.SessionID)
	}
	if mode, ok, err := optString(spec.Options, "mode"); err != nil {
		return nil, nil, "", err
	} else if ok && mode != "" && mode != "agent" {
		if mode != "plan" && mode != "ask" {
			return nil, nil, "", fmt.Errorf("agent_options.mode must be agent, plan or ask, not %q", mode)
		}
		argv = append(argv, "--mode", mode)
	}
	switch s := spec.Options["sandbox"].(type) {
	case nil:
	case bool:
		argv = append(argv, "--sandbox", map[bool]string{true: "enabled", false: "disabled"}[s])
	case string:
		if s != "enabled" && s != "disabled" {
			return nil, nil, "", fmt.Errorf("agent_options.sandbox must be enabled or disabled, not %q", s)
		}
		argv = append(argv, "--sandbox", s)
	default:
		return nil, nil, "", fmt.Errorf("agent_options.sandbox must be enabled or disabled")
	}
	for _, k := range []string{"approveMcps", "approve_mcps"} {
		if b, ok, err := optBool(spec.Options, k); err != nil {
			return nil, nil, "", err
		} else if ok && b {
			argv = append(argv, "--approve-mcps")
			break
		}
	}
	prompt := spec.Prompt
	if strings.HasPrefix(prompt, "-") {
		prompt = " " + prompt
	}
	argv = append(argv, prompt)
	env := map[string]string{}
	if spec.APIKey != "" {
		env["CURSOR_API_KEY"] = spec.APIKey
	}
	if err := checkCommand(argv, env); err != nil {
		return nil, nil, "", err
	}
	return argv, env, "", nil
}

func (cursor) NewMapper() Mapper { return &cursorMapper{} }

// cursorMapper maps cursor-agent's stream-json output:
//
//	system/init                      remembered session id, no event
//	user                             nothing (the prompt echoed)
//	assistant {message.content}      text (the message's text parts joined)
//	thinking delta {text}            thinking
//	tool_call started                tool {toolCallId: call_id, name, input: args}
//	tool_call completed              tool_result {output: result.success, or the failure
//	                                 with is_error}
//	result success                   done {output: result, usage, session_id}
//	result error / is_error          error {error}
//
// A tool call is {"<name>ToolCall": {"args": …, "result": …}} (readToolCall,
// shellToolCall, editToolCall…): the name is the key without ToolCall;
// a {"function": {"name", "arguments"}} call is also understood. Cursor
// reports no cost (0). Usage, in newer versions, is camelCase
// {inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens} with
// inputTokens excluding the cache: input_tokens is the sum of the three
// input counts, cached_input_tokens cacheReadTokens.
type cursorMapper struct {
	sessionID string
	final     finalText
	finished  bool
}

type cursorLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Text      string `json:"text"`
	Message   *struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	CallID   string                     `json:"call_id"`
	ToolCall map[string]json.RawMessage `json:"tool_call"`
	IsError  bool                       `json:"is_error"`
	Result   string                     `json:"result"`
	Error    json.RawMessage            `json:"error"`
	Usage    *struct {
		InputTokens      int64 `json:"inputTokens"`
		OutputTokens     int64 `json:"outputTokens"`
		CacheReadTokens  int64 `json:"cacheReadTokens"`
		CacheWriteTokens int64 `json:"cacheWriteTokens"`
	} `json:"usage"`
}

func (m *cursorMapper) Line(line []byte, emit Emit) bool {
	var l cursorLine
	if !decodeLine(line, &l) {
		return true
	}
	if l.SessionID != "" {
		m.sessionID = l.SessionID
	}
	switch l.Type {
	case "assistant":
		if l.Message == nil {
			return true
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(l.Message.Content, &parts) != nil {
			return true
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		m.final.add(b.String())
		return emitText(emit, "text", b.String())
	case "thinking":
		if l.Subtype == "delta" {
			return emitText(emit, "thinking", l.Text)
		}
	case "tool_call":
		name, body := cursorToolCall(l.ToolCall)
		if name == "" {
			return true
		}
		switch l.Subtype {
		case "started":
			m.final.tool()
			return emit("tool", encode(toolData{ToolCallID: l.CallID, Name: name, Input: object(body.Args)}))
		case "completed":
			out, failed := cursorToolResult(body.Result)
			return emit("tool_result", encode(toolResultData{ToolCallID: l.CallID, Output: out, IsError: failed}))
		}
	case "result":
		m.finished = true
		var u usage
		if l.Usage != nil {
			u.InputTokens = l.Usage.InputTokens + l.Usage.CacheReadTokens + l.Usage.CacheWriteTokens
			u.CachedInputTokens = l.Usage.CacheReadTokens
			u.OutputTokens = l.Usage.OutputTokens
		}
		if l.IsError || (l.Subtype != "" && l.Subtype != "success") {
			msg := strings.TrimSpace(l.Result)
			if msg == "" {
				msg = opencodeError(l.Error) // the same {message} / string shapes
			}
			return emit("error", encode(errorData{Error: "cursor: " + msg, usage: u, SessionID: m.sessionID}))
		}
		return emit("done", encode(doneData{Output: l.Result, usage: u, SessionID: m.sessionID}))
	}
	return true
}

type cursorToolBody struct {
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result"`
}

// cursorToolCall finds the tool's name and body in a tool_call payload.
func cursorToolCall(tc map[string]json.RawMessage) (string, cursorToolBody) {
	for _, k := range sortedKeys(tc) {
		var body cursorToolBody
		if name, ok := strings.CutSuffix(k, "ToolCall"); ok && name != "" {
			if json.Unmarshal(tc[k], &body) == nil {
				return name, body
			}
		}
	}
	if raw, ok := tc["function"]; ok {
		var f struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Result    json.RawMessage `json:"result"`
		}
		if json.Unmarshal(raw, &f) == nil && f.Name != "" {
			args := f.Arguments
			// OpenAI-style arguments are a JSON string holding an object.
			var s string
			if json.Unmarshal(args, &s) == nil && json.Valid([]byte(s)) {
				args = json.RawMessage(s)
			}
			return f.Name, cursorToolBody{Args: args, Result: f.Result}
		}
	}
	return "", cursorToolBody{}
}

// cursorToolResult unwraps {"success": …}; {"error": …}, {"failure": …}
// and {"rejected": …} are failures.
func cursorToolResult(raw json.RawMessage) (json.RawMessage, bool) {
	var r map[string]json.RawMessage
	if json.Unmarshal(raw, &r) != nil {
		return value(raw), false
	}
	if v, ok := r["success"]; ok {
		return value(v), false
	}
	for _, k := range []string{"error", "failure", "rejected"} {
		if v, ok := r[k]; ok {
			return value(v), true
		}
	}
	return value(raw), false
}

func (m *cursorMapper) End(emit Emit) {
	if m.finished || !m.final.written {
		return
	}
	emit("done", encode(doneData{Output: m.final.String(), SessionID: m.sessionID}))
}
