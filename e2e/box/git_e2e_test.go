package box_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/gittest"
	"github.com/upstash/box-go/local"
)

// gitToken is the token the loopback git server and GitHub stand-in
// accept.
const gitToken = "ghs_boxdGitTestToken0123456789abcdef"

// gitEnv is boxd with its GitHub pointed at a loopback git server (for
// git) and a GitHub API stand-in (for pull requests and issues).
type gitEnv struct {
	srv *boxtest.Server
	git *gittest.Git
	gh  *gittest.GitHub
	// seen collects every text a git call returned, to check that the
	// token is in none.
	seen []string
}

func newGitEnv(t *testing.T) *gitEnv {
	t.Helper()
	e := &gitEnv{git: gittest.NewGit(t, gitToken), gh: gittest.NewGitHub(t, gitToken)}
	e.srv = boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.GitHubURL = e.git.BoxURL
		c.GitHubAPIURL = e.gh.URL
	}))
	t.Cleanup(func() {
		for _, s := range e.seen {
			if leaks(s) {
				t.Errorf("a git call returned the token: %q", s)
			}
		}
	})
	return e
}

// leaks reports text that holds the token, raw or in its Basic form.
func leaks(s string) bool {
	return strings.Contains(s, gitToken) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte("x-access-token:"+gitToken)))
}

func (e *gitEnv) note(s string) string { e.seen = append(e.seen, s); return s }

// exec runs git in the box and fails the test if the call fails.
func (e *gitEnv) exec(t *testing.T, b *box.Box, args ...string) box.GitExecResult {
	t.Helper()
	r, err := b.Git.Exec(t.Context(), args)
	if err != nil {
		t.Fatalf("Git.Exec(%q): %v", args, err)
	}
	e.note(r.Output)
	return r
}

// out runs git in the box and returns its trimmed output, failing the
// test unless git exits 0.
func (e *gitEnv) out(t *testing.T, b *box.Box, args ...string) string {
	t.Helper()
	r := e.exec(t, b, args...)
	if r.ExitCode != 0 {
		t.Fatalf("git %s: exit %d: %s", strings.Join(args, " "), r.ExitCode, r.Output)
	}
	return strings.TrimSpace(r.Output)
}

// apiError checks that err is a *box.Error with status and a message
// that contains want, and that it does not hold the token.
func (e *gitEnv) apiError(t *testing.T, what string, err error, status int, want string) {
	t.Helper()
	var ae *box.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%s: want a *box.Error %d, got %v", what, status, err)
	}
	e.note(ae.Message)
	t.Logf("%s: %d %s", what, ae.StatusCode, ae.Message)
	if ae.StatusCode != status || !strings.Contains(ae.Message, want) {
		t.Errorf("%s: got %d %q, want %d and a message with %q", what, ae.StatusCode, ae.Message, status, want)
	}
}

func (e *gitEnv) write(t *testing.T, b *box.Box, path, content string) {
	t.Helper()
	if err := b.Files.WriteText(t.Context(), path, content); err != nil {
		t.Fatalf("Files.WriteText(%s): %v", path, err)
	}
}

