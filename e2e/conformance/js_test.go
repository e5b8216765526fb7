package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/browsertest"
	"github.com/upstash/box-go/internal/gittest"
	"github.com/upstash/box-go/local"
)

const (
	// jsSDKVersion is the exact @upstash/box release pinned in js/package.json.
	jsSDKVersion = "0.5.5"
	// playwrightVersion is the playwright-core release pinned there.
	playwrightVersion = "1.65.1"
	// npmInstallTimeout bounds `npm ci` when node_modules is missing or stale.
	npmInstallTimeout = 5 * time.Minute
	// scriptTimeout bounds one run of a conformance script.
	scriptTimeout = 3 * time.Minute
	// harnessBuildTimeout bounds building internal/testharness.
	harnessBuildTimeout = 3 * time.Minute
)

// TestOfficialJSSDK05 runs the official @upstash/box 0.5.5 JS SDK (from npm,
// unchanged) against an in-process boxd through js/box05.mjs.
//
// Without node/npm the test is skipped, unless CI is set: CI must run it.
func TestOfficialJSSDK05(t *testing.T) {
	runJSScript(t, "box05.mjs")
}

// TestOfficialJSSDK05Snapshots runs js/snap05.mjs: snapshots, schedules
// and ephemeral boxes through the official 0.5.5 JS SDK.
func TestOfficialJSSDK05Snapshots(t *testing.T) {
	runJSScript(t, "snap05.mjs")
}

// TestOfficialJSSDK05Config runs js/config05.mjs: labels, skills, account
// env and the init command through the official 0.5.5 JS SDK.
func TestOfficialJSSDK05Config(t *testing.T) {
	runJSScript(t, "config05.mjs")
}

// TestOfficialJSSDK05Agent runs js/agent05.mjs: agent runs and streams of
// the official 0.5.5 JS SDK against boxd, with internal/testharness as the
// box's custom harness (box-sse-v1), plus the exec streams.
func TestOfficialJSSDK05Agent(t *testing.T) {
	// Skip before building the harness when node/npm are missing.
	requireTool(t, "node")
	requireTool(t, "npm")
	bin := buildTestHarness(t)
	runJSScript(t, "agent05.mjs", "BOX_TEST_HARNESS="+bin)
}

// TestOfficialJSSDK05Git runs js/git05.mjs: the official 0.5.5 JS SDK's
// git calls against boxd, whose GitHub is a loopback git server (smart
// HTTP, token required) and a GitHub API stand-in. GIT_CHECK_URL answers
// what they received: {"branches": {name: sha}, "pulls": [{title, body,
// head, base, auth}]}.
func TestOfficialJSSDK05Git(t *testing.T) {
	requireTool(t, "node")
	const token = "ghs_jsConformanceToken0123456789"
	g := gittest.NewGit(t, token)
	gh := gittest.NewGitHub(t, token)
	g.Repo(t, "acme/js", map[string]string{"README.md": "# js\n"})
	check := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		branches, err := g.Branches("acme/js")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out := struct {
			Branches map[string]string `json:"branches"`
			Pulls    []map[string]any  `json:"pulls"`
		}{Branches: branches, Pulls: []map[string]any{}}
		for _, rq := range gh.Requests() {
			if rq.Method == http.MethodPost && rq.Path == "/repos/acme/js/pulls" {
				var pr map[string]any
				_ = json.Unmarshal(rq.Body, &pr)
				pr["auth"] = rq.Authorization
				out.Pulls = append(out.Pulls, pr)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(check.Close)
	opts := []boxtest.Option{boxtest.WithConfig(func(c *local.Config) { c.GitHubURL, c.GitHubAPIURL = g.BoxURL, gh.URL })}
	runJSScriptWith(t, opts, "git05.mjs", "GIT_TOKEN="+token, "GIT_REPO=acme/js", "GIT_BOX_URL="+g.BoxURL, "GIT_CHECK_URL="+check.URL)
}

// TestPlaywrightOverCDP runs js/cdp_playwright.mjs: Playwright
// (playwright-core from npm) drives a box's browser over its CDP URL while
// boxd records, and the recording follows the tab Playwright brings to the
// front; JavaScript redirects and dialogs go through boxd's REST API.
func TestPlaywrightOverCDP(t *testing.T) {
	if !browsertest.Installed() {
		missing(t, "Chromium is not installed (apt-get install chromium)")
	}
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		missing(t, "ffmpeg is not installed (apt-get install ffmpeg)")
	}
	runJSScript(t, "cdp_playwright.mjs")
}

// runJSScript runs node on script in js/ against a fresh boxd, with
// BOX_BASE_URL, BOX_API_KEY and extraEnv set, and fails the test when the
// script fails. It skips (fails under CI) without node/npm.
func runJSScript(t *testing.T, script string, extraEnv ...string) {
	t.Helper()
	runJSScriptWith(t, nil, script, extraEnv...)
}

// runJSScriptWith is runJSScript with options for the boxd it starts.
func runJSScriptWith(t *testing.T, opts []boxtest.Option, script string, extraEnv ...string) {
	t.Helper()
	node := requireTool(t, "node")
	npm := requireTool(t, "npm")
	requireNodeMajor(t, node, 18)

	jsDir, err := filepath.Abs("js")
	if err != nil {
		t.Fatal(err)
	}
	ensureJSDeps(t, npm, jsDir)

	srv := boxtest.NewServer(t, opts...)

	ctx, cancel := context.WithTimeout(t.Context(), scriptTimeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = jsDir
	cmd.Env = append(scriptEnv(),
		"BOX_BASE_URL="+srv.URL(),
		"BOX_API_KEY="+srv.APIKey(),
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	name := strings.TrimSuffix(script, ".mjs")
	out := &lineLogger{t: t, prefix: name + ": "}
	cmd.Stdout = out
	cmd.Stderr = out
	// If node leaves a child holding the pipes, do not hang past the deadline.
	cmd.WaitDelay = 10 * time.Second

	start := time.Now()
	runErr := cmd.Run()
	out.flush()
	if runErr != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s did not finish within %v: %v", script, scriptTimeout, runErr)
		}
		t.Fatalf("%s failed after %v: %v (see the log above for the failing check)",
			script, time.Since(start).Round(time.Millisecond), runErr)
	}
	t.Logf("%s passed in %v", script, time.Since(start).Round(time.Millisecond))
}

// buildTestHarness builds internal/testharness, statically (CGO_ENABLED=0)
// so that it runs inside a box, into t.TempDir() and returns its path.
func buildTestHarness(t *testing.T) string {
	t.Helper()
	// The test runs in e2e/conformance; the repository root (the SDK
	// module, which holds internal/testharness) is two up.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("cannot find the module root from the test directory: %v", err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not found on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "testharness")

	ctx, cancel := context.WithTimeout(t.Context(), harnessBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./internal/testharness")
	cmd.Dir = root
	// Boxes are Linux wherever the test runs.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building internal/testharness: %v\n%s", err, out)
	}
	return bin
}

// requireTool returns the absolute path of an executable, or skips the test
// (fails it when CI is set) when it is not on PATH.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s not found on PATH (%v); install Node.js >= 18 with npm to run the official JS SDK conformance test", name, err)
	}
	return p
}

