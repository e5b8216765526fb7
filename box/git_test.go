package box

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/gen"
)

// TestGitWire checks what each Git call sends, from a box whose working
// directory is /workspace/home/app, and how it reads the answers,
// against a fake server.
func TestGitWire(t *testing.T) {
	t.Parallel()
	type sent struct {
		Method, Path, Query string
		Body                map[string]any
	}
	var (
		mu   sync.Mutex
		reqs []sent
	)
	answers := map[string]string{
		"POST /v2/box/box-1/git/clone":        `{"message":"Repository cloned"}`,
		"GET /v2/box/box-1/git/status":        `{"status":" M a.go\n"}`,
		"GET /v2/box/box-1/git/diff":          `{"diff":"+x\n"}`,
		"POST /v2/box/box-1/git/commit":       `{"sha":"abc","message":"m"}`,
		"POST /v2/box/box-1/git/push":         `{}`,
		"POST /v2/box/box-1/git/checkout":     `{}`,
		"POST /v2/box/box-1/git/create-pr":    `{"url":"https://github.com/o/r/pull/42","number":42,"title":"T","base":"main","warning":"w"}`,
		"POST /v2/box/box-1/git/create-issue": `{"url":"https://github.com/o/r/issues/7","number":7,"title":"I"}`,
		"PUT /v2/box/box-1/config/git":        `{"git_user_name":"Bot","git_user_email":"bot@example.com"}`,
	}
	execAnswer := `{"output":"fatal: bad\n","exit_code":128}`
	headAnswer := `{"output":"main\n","exit_code":0}` // git symbolic-ref HEAD
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		reqs = append(reqs, sent{r.Method, r.URL.Path, r.URL.RawQuery, body})
		mu.Unlock()
		key := r.Method + " " + r.URL.Path
		if key == "POST /v2/box/box-1/git/exec" {
			if args, _ := body["args"].([]any); len(args) > 0 && args[0] == "symbolic-ref" {
				_, _ = io.WriteString(w, headAnswer)
				return
			}
			_, _ = io.WriteString(w, execAnswer)
			return
		}
		a, ok := answers[key]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, a)
	}))
	t.Cleanup(ts.Close)
	c := pollClient(t, ts.URL)
	b := c.newBox(&gen.BoxData{ID: "box-1"})
	b.st.gitToken = "ghp_tok"
	b.wd.set("/workspace/home/app")
	ctx := t.Context()

	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	check("Clone", b.Git.Clone(ctx, &CloneParams{Repo: "o/r", Branch: "dev", Depth: 1, Folder: "dest"}))
	check("Clone without Folder", b.Git.Clone(ctx, &CloneParams{Repo: "https://github.com/o/lib.git/"}))
	check("Clone into an absolute Folder", b.Git.Clone(ctx, &CloneParams{Repo: "o/r", Folder: "/tmp/x/../y"}))
	check("Clone with Directory", b.Git.Clone(ctx, &CloneParams{Repo: "o/r", Directory: "../old"}))
	check("Clone with Folder and the same Directory", b.Git.Clone(ctx, &CloneParams{Repo: "o/r", Folder: "d", Directory: "d"}))
	st, err := b.Git.Status(ctx)
	check("Status", err)
	d, err := b.Git.Diff(ctx)
	check("Diff", err)
	cm, err := b.Git.Commit(ctx, &CommitParams{Message: "m", AuthorName: "Jane"})
	check("Commit", err)
	check("Push", b.Git.Push(ctx, nil))
	check("Push branch", b.Git.Push(ctx, &PushParams{Branch: "feat"}))
	check("Checkout", b.Git.Checkout(ctx, "feat"))
	pr, err := b.Git.CreatePR(ctx, &PRParams{Title: "T", Attach: []string{"a.png#alt"}})
	check("CreatePR", err)
	is, err := b.Git.CreateIssue(ctx, &IssueParams{Title: "I", Body: "b"})
	check("CreateIssue", err)
	gc, err := b.Git.UpdateConfig(ctx, &GitConfigParams{UserName: "Bot"})
	check("UpdateConfig", err)
	ex, err := b.Git.Exec(ctx, []string{"log", "-1"})
	check("Exec", err)
	execAnswer = `{"output":"ok\n"}` // a server that does not report the exit code
	ex2, err := b.Git.Exec(ctx, []string{"status"})
	check("Exec without exit_code", err)

	got := []any{st, d, cm, pr, is, gc, ex, ex2}
	want := []any{" M a.go\n", "+x\n", GitCommitResult{SHA: "abc", Message: "m"},
		PullRequest{URL: "https://github.com/o/r/pull/42", Number: 42, Title: "T", Base: "main", Warning: "w"},
		Issue{URL: "https://github.com/o/r/issues/7", Number: 7, Title: "I"},
		GitConfig{UserName: "Bot", UserEmail: "bot@example.com"},
		GitExecResult{Output: "fatal: bad\n", ExitCode: 128}, GitExecResult{Output: "ok\n", ExitCode: -1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}

	f := "app"
	wantReqs := []sent{
		{"POST", "/v2/box/box-1/git/clone", "", map[string]any{"repo": "o/r", "branch": "dev", "depth": 1.0, "github_token": "ghp_tok", "folder": "/workspace/home/app/dest"}},
		{"POST", "/v2/box/box-1/git/clone", "", map[string]any{"repo": "https://github.com/o/lib.git/", "github_token": "ghp_tok", "folder": "/workspace/home/app/lib"}},
		{"POST", "/v2/box/box-1/git/clone", "", map[string]any{"repo": "o/r", "github_token": "ghp_tok", "folder": "/tmp/y"}},
		{"POST", "/v2/box/box-1/git/clone", "", map[string]any{"repo": "o/r", "github_token": "ghp_tok", "folder": "/workspace/home/old"}},
		{"POST", "/v2/box/box-1/git/clone", "", map[string]any{"repo": "o/r", "github_token": "ghp_tok", "folder": "/workspace/home/app/d"}},
		{"GET", "/v2/box/box-1/git/status", "folder=app", nil},
		{"GET", "/v2/box/box-1/git/diff", "folder=app", nil},
		{"POST", "/v2/box/box-1/git/commit", "", map[string]any{"message": "m", "author_name": "Jane", "folder": f}},
		{"POST", "/v2/box/box-1/git/exec", "", map[string]any{"args": []any{"symbolic-ref", "--quiet", "--short", "HEAD"}, "folder": f}},
		{"POST", "/v2/box/box-1/git/push", "", map[string]any{"branch": "main", "folder": f}},
		{"POST", "/v2/box/box-1/git/push", "", map[string]any{"branch": "feat", "folder": f}},
		{"POST", "/v2/box/box-1/git/checkout", "", map[string]any{"branch": "feat", "folder": f}},
		{"POST", "/v2/box/box-1/git/create-pr", "", map[string]any{"title": "T", "attach": []any{"a.png#alt"}, "folder": f}},
		{"POST", "/v2/box/box-1/git/create-issue", "", map[string]any{"title": "I", "body": "b", "folder": f}},
		{"PUT", "/v2/box/box-1/config/git", "", map[string]any{"git_user_name": "Bot"}},
		{"POST", "/v2/box/box-1/git/exec", "", map[string]any{"args": []any{"log", "-1"}, "folder": f}},
		{"POST", "/v2/box/box-1/git/exec", "", map[string]any{"args": []any{"status"}, "folder": f}},
	}
	take := func() []sent {
		mu.Lock()
		defer mu.Unlock()
		out := reqs
		reqs = nil
		return out
	}
	if diff := cmp.Diff(wantReqs, take()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}

	// Push without a branch on a detached HEAD: ErrDetachedHead, and
	// nothing is pushed. Where git cannot tell (outside a repository), the
	// push goes without a branch and the server says what is wrong.
	headAnswer = `{"output":"","exit_code":1}`
	if err := b.Git.Push(ctx, nil); !errors.Is(err, ErrDetachedHead) {
		t.Errorf("Push on a detached HEAD = %v, want ErrDetachedHead", err)
	}
	headAnswer = `{"output":"fatal: not a git repository\n","exit_code":128}`
	check("Push outside a repository", b.Git.Push(ctx, &PushParams{}))
	symref := sent{"POST", "/v2/box/box-1/git/exec", "", map[string]any{"args": []any{"symbolic-ref", "--quiet", "--short", "HEAD"}, "folder": f}}
	if diff := cmp.Diff([]sent{symref, symref, {"POST", "/v2/box/box-1/git/push", "", map[string]any{"folder": f}}}, take()); diff != "" {
		t.Errorf("requests of Push without a current branch (-want +got):\n%s", diff)
	}

	// At /workspace/home no folder is sent, and without a token no
	// github_token.
	b2 := c.newBox(&gen.BoxData{ID: "box-1"})
	check("Clone at home", b2.Git.Clone(ctx, &CloneParams{Repo: "o/r"}))
	_, err = b2.Git.Status(ctx)
	check("Status at home", err)
	if diff := cmp.Diff([]sent{
		{"POST", "/v2/box/box-1/git/clone", "", map[string]any{"repo": "o/r"}},
		{"GET", "/v2/box/box-1/git/status", "", nil},
	}, take()); diff != "" {
		t.Errorf("requests at /workspace/home (-want +got):\n%s", diff)
	}
}

