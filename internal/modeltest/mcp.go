package modeltest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// MCP is an MCP server over streamable HTTP (JSON answers, no event
// stream) with one tool, echo_upper, which answers its text in capitals.
type MCP struct {
	// URL is its endpoint, http://127.0.0.1:port/mcp.
	URL string

	mu      sync.Mutex
	methods []string
}

// NewMCP starts an MCP server; it stops with the test.
func NewMCP(t testing.TB) *MCP {
	t.Helper()
	m := &MCP{}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/mcp"
	return m
}

// Methods returns the JSON-RPC methods called so far, in order.
func (m *MCP) Methods() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.methods)
}

func (m *MCP) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path != "/mcp":
		http.NotFound(w, r)
		return
	case r.Method == http.MethodDelete:
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "no event stream here", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string         `json:"protocolVersion"`
			Name            string         `json:"name"`
			Arguments       map[string]any `json:"arguments"`
		} `json:"params"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.methods = append(m.methods, req.Method)
	m.mu.Unlock()
	if len(req.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	var result any
	switch req.Method {
	case "initialize":
		result = map[string]any{"protocolVersion": req.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "modeltest", "version": "1.0.0"}}
	case "tools/list":
		result = map[string]any{"tools": []any{map[string]any{"name": "echo_upper", "description": "Answers its text in capitals.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}}}}}
	case "tools/call":
		text, _ := req.Params.Arguments["text"].(string)
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.ToUpper(text)}}}
	case "ping":
		result = map[string]any{}
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "no method " + req.Method}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
}