func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set, refusing to skip: "+format, args...)
	}
	t.Skipf(format, args...)
}

// requireNodeMajor makes sure node is new enough for the SDK (global fetch,
// FormData and Blob).
func requireNodeMajor(t *testing.T, node string, minMajor int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	v := strings.TrimSpace(string(out))
	major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0])
	if err != nil {
		t.Fatalf("cannot parse node version %q: %v", v, err)
	}
	if major < minMajor {
		missing(t, "node %s is too old; @upstash/box needs node >= %d", v, minMajor)
	}
	t.Logf("using node %s", v)
}

// ensureJSDeps installs js/node_modules from the committed lock file unless
// the pinned SDK version is already present.
func ensureJSDeps(t *testing.T, npm, jsDir string) {
	t.Helper()
	pkgJSON := filepath.Join(jsDir, "node_modules", "@upstash", "box", "package.json")
	installed, err := installedVersion(pkgJSON)
	pw, pwErr := installedVersion(filepath.Join(jsDir, "node_modules", "playwright-core", "package.json"))
	if err == nil && installed == jsSDKVersion && pwErr == nil && pw == playwrightVersion {
		return
	}
	if err == nil {
		t.Logf("node_modules has @upstash/box %s and playwright-core %s, want %s and %s; reinstalling", installed, pw, jsSDKVersion, playwrightVersion)
	}

	ctx, cancel := context.WithTimeout(t.Context(), npmInstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = jsDir
	cmd.Env = scriptEnv()
	cmd.WaitDelay = 10 * time.Second
	t.Logf("running npm ci in %s", jsDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm ci --no-audit --no-fund in %s failed: %v\n%s", jsDir, err, out)
	}
	installed, err = installedVersion(pkgJSON)
	if err != nil {
		t.Fatalf("npm ci succeeded but @upstash/box is not readable: %v\n%s", err, out)
	}
	if installed != jsSDKVersion {
		t.Fatalf("npm ci installed @upstash/box %s, want %s", installed, jsSDKVersion)
	}
}

func installedVersion(pkgJSON string) (string, error) {
	b, err := os.ReadFile(pkgJSON)
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", err
	}
	if pkg.Version == "" {
		return "", errors.New("no version in " + pkgJSON)
	}
	return pkg.Version, nil
}

// scriptEnv is the test process environment minus the variables that would
// change what the SDK sends: the script gets baseUrl/apiKey explicitly, and
// telemetry headers must stay on so the server is tested with them.
func scriptEnv() []string {
	drop := map[string]bool{
		"UPSTASH_DISABLE_TELEMETRY": true,
		"UPSTASH_BOX_API_KEY":       true,
		"UPSTASH_BOX_BASE_URL":      true,
		"BOX_BASE_URL":              true,
		"BOX_API_KEY":               true,
		"BOX_TEST_HARNESS":          true,
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return env
}

// lineLogger is an io.Writer that forwards complete lines to t.Log.
type lineLogger struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			// Incomplete line: keep it for the next write.
			l.buf.Reset()
			l.buf.WriteString(line)
			break
		}
		l.t.Log(l.prefix + strings.TrimRight(line, "\r\n"))
	}
	return len(p), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 0 {
		l.t.Log(l.prefix + l.buf.String())
		l.buf.Reset()
	}
}
