// Package modeltest is a scripted model provider for tests of the agent
// CLIs: it speaks the Anthropic Messages API, the OpenAI Responses API and
// Chat Completions, streaming as the providers stream (server-sent
// events), plays a script of replies, and records what each CLI sent.
package modeltest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is what a CLI sent, as the script and the test see it.
type Request struct {
	// API is "anthropic", "responses" or "chat".
	API string
	// Path is the request's path and query.
	Path string
	// Model, System (every system or developer text, joined) and Tools
	// (the names of the tools offered) are the request's.
	Model  string
	System string
	Tools  []string
	// User is the text of the last user message; ToolResult the output
	// of a tool in the last message, with HasToolResult.
	User          string
	ToolResult    string
	HasToolResult bool
	// SearchedTools is the JSON of the tools a Responses tool search
	// found (Codex's tool_search), when its output is the last input
	// item; "" otherwise.
	SearchedTools string
	// Turns counts the messages (or input items) the request carries.
	Turns int
	// Key is the API key it carried (x-api-key or the bearer token).
	Key string
	// Images are the images (base64-decoded) of the last user message,
	// its tool results' included, in order (Anthropic only).
	Images [][]byte
	// Body is the request's JSON.
	Body map[string]any
}

// HasTool reports whether the request offers a tool of that name.
func (r *Request) HasTool(name string) bool { return slices.Contains(r.Tools, name) }

// ShellTool is the name of the CLI's shell tool among those offered:
// Bash (Claude Code), exec_command (Codex) or bash (OpenCode); "" when
// there is none (a title request, say).
func (r *Request) ShellTool() string {
	for _, t := range []string{"Bash", "exec_command", "bash", "shell"} {
		if r.HasTool(t) {
			return t
		}
	}
	return ""
}

// Reply is one model turn.
type Reply struct {
	// Reasoning is streamed before the text, where the API has a way.
	Reasoning string
	// Text is the answer, streamed in a few deltas.
	Text string
	// Tool, when set, is a tool call after the text.
	Tool *ToolCall
	// ToolSearch, when set, is a search of the client's deferred tools
	// with that query after the text (Responses only: Codex's
	// tool_search, which Codex runs and answers with the tools found).
	ToolSearch string
	// Usage is the turn's token usage.
	Usage Usage
	// Slow streams the text one delta per Slow, until the text ends or
	// the client goes: a turn to cancel.
	Slow time.Duration
}

// ToolCall is a call of a tool by name with its input.
type ToolCall struct {
	Name  string
	Input map[string]any
	// Namespace is the namespace of a Responses function, "" for none:
	// Codex's MCP tools, once a tool search found them, are the functions
	// of a namespace per server.
	Namespace string
}

// Usage is a turn's tokens.
type Usage struct {
	Input, Output, CacheRead int
}

// Script answers a request.
type Script func(r *Request) Reply

// Server is the scripted provider.
type Server struct {
	// URL is its base, http://127.0.0.1:port.
	URL string
	srv *httptest.Server

	mu     sync.Mutex
	script Script
	reqs   []*Request
	seq    int
}

