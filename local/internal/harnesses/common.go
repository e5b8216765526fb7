package harnesses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxArgBytes bounds one command-line argument or environment value.
// Linux refuses any single argv or envp string longer than
// MAX_ARG_STRLEN (32 pages, 128 KiB); staying well below it leaves room
// for the rest. Prompts longer than this go on standard input when the
// CLI reads its prompt from there.
const maxArgBytes = 100 << 10

// promptOnStdin reports whether a prompt must go on standard input rather
// than in argv: when it is too long for one argument, or when it starts
// with a dash and an argument parser would take it for a flag.
func promptOnStdin(prompt string) bool {
	return len(prompt) > maxArgBytes || strings.HasPrefix(prompt, "-")
}

// checkCommand rejects argv and environment strings the kernel would
// refuse, so the run fails with a clear message instead of E2BIG.
func checkCommand(argv []string, env map[string]string) error {
	for _, a := range argv {
		if len(a) > maxArgBytes {
			return fmt.Errorf("a command-line argument of %d bytes is longer than the %d bytes allowed", len(a), maxArgBytes)
		}
	}
	for k, v := range env {
		if len(k)+1+len(v) > maxArgBytes {
			return fmt.Errorf("environment variable %s is longer than the %d bytes allowed", k, maxArgBytes)
		}
	}
	return nil
}

// checkSessionID rejects session ids that could be mistaken for flags or
// that hold control characters; every CLI's ids are plain tokens.
func checkSessionID(id string) error {
	if strings.TrimSpace(id) != id || strings.HasPrefix(id, "-") || len(id) > 512 {
		return fmt.Errorf("invalid session id %q", id)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("invalid session id %q", id)
		}
	}
	return nil
}

// CanonicalModel returns the id that a model of the official SDKs' first
// scheme (0.1.x) has today: claude/opus_4_6 is anthropic/claude-opus-4-6,
// claude/sonnet_4 anthropic/claude-sonnet-4. Other ids come back as they
// are.
func CanonicalModel(model string) string {
	if rest, ok := strings.CutPrefix(model, "claude/"); ok && rest != "" {
		return "anthropic/claude-" + strings.ReplaceAll(rest, "_", "-")
	}
	return model
}

// splitModel splits a Box model id at its first slash into the provider
// prefix and the rest: "anthropic/claude-sonnet-4-5" gives "anthropic" and
// "claude-sonnet-4-5". An id without a slash has no provider. Ids of the
// first scheme are read as today's (CanonicalModel).
func splitModel(model string) (provider, rest string) {
	model = CanonicalModel(model)
	if i := strings.IndexByte(model, '/'); i >= 0 {
		return model[:i], model[i+1:]
	}
	return "", model
}

// Option readers. Options come from decoded JSON, so numbers are usually
// float64; json.Number and Go integers are accepted too.

func optString(opts map[string]any, key string) (string, bool, error) {
	v, ok := opts[key]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, fmt.Errorf("agent_options.%s must be a string", key)
	}
	return s, true, nil
}

func optNumber(opts map[string]any, key string) (float64, bool, error) {
	v, ok := opts[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, false, fmt.Errorf("agent_options.%s must be a number", key)
		}
		f = x
	default:
		return 0, false, fmt.Errorf("agent_options.%s must be a number", key)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("agent_options.%s must be a finite number", key)
	}
	return f, true, nil
}

func optInt(opts map[string]any, key string) (int64, bool, error) {
	f, ok, err := optNumber(opts, key)
	if err != nil || !ok {
		return 0, ok, err
	}
	if f != math.Trunc(f) || f < 0 || f > 1<<53 {
		return 0, false, fmt.Errorf("agent_options.%s must be a non-negative integer", key)
	}
	return int64(f), true, nil
}

func optBool(opts map[string]any, key string) (bool, bool, error) {
	v, ok := opts[key]
	if !ok || v == nil {
		return false, false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, false, fmt.Errorf("agent_options.%s must be a boolean", key)
	}
	return b, true, nil
}

func optStrings(opts map[string]any, key string) ([]string, bool, error) {
	v, ok := opts[key]
	if !ok || v == nil {
		return nil, false, nil
	}
	switch l := v.(type) {
	case []string:
		return l, true, nil
	case []any:
		out := make([]string, 0, len(l))
		for _, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, false, fmt.Errorf("agent_options.%s must be a list of strings", key)
			}
			out = append(out, s)
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("agent_options.%s must be a list of strings", key)
}

