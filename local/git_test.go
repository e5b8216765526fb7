package local_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/gittest"
	"github.com/upstash/box-go/local"
)

const wireToken = "ghp_wireTestToken_0123456789ABCDEFG"

// lockedBuffer is a bytes.Buffer safe for boxd's concurrent logging.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGitWire checks the git routes' JSON as the official 0.5.5 client
// sends and reads it: `folder` relative, absolute or absent, github_token
// in the clone body (and remembered), exec's exit_code, the errors, and
// that the token is in no answer and no log.
func TestGitWire(t *testing.T) {
	t.Parallel()
	g := gittest.NewGit(t, wireToken)
	g.Repo(t, "acme/wire", map[string]string{"README.md": "one\n"})
	g.Branch(t, "acme/wire", "other")
	g.Commit(t, "acme/wire", "other", "other readme", map[string]string{"README.md": "other\n"})
	var logs lockedBuffer
	srv := boxtest.NewServer(t,
		boxtest.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		boxtest.WithConfig(func(c *local.Config) { c.GitHubURL = g.BoxURL }))
	c := rawFor(t, srv)
	id := newBox(t, srv, nil).ID()
	p := "/v2/box/" + id
	var answers []string
	do := func(method, path string, body any) response {
		t.Helper()
		r := c.do(method, path, body, nil)
		answers = append(answers, string(r.body))
		return r
	}
	wantJSON := func(what string, r response, want map[string]any) {
		t.Helper()
		wantOK(t, what, r)
		got := jsonObject(t, r)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %#v, want %#v (body %s)", what, k, got[k], v, r.body)
			}
		}
	}
	// The 0.5.5 SDK sends its working directory as folder; there is a
	// file in it, as there is in a working directory that holds work.
	wantOK(t, "mkdir", do("POST", p+"/exec", execBody("mkdir -p work /tmp/abs && echo notes > work/notes.txt")))

	// Outside a repository: status and diff are empty, exec reports 128.
	wantJSON("status at the root", do("GET", p+"/git/status", nil), map[string]any{"status": ""})
	wantJSON("diff at the root", do("GET", p+"/git/diff", nil), map[string]any{"diff": ""})
	wantJSON("exec at the root", do("POST", p+"/git/exec", map[string]any{"args": []string{"status"}}), map[string]any{"exit_code": 128.0})

	// The JS SDK 0.5.5's clone: token in the body, folder relative.
	wantOK(t, "clone", do("POST", p+"/git/clone", map[string]any{"repo": "acme/wire", "github_token": wireToken, "folder": "work"}))
	for _, f := range []string{"work/wire", "/workspace/home/work/wire"} {
		wantJSON("status in "+f, do("GET", p+"/git/status?folder="+url.QueryEscape(f), nil), map[string]any{"status": ""})
		wantJSON("exec in "+f, do("POST", p+"/git/exec", map[string]any{"args": []string{"rev-parse", "--abbrev-ref", "HEAD"}, "folder": f}),
			map[string]any{"output": "main\n", "exit_code": 0.0})
	}
	// The token given with the clone is the box's now: a later exec
	// (ls-remote) is authenticated without one.
	wantJSON("ls-remote with the remembered token", do("POST", p+"/git/exec", map[string]any{"args": []string{"ls-remote", "--heads", "origin", "other"}, "folder": "work/wire"}),
		map[string]any{"exit_code": 0.0})
	wantOK(t, "clone into an absolute folder", do("POST", p+"/git/clone", map[string]any{"repo": g.BoxURL + "/acme/wire", "folder": "/tmp/abs", "directory": "copy"}))
	wantJSON("the absolute clone", do("POST", p+"/git/exec", map[string]any{"args": []string{"rev-parse", "--show-toplevel"}, "folder": "/tmp/abs/copy"}),
		map[string]any{"output": "/tmp/abs/copy\n", "exit_code": 0.0})

	wantError(t, "commit without a message", do("POST", p+"/git/commit", map[string]any{"folder": "work/wire"}), http.StatusBadRequest, "message")
	wantError(t, "commit of nothing", do("POST", p+"/git/commit", map[string]any{"message": "x", "folder": "work/wire"}), http.StatusConflict, "nothing to commit")
	wantError(t, "commit with a two-line author", do("POST", p+"/git/commit", map[string]any{"message": "x", "author_name": "a\nb", "folder": "work/wire"}), http.StatusBadRequest, "author_name")
	wantError(t, "commit outside a repository", do("POST", p+"/git/commit", map[string]any{"message": "x"}), http.StatusBadRequest, "/workspace/home is not in a git repository")
	wantError(t, "checkout without a branch", do("POST", p+"/git/checkout", map[string]any{"folder": "work/wire"}), http.StatusBadRequest, "branch")
	wantError(t, "checkout of an option", do("POST", p+"/git/checkout", map[string]any{"branch": "--orphan", "folder": "work/wire"}), http.StatusBadRequest, "branch")
	wantError(t, "exec without args", do("POST", p+"/git/exec", map[string]any{"args": []string{}}), http.StatusBadRequest, "args")
	wantError(t, "git-config without a field", do("PUT", p+"/git-config", map[string]any{}), http.StatusBadRequest, "git_user_name")
	wantError(t, "config/git without a field", do("PUT", p+"/config/git", map[string]any{}), http.StatusBadRequest, "git_user_name")
	wantError(t, "config/git of an unknown box", do("PUT", "/v2/box/box-nosuchbox00/config/git", map[string]any{"git_user_name": "x"}), http.StatusNotFound, "box not found")
	wantError(t, "clone without a repo", do("POST", p+"/git/clone", map[string]any{}), http.StatusBadRequest, "repo")
	wantError(t, "clone with depth 0", do("POST", p+"/git/clone", map[string]any{"repo": "acme/wire", "depth": 0}), http.StatusBadRequest, "depth")
	wantError(t, "status in a missing folder", do("GET", p+"/git/status?folder=nope", nil), http.StatusBadRequest, "does not exist")
	wantError(t, "push outside a repository", do("POST", p+"/git/push", map[string]any{}), http.StatusBadRequest, "not in a git repository")
	wantError(t, "pull request without a title", do("POST", p+"/git/create-pr", map[string]any{"title": " "}), http.StatusBadRequest, "title")
	wantError(t, "issue outside a repository", do("POST", p+"/git/create-issue", map[string]any{"title": "x"}), http.StatusBadRequest, "not in a git repository")
	wantError(t, "unknown box", do("GET", "/v2/box/box-nosuchbox00/git/status", nil), http.StatusNotFound, "box not found")

	// A token written into the URL is not repeated in the error.
	leaky := strings.Replace(g.BoxURL, "http://", "http://x-access-token:"+wireToken+"@", 1) + "/acme/missing"
	wantError(t, "clone of a missing repository", do("POST", p+"/git/clone", map[string]any{"repo": leaky, "folder": "work"}), http.StatusBadRequest, "not found", "***")

	// Local changes that a checkout would lose: 409, and nothing moves.
	wantOK(t, "edit", do("POST", p+"/files/write", map[string]any{"path": "/workspace/home/work/wire/README.md", "content": "mine\n"}))
	wantError(t, "checkout over local changes", do("POST", p+"/git/checkout", map[string]any{"branch": "other", "folder": "work/wire"}), http.StatusConflict, "would be overwritten")
	wantJSON("branch after the refused checkout", do("POST", p+"/git/exec", map[string]any{"args": []string{"branch", "--show-current"}, "folder": "work/wire"}),
		map[string]any{"output": "main\n"})
	// A branch only on origin is created tracking it.
	wantOK(t, "discard", do("POST", p+"/git/exec", map[string]any{"args": []string{"checkout", "--", "README.md"}, "folder": "work/wire"}))
	wantOK(t, "checkout of a remote branch", do("POST", p+"/git/checkout", map[string]any{"branch": "other", "folder": "work/wire"}))
	wantJSON("its upstream", do("POST", p+"/git/exec", map[string]any{"args": []string{"rev-parse", "--abbrev-ref", "@{upstream}"}, "folder": "work/wire"}),
		map[string]any{"output": "origin/other\n"})

	// The git identity, at the path 0.5.5 calls (git-config) and at the
	// one the newest SDKs call (config/git), with the body they send:
	// each answers the whole identity, and omitted fields stay.
	wantJSON("git-config name", do("PUT", p+"/git-config", map[string]any{"git_user_name": "Ada"}), map[string]any{"git_user_name": "Ada", "git_user_email": ""})
	wantJSON("git-config email", do("PUT", p+"/git-config", map[string]any{"git_user_email": "ada@example.com"}), map[string]any{"git_user_name": "Ada", "git_user_email": "ada@example.com"})
	wantJSON("config/git name", do("PUT", p+"/config/git", map[string]any{"git_user_name": "Grace"}), map[string]any{"git_user_name": "Grace", "git_user_email": "ada@example.com"})
	wantJSON("config/git both", do("PUT", p+"/config/git", map[string]any{"git_user_name": "Grace Hopper", "git_user_email": "grace@example.com"}),
		map[string]any{"git_user_name": "Grace Hopper", "git_user_email": "grace@example.com"})
	wantJSON("the identity in the box", do("POST", p+"/git/exec", map[string]any{"args": []string{"config", "--global", "--get-regexp", "^user\\."}}),
		map[string]any{"output": "user.name Grace Hopper\nuser.email grace@example.com\n", "exit_code": 0.0})

	// A repository with no commit yet: the diff is against nothing.
	wantOK(t, "fresh repo", do("POST", p+"/exec", execBody("git init -q fresh && echo hello > fresh/a.txt && git -C fresh add a.txt")))
	r := do("GET", p+"/git/diff?folder=fresh", nil)
	wantOK(t, "diff of a fresh repository", r)
	if d, _ := jsonObject(t, r)["diff"].(string); !strings.Contains(d, "+hello") {
		t.Errorf("diff of a fresh repository = %q", d)
	}

	// Ephemeral boxes have no git.
	er := do("POST", "/v2/box", map[string]any{"ephemeral": true, "ttl": 600})
	wantOK(t, "ephemeral create", er)
	eid, _ := jsonObject(t, er)["id"].(string)
	wantError(t, "git on an ephemeral box", do("GET", "/v2/box/"+eid+"/git/status", nil), http.StatusBadRequest, "ephemeral")

	// The token is in no answer, no box log and no boxd log.
	var boxLogs struct {
		Logs []struct{ Message string } `json:"logs"`
	}
	lr := do("GET", p+"/logs", nil)
	if err := json.Unmarshal(lr.body, &boxLogs); err != nil {
		t.Fatal(err)
	}
	cloned := false
	for _, e := range boxLogs.Logs {
		cloned = cloned || strings.HasPrefix(e.Message, "git: cloned "+g.BoxURL)
	}
	if !cloned {
		t.Errorf("the box's log does not record the clone: %s", lr.body)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + wireToken))
	for _, s := range append(answers, logs.String()) {
		if strings.Contains(s, wireToken) || strings.Contains(s, basic) {
			t.Errorf("the token leaked: %s", s)
		}
	}
}

