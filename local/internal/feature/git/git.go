package git

// Git on boxd. Every git route runs the real git inside the box, through
// the agent's process route, in the request's folder; nothing of the
// repository is touched from the host.
//
// The box's GitHub token authenticates clone, push and `git exec` (fetch,
// pull, ls-remote...) without being written anywhere in the box: it is
// handed to that one git process as an http.<GitHub URL>/.extraHeader
// setting in the process's environment (GIT_CONFIG_COUNT/KEY/VALUE), so git
// sends it only to the configured GitHub host, and .git/config and the
// remote URL stay clean. Everything boxd returns or logs is scrubbed of
// the token and of its Basic-auth form.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// The identity commits get when neither the request, the box nor the
// box's git configuration names one.
const (
	defaultGitUserName  = core.DefaultGitUserName
	defaultGitUserEmail = core.DefaultGitUserEmail
)

// maxGitOutput bounds what boxd reads of one git command's output (a diff,
// a log); the rest is dropped and the text says so.
const maxGitOutput = 16 << 20

// Default GitHub locations (Config.GitHubURL, Config.GitHubAPIURL).
const (
	defaultGitHubURL    = "https://github.com"
	defaultGitHubAPIURL = "https://api.github.com"
)

// githubURLs returns the configured GitHub web and API base URLs, without
// a trailing slash. A GitHub Enterprise web URL without an API URL gets
// the Enterprise API path, {url}/api/v3.
func (f *Git) githubURLs() (web, api string) {
	web = strings.TrimRight(f.cfg.GitHubURL, "/")
	api = strings.TrimRight(f.cfg.GitHubAPIURL, "/")
	if web == "" {
		web = defaultGitHubURL
	}
	if api == "" {
		api = defaultGitHubAPIURL
		if web != defaultGitHubURL {
			api = web + "/api/v3"
		}
	}
	return web, api
}

// ownerRepo is the owner/repo shorthand of the clone request.
var ownerRepo = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// hostRepo is github.com/owner/repo: a host name (with a dot, or the
// configured GitHub host) and two path segments.
var hostRepo = regexp.MustCompile(`^([A-Za-z0-9.-]+(?::[0-9]+)?)/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)/?$`)

// scpLike is git's user@host:path form of an ssh URL.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/]`)

// resolveRepo turns the repo of a clone request into the URL git clones:
// "owner/repo" is on the configured GitHub; "host/owner/repo" is
// https://host/owner/repo (the configured GitHub's own scheme and port
// when host is its host); a URL (scheme://..., or git's user@host:path)
// is used as given.
func (f *Git) resolveRepo(repo string) (string, error) {
	web, _ := f.githubURLs()
	switch {
	case repo == "":
		return "", errdefs.Invalid("repo is required")
	case strings.HasPrefix(repo, "-") || strings.ContainsAny(repo, " \t\r\n\x00"):
		return "", errdefs.Invalid("repo %q is not a repository URL or owner/repo", repo)
	case strings.Contains(repo, "://"), scpLike.MatchString(repo):
		return repo, nil
	case ownerRepo.MatchString(repo):
		return web + "/" + repo, nil
	}
	if m := hostRepo.FindStringSubmatch(repo); m != nil {
		if u, err := url.Parse(web); err == nil && strings.EqualFold(m[1], u.Host) {
			return web + "/" + m[2], nil
		}
		if strings.Contains(m[1], ".") {
			return "https://" + m[1] + "/" + m[2], nil
		}
	}
	return "", errdefs.Invalid("repo %q is not a repository URL (https://github.com/owner/repo), host/owner/repo or owner/repo", repo)
}

// secrets are texts that never leave boxd: a token and its encodings.
type secrets []string

// secretsOf returns the forms of each token that git or an API could echo.
func secretsOf(tokens ...string) secrets {
	var s secrets
	for _, t := range tokens {
		if len(t) < 4 { // scrubbing "" or "a" would mangle every text
			continue
		}
		s = append(s, t, basicAuth(t), base64.StdEncoding.EncodeToString([]byte(t)), url.QueryEscape(t))
	}
	return s
}