// New starts a server playing script; it stops with the test.
func New(t testing.TB, script Script) *Server {
	t.Helper()
	s := &Server{script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	return s
}

// SetScript replaces the script.
func (s *Server) SetScript(script Script) {
	s.mu.Lock()
	s.script = script
	s.mu.Unlock()
}

// Requests returns what was sent so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Shell answers with a call of the CLI's shell tool running command, and
// once the tool's output has come back with final (the output appended
// after a colon); requests without a shell tool (titles) get "title".
func Shell(command, final string, usage Usage) Script {
	return func(r *Request) Reply {
		tool := r.ShellTool()
		switch {
		case tool == "":
			return Reply{Text: "title", Usage: usage}
		case r.HasToolResult:
			return Reply{Text: final + ": " + strings.TrimSpace(r.ToolResult), Usage: usage}
		}
		key := "command"
		if tool == "exec_command" {
			key = "cmd"
		}
		return Reply{Reasoning: "The user wants a command run.", Text: "Running it.", Tool: &ToolCall{Name: tool, Input: map[string]any{key: command}}, Usage: usage}
	}
}

// JSON answers with out as the run's structured output: through the
// StructuredOutput tool where the CLI offers one (Claude Code with a
// response schema), else as the answer's text.
func JSON(out map[string]any, usage Usage) Script {
	return func(r *Request) Reply {
		switch {
		case r.ShellTool() == "" && !r.HasTool("StructuredOutput"):
			return Reply{Text: "title", Usage: usage}
		case r.HasTool("StructuredOutput") && r.HasToolResult:
			return Reply{Text: "Done.", Usage: usage}
		case r.HasTool("StructuredOutput"):
			return Reply{Tool: &ToolCall{Name: "StructuredOutput", Input: out}, Usage: usage}
		}
		raw, _ := json.Marshal(out)
		return Reply{Text: string(raw), Usage: usage}
	}
}

func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s_%d", prefix, s.seq)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
		return
	}
	var api string
	switch {
	case r.Method != http.MethodPost:
	case strings.HasSuffix(r.URL.Path, "/messages"):
		api = "anthropic"
	case strings.HasSuffix(r.URL.Path, "/responses"):
		api = "responses"
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		api = "chat"
	}
	if api == "" {
		http.Error(w, "modeltest: no such API: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&body); err != nil {
		http.Error(w, "modeltest: body: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := parse(api, body)
	req.Path = r.URL.RequestURI()
	req.Key = r.Header.Get("X-Api-Key")
	if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		req.Key = k
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	script := s.script
	s.mu.Unlock()
	reply := script(req)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	st := &stream{w: w, rc: http.NewResponseController(w), done: r.Context().Done()}
	switch api {
	case "anthropic":
		if body["stream"] != true {
			s.anthropicMessage(w, req, reply)
			return
		}
		s.anthropic(st, req, reply)
	case "responses":
		s.responses(st, req, reply)
	case "chat":
		s.chat(st, req, reply)
	}
}

// stream writes server-sent events.
type stream struct {
	w    io.Writer
	rc   *http.ResponseController
	done <-chan struct{}
	gone bool
}

func (st *stream) event(name string, data any) {
	if st.gone {
		return
	}
	raw, _ := json.Marshal(data)
	var err error
	if name != "" {
		_, err = fmt.Fprintf(st.w, "event: %s\ndata: %s\n\n", name, raw)
	} else {
		_, err = fmt.Fprintf(st.w, "data: %s\n\n", raw)
	}
	if err == nil {
		err = st.rc.Flush()
	}
	st.gone = err != nil
}

// pause waits d, and reports whether the client is still there.
func (st *stream) pause(d time.Duration) bool {
	if d <= 0 {
		return !st.gone
	}
	select {
	case <-st.done:
		st.gone = true
	case <-time.After(d):
	}
	return !st.gone
}

// pieces splits text into a few deltas.
func pieces(text string) []string {
	var out []string
	for len(text) > 0 {
		n := min(len(text), max(1, len(text)/3+1))
		for n < len(text) && (text[n]&0xC0) == 0x80 {
			n++ // not inside a UTF-8 sequence
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

// slowPieces splits text into words for a slow turn.
func slowPieces(text string) []string {
	var out []string
	for w := range strings.SplitAfterSeq(text, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

func (r Reply) deltas() []string {
	if r.Slow > 0 {
		return slowPieces(r.Text)
	}
	return pieces(r.Text)
}

func inputJSON(tc *ToolCall) string {
	raw, _ := json.Marshal(tc.Input)
	return string(raw)
}

func (s *Server) anthropic(st *stream, req *Request, r Reply) {
	msgID := s.id("msg")
	st.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": r.Usage.Input, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": r.Usage.CacheRead},
	}})
	index := 0
	if r.Reasoning != "" {
		st.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		for _, p := range pieces(r.Reasoning) {
			st.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "thinking_delta", "thinking": p}})
		}
		st.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "signature_delta", "signature": "modeltest"}})
		st.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if r.Text != "" {
		st.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, p := range r.deltas() {
			if !st.pause(r.Slow) {
				return
			}
			st.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": p}})
		}
		st.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	stop := "end_turn"
	if r.Tool != nil {
		stop = "tool_use"
		st.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "tool_use", "id": s.id("toolu"), "name": r.Tool.Name, "input": map[string]any{}}})
		for _, p := range pieces(inputJSON(r.Tool)) {
			st.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
		}
		st.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	st.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": r.Usage.Output}})
	st.event("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicMessage answers a Messages request that did not ask for a
// stream with the whole message.
func (s *Server) anthropicMessage(w http.ResponseWriter, req *Request, r Reply) {
	var content []any
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	stop := "end_turn"
	if r.Tool != nil {
		stop = "tool_use"
		content = append(content, map[string]any{"type": "tool_use", "id": s.id("toolu"), "name": r.Tool.Name, "input": r.Tool.Input})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": s.id("msg"), "type": "message", "role": "assistant", "model": req.Model, "content": content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": r.Usage.Input, "output_tokens": r.Usage.Output, "cache_read_input_tokens": r.Usage.CacheRead},
	})
}

