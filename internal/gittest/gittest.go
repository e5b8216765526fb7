// Package gittest serves git repositories over smart HTTP (git
// http-backend) and stands in for the GitHub REST API, on loopback, for the
// tests of boxd's git support. Both check a token, so that a test proves
// the token was sent, and record what they were sent.
package gittest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// HostAlias is boxd's name for the host's 127.0.0.1, as boxes see it.
const HostAlias = "host.boxd.internal"

// Git is a git server: bare repositories under Root, served by git
// http-backend, read and written only with the token.
type Git struct {
	// Root holds the bare repositories, as Root/owner/name.
	Root string
	// URL is the server's address on the host, http://127.0.0.1:port.
	URL string
	// BoxURL is its address from inside a box,
	// http://host.boxd.internal:port: set it as boxd's GitHubURL.
	BoxURL string
	token  string
	hs     *httptest.Server

	mu   sync.Mutex
	auth []string // the Authorization header of every request
}

// NewGit starts a git server whose repositories need token (sent as git
// sends a GitHub token: Basic x-access-token:token), or nothing when token
// is empty. It stops at the end of the test.
func NewGit(t testing.TB, token string) *Git {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("git is not installed: %v", err)
	}
	execPath := strings.TrimSpace(run(t, "", "git", "--exec-path"))
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend is not installed: %v", err)
	}
	g := &Git{Root: t.TempDir(), token: token}
	home := t.TempDir()
	cgiH := &cgi.Handler{
		Path:   backend,
		Stderr: io.Discard,
		Env: []string{
			"GIT_PROJECT_ROOT=" + g.Root,
			"GIT_HTTP_EXPORT_ALL=1",
			"HOME=" + home,
			"PATH=" + os.Getenv("PATH"),
		},
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	g.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		g.mu.Lock()
		g.auth = append(g.auth, got)
		g.mu.Unlock()
		if token != "" && got != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		// owner/name.git is owner/name, as on GitHub.
		r.URL.Path = strings.Replace(r.URL.Path, ".git/", "/", 1)
		cgiH.ServeHTTP(w, r)
	}))
	t.Cleanup(g.hs.Close)
	g.URL = g.hs.URL
	_, port, _ := net.SplitHostPort(g.hs.Listener.Addr().String())
	g.BoxURL = "http://" + HostAlias + ":" + port
	return g
}

// Repo makes the bare repository owner/name with one commit on main that
// holds files, accepting pushes, and returns its directory.
func (g *Git) Repo(t testing.TB, fullName string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	run(t, work, "git", "init", "-q", "-b", "main")
	writeFiles(t, work, files)
	run(t, work, "git", "add", "-A")
	gitCommit(t, work, "initial commit")
	bare := filepath.Join(g.Root, filepath.FromSlash(fullName))
	run(t, "", "git", "clone", "-q", "--bare", work, bare)
	run(t, bare, "git", "config", "http.receivepack", "true")
	return bare
}

// Commit adds a commit with files to branch of the bare repository, as
// someone else pushing would, and returns its SHA.
func (g *Git) Commit(t testing.TB, fullName, branch, msg string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	bare := filepath.Join(g.Root, filepath.FromSlash(fullName))
	run(t, "", "git", "clone", "-q", "--branch", branch, bare, work)
	writeFiles(t, work, files)
	run(t, work, "git", "add", "-A")
	gitCommit(t, work, msg)
	run(t, work, "git", "push", "-q", "origin", branch)
	return strings.TrimSpace(run(t, work, "git", "rev-parse", "HEAD"))
}

// Branch makes branch at main's commit in the bare repository.
func (g *Git) Branch(t testing.TB, fullName, branch string) {
	t.Helper()
	g.Run(t, fullName, "branch", branch, "main")
}

// Run runs git in the bare repository owner/name and returns its output.
func (g *Git) Run(t testing.TB, fullName string, args ...string) string {
	t.Helper()
	return run(t, filepath.Join(g.Root, filepath.FromSlash(fullName)), "git", args...)
}