// urlPassword matches the password of a URL's user info.
var urlPassword = regexp.MustCompile(`(://[^/\s:@]*):[^@/\s]+@`)

// scrub removes the secrets, and any password written into a URL, from a
// text boxd returns or logs.
func (s secrets) scrub(text string) string {
	for _, v := range s {
		if v != "" {
			text = strings.ReplaceAll(text, v, "***")
		}
	}
	return urlPassword.ReplaceAllString(text, "$1:***@")
}

// basicAuth is the Basic credential git sends for token, the way GitHub
// takes installation and personal tokens.
func basicAuth(token string) string {
	return base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
}

// gitBox is one git request's box: its record, its running sandbox, the
// folder git runs in and the token it may use.
type gitBox struct {
	f      *Git
	b      *store.Box
	rt     *agent.Client
	folder string
	token  string
	secret secrets
}

// gitBox finds box id, checks that it may run git, and starts it.
func (f *Git) gitBox(ctx context.Context, id string, folder *string) (*gitBox, error) {
	b, err := f.host.Box(id)
	if err != nil {
		return nil, err
	}
	if b.Ephemeral {
		return nil, errdefs.Invalid("ephemeral boxes have no git: use a box without a TTL")
	}
	rt, err := f.host.EnsureRunning(ctx, b)
	if err != nil {
		return nil, err
	}
	return &gitBox{f: f, b: b, rt: rt, folder: wire.Deref(folder), token: b.GitHubToken, secret: secretsOf(b.GitHubToken)}, nil
}

// useToken makes git authenticate with token (a clone's own token).
func (g *gitBox) useToken(token string) {
	if token != "" {
		g.token = token
		g.secret = secretsOf(token, g.b.GitHubToken)
	}
}

// dir is the absolute directory git runs in, as the box sees it.
func (g *gitBox) dir() string {
	switch {
	case g.folder == "":
		return sandbox.Home
	case strings.HasPrefix(g.folder, "/"):
		return path.Clean(g.folder)
	}
	return path.Join(sandbox.Home, g.folder)
}

// gitOpts says how to run one git command.
type gitOpts struct {
	// auth passes the token to git (clone, push, exec).
	auth bool
	// merge puts standard error into the output, in order (exec).
	merge bool
	// stdin is given to git.
	stdin string
}

// gitResult is a finished git command. stderr is its last 4 KiB.
type gitResult struct {
	code      int
	out       string
	stderr    string
	truncated bool
}

// msg is what git said about a failure: standard error, or the output
// when it wrote nothing there.
func (r gitResult) msg() string {
	m := r.stderr
	if strings.TrimSpace(m) == "" {
		m = r.out
	}
	// git's hints repeat advice the API's message gives in its own words.
	var lines []string
	for line := range strings.Lines(m) {
		if !strings.HasPrefix(line, "hint:") {
			lines = append(lines, line)
		}
	}
	m = strings.TrimSpace(strings.Join(lines, ""))
	if len(m) > 4000 {
		m = strings.ToValidUTF8(m[:4000], "") + "..."
	}
	return m
}

