package local_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// devtoolsScript prints the box's Chromium's /json/version and, on the
// last line, its DevTools port, asked from inside the box. The port is
// 9222 in an isolated box; a box that shares the host's network has
// Chromium pick one, which it writes into its profile's
// DevToolsActivePort. It exits 4 while the port does not answer.
const devtoolsScript = `port=$(head -n1 "${TMPDIR:-/tmp}/.boxd-chromium/DevToolsActivePort" 2>/dev/null)
port=${port:-9222}
curl -sf --noproxy '*' --max-time 5 "http://127.0.0.1:$port/json/version" || exit 4
echo
echo "$port"`

// devtoolsVersion waits until the box's Chromium answers /json/version
// inside the box, and returns the answer, its port and how long it took.
// No browser call is made: Chromium must have been started with the box.
func devtoolsVersion(t *testing.T, b *box.Box, within time.Duration) (version map[string]any, port int, took time.Duration) {
	t.Helper()
	start := time.Now()
	var last *box.Run
	for time.Since(start) < within {
		r, err := b.Exec.Command(t.Context(), devtoolsScript)
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		last = r
		if r.ExitCode == 0 {
			out := strings.TrimSpace(r.Stdout)
			i := strings.LastIndexByte(out, '\n')
			if i < 0 {
				t.Fatalf("devtools script printed %q", r.Stdout)
			}
			if err := json.Unmarshal([]byte(out[:i]), &version); err != nil {
				t.Fatalf("/json/version: %v in %q", err, out[:i])
			}
			port, _ = strconv.Atoi(out[i+1:])
			return version, port, time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the box's Chromium did not answer within %v (last: exit %d, %q %q)", within, last.ExitCode, last.Stdout, last.Stderr)
	return nil, 0, 0
}

// logCount counts the box's log lines that contain s.
func logCount(t *testing.T, b *box.Box, s string) int {
	t.Helper()
	logs, err := b.Logs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range logs {
		if strings.Contains(l.Message, s) {
			n++
		}
	}
	return n
}

// TestBrowserBoxStartsChromium: a box created with browser: true has
// Chromium running right after create, with no browser call, its DevTools
// on 127.0.0.1:9222 in an isolated box as on the cloud; the first browser
// call uses that Chromium; a new sandbox of the box starts a new one.
func TestBrowserBoxStartsChromium(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	srv := boxtest.NewServer(t)
	ctx := t.Context()

	created := time.Now()
	b := newBox(t, srv, &box.CreateParams{Browser: true})
	t.Logf("create returned in %v", time.Since(created))
	version, port, took := devtoolsVersion(t, b, 30*time.Second)
	t.Logf("Chromium answered in the box %v after create", took)
	if ua, _ := version["User-Agent"].(string); !strings.Contains(ua, "HeadlessChrome") || !strings.HasPrefix(fmt.Sprint(version["webSocketDebuggerUrl"]), "ws://127.0.0.1:") {
		t.Errorf("/json/version = %v", version)
	}
	if isolation(t) == local.IsolationBwrap && port != 9222 {
		t.Errorf("DevTools port %d in an isolated box, want 9222", port)
	}

	// The first browser call finds Chromium running and starts no other.
	if _, err := b.Browser.ListTabs(ctx); err != nil {
		t.Fatal(err)
	}
	if n := logCount(t, b, "browser started"); n != 1 {
		t.Errorf("%d browser starts logged after create and a browser call, want 1", n)
	}

	if isolation(t) != local.IsolationBwrap {
		return // killing every process of a box that is not isolated would kill the host's
	}
	// A box that lost its processes gets Chromium back with its next
	// sandbox, before any browser call.
	killSandbox(t, b)
	mustExec(t, b, "true")
	if _, again, _ := devtoolsVersion(t, b, 30*time.Second); again != 9222 {
		t.Errorf("DevTools port after a restart = %d", again)
	}
	// Chromium answers a moment before boxd has connected to it and
	// logged the start.
	if !waitFor(10*time.Second, func() bool { return logCount(t, b, "browser started") == 2 }) {
		t.Errorf("%d browser starts logged after a restart of the box, want 2", logCount(t, b, "browser started"))
	}
}

// TestBrowserBoxChromiumFails: when Chromium cannot start, create still
// succeeds at once, the box's log says why, the browser calls fail with
// the reason, and an agent run goes on without the browser's MCP server.
func TestBrowserBoxChromiumFails(t *testing.T) {
	t.Parallel()
	// /usr/bin/false exits at once, as a broken Chromium would.
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) { c.ChromiumPath = "/usr/bin/false" }))
	start := time.Now()
	b := newBox(t, srv, &box.CreateParams{Browser: true, Agent: &box.AgentOptions{Harness: box.HarnessOpenCode, Model: box.OpenCodeBigPickle, APIKey: "oc-test"}})
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("create took %v", d)
	}
	if !waitFor(30*time.Second, func() bool { return logCount(t, b, "the browser did not start: Chromium exited") > 0 }) {
		t.Errorf("the box's log does not say that the browser did not start")
	}
	_, err := b.Browser.ListTabs(t.Context())
	var apiErr *box.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode < 500 || !strings.Contains(err.Error(), "the browser did not start: Chromium exited") {
		t.Errorf("ListTabs = %v, want a 5xx saying that Chromium exited", err)
	}

	installStub(t, b, "opencode")
	_, _ = b.Agent.Run(t.Context(), &box.AgentParams{Prompt: "Open the page"}) // the stub prints no answer
	if cmdline, ok := opencodeEntry(t, b, mustExec(t, b, "cat /home/boxuser/cli-args")); ok {
		t.Errorf("a run without a browser got its MCP server: %s", cmdline)
	}
	if logCount(t, b, "the agent runs without the browser's MCP server: ") != 1 {
		t.Errorf("the box's log does not say why the run has no browser")
	}
}