func TestGitWorkflow(t *testing.T) {
	t.Parallel()
	e := newGitEnv(t)
	ctx := t.Context()
	e.git.Repo(t, "acme/app", map[string]string{"README.md": "# app\n", "main.go": "package main\n"})
	b := newBox(t, e.srv, &box.CreateParams{Git: &box.GitOptions{Token: gitToken}})

	// At the workspace root there is no repository: status is empty, and
	// git exec reports git's own failure as a result.
	st, err := b.Git.Status(ctx)
	if err != nil || st != "" {
		t.Errorf("Status at the workspace root = %q, %v; want empty", st, err)
	}
	if r := e.exec(t, b, "status"); r.ExitCode != 128 || !strings.Contains(r.Output, "not a git repository") {
		t.Errorf("git status at the workspace root = %+v, want exit 128", r)
	}

	if err := b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/app"}); err != nil {
		t.Fatalf("Clone(acme/app): %v", err)
	}
	if err := b.Cd(ctx, "app"); err != nil {
		t.Fatalf("the clone is not in ./app: %v", err)
	}
	if got := e.out(t, b, "remote", "get-url", "origin"); got != e.git.BoxURL+"/acme/app" {
		t.Errorf("origin = %q, want the clean URL %q", got, e.git.BoxURL+"/acme/app")
	}
	cfg, err := b.Files.ReadText(ctx, ".git/config")
	if err != nil {
		t.Fatal(err)
	}
	if leaks(cfg) || strings.Contains(strings.ToLower(cfg), "extraheader") {
		t.Errorf(".git/config holds credentials:\n%s", cfg)
	}
	if got := e.git.Authorizations(); len(got) == 0 || got[len(got)-1] != "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:"+gitToken)) {
		t.Errorf("the git server was not sent the token: %q", got)
	}

	// Change, look, commit.
	e.write(t, b, "README.md", "# app\n\nchanged\n")
	e.write(t, b, "new.txt", "new\n")
	if st, err = b.Git.Status(ctx); err != nil || !strings.Contains(st, " M README.md") || !strings.Contains(st, "?? new.txt") {
		t.Errorf("Status = %q, %v", e.note(st), err)
	}
	if d, err := b.Git.Diff(ctx); err != nil || !strings.Contains(d, "+changed") || !strings.Contains(d, "README.md") {
		t.Errorf("Diff = %q, %v", e.note(d), err)
	}
	c1, err := b.Git.Commit(ctx, &box.CommitParams{Message: "docs: change the readme"})
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(c1.SHA) || c1.Message != "docs: change the readme" {
		t.Errorf("Commit = %+v", c1)
	}
	if got := e.out(t, b, "log", "-1", "--format=%an <%ae>|%s"); got != "Upstash Box <box@upstash.com>|docs: change the readme" {
		t.Errorf("the commit is %q, want boxd's default identity", got)
	}
	if st, _ := b.Git.Status(ctx); st != "" {
		t.Errorf("Status after Commit = %q, want clean (new.txt committed too)", st)
	}
	_, err = b.Git.Commit(ctx, &box.CommitParams{Message: "again"})
	e.apiError(t, "Commit with nothing to commit", err, http.StatusConflict, "nothing to commit")

	// Push the current branch: the bare repository on the host gets it.
	if err := b.Git.Push(ctx, nil); err != nil {
		t.Fatalf("Push: %v", err)
	}
	if got := strings.TrimSpace(e.git.Run(t, "acme/app", "rev-parse", "main")); got != c1.SHA {
		t.Errorf("the server's main is %s, want %s", got, c1.SHA)
	}

	// Checkout makes a new branch, and switches to an existing one.
	if err := b.Git.Checkout(ctx, "feature/login"); err != nil {
		t.Fatalf("Checkout(new branch): %v", err)
	}
	if got := e.out(t, b, "rev-parse", "--abbrev-ref", "HEAD"); got != "feature/login" {
		t.Errorf("branch = %q after Checkout(feature/login)", got)
	}
	e.write(t, b, "login.go", "package main\n")
	c2, err := b.Git.Commit(ctx, &box.CommitParams{Message: "feat: login", AuthorName: "Jane Doe", AuthorEmail: "jane@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.out(t, b, "log", "-1", "--format=%an <%ae>"); got != "Jane Doe <jane@example.com>" {
		t.Errorf("per-commit author = %q", got)
	}
	if err := b.Git.Push(ctx, &box.PushParams{Branch: "feature/login"}); err != nil {
		t.Fatalf("Push(feature/login): %v", err)
	}
	if got := strings.TrimSpace(e.git.Run(t, "acme/app", "rev-parse", "feature/login")); got != c2.SHA {
		t.Errorf("the server's feature/login is %s, want %s", got, c2.SHA)
	}
	if got := e.out(t, b, "rev-parse", "--abbrev-ref", "feature/login@{upstream}"); got != "origin/feature/login" {
		t.Errorf("upstream of feature/login = %q, want it set by the push", got)
	}
	if err := b.Git.Checkout(ctx, "main"); err != nil {
		t.Fatalf("Checkout(main): %v", err)
	}
	if got := e.out(t, b, "rev-parse", "HEAD"); got != c1.SHA {
		t.Errorf("main is at %s after Checkout(main), want %s", got, c1.SHA)
	}

	// The box-wide identity: on later commits and in the box's global
	// git configuration.
	gc, err := b.Git.UpdateConfig(ctx, &box.GitConfigParams{UserName: "Release Bot"})
	if err != nil || gc != (box.GitConfig{UserName: "Release Bot"}) {
		t.Errorf("UpdateConfig(name) = %+v, %v", gc, err)
	}
	gc, err = b.Git.UpdateConfig(ctx, &box.GitConfigParams{UserEmail: "bot@example.com"})
	if err != nil || gc != (box.GitConfig{UserName: "Release Bot", UserEmail: "bot@example.com"}) {
		t.Errorf("UpdateConfig(email) = %+v, %v", gc, err)
	}
	if got := e.out(t, b, "config", "--global", "user.email"); got != "bot@example.com" {
		t.Errorf("global user.email = %q", got)
	}
	if _, err := b.Git.UpdateConfig(ctx, &box.GitConfigParams{}); err == nil {
		t.Error("UpdateConfig with no field: want a client-side error")
	}

	// Someone else pushes to main: our push is refused, clearly.
	e.git.Commit(t, "acme/app", "main", "someone else's change", map[string]string{"other.txt": "x\n"})
	e.write(t, b, "mine.txt", "mine\n")
	if _, err := b.Git.Commit(ctx, &box.CommitParams{Message: "mine"}); err != nil {
		t.Fatal(err)
	}
	if got := e.out(t, b, "log", "-1", "--format=%an <%ae>"); got != "Release Bot <bot@example.com>" {
		t.Errorf("commit identity after UpdateConfig = %q", got)
	}
	err = b.Git.Push(ctx, nil)
	e.apiError(t, "Push behind the remote", err, http.StatusConflict, "non-fast-forward")
	// git exec has the token too: a pull brings the remote change in.
	if r := e.exec(t, b, "pull", "--no-rebase", "--no-edit"); r.ExitCode != 0 {
		t.Fatalf("git pull: %+v", r)
	}
	if err := b.Git.Push(ctx, nil); err != nil {
		t.Errorf("Push after pull: %v", err)
	}
	// A configuration dump shows no credential either.
	if r := e.exec(t, b, "config", "--list", "--show-origin"); strings.Contains(strings.ToLower(r.Output), "extraheader") && !strings.Contains(r.Output, "***") {
		t.Errorf("git config --list shows the credential unscrubbed: %s", r.Output)
	}

	// Client-side checks send nothing.
	if err := b.Git.Clone(ctx, &box.CloneParams{}); err == nil {
		t.Error("Clone without Repo: want an error")
	}
	if _, err := b.Git.Exec(ctx, nil); err == nil {
		t.Error("Exec without args: want an error")
	}
}