// TestGitCloneFolder checks clone's folder as both generations of the
// official SDK send it: the newest sends the destination, 0.5.5 its
// working directory (an existing directory with files in it), and a
// destination that exists already is a 409 that changes nothing.
func TestGitCloneFolder(t *testing.T) {
	t.Parallel()
	g := gittest.NewGit(t, wireToken)
	g.Repo(t, "acme/wire", map[string]string{"README.md": "wire\n"})
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) { c.GitHubURL = g.BoxURL }))
	c := rawFor(t, srv)
	id := newBox(t, srv, &box.CreateParams{Git: &box.GitOptions{Token: wireToken}}).ID()
	p := "/v2/box/" + id
	clone := func(body map[string]any) response {
		t.Helper()
		body["repo"] = "acme/wire"
		body["github_token"] = wireToken
		return c.do("POST", p+"/git/clone", body, nil)
	}
	// toplevel is the repository folder is in, or what git says.
	toplevel := func(folder string) string {
		t.Helper()
		r := c.do("POST", p+"/git/exec", map[string]any{"args": []string{"rev-parse", "--show-toplevel"}, "folder": folder}, nil)
		wantOK(t, "rev-parse in "+folder, r)
		out, _ := jsonObject(t, r)["output"].(string)
		return strings.TrimSpace(out)
	}
	sh := func(script string) string {
		t.Helper()
		return decodeExec(t, script, c.do("POST", p+"/exec", execBody(script), nil)).Output
	}
	sh("mkdir -p empty proj && echo mine > proj/keep.txt && mkdir -p /tmp/taken && echo mine > /tmp/taken/keep.txt")

	// The newest SDK: folder is the destination, relative, absolute (its
	// parents made), or an empty directory.
	for _, tc := range []struct{ folder, want string }{
		{"app", "/workspace/home/app"},
		{"/tmp/deep/er/app", "/tmp/deep/er/app"},
		{"/workspace/home/empty", "/workspace/home/empty"},
	} {
		wantOK(t, "clone into "+tc.folder, clone(map[string]any{"folder": tc.folder}))
		if got := toplevel(tc.want); got != tc.want {
			t.Errorf("clone with folder %s: the repository is at %q, want %s", tc.folder, got, tc.want)
		}
	}
	// 0.5.5: folder is the working directory, with files in it; the clone
	// goes into a directory named after the repository there.
	wantOK(t, "0.5.5 clone in proj", clone(map[string]any{"folder": "proj"}))
	if got := toplevel("proj/wire"); got != "/workspace/home/proj/wire" {
		t.Errorf("0.5.5 clone in proj: the repository is at %q, want /workspace/home/proj/wire", got)
	}
	// Without folder: /workspace/home/wire, as git names it.
	wantOK(t, "clone without folder", clone(map[string]any{}))
	if got := toplevel("wire"); got != "/workspace/home/wire" {
		t.Errorf("clone without folder: the repository is at %q", got)
	}

	// The same clone again, however its folder is named, is a 409 and
	// leaves what is there alone: the repository's own name, another
	// name (its origin is this repository), a 0.5.5 working directory
	// that holds the clone already, and no folder.
	sh("echo local change >> app/README.md && echo local change >> wire/README.md")
	for _, folder := range []string{"wire", "/workspace/home/wire", "app", "proj", ""} {
		body := map[string]any{}
		if folder != "" {
			body["folder"] = folder
		}
		wantError(t, "clone again into "+folder, clone(body), http.StatusConflict, "already exists")
	}
	for f, want := range map[string]string{"app/README.md": "wire\nlocal change\n", "wire/README.md": "wire\nlocal change\n", "proj/keep.txt": "mine\n"} {
		if got := sh("cat " + f); got != want {
			t.Errorf("%s after the refused clones = %q, want %q", f, got, want)
		}
	}
	if got := sh("for d in proj/wire/wire app/wire wire/wire; do test -e $d && echo $d; done; true"); got != "" {
		t.Errorf("a refused clone nested a repository: %q", got)
	}
	// An existing folder of another repository is a 0.5.5 working
	// directory; a file in the way is a 409.
	sh("touch afile")
	wantError(t, "clone onto a file", clone(map[string]any{"folder": "afile"}), http.StatusConflict, "already exists")
	wantOK(t, "0.5.5 clone in /tmp/taken", clone(map[string]any{"folder": "/tmp/taken"}))
	if got := toplevel("/tmp/taken/wire"); got != "/tmp/taken/wire" {
		t.Errorf("0.5.5 clone with an absolute folder: the repository is at %q", got)
	}
	wantError(t, "clone with a folder of two lines", clone(map[string]any{"folder": "a\nb"}), http.StatusBadRequest, "folder")

	// box-go's directory: folder is the working directory.
	wantOK(t, "clone with directory", clone(map[string]any{"folder": "proj", "directory": "sub"}))
	if got := toplevel("proj/sub"); got != "/workspace/home/proj/sub" {
		t.Errorf("clone with folder and directory: the repository is at %q", got)
	}
}