// git runs `git args...` in the box's folder. An error means git did not
// run to its end; a non-zero exit is in the result. Its texts are scrubbed.
func (g *gitBox) git(ctx context.Context, o gitOpts, args ...string) (gitResult, error) {
	defer g.f.host.Busy(g.b.ID)()
	var res gitResult
	env := map[string]string{
		// Never wait for a password nobody can type.
		"GIT_TERMINAL_PROMPT": "0",
		"GCM_INTERACTIVE":     "never",
		"GIT_PAGER":           "cat",
	}
	if o.auth && g.token != "" {
		web, _ := g.f.githubURLs()
		env["GIT_CONFIG_COUNT"] = "1"
		env["GIT_CONFIG_KEY_0"] = "http." + web + "/.extraheader"
		env["GIT_CONFIG_VALUE_0"] = "Authorization: Basic " + basicAuth(g.token)
	}
	p, err := g.rt.Process(ctx, agent.ProcessRequest{Argv: append([]string{"git"}, args...), Folder: g.folder, Env: env, Stdin: o.stdin, MergeStderr: o.merge})
	var ae *agent.Error
	if errors.As(err, &ae) {
		return res, agentFailure(ae.Kind(), g.secret.scrub(ae.Message))
	}
	if err != nil {
		return res, err
	}
	defer p.Close()
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(p.Output, maxGitOutput))
	if err == nil && n == maxGitOutput {
		var rest int64
		rest, err = io.Copy(io.Discard, p.Output)
		res.truncated = rest > 0
	}
	if err != nil {
		return res, fmt.Errorf("reading git's output: %w", err)
	}
	res.out = g.secret.scrub(out.String())
	if res.truncated {
		res.out += fmt.Sprintf("\n[output truncated at %d bytes]\n", maxGitOutput)
	}
	st, err := p.Wait()
	switch {
	case errors.As(err, &ae):
		return res, errdefs.MissingDependency("cannot run git in the box: %s", g.secret.scrub(ae.Message))
	case errors.Is(err, agent.ErrExitUnknown):
		return res, errors.New("git's outcome was lost")
	case err != nil:
		return res, err
	}
	res.code = st.ExitCode
	res.stderr = g.secret.scrub(st.Stderr)
	return res, nil
}

// notRepo reports a command that failed because its folder is not in a
// git repository.
func notRepo(r gitResult) bool {
	return r.code != 0 && strings.Contains(r.stderr, "not a git repository")
}

// failed turns a failed git command into the API's error: 400 with what
// git said, naming the folder when it is not a repository.
func (g *gitBox) failed(op string, r gitResult) error {
	if notRepo(r) {
		return errdefs.Invalid("git %s: %s is not in a git repository", op, g.dir())
	}
	return errdefs.Invalid("git %s failed (exit %d): %s%s", op, r.code, r.msg(), authHint(r.msg()))
}

// authHint explains a failure that looks like missing or refused
// credentials.
func authHint(msg string) string {
	for _, s := range []string{"could not read Username", "terminal prompts disabled", "Authentication failed", "403", "401"} {
		if strings.Contains(msg, s) {
			return " (the repository needs a GitHub token with access to it: give one at create as git.token, or as github_token with the clone)"
		}
	}
	return ""
}

// checkArg refuses a branch or directory that git would read as an option.
func checkArg(what, v string) error {
	if strings.HasPrefix(v, "-") || strings.ContainsAny(v, "\x00\r\n") {
		return errdefs.Invalid("%s %q is not valid", what, v)
	}
	return nil
}

// repoDirName is the directory name git clone gives a clone of repoURL:
// its last path segment without a trailing ".git".
func repoDirName(repoURL string) string {
	r := strings.TrimRight(repoURL, "/")
	r = strings.TrimRight(strings.TrimSuffix(r, "/.git"), "/")
	if i := strings.LastIndexAny(r, "/:"); i >= 0 {
		r = r[i+1:]
	}
	return strings.TrimSuffix(r, ".git")
}

// cloneInside reports whether a clone of repoURL whose folder is g's goes
// inside that folder (the 0.5.5 meaning) rather than being it. It does
// when the folder is an existing directory with something in it that is
// not this repository cloned before: its name is not the repository's,
// and its origin is not the repository. The box's agent and git look, so
// the folder is seen as the box sees it.
func (g *gitBox) cloneInside(ctx context.Context, repoURL string) (bool, error) {
	dir := g.dir()
	if path.Base(dir) == repoDirName(repoURL) {
		return false, nil
	}
	files, err := g.rt.ListFiles(ctx, dir)
	var ae *agent.Error
	switch {
	case errors.Is(err, agent.ErrTooLarge):
		return true, nil // something is in it
	case errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrInvalidArgument):
		// Nothing there, or not a directory: the destination (git
		// refuses the latter itself).
		return false, nil
	case errors.As(err, &ae):
		return false, errdefs.Invalid("git clone: cannot look into %s: %s", dir, ae.Message)
	case err != nil:
		return false, err
	}
	if len(files) == 0 {
		return false, nil
	}
	for _, f := range files {
		if f.Name != ".git" {
			continue
		}
		r, err := g.git(ctx, gitOpts{}, "config", "--get", "remote.origin.url")
		if err != nil {
			return false, err
		}
		if r.code == 0 && sameRepo(strings.TrimSpace(r.out), repoURL) {
			return false, nil
		}
	}
	return true, nil
}

