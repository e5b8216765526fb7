package harnesses

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// MCPServer is an MCP server a run's CLI is given: a program the CLI
// starts and speaks to over stdio (Command set), or a server it reaches
// over streamable HTTP (URL set).
type MCPServer struct {
	// Name is the server's name, which prefixes its tools' names.
	Name string
	// Command, Args and Env start a stdio server; Env is laid over what
	// the CLI passes on.
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach an HTTP server.
	URL     string
	Headers map[string]string
	// Timeout bounds the server's start and each of its tool calls, for
	// the CLIs that take a timeout per server (Codex, OpenCode); 0 keeps
	// the CLI's defaults.
	Timeout time.Duration
}

// MCPConfigJSON renders servers as the {"mcpServers": {...}} file that
// Claude Code reads with --mcp-config: a stdio server as {command, args,
// env}, an HTTP one as {type: "http", url, headers}.
func MCPConfigJSON(servers []MCPServer) []byte {
	out := map[string]any{}
	for _, m := range servers {
		if m.URL != "" {
			entry := map[string]any{"type": "http", "url": m.URL}
			if len(m.Headers) > 0 {
				entry["headers"] = m.Headers
			}
			out[m.Name] = entry
			continue
		}
		entry := map[string]any{"command": m.Command, "args": nonNil(m.Args)}
		if len(m.Env) > 0 {
			entry["env"] = m.Env
		}
		out[m.Name] = entry
	}
	return encodeIndent(map[string]any{"mcpServers": out})
}

// proxyEnvNames are the variables of a box's egress proxy and CA bundle,
// which a stdio MCP server needs to reach the network (npx fetching its
// package, a server calling an API). Codex starts its servers with a
// short list of variables only, and is told to pass these on.
var proxyEnvNames = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy",
	"NODE_USE_ENV_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
}

// codexMCPArgs renders servers as codex -c overrides of its mcp_servers
// table. Codex splits a key at its dots and takes server names of
// letters, digits, - and _ only, so other characters of a name become _.
//
// Codex starts the servers alongside the first turn, whose tools are
// those of the servers ready within a grace of a second; a server that
// takes longer (Chrome DevTools' does) would be missing for the whole
// run. A grace of 0 makes the turn wait for each server up to its own
// startup timeout instead; one that fails is left out, and the run goes
// on.
func codexMCPArgs(servers []MCPServer) []string {
	if len(servers) == 0 {
		return nil
	}
	argv := []string{"-c", "mcp_optional_startup_grace_ms=0"}
	for _, m := range servers {
		prefix := "mcp_servers." + codexMCPName(m.Name) + "."
		set := func(key, value string) { argv = append(argv, "-c", prefix+key+"="+value) }
		if m.URL != "" {
			set("url", tomlString(m.URL))
			if len(m.Headers) > 0 {
				set("http_headers", tomlTable(m.Headers))
			}
		} else {
			set("command", tomlString(m.Command))
			set("args", tomlArray(m.Args))
			if len(m.Env) > 0 {
				set("env", tomlTable(m.Env))
			}
			set("env_vars", tomlArray(proxyEnvNames))
		}
		if m.Timeout > 0 {
			secs := strconv.FormatInt(int64((m.Timeout+time.Second-1)/time.Second), 10)
			set("startup_timeout_sec", secs)
			set("tool_timeout_sec", secs)
		}
	}
	return argv
}

func codexMCPName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
}

// opencodeMCP renders servers as the "mcp" object of an OpenCode config:
// {type: "local", command: [program, args…], environment} or {type:
// "remote", url, headers}, each enabled, with its timeout in
// milliseconds.
func opencodeMCP(servers []MCPServer) map[string]any {
	out := map[string]any{}
	for _, m := range servers {
		var entry map[string]any
		if m.URL != "" {
			entry = map[string]any{"type": "remote", "url": m.URL, "enabled": true}
			if len(m.Headers) > 0 {
				entry["headers"] = m.Headers
			}
		} else {
			entry = map[string]any{"type": "local", "command": append([]string{m.Command}, m.Args...), "enabled": true}
			if len(m.Env) > 0 {
				entry["environment"] = m.Env
			}
		}
		if m.Timeout > 0 {
			entry["timeout"] = m.Timeout.Milliseconds()
		}
		out[m.Name] = entry
	}
	return out
}

// tomlArray renders ss as a TOML array of strings.
func tomlArray(ss []string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = tomlString(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// tomlTable renders m as a TOML inline table of strings, keys in order.
func tomlTable(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, tomlString(k)+" = "+tomlString(m[k]))
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// encodeIndent is encode, indented for a file a person may read.
func encodeIndent(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return []byte("{}")
	}
	return b.Bytes()
}