func TestGitClientChecks(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request was sent: %s %s", r.Method, r.URL.Path)
	}))
	t.Cleanup(ts.Close)
	b := pollClient(t, ts.URL).newBox(&gen.BoxData{ID: "box-1"})
	ctx := t.Context()
	for what, err := range map[string]error{
		"Clone(nil)":                          b.Git.Clone(ctx, nil),
		"Clone(no repo)":                      b.Git.Clone(ctx, &CloneParams{Branch: "x"}),
		"Clone(depth < 0)":                    b.Git.Clone(ctx, &CloneParams{Repo: "o/r", Depth: -1}),
		"Clone(Folder and another Directory)": b.Git.Clone(ctx, &CloneParams{Repo: "o/r", Folder: "a", Directory: "b"}),
		"Checkout(\"\")":                      b.Git.Checkout(ctx, " "),
		"Commit(nil)":                         gitErrOnly(b.Git.Commit(ctx, nil)),
		"CreatePR(no title)":                  gitErrOnly(b.Git.CreatePR(ctx, &PRParams{Body: "x"})),
		"CreateIssue(nil)":                    gitErrOnly(b.Git.CreateIssue(ctx, nil)),
		"UpdateConfig({})":                    gitErrOnly(b.Git.UpdateConfig(ctx, &GitConfigParams{})),
		"Exec()":                              gitErrOnly(b.Git.Exec(ctx, nil)),
	} {
		if err == nil {
			t.Errorf("%s: want an error", what)
		}
	}
}

// gitErrOnly keeps the error of a call that also returns a value.
func gitErrOnly[T any](_ T, err error) error { return err }

func TestRepoDirName(t *testing.T) {
	t.Parallel()
	for repo, want := range map[string]string{
		"owner/repo":                       "repo",
		"https://github.com/acme/lib":      "lib",
		"https://github.com/acme/lib.git":  "lib",
		"https://github.com/acme/lib.git/": "lib",
		"https://github.com/acme/lib/.git": "lib",
		"github.com/acme/lib/":             "lib",
		"git@github.com:acme/lib.git":      "lib",
		"git@host:lib.git":                 "lib",
		" acme/spaced ":                    "spaced",
		"https://github.com/":              "github.com",
		"..":                               "",
		"/":                                "",
		".git":                             "",
	} {
		if got := repoDirName(repo); got != want {
			t.Errorf("repoDirName(%q) = %q, want %q", repo, got, want)
		}
	}
}