func optObject(opts map[string]any, key string) (map[string]any, bool, error) {
	v, ok := opts[key]
	if !ok || v == nil {
		return nil, false, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("agent_options.%s must be an object", key)
	}
	return m, true, nil
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// tomlString quotes s as a TOML basic string, for codex's -c overrides.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		case r == utf8.RuneError:
			b.WriteString(`\uFFFD`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// sortedKeys returns the keys of m in order, for a stable argv.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Run-stream event data (box-api §9.1). Tokens are integers and every
// usage field of done is always present, as the custom-harness helper
// writes them (§17).

type textData struct {
	Text string `json:"text"`
}

type toolData struct {
	ToolCallID string          `json:"toolCallId,omitempty"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
}

type toolResultData struct {
	ToolCallID string          `json:"toolCallId,omitempty"`
	Output     json.RawMessage `json:"output"`
	IsError    bool            `json:"is_error,omitempty"`
}

// usage is a run's token and cost totals. InputTokens counts every
// prompt token, cached or not; CachedInputTokens is the part of it read
// from the provider's prompt cache. This is the OpenAI (and Codex)
// convention, so the four harnesses report comparable numbers: the
// Anthropic-style counts of Claude Code, OpenCode and Cursor, whose
// input excludes cache reads and writes, are summed into InputTokens.
type usage struct {
	InputTokens       int64   `json:"input_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens"`
	TotalCostUSD      float64 `json:"total_cost_usd"`
}

type doneData struct {
	Output string `json:"output"`
	usage
	SessionID string `json:"session_id"`
}

// errorData is the error event. Besides the error the client reads, it
// carries the usage and session so far, as box-sse-v1 harnesses do.
type errorData struct {
	Error string `json:"error"`
	usage
	SessionID string `json:"session_id"`
}

// encode is JSON without HTML escaping, so code in text stays readable.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("{}")
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func emitText(emit Emit, event, text string) bool {
	if text == "" {
		return true
	}
	return emit(event, encode(textData{Text: text}))
}

// object returns raw if it is a JSON object, {} if it is empty or null,
// and {"value": raw} otherwise: a tool event's input is always an object.
func object(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0 || string(t) == "null":
		return json.RawMessage("{}")
	case t[0] == '{':
		return t
	}
	return encode(map[string]json.RawMessage{"value": t})
}

// value returns raw, or JSON null when it is empty.
func value(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return json.RawMessage("null")
	}
	return t
}

// contentText flattens a tool result given as a string or as a list of
// content blocks: a list holding only text blocks becomes their text
// joined by newlines; anything else (images, unknown blocks) is kept.
func contentText(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' {
		return value(t)
	}
	var blocks []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(t, &blocks) != nil {
		return t
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type != "text" || b.Text == nil {
			return t
		}
		parts = append(parts, *b.Text)
	}
	return encode(strings.Join(parts, "\n"))
}

// finalText keeps the answer text of a run for a done event the mapper
// makes up itself: the text the agent wrote after its last tool call.
type finalText struct {
	b       strings.Builder
	stale   bool
	written bool
}

// tool starts a new segment: the next text replaces what came before.
func (f *finalText) tool() { f.stale = true }

func (f *finalText) add(s string) {
	if s == "" {
		return
	}
	if f.stale {
		f.b.Reset()
		f.stale = false
	}
	f.b.WriteString(s)
	f.written = true
}

func (f *finalText) String() string { return f.b.String() }

// decodeLine parses one output line into v. Lines that are not JSON
// objects (progress text, warnings) give false and are ignored.
func decodeLine(line []byte, v any) bool {
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	return json.Unmarshal(line, v) == nil
}

// withSchema adds a run's response schema to the prompt of a CLI that
// has no way of its own to enforce one: boxd checks the answer against it.
func withSchema(prompt string, schema []byte) string {
	if len(schema) == 0 {
		return prompt
	}
	return prompt + "\n\nAnswer with a single JSON object, and nothing else, that matches this JSON Schema:\n" + string(schema)
}