func TestGitClone(t *testing.T) {
	t.Parallel()
	e := newGitEnv(t)
	ctx := t.Context()
	e.git.Repo(t, "acme/lib", map[string]string{"lib.txt": "v1\n"})
	e.git.Commit(t, "acme/lib", "main", "second", map[string]string{"lib.txt": "v2\n"})
	e.git.Branch(t, "acme/lib", "dev")
	e.git.Commit(t, "acme/lib", "dev", "on dev", map[string]string{"dev.txt": "dev\n"})
	b := newBox(t, e.srv, &box.CreateParams{Git: &box.GitOptions{Token: gitToken}})

	for _, tc := range []struct {
		name   string
		params box.CloneParams
		dir    string // where the clone lands, from /workspace/home
		branch string
		count  string // commits in HEAD's history
	}{
		{"full URL", box.CloneParams{Repo: e.git.BoxURL + "/acme/lib"}, "lib", "main", "2"},
		{"full URL with .git", box.CloneParams{Repo: e.git.BoxURL + "/acme/lib.git", Folder: "dotgit"}, "dotgit", "main", "2"},
		{"host/owner/repo", box.CloneParams{Repo: strings.TrimPrefix(e.git.BoxURL, "http://") + "/acme/lib", Folder: "hostform"}, "hostform", "main", "2"},
		{"owner/repo, branch, depth", box.CloneParams{Repo: "acme/lib", Branch: "dev", Depth: 1, Folder: "shallow"}, "shallow", "dev", "1"},
		{"absolute folder", box.CloneParams{Repo: "acme/lib", Folder: "/tmp/elsewhere/lib"}, "/tmp/elsewhere/lib", "main", "2"},
		{"Directory, Folder's former name", box.CloneParams{Repo: "acme/lib", Directory: "formerly"}, "formerly", "main", "2"},
	} {
		if err := b.Git.Clone(ctx, &tc.params); err != nil {
			t.Errorf("%s: Clone: %v", tc.name, err)
			continue
		}
		if err := b.Cd(ctx, tc.dir); err != nil {
			t.Errorf("%s: the clone is not in %s: %v", tc.name, tc.dir, err)
			continue
		}
		if got := e.out(t, b, "rev-parse", "--abbrev-ref", "HEAD"); got != tc.branch {
			t.Errorf("%s: branch %q, want %q", tc.name, got, tc.branch)
		}
		if got := e.out(t, b, "rev-list", "--count", "HEAD"); got != tc.count {
			t.Errorf("%s: %s commits, want %s", tc.name, got, tc.count)
		}
		if err := b.Cd(ctx, box.WorkspaceHome); err != nil {
			t.Fatal(err)
		}
	}

	// Clone runs in the working directory too.
	if r, err := b.Exec.Command(ctx, "mkdir sub"); err != nil || r.ExitCode != 0 {
		t.Fatalf("mkdir sub: %+v %v", r, err)
	}
	if err := b.Cd(ctx, "sub"); err != nil {
		t.Fatal(err)
	}
	if err := b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/lib"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Cd(ctx, "/workspace/home/sub/lib"); err != nil {
		t.Errorf("clone from /workspace/home/sub did not land in sub/lib: %v", err)
	}
	if err := b.Cd(ctx, box.WorkspaceHome+"/sub"); err != nil {
		t.Fatal(err)
	}
	// A Folder is relative to the working directory, and its parents are
	// made. The same clone again is a 409 that leaves the clone as it is.
	if err := b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/lib", Folder: "given/place"}); err != nil {
		t.Fatalf("Clone into a given folder: %v", err)
	}
	if got := e.out(t, b.At("given/place"), "rev-parse", "--show-toplevel"); got != "/workspace/home/sub/given/place" {
		t.Errorf("Clone with Folder given/place from sub: the repository is at %q", got)
	}
	e.write(t, b, "given/place/lib.txt", "mine\n")
	err := b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/lib", Folder: "given/place"})
	e.apiError(t, "Clone into the same folder again", err, http.StatusConflict, "already exists")
	if got, err := b.Files.ReadText(ctx, "given/place/lib.txt"); err != nil || got != "mine\n" {
		t.Errorf("the clone after the refused one: lib.txt = %q, %v; want the local change kept", got, err)
	}
	if _, err := b.Files.Stat(ctx, "given/place/lib", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused clone left given/place/lib behind: %v", err)
	}
	if err := b.Cd(ctx, box.WorkspaceHome); err != nil {
		t.Fatal(err)
	}

	err = b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/lib"})
	e.apiError(t, "Clone into an existing directory", err, http.StatusConflict, "already exists")
	err = b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/missing"})
	e.apiError(t, "Clone of a missing repository", err, http.StatusBadRequest, "not found")
	err = b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/lib", Branch: "no-such-branch", Folder: "x"})
	e.apiError(t, "Clone of a missing branch", err, http.StatusBadRequest, "no-such-branch")
	err = b.Git.Clone(ctx, &box.CloneParams{Repo: "--upload-pack=touch /tmp/pwned"})
	e.apiError(t, "Clone of an option", err, http.StatusBadRequest, "not a repository")

	// The token goes to the configured GitHub only: a clone from another
	// server (here: another port) is sent no credentials.
	public := gittest.NewGit(t, "")
	public.Repo(t, "other/pub", map[string]string{"pub.txt": "pub\n"})
	if err := b.Git.Clone(ctx, &box.CloneParams{Repo: public.BoxURL + "/other/pub"}); err != nil {
		t.Fatalf("Clone from a server that is not the GitHub: %v", err)
	}
	if got := public.Authorizations(); len(got) == 0 || strings.Join(got, "") != "" {
		t.Errorf("a server that is not the GitHub was sent credentials: %q", got)
	}

	// A box without a token cannot read the private repository...
	bare := newBox(t, e.srv, nil)
	err = bare.Git.Clone(ctx, &box.CloneParams{Repo: "acme/lib"})
	e.apiError(t, "Clone without a token", err, http.StatusBadRequest, "token")
	// ...until a handle with the token clones it; boxd then remembers the
	// token for the box's pushes, whichever handle asks.
	withToken, err := e.srv.Client().Get(ctx, bare.ID(), &box.GetParams{GitToken: gitToken})
	if err != nil {
		t.Fatal(err)
	}
	if err := withToken.Git.Clone(ctx, &box.CloneParams{Repo: "acme/lib"}); err != nil {
		t.Fatalf("Clone with GetParams.GitToken: %v", err)
	}
	if err := bare.Cd(ctx, "lib"); err != nil {
		t.Fatal(err)
	}
	if err := bare.Git.Checkout(ctx, "from-bare"); err != nil {
		t.Fatal(err)
	}
	e.write(t, bare, "bare.txt", "x\n")
	if _, err := bare.Git.Commit(ctx, &box.CommitParams{Message: "from a handle without the token"}); err != nil {
		t.Fatal(err)
	}
	if err := bare.Git.Push(ctx, nil); err != nil {
		t.Errorf("Push with the token remembered from the clone: %v", err)
	}
}