// Branches returns the branches of the bare repository owner/name and
// their commits. It may be called from any goroutine.
func (g *Git) Branches(fullName string) (map[string]string, error) {
	cmd := exec.Command("git", "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
	cmd.Dir = filepath.Join(g.Root, filepath.FromSlash(fullName))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git for-each-ref in %s: %w", fullName, err)
	}
	branches := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if name, sha, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			branches[name] = sha
		}
	}
	return branches, nil
}

// Authorizations returns the Authorization header of every request so
// far, in order.
func (g *Git) Authorizations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.auth...)
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func gitCommit(t testing.TB, dir, msg string) {
	t.Helper()
	run(t, dir, "git", "-c", "user.name=Someone Else", "-c", "user.email=else@example.com", "commit", "-q", "--allow-empty", "-m", msg)
}

func run(t testing.TB, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Request is one request the GitHub stand-in received.
type Request struct {
	Method        string
	Path          string // unescaped
	Query         string
	Authorization string
	Body          []byte
}

// GitHub stands in for the GitHub REST API: repositories, pull requests,
// issues, git refs, trees and commits, and the contents API. Every call
// needs "Bearer token" (or "token token"); pull requests, issues and
// uploaded files are kept in memory.
type GitHub struct {
	// URL is the API's base URL: set it as boxd's GitHubAPIURL.
	URL string
	// Web is the base of the html_url links it answers.
	Web string
	// DefaultBranch is what GET /repos/{o}/{r} reports (main).
	DefaultBranch string

	token string
	hs    *httptest.Server

	mu       sync.Mutex
	reqs     []Request
	refs     map[string]string // "o/r refs/heads/x" -> sha
	files    map[string][]byte // "o/r branch path" -> content
	pulls    map[string][]map[string]any
	issues   map[string]int
	seq      int
	failPath *regexp.Regexp
}

// NewGitHub starts a GitHub API stand-in that accepts token. It stops at
// the end of the test.
func NewGitHub(t testing.TB, token string) *GitHub {
	t.Helper()
	gh := &GitHub{token: token, DefaultBranch: "main", Web: "https://github.test",
		refs: map[string]string{}, files: map[string][]byte{}, pulls: map[string][]map[string]any{}, issues: map[string]int{}}
	gh.hs = httptest.NewServer(http.HandlerFunc(gh.serve))
	t.Cleanup(gh.hs.Close)
	gh.URL = gh.hs.URL
	return gh
}

// FailUploads makes contents API uploads whose path matches re fail with
// 500 (nil: none fail).
func (gh *GitHub) FailUploads(re *regexp.Regexp) {
	gh.mu.Lock()
	gh.failPath = re
	gh.mu.Unlock()
}

// Requests returns the requests received so far.
func (gh *GitHub) Requests() []Request {
	gh.mu.Lock()
	defer gh.mu.Unlock()
	return append([]Request(nil), gh.reqs...)
}

// File returns a file uploaded with the contents API to branch of
// owner/name (nil if there is none).
func (gh *GitHub) File(fullName, branch, path string) []byte {
	gh.mu.Lock()
	defer gh.mu.Unlock()
	return gh.files[fullName+" "+branch+" "+path]
}

var (
	repoPath     = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)$`)
	pullsPath    = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/pulls$`)
	issuesPath   = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/issues$`)
	refPath      = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/git/ref/(.+)$`)
	refsPath     = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/git/refs$`)
	objPath      = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/git/(trees|commits)$`)
	contentsPath = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/contents/(.+)$`)
)

func (gh *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	gh.mu.Lock()
	defer gh.mu.Unlock()
	gh.reqs = append(gh.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Authorization: r.Header.Get("Authorization"), Body: body})
	if a := r.Header.Get("Authorization"); a != "Bearer "+gh.token && a != "token "+gh.token {
		reply(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return
	}
	var in map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			reply(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
			return
		}
	}
	p := r.URL.Path
	str := func(k string) string { s, _ := in[k].(string); return s }
	var m []string
	is := func(method string, re *regexp.Regexp) bool {
		if r.Method != method {
			return false
		}
		m = re.FindStringSubmatch(p)
		return m != nil
	}
	switch {
	case is(http.MethodGet, repoPath):
		reply(w, http.StatusOK, map[string]any{"full_name": m[1] + "/" + m[2], "default_branch": gh.DefaultBranch})
	case is(http.MethodPost, pullsPath):
		repo := m[1] + "/" + m[2]
		if str("title") == "" || str("head") == "" || str("base") == "" {
			reply(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []any{map[string]any{"field": "head", "code": "missing_field"}}})
			return
		}
		for _, pr := range gh.pulls[repo] {
			if pr["head"].(map[string]any)["ref"] == str("head") {
				reply(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []any{map[string]any{"message": "A pull request already exists for " + m[1] + ":" + str("head") + "."}}})
				return
			}
		}
		gh.seq++
		pr := map[string]any{"number": gh.seq, "title": str("title"), "body": str("body"), "html_url": fmt.Sprintf("%s/%s/pull/%d", gh.Web, repo, gh.seq),
			"head": map[string]any{"ref": str("head")}, "base": map[string]any{"ref": str("base")}, "state": "open"}
		gh.pulls[repo] = append(gh.pulls[repo], pr)
		reply(w, http.StatusCreated, pr)
	case is(http.MethodGet, pullsPath):
		_, head, _ := strings.Cut(r.URL.Query().Get("head"), ":")
		out := []any{}
		for _, pr := range gh.pulls[m[1]+"/"+m[2]] {
			if head == "" || pr["head"].(map[string]any)["ref"] == head {
				out = append(out, pr)
			}
		}
		reply(w, http.StatusOK, out)
	case is(http.MethodPost, issuesPath):
		if str("title") == "" {
			reply(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed"})
			return
		}
		gh.seq++
		reply(w, http.StatusCreated, map[string]any{"number": gh.seq, "title": str("title"), "body": str("body"),
			"html_url": fmt.Sprintf("%s/%s/%s/issues/%d", gh.Web, m[1], m[2], gh.seq)})
	case is(http.MethodGet, refPath):
		sha, ok := gh.refs[m[1]+"/"+m[2]+" refs/"+m[3]]
		if !ok {
			reply(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
		reply(w, http.StatusOK, map[string]any{"ref": "refs/" + m[3], "object": map[string]any{"sha": sha, "type": "commit"}})
	case is(http.MethodPost, objPath):
		gh.seq++
		reply(w, http.StatusCreated, map[string]any{"sha": fmt.Sprintf("%040d", gh.seq)})
	case is(http.MethodPost, refsPath):
		key := m[1] + "/" + m[2] + " " + str("ref")
		if _, ok := gh.refs[key]; ok {
			reply(w, http.StatusUnprocessableEntity, map[string]any{"message": "Reference already exists"})
			return
		}
		gh.refs[key] = str("sha")
		reply(w, http.StatusCreated, map[string]any{"ref": str("ref"), "object": map[string]any{"sha": str("sha")}})
	case is(http.MethodPut, contentsPath):
		branch := str("branch")
		if branch == "" {
			branch = gh.DefaultBranch
		}
		if _, ok := gh.refs[m[1]+"/"+m[2]+" refs/heads/"+branch]; !ok && branch != gh.DefaultBranch {
			reply(w, http.StatusNotFound, map[string]any{"message": "Branch " + branch + " not found"})
			return
		}
		if gh.failPath != nil && gh.failPath.MatchString(m[3]) {
			reply(w, http.StatusInternalServerError, map[string]any{"message": "Server Error"})
			return
		}
		data, err := base64.StdEncoding.DecodeString(str("content"))
		if err != nil || str("message") == "" {
			reply(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid request"})
			return
		}
		gh.files[m[1]+"/"+m[2]+" "+branch+" "+m[3]] = data
		reply(w, http.StatusCreated, map[string]any{"content": map[string]any{
			"path":         m[3],
			"html_url":     fmt.Sprintf("%s/%s/%s/blob/%s/%s", gh.Web, m[1], m[2], branch, m[3]),
			"download_url": fmt.Sprintf("https://raw.github.test/%s/%s/%s/%s", m[1], m[2], branch, m[3]),
		}})
	default:
		reply(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
}

func reply(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