// cliStub stands in for the agent CLIs: it records its arguments and
// OpenCode's config variable, and prints nothing.
const cliStub = `#!/bin/sh
{ printf '%s\n' "$@"; printf 'OPENCODE_CONFIG_CONTENT=%s\n' "$OPENCODE_CONFIG_CONTENT"; } > /home/boxuser/cli-args
`

// installStub puts cliStub on the box's PATH as the CLI bin.
func installStub(t *testing.T, b *box.Box, bin string) {
	t.Helper()
	mustExec(t, b, "mkdir -p ~/.local/bin && cat > ~/.local/bin/"+bin+" <<'EOF'\n"+cliStub+"EOF\nchmod +x ~/.local/bin/"+bin)
}

// TestBrowserBoxAgentMCP: a run of Claude Code, Codex or OpenCode on a
// browser box gets the Chrome DevTools MCP server pointed at the box's
// Chromium, each in the CLI's own config terms; on a box without a
// browser, none of them does.
func TestBrowserBoxAgentMCP(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	for _, tc := range []struct {
		bin   string
		agent *box.AgentOptions
		// entry finds the server in what the run left (its argv and
		// OpenCode's config, and Claude Code's MCP config file), and
		// returns its command line.
		entry func(t *testing.T, b *box.Box, args string) (string, bool)
	}{
		{"claude", &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5, APIKey: "sk-ant-test"}, claudeEntry},
		{"codex", &box.AgentOptions{Harness: box.HarnessCodex, Model: box.OpenAICodexGPT5_3Codex, APIKey: "sk-test"}, codexEntry},
		{"opencode", &box.AgentOptions{Harness: box.HarnessOpenCode, Model: box.OpenCodeBigPickle, APIKey: "oc-test"}, opencodeEntry},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			for _, browser := range []bool{true, false} {
				b := newBox(t, srv, &box.CreateParams{Browser: browser, Agent: tc.agent})
				installStub(t, b, tc.bin)
				_, _ = b.Agent.Run(ctx, &box.AgentParams{Prompt: "Open the page"}) // the stub prints no answer
				args := mustExec(t, b, "cat /home/boxuser/cli-args")
				cmdline, ok := tc.entry(t, b, args)
				if !browser {
					if ok {
						t.Errorf("a box without a browser got the server: %s", cmdline)
					}
					continue
				}
				if !ok {
					t.Fatalf("no chrome-devtools server in the run's config; argv and env:\n%s", args)
				}
				_, port, _ := devtoolsVersion(t, b, 30*time.Second)
				want := "--browserUrl http://127.0.0.1:" + strconv.Itoa(port)
				if !strings.Contains(cmdline, "chrome-devtools-mcp") || !strings.Contains(cmdline, want) || !strings.Contains(cmdline, "--no-usage-statistics") {
					t.Errorf("server command %q, want chrome-devtools-mcp with %s", cmdline, want)
				}
				if err := b.Delete(ctx); err != nil { // its Chromium goes with it
					t.Fatal(err)
				}
			}
		})
	}
}

// claudeEntry reads the server from the MCP config file Claude Code is
// given with --mcp-config.
func claudeEntry(t *testing.T, b *box.Box, args string) (string, bool) {
	const flag = "--mcp-config=/home/boxuser/.config/boxd/mcp.json"
	if !slices.Contains(strings.Split(args, "\n"), flag) {
		return "", false
	}
	raw := mustExec(t, b, "cat /home/boxuser/.config/boxd/mcp.json")
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("mcp.json: %v in %s", err, raw)
	}
	s, ok := cfg.MCPServers["chrome-devtools"]
	return strings.Join(append([]string{s.Command}, s.Args...), " "), ok
}

// codexEntry reads the server from codex's -c mcp_servers overrides.
func codexEntry(t *testing.T, _ *box.Box, args string) (string, bool) {
	var command, argv string
	for _, a := range strings.Split(args, "\n") {
		if v, ok := strings.CutPrefix(a, "mcp_servers.chrome-devtools.command="); ok {
			command = v
		}
		if v, ok := strings.CutPrefix(a, "mcp_servers.chrome-devtools.args="); ok {
			// A TOML array of basic strings is a JSON array here: no
			// escapes beyond JSON's.
			var list []string
			if err := json.Unmarshal([]byte(v), &list); err != nil {
				t.Fatalf("codex args %s: %v", v, err)
			}
			argv = strings.Join(list, " ")
		}
	}
	return strings.Trim(command, `"`) + " " + argv, command != ""
}