func (s *Server) responses(st *stream, req *Request, r Reply) {
	respID := s.id("resp")
	base := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(), "model": req.Model, "status": "in_progress", "output": []any{}}
	st.event("response.created", map[string]any{"type": "response.created", "response": base})
	var output []any
	n := 0
	if r.Reasoning != "" {
		item := map[string]any{"type": "reasoning", "id": s.id("rs"), "summary": []any{map[string]any{"type": "summary_text", "text": r.Reasoning}}}
		st.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": n, "item": item})
		st.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": n, "item": item})
		output = append(output, item)
		n++
	}
	if r.Text != "" {
		id := s.id("msg")
		st.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": n, "item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}})
		st.event("response.content_part.added", map[string]any{"type": "response.content_part.added", "item_id": id, "output_index": n, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		for _, p := range r.deltas() {
			if !st.pause(r.Slow) {
				return
			}
			st.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": id, "output_index": n, "content_index": 0, "delta": p})
		}
		part := map[string]any{"type": "output_text", "text": r.Text, "annotations": []any{}}
		st.event("response.output_text.done", map[string]any{"type": "response.output_text.done", "item_id": id, "output_index": n, "content_index": 0, "text": r.Text})
		st.event("response.content_part.done", map[string]any{"type": "response.content_part.done", "item_id": id, "output_index": n, "content_index": 0, "part": part})
		item := map[string]any{"type": "message", "id": id, "role": "assistant", "status": "completed", "content": []any{part}}
		st.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": n, "item": item})
		output = append(output, item)
		n++
	}
	if r.Tool != nil {
		id, call := s.id("fc"), s.id("call")
		args := inputJSON(r.Tool)
		st.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": n, "item": map[string]any{"type": "function_call", "id": id, "call_id": call, "name": r.Tool.Name, "arguments": "", "status": "in_progress"}})
		for _, p := range pieces(args) {
			st.event("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta", "item_id": id, "output_index": n, "delta": p})
		}
		st.event("response.function_call_arguments.done", map[string]any{"type": "response.function_call_arguments.done", "item_id": id, "output_index": n, "arguments": args})
		item := map[string]any{"type": "function_call", "id": id, "call_id": call, "name": r.Tool.Name, "arguments": args, "status": "completed"}
		if r.Tool.Namespace != "" {
			item["namespace"] = r.Tool.Namespace
		}
		st.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": n, "item": item})
		output = append(output, item)
		n++
	}
	if r.ToolSearch != "" {
		item := map[string]any{"type": "tool_search_call", "id": s.id("ts"), "call_id": s.id("call"), "execution": "client", "status": "completed",
			"arguments": map[string]any{"query": r.ToolSearch}}
		st.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": n, "item": item})
		st.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": n, "item": item})
		output = append(output, item)
	}
	done := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(), "model": req.Model, "status": "completed", "output": output,
		"usage": map[string]any{"input_tokens": r.Usage.Input, "input_tokens_details": map[string]any{"cached_tokens": r.Usage.CacheRead},
			"output_tokens": r.Usage.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": r.Usage.Input + r.Usage.Output}}
	st.event("response.completed", map[string]any{"type": "response.completed", "response": done})
}