// sameRepo reports whether two clone URLs name the same repository, with
// or without a trailing slash or ".git".
func sameRepo(a, b string) bool {
	norm := func(s string) string { return strings.TrimSuffix(strings.TrimRight(s, "/"), ".git") }
	return norm(a) == norm(b)
}

// GitClone clones a repository. Two generations of clients send it:
// the newest official SDKs send the destination as folder, and 0.5.5
// sent its working directory there, the clone going into
// folder/<repository name>. boxd reads folder the older way only when
// that is the one way the clone could succeed: folder is an existing
// directory that is not empty (so it cannot be the destination), and not
// this repository cloned before (by its name or its origin), which is a
// 409 as on the cloud. With box-go's own directory field, folder is the
// working directory and directory the destination.
func (f *Git) GitClone(ctx context.Context, req gen.GitCloneRequestObject) (gen.GitCloneResponseObject, error) {
	body := req.Body
	if body == nil {
		return nil, errdefs.Invalid("a JSON body with repo is required")
	}
	repoURL, err := f.resolveRepo(strings.TrimSpace(body.Repo))
	if err != nil {
		return nil, err
	}
	args := []string{"clone", "--quiet"}
	if d := body.Depth; d != nil {
		if *d < 1 {
			return nil, errdefs.Invalid("depth must be at least 1, got %d", *d)
		}
		args = append(args, "--depth", strconv.Itoa(*d))
	}
	if br := wire.Deref(body.Branch); br != "" {
		if err := checkArg("branch", br); err != nil {
			return nil, err
		}
		args = append(args, "--branch", br)
	}
	args = append(args, "--", repoURL)
	dir, folder := wire.Deref(body.Directory), wire.Deref(body.Folder)
	if dir != "" {
		if err := checkArg("directory", dir); err != nil {
			return nil, err
		}
	}
	if strings.ContainsAny(folder, "\x00\r\n") {
		return nil, errdefs.Invalid("folder %q is not valid", folder)
	}
	g, err := f.gitBox(ctx, req.ID, body.Folder)
	if err != nil {
		return nil, err
	}
	switch {
	case dir != "":
		args = append(args, dir)
	case folder != "":
		inside, err := g.cloneInside(ctx, repoURL)
		if err != nil {
			return nil, err
		}
		if !inside {
			// folder is the destination: git runs in /workspace/home
			// and makes the directory, with its parents.
			dest := g.dir()
			g.folder = ""
			args = append(args, dest)
		}
	}
	token := wire.Deref(body.GithubToken)
	g.useToken(token)
	r, err := g.git(ctx, gitOpts{auth: true}, args...)
	if err != nil {
		return nil, err
	}
	shown := g.secret.scrub(repoURL)
	if r.code != 0 {
		msg := r.msg()
		switch {
		case strings.Contains(msg, "already exists and is not an empty directory"):
			return nil, errdefs.Conflict("git clone %s: %s", shown, msg)
		case strings.Contains(msg, "Remote branch"):
			return nil, errdefs.Invalid("git clone %s: branch %s not found: %s", shown, wire.Deref(body.Branch), msg)
		case strings.Contains(msg, "not found") || strings.Contains(msg, "does not appear to be a git repository"):
			return nil, errdefs.Invalid("git clone %s: repository not found, or the token cannot read it: %s", shown, msg)
		}
		return nil, errdefs.Invalid("git clone %s failed: %s%s", shown, msg, authHint(msg))
	}
	// The box remembers a clone's token for its later pushes and pull
	// requests, as if it had been given at create.
	if token != "" && token != g.b.GitHubToken {
		if err := f.host.UpdateBox(g.b.ID, func(b *store.Box) error { b.GitHubToken = token; return nil }); err != nil {
			return nil, err
		}
	}
	f.host.Logf(g.b.ID, "info", "system", "git: cloned "+shown)
	return gen.GitClone200JSONResponse(wire.Message("Repository cloned")), nil
}