// opencodeEntry reads the server from OPENCODE_CONFIG_CONTENT.
func opencodeEntry(t *testing.T, _ *box.Box, args string) (string, bool) {
	i := strings.Index(args, "OPENCODE_CONFIG_CONTENT=")
	raw := strings.TrimSpace(args[i+len("OPENCODE_CONFIG_CONTENT="):])
	if raw == "" {
		return "", false
	}
	var cfg struct {
		MCP map[string]struct {
			Type    string   `json:"type"`
			Command []string `json:"command"`
			Enabled bool     `json:"enabled"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("OPENCODE_CONFIG_CONTENT: %v in %s", err, raw)
	}
	s, ok := cfg.MCP["chrome-devtools"]
	if ok && (s.Type != "local" || !s.Enabled) {
		t.Errorf("opencode entry %+v", s)
	}
	return strings.Join(s.Command, " "), ok
}

// TestBrowserBoxMCPServer starts the Chrome DevTools MCP server in a
// browser box exactly as its coding agent is told to (the command of the
// MCP config a run writes), speaks MCP to it over stdio, and drives the
// box's own Chromium with it: the tools are listed, and a page it opens
// is a tab of the box's browser.
func TestBrowserBoxMCPServer(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	if _, err := exec.LookPath("chrome-devtools-mcp"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set and chrome-devtools-mcp is not installed (./scripts/deps.sh --tests installs it)")
		}
		t.Skip("chrome-devtools-mcp is not installed (npm install -g chrome-devtools-mcp@1.11.0)")
	}
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Browser: true, Agent: &box.AgentOptions{Harness: box.HarnessClaudeCode, Model: box.ClaudeCodeSonnet4_5, APIKey: "sk-ant-test"}})
	installStub(t, b, "claude")
	_, _ = b.Agent.Run(ctx, &box.AgentParams{Prompt: "Open the page"})
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(mustExec(t, b, "cat /home/boxuser/.config/boxd/mcp.json")), &cfg); err != nil {
		t.Fatal(err)
	}
	entry, ok := cfg.MCPServers["chrome-devtools"]
	if !ok {
		t.Fatalf("no chrome-devtools server in %+v", cfg)
	}
	var env []string
	for k, v := range entry.Env {
		env = append(env, k+"="+v)
	}
	start := time.Now()
	s, err := b.Exec.Session(ctx, &box.SessionParams{Argv: append([]string{entry.Command}, entry.Args...), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A server that stops answering ends the test instead of hanging it.
	hang := time.AfterFunc(2*time.Minute, func() { s.Close() })
	defer hang.Stop()
	go func() { _, _ = io.Copy(io.Discard, s.Stderr) }()
	lines := bufio.NewScanner(s.Stdout)
	lines.Buffer(make([]byte, 0, 64<<10), 16<<20)
	id := 0
	// call sends one request and returns its result, skipping the
	// server's notifications.
	call := func(method string, params any) json.RawMessage {
		t.Helper()
		id++
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := s.Stdin.Write(append(req, '\n')); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		for lines.Scan() {
			var msg struct {
				ID     *int            `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(lines.Bytes(), &msg); err != nil {
				t.Fatalf("%s: the server wrote %q", method, lines.Bytes())
			}
			if msg.ID == nil || *msg.ID != id {
				continue
			}
			if msg.Error != nil {
				t.Fatalf("%s: %s", method, msg.Error)
			}
			return msg.Result
		}
		t.Fatalf("%s: the server's output ended (%v)", method, lines.Err())
		return nil
	}
	var init struct {
		ServerInfo struct{ Name, Version string } `json:"serverInfo"`
	}
	_ = json.Unmarshal(call("initialize", map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "box-go-test", "version": "1"},
	}), &init)
	if _, err := s.Stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	_ = json.Unmarshal(call("tools/list", map[string]any{}), &list)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	t.Logf("%s %s in the box: %d tools after %v", init.ServerInfo.Name, init.ServerInfo.Version, len(names), time.Since(start))
	for _, want := range []string{"list_pages", "new_page", "navigate_page", "take_screenshot", "click"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}

	// The server drives the box's Chromium: a page it lists is one of
	// the box's tabs.
	tabs, err := b.Browser.ListTabs(ctx)
	if err != nil || len(tabs) == 0 {
		t.Fatalf("ListTabs = %v, %v", tabs, err)
	}
	const title = "mcp-probe"
	if _, err := b.Browser.Tabs.Create(ctx, "data:text/html,<title>"+title+"</title>", nil); err != nil {
		t.Fatal(err)
	}
	pages := string(call("tools/call", map[string]any{"name": "list_pages", "arguments": map[string]any{}}))
	if !strings.Contains(pages, title) {
		t.Errorf("list_pages does not show the box's tab %q: %s", title, pages)
	}
}