func (s *Server) chat(st *stream, req *Request, r Reply) {
	id := s.id("chatcmpl")
	chunk := func(delta map[string]any, finish any, usage map[string]any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		st.event("", c)
	}
	if r.Reasoning != "" {
		chunk(map[string]any{"role": "assistant", "reasoning_content": r.Reasoning}, nil, nil)
	}
	for _, p := range r.deltas() {
		if !st.pause(r.Slow) {
			return
		}
		chunk(map[string]any{"role": "assistant", "content": p}, nil, nil)
	}
	finish := "stop"
	if r.Tool != nil {
		finish = "tool_calls"
		chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": s.id("call"), "type": "function", "function": map[string]any{"name": r.Tool.Name, "arguments": inputJSON(r.Tool)}}}}, nil, nil)
	}
	chunk(map[string]any{}, finish, map[string]any{"prompt_tokens": r.Usage.Input, "completion_tokens": r.Usage.Output, "total_tokens": r.Usage.Input + r.Usage.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": r.Usage.CacheRead}})
	if !st.gone {
		_, _ = io.WriteString(st.w, "data: [DONE]\n\n")
		_ = st.rc.Flush()
	}
}

// parse reads what a script needs from a request body of api.
func parse(api string, body map[string]any) *Request {
	r := &Request{API: api, Body: body}
	r.Model, _ = body["model"].(string)
	var system []string
	addSystem := func(v any) {
		if t := textOf(v); t != "" {
			system = append(system, t)
		}
	}
	for _, t := range asList(body["tools"]) {
		m, _ := t.(map[string]any)
		name, _ := m["name"].(string)
		if f, ok := m["function"].(map[string]any); ok {
			name, _ = f["name"].(string)
		}
		if m["type"] == "tool_search" {
			name = "tool_search"
		}
		if name != "" {
			r.Tools = append(r.Tools, name)
		}
	}
	switch api {
	case "anthropic":
		addSystem(body["system"])
		msgs := asList(body["messages"])
		r.Turns = len(msgs)
		for _, m := range msgs {
			if mm, _ := m.(map[string]any); mm["role"] == "system" {
				addSystem(mm["content"])
			}
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			m, _ := msgs[i].(map[string]any)
			if m["role"] != "user" {
				continue
			}
			r.User = textOf(m["content"])
			for _, b := range asList(m["content"]) {
				bm, _ := b.(map[string]any)
				if bm["type"] == "tool_result" {
					r.HasToolResult, r.ToolResult = true, textOf(bm["content"])
					r.Images = append(r.Images, images(bm["content"])...)
				}
				if bm["type"] == "image" {
					r.Images = append(r.Images, images([]any{bm})...)
				}
			}
			break
		}
	case "responses", "chat":
		// A list of role-tagged items, the last of which is the tool's
		// output after a tool call: input and function_call_output for
		// Responses, messages and a tool message for Chat Completions.
		addSystem(body["instructions"])
		key, isResult, output := "messages", func(m map[string]any) bool { return m["role"] == "tool" }, "content"
		if api == "responses" {
			key, isResult, output = "input", func(m map[string]any) bool { return m["type"] == "function_call_output" }, "output"
		}
		items := asList(body[key])
		r.Turns = len(items)
		for _, it := range items {
			m, _ := it.(map[string]any)
			switch m["role"] {
			case "system", "developer":
				addSystem(m["content"])
			case "user":
				r.User = textOf(m["content"])
			}
		}
		if n := len(items); n > 0 {
			m, _ := items[n-1].(map[string]any)
			if isResult(m) {
				r.HasToolResult = true
				r.ToolResult = textOf(m[output])
			}
			if m["type"] == "tool_search_output" {
				raw, _ := json.Marshal(m["tools"])
				r.SearchedTools = string(raw)
			}
		}
	}
	r.System = strings.Join(system, "\n")
	return r
}

// images decodes the base64 image blocks of a content list.
func images(v any) [][]byte {
	var out [][]byte
	for _, b := range asList(v) {
		bm, _ := b.(map[string]any)
		src, _ := bm["source"].(map[string]any)
		if bm["type"] != "image" || src["type"] != "base64" {
			continue
		}
		data, _ := src["data"].(string)
		if img, err := base64.StdEncoding.DecodeString(data); err == nil {
			out = append(out, img)
		}
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// textOf joins the text of a string, a content block or a list of them.
func textOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		for _, k := range []string{"text", "content", "output"} {
			if s, ok := v[k].(string); ok {
				return s
			}
		}
	case []any:
		var parts []string
		for _, p := range v {
			if m, ok := p.(map[string]any); ok && m["type"] == "tool_result" {
				continue // a tool's output is not the user's text
			}
			if s := textOf(p); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}