func (f *Git) GitStatus(ctx context.Context, req gen.GitStatusRequestObject) (gen.GitStatusResponseObject, error) {
	g, err := f.gitBox(ctx, req.ID, req.Params.Folder)
	if err != nil {
		return nil, err
	}
	r, err := g.git(ctx, gitOpts{}, "status", "--porcelain")
	if err != nil {
		return nil, err
	}
	switch {
	case notRepo(r):
		// Outside a repository (the workspace root) there is nothing to
		// report, as on the cloud.
		return gen.GitStatus200JSONResponse{Status: ""}, nil
	case r.code != 0:
		return nil, g.failed("status", r)
	}
	return gen.GitStatus200JSONResponse{Status: r.out}, nil
}

// emptyTree is git's empty tree (SHA-1 repositories).
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// GitDiff answers `git diff HEAD`: staged and unstaged changes to tracked
// files (new files once added). Outside a repository it is empty, like
// the status.
func (f *Git) GitDiff(ctx context.Context, req gen.GitDiffRequestObject) (gen.GitDiffResponseObject, error) {
	g, err := f.gitBox(ctx, req.ID, req.Params.Folder)
	if err != nil {
		return nil, err
	}
	// Outside a repository, git diff would compare files (--no-index);
	// look first. Before the first commit, compare with the empty tree.
	r, err := g.git(ctx, gitOpts{}, "rev-parse", "--verify", "--quiet", "HEAD")
	if err != nil {
		return nil, err
	}
	if !notRepo(r) {
		against := "HEAD"
		if r.code != 0 {
			against = emptyTree
		}
		if r, err = g.git(ctx, gitOpts{}, "diff", against, "--"); err != nil {
			return nil, err
		}
	}
	switch {
	case notRepo(r):
		return gen.GitDiff200JSONResponse{Diff: ""}, nil
	case r.code != 0:
		return nil, g.failed("diff", r)
	}
	return gen.GitDiff200JSONResponse{Diff: r.out}, nil
}

// identity is the name and email a commit is made with: the request's,
// else the box's, else the git configuration's in the box, else boxd's
// default.
func (g *gitBox) identity(ctx context.Context, name, email string) (string, string, error) {
	if name == "" {
		name = g.b.GitUserName
	}
	if email == "" {
		email = g.b.GitUserEmail
	}
	if name != "" && email != "" {
		return name, email, nil
	}
	r, err := g.git(ctx, gitOpts{}, "config", "--get-regexp", `^user\.(name|email)$`)
	if err != nil {
		return "", "", err
	}
	for line := range strings.Lines(r.out) {
		k, v, _ := strings.Cut(strings.TrimRight(line, "\n"), " ")
		switch {
		case k == "user.name" && name == "":
			name = v
		case k == "user.email" && email == "":
			email = v
		}
	}
	if name == "" {
		name = defaultGitUserName
	}
	if email == "" {
		email = defaultGitUserEmail
	}
	return name, email, nil
}

// GitCommit stages every change (git add -A) and commits it.
func (f *Git) GitCommit(ctx context.Context, req gen.GitCommitRequestObject) (gen.GitCommitResponseObject, error) {
	body := req.Body
	if body == nil || strings.TrimSpace(body.Message) == "" {
		return nil, errdefs.Invalid("message is required")
	}
	if strings.ContainsAny(wire.Deref(body.AuthorName)+wire.Deref(body.AuthorEmail), "\x00\r\n<>") {
		return nil, errdefs.Invalid("author_name and author_email must be one line without < or >")
	}
	g, err := f.gitBox(ctx, req.ID, body.Folder)
	if err != nil {
		return nil, err
	}
	r, err := g.git(ctx, gitOpts{}, "add", "-A")
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return nil, g.failed("commit", r)
	}
	name, email, err := g.identity(ctx, wire.Deref(body.AuthorName), wire.Deref(body.AuthorEmail))
	if err != nil {
		return nil, err
	}
	// The message goes through standard input: any text, any length.
	r, err = g.git(ctx, gitOpts{stdin: body.Message}, "-c", "user.name="+name, "-c", "user.email="+email, "commit", "--quiet", "--file=-")
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		if all := r.out + r.stderr; strings.Contains(all, "nothing to commit") || strings.Contains(all, "nothing added to commit") {
			return nil, errdefs.Conflict("nothing to commit: the working tree of %s is clean", g.dir())
		}
		return nil, g.failed("commit", r)
	}
	r, err = g.git(ctx, gitOpts{}, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return nil, g.failed("rev-parse", r)
	}
	return gen.GitCommit200JSONResponse{Sha: strings.TrimSpace(r.out), Message: body.Message}, nil
}