func TestGitPullRequestsAndIssues(t *testing.T) {
	t.Parallel()
	e := newGitEnv(t)
	ctx := t.Context()
	e.git.Repo(t, "acme/web", map[string]string{"index.html": "<h1>hi</h1>\n"})
	b := newBox(t, e.srv, &box.CreateParams{Git: &box.GitOptions{Token: gitToken}})
	if err := b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/web"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Cd(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if err := b.Git.Checkout(ctx, "fix-layout"); err != nil {
		t.Fatal(err)
	}
	png := "\x89PNG\r\n\x1a\n\x00\x01binary\xff"
	r, err := b.Exec.Command(ctx, `mkdir -p shots && printf '\211PNG\r\n\032\n\000\001binary\377' > shots/before.png && printf 'MP4DATA' > clip.mp4 && printf 'notes' > notes.txt`)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("writing attachments: %+v %v", r, err)
	}
	e.write(t, b, "index.html", "<h1>hello</h1>\n")
	if _, err := b.Git.Commit(ctx, &box.CommitParams{Message: "fix the layout"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Git.Push(ctx, nil); err != nil {
		t.Fatal(err)
	}

	pr, err := b.Git.CreatePR(ctx, &box.PRParams{
		Title:  "Fix the layout",
		Body:   "Before:\n![before](./shots/before.png)\n<video src=\"clip.mp4\"></video>\n[elsewhere](https://example.com/x.png)",
		Attach: []string{"shots/before.png#the old layout", "clip.mp4", "notes.txt#release notes"},
	})
	if err != nil {
		t.Fatalf("CreatePR: %v", err)
	}
	if pr.Number == 0 || pr.Title != "Fix the layout" || pr.Base != "main" || pr.Warning != "" ||
		!strings.HasPrefix(pr.URL, "https://github.test/acme/web/pull/") {
		t.Errorf("CreatePR = %+v", pr)
	}
	var create *gittest.Request
	auth := map[string]bool{}
	uploads := map[string]string{} // file name -> path in the repository
	for _, rq := range e.gh.Requests() {
		auth[rq.Authorization] = true
		if rq.Method == http.MethodPost && rq.Path == "/repos/acme/web/pulls" {
			create = &rq
		}
		if rq.Method == http.MethodPut && strings.HasPrefix(rq.Path, "/repos/acme/web/contents/") {
			p := strings.TrimPrefix(rq.Path, "/repos/acme/web/contents/")
			uploads[p[strings.LastIndex(p, "/")+1:]] = p
		}
	}
	if len(auth) != 1 || !auth["Bearer "+gitToken] {
		t.Errorf("GitHub API Authorization headers = %v, want only the box's token", auth)
	}
	if create == nil {
		t.Fatal("no pull request was created on the GitHub API")
	}
	var sent struct{ Title, Body, Head, Base string }
	if err := json.Unmarshal(create.Body, &sent); err != nil {
		t.Fatal(err)
	}
	blob := "https://github.test/acme/web/blob/box-attachments/"
	wantBody := "Before:\n![before](" + blob + uploads["before.png"] + "?raw=true)\n<video src=\"" + blob + uploads["clip.mp4"] + "?raw=true\"></video>\n" +
		"[elsewhere](https://example.com/x.png)\n\n[release notes](" + blob + uploads["notes.txt"] + "?raw=true)\n"
	if sent.Head != "fix-layout" || sent.Base != "main" || sent.Body != wantBody {
		t.Errorf("pull request sent head %q base %q body:\n%s\nwant body:\n%s", sent.Head, sent.Base, sent.Body, wantBody)
	}
	if p := uploads["before.png"]; !strings.HasPrefix(p, b.ID()+"/") {
		t.Errorf("attachment stored at %q, want under the box's id", p)
	}
	if got := string(e.gh.File("acme/web", "box-attachments", uploads["before.png"])); got != png {
		t.Errorf("uploaded before.png = %q, want %q", got, png)
	}
	if got := string(e.gh.File("acme/web", "box-attachments", uploads["clip.mp4"])); got != "MP4DATA" {
		t.Errorf("uploaded clip.mp4 = %q", got)
	}

	// The pull request for this branch is open already: it comes back,
	// with a warning.
	again, err := b.Git.CreatePR(ctx, &box.PRParams{Title: "Fix the layout, again"})
	if err != nil || again.Number != pr.Number || !strings.Contains(again.Warning, "already open") {
		t.Errorf("second CreatePR = %+v, %v; want #%d with a warning", again, err, pr.Number)
	}

	// Issues, with an attachment GitHub refuses: the issue is created,
	// the warning says which file, and its reference is left alone.
	e.gh.FailUploads(regexp.MustCompile(`clip\.mp4$`))
	is, err := b.Git.CreateIssue(ctx, &box.IssueParams{
		Title:  "Layout flickers",
		Body:   "![shot](shots/before.png) and ![clip](./clip.mp4)",
		Attach: []string{"shots/before.png", "clip.mp4"},
	})
	if err != nil {
		t.Fatalf("CreateIssue: %v", err)
	}
	if is.Number == 0 || is.Title != "Layout flickers" || !strings.HasPrefix(is.URL, "https://github.test/acme/web/issues/") ||
		!strings.Contains(is.Warning, "clip.mp4") {
		t.Errorf("CreateIssue = %+v", is)
	}
	reqs := e.gh.Requests()
	last := reqs[len(reqs)-1]
	var issue struct{ Body string }
	if err := json.Unmarshal(last.Body, &issue); err != nil || last.Path != "/repos/acme/web/issues" {
		t.Fatalf("last GitHub request = %s %s", last.Method, last.Path)
	}
	if !strings.HasPrefix(issue.Body, "![shot]("+blob+b.ID()+"/") || !strings.HasSuffix(issue.Body, "/before.png?raw=true) and ![clip](./clip.mp4)") {
		t.Errorf("issue body = %q", issue.Body)
	}

	// A file that is not in the box fails before anything is created.
	n := len(e.gh.Requests())
	_, err = b.Git.CreateIssue(ctx, &box.IssueParams{Title: "x", Attach: []string{"missing.png"}})
	e.apiError(t, "CreateIssue with a missing attachment", err, http.StatusBadRequest, "missing.png")
	if got := len(e.gh.Requests()); got != n {
		t.Errorf("a failed attachment still sent %d GitHub requests", got-n)
	}

	// A branch that was not pushed: nothing is created, nothing stored.
	if err := b.Git.Checkout(ctx, "local-only"); err != nil {
		t.Fatal(err)
	}
	n = len(e.gh.Requests())
	_, err = b.Git.CreatePR(ctx, &box.PRParams{Title: "x", Attach: []string{"clip.mp4"}})
	e.apiError(t, "CreatePR from a branch that is not pushed", err, http.StatusBadRequest, "push it first")
	if got := len(e.gh.Requests()); got != n {
		t.Errorf("a PR from an unpushed branch still sent %d GitHub requests", got-n)
	}

	// Without a token there is no pull request.
	other := newBox(t, e.srv, nil)
	_, err = other.Git.CreatePR(ctx, &box.PRParams{Title: "x"})
	e.apiError(t, "CreatePR without a token", err, http.StatusBadRequest, "token")
	e.note(pr.URL + pr.Warning + again.Warning + is.Warning)
}

// TestGitPushCurrentBranch checks that Push without a branch pushes the
// branch checked out, naming it on the wire so that boxd and the cloud
// push the same branch, and that a detached HEAD is ErrDetachedHead with
// nothing pushed.
func TestGitPushCurrentBranch(t *testing.T) {
	t.Parallel()
	e := newGitEnv(t)
	ctx := t.Context()
	e.git.Repo(t, "acme/push", map[string]string{"a.txt": "a\n"})
	b := newBox(t, e.srv, &box.CreateParams{Git: &box.GitOptions{Token: gitToken}})
	if err := b.Git.Clone(ctx, &box.CloneParams{Repo: "acme/push"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Cd(ctx, "push"); err != nil {
		t.Fatal(err)
	}
	if err := b.Git.Checkout(ctx, "topic/one"); err != nil {
		t.Fatal(err)
	}
	e.write(t, b, "b.txt", "b\n")
	c, err := b.Git.Commit(ctx, &box.CommitParams{Message: "on topic"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Git.Push(ctx, &box.PushParams{}); err != nil {
		t.Fatalf("Push on topic/one: %v", err)
	}
	branches, err := e.git.Branches("acme/push")
	if err != nil {
		t.Fatal(err)
	}
	if branches["topic/one"] != c.SHA {
		t.Errorf("the server's branches after Push = %v, want topic/one at %s", branches, c.SHA)
	}

	// Detached: no current branch, nothing pushed.
	e.out(t, b, "checkout", "--quiet", "--detach")
	e.write(t, b, "c.txt", "c\n")
	if _, err := b.Git.Commit(ctx, &box.CommitParams{Message: "detached"}); err != nil {
		t.Fatal(err)
	}
	err = b.Git.Push(ctx, nil)
	if !errors.Is(err, box.ErrDetachedHead) {
		t.Fatalf("Push on a detached HEAD = %v, want ErrDetachedHead", err)
	}
	after, err := e.git.Branches("acme/push")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(branches, after); diff != "" {
		t.Errorf("the server's branches changed after a refused push (-before +after):\n%s", diff)
	}
	// A named branch still pushes from a detached HEAD's repository.
	if err := b.Git.Push(ctx, &box.PushParams{Branch: "main"}); err != nil {
		t.Errorf("Push(main) from a detached HEAD: %v", err)
	}
}