// currentBranch is the branch checked out in the folder.
func (g *gitBox) currentBranch(ctx context.Context) (string, error) {
	r, err := g.git(ctx, gitOpts{}, "rev-parse", "--abbrev-ref", "HEAD")
	if err != nil {
		return "", err
	}
	if r.code != 0 {
		return "", g.failed("rev-parse", r)
	}
	br := strings.TrimSpace(r.out)
	if br == "HEAD" {
		return "", errdefs.Invalid("HEAD is detached in %s: check out a branch first", g.dir())
	}
	return br, nil
}

// GitPush pushes a branch (the current one by default) to origin and sets
// it as the branch's upstream: `git push -u origin <branch>`.
func (f *Git) GitPush(ctx context.Context, req gen.GitPushRequestObject) (gen.GitPushResponseObject, error) {
	var branch string
	var folder *string
	if req.Body != nil {
		branch, folder = wire.Deref(req.Body.Branch), req.Body.Folder
	}
	if err := checkArg("branch", branch); err != nil {
		return nil, err
	}
	g, err := f.gitBox(ctx, req.ID, folder)
	if err != nil {
		return nil, err
	}
	if branch == "" {
		if branch, err = g.currentBranch(ctx); err != nil {
			return nil, err
		}
	}
	r, err := g.git(ctx, gitOpts{auth: true}, "push", "--quiet", "-u", "origin", branch)
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		msg := r.msg()
		switch {
		case notRepo(r):
			return nil, g.failed("push", r)
		case strings.Contains(msg, "[rejected]") || strings.Contains(msg, "non-fast-forward") || strings.Contains(msg, "fetch first"):
			return nil, errdefs.Conflict("push of %s rejected: the remote branch has commits this one does not have (non-fast-forward); pull or rebase, then push again: %s", branch, msg)
		case strings.Contains(msg, "src refspec"):
			return nil, errdefs.Invalid("push: there is no local branch %q: %s", branch, msg)
		}
		return nil, errdefs.Invalid("git push origin %s failed: %s%s", branch, msg, authHint(msg))
	}
	f.host.Logf(g.b.ID, "info", "system", "git: pushed "+branch)
	return gen.GitPush200JSONResponse(wire.Message("Pushed " + branch)), nil
}

// GitCheckout switches to a branch: an existing local branch is checked
// out; a branch that exists only on a remote is created tracking it (git
// switch's guess); any other name creates a new branch at HEAD. Local
// changes are carried along when git can; when they would be lost the
// answer is 409 and nothing changes.
func (f *Git) GitCheckout(ctx context.Context, req gen.GitCheckoutRequestObject) (gen.GitCheckoutResponseObject, error) {
	if req.Body == nil || strings.TrimSpace(req.Body.Branch) == "" {
		return nil, errdefs.Invalid("branch is required")
	}
	branch := req.Body.Branch
	if err := checkArg("branch", branch); err != nil {
		return nil, err
	}
	g, err := f.gitBox(ctx, req.ID, req.Body.Folder)
	if err != nil {
		return nil, err
	}
	r, err := g.git(ctx, gitOpts{}, "switch", "--quiet", branch)
	if err == nil && r.code != 0 && strings.Contains(r.stderr, "invalid reference") {
		r, err = g.git(ctx, gitOpts{}, "switch", "--quiet", "--create", branch)
	}
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		if strings.Contains(r.stderr, "would be overwritten") {
			return nil, errdefs.Conflict("checkout %s: local changes would be overwritten; commit them first: %s", branch, r.msg())
		}
		return nil, g.failed("checkout "+branch, r)
	}
	return gen.GitCheckout200JSONResponse(wire.Message("Checked out " + branch)), nil
}

// GitExec runs `git args...` and answers its merged output and exit code,
// 200 whatever the exit code. It has the token, so that fetch, pull and
// ls-remote reach private repositories.
func (f *Git) GitExec(ctx context.Context, req gen.GitExecRequestObject) (gen.GitExecResponseObject, error) {
	if req.Body == nil || len(req.Body.Args) == 0 {
		return nil, errdefs.Invalid("args is required: git's arguments, without the leading git")
	}
	g, err := f.gitBox(ctx, req.ID, req.Body.Folder)
	if err != nil {
		return nil, err
	}
	r, err := g.git(ctx, gitOpts{auth: true, merge: true}, req.Body.Args...)
	if err != nil {
		return nil, err
	}
	return gen.GitExec200JSONResponse{Output: r.out, ExitCode: wire.Ptr(r.code)}, nil
}

// UpdateGitConfig sets the box-wide identity at PUT …/config/git, the path
// today's cloud and the newest official SDKs use.
func (f *Git) UpdateGitConfig(ctx context.Context, req gen.UpdateGitConfigRequestObject) (gen.UpdateGitConfigResponseObject, error) {
	out, err := f.updateGitConfig(ctx, req.ID, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.UpdateGitConfig200JSONResponse(out), nil
}

// UpdateGitConfigLegacy is the same operation at PUT …/git-config, the
// path the official SDK 0.5.5 calls.
func (f *Git) UpdateGitConfigLegacy(ctx context.Context, req gen.UpdateGitConfigLegacyRequestObject) (gen.UpdateGitConfigLegacyResponseObject, error) {
	out, err := f.updateGitConfig(ctx, req.ID, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.UpdateGitConfigLegacy200JSONResponse(out), nil
}

// updateGitConfig sets the box-wide identity: on the box's record (which
// commits use) and in the box user's global git configuration (which git
// run any other way uses). Empty or omitted fields stay unchanged.
func (f *Git) updateGitConfig(ctx context.Context, id string, body *gen.GitConfig) (gen.GitConfig, error) {
	var name, email string
	if body != nil {
		name, email = wire.Deref(body.GitUserName), wire.Deref(body.GitUserEmail)
	}
	if name == "" && email == "" {
		return gen.GitConfig{}, errdefs.Invalid("git_user_name or git_user_email is required")
	}
	if strings.ContainsAny(name+email, "\x00\r\n") {
		return gen.GitConfig{}, errdefs.Invalid("git_user_name and git_user_email must be one line")
	}
	g, err := f.gitBox(ctx, id, nil)
	if err != nil {
		return gen.GitConfig{}, err
	}
	for _, kv := range [][2]string{{"user.name", name}, {"user.email", email}} {
		if kv[1] == "" {
			continue
		}
		r, err := g.git(ctx, gitOpts{}, "config", "--global", kv[0], kv[1])
		if err != nil {
			return gen.GitConfig{}, err
		}
		if r.code != 0 {
			return gen.GitConfig{}, g.failed("config", r)
		}
	}
	var out store.Box
	err = f.host.UpdateBox(g.b.ID, func(b *store.Box) error {
		if name != "" {
			b.GitUserName = name
		}
		if email != "" {
			b.GitUserEmail = email
		}
		out = *b
		return nil
	})
	if err != nil {
		return gen.GitConfig{}, err
	}
	return gen.GitConfig{GitUserName: wire.Ptr(out.GitUserName), GitUserEmail: wire.Ptr(out.GitUserEmail)}, nil
}

// agentFailure is the error for an agent's answer of kind (agent.Error's
// Kind) with message msg: a refusal of the request, or a full disk, keeps
// its kind; anything else is the agent's own failure, an error of no kind.
func agentFailure(kind error, msg string) error {
	if kind == errdefs.ErrUpstream {
		return errors.New(msg)
	}
	return errdefs.New(kind, "%s", msg)
}
