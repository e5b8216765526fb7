package box

import (
	"context"
	"errors"
	"strings"

	"github.com/upstash/box-go/gen"
)

// Git runs git in a box. Every call except Clone runs in the box's tracked
// working directory (see [Box.Cd]), so Cd into a clone before working in
// it. Git failures are *Error with status 4xx and git's own message;
// Exec is the exception, as its result carries the exit code.
//
// The box's git token (CreateParams.Git.Token, or GetParams.GitToken)
// authenticates clone, push and pull requests; the server keeps it out of
// the repository's configuration and out of every output.
type Git struct{ b *Box }

// CloneParams says what to clone and where.
type CloneParams struct {
	// Repo is https://github.com/owner/repo, github.com/owner/repo,
	// owner/repo (on the server's GitHub), or any other URL git clones.
	// Required.
	Repo string
	// Branch is checked out instead of the remote's default branch.
	Branch string
	// Depth > 0 makes a shallow clone with that many commits.
	Depth int
	// Folder is where the clone goes: relative to the working directory,
	// or absolute. Empty means a directory named after the repository in
	// the working directory, as git clone names it. A Folder that exists
	// and is not empty is refused (409), and nothing in it changes; on
	// boxd, for the official SDK 0.5.5, one whose own name is not the
	// repository's gets the clone inside it instead.
	Folder string
	// Directory is the former name of Folder and means the same.
	//
	// Deprecated: use Folder.
	Directory string
}

// Clone clones a repository (POST /v2/box/{id}/git/clone), sending the
// box's git token with it and the destination as `folder`, an absolute
// path, as the newest official SDKs do. The server remembers that token
// for the box's later pushes and pull requests.
func (g *Git) Clone(ctx context.Context, params *CloneParams, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if params == nil || strings.TrimSpace(params.Repo) == "" {
		return invalidf("box: git clone: Repo is required")
	}
	if params.Depth < 0 {
		return invalidf("box: git clone: Depth must not be negative")
	}
	dest := params.Folder
	if d := params.Directory; d != "" {
		if dest != "" && dest != d {
			return invalidf("box: git clone: Folder and its former name Directory differ; set Folder alone")
		}
		dest = d
	}
	body := gen.GitCloneRequest{
		Repo:        params.Repo,
		Branch:      nonEmpty(params.Branch),
		GithubToken: nonEmpty(g.token()),
		Folder:      g.cloneFolder(params.Repo, dest),
	}
	if params.Depth > 0 {
		body.Depth = &params.Depth
	}
	return none(g.b.c.api.GitClone(ctx, g.b.id, body))
}

// cloneFolder is the `folder` of a clone: dest resolved against the
// working directory, or the directory git would name after repo there.
// At /workspace/home with no dest, none is sent, and the server names the
// directory; that is also the way out when repo has no usable name.
func (g *Git) cloneFolder(repo, dest string) *string {
	wd := g.b.wd.get()
	if dest != "" {
		return nonEmpty(join(wd, dest))
	}
	name := repoDirName(repo)
	if wd == WorkspaceHome || name == "" {
		return g.b.folder()
	}
	return nonEmpty(join(wd, name))
}

// repoDirName is the directory name git clone gives a clone of repo: its
// last path segment without a trailing ".git"; empty when there is none.
func repoDirName(repo string) string {
	r := strings.TrimRight(strings.TrimSpace(repo), "/")
	r = strings.TrimRight(strings.TrimSuffix(r, "/.git"), "/")
	if i := strings.LastIndexAny(r, "/:"); i >= 0 {
		r = r[i+1:]
	}
	r = strings.TrimSuffix(r, ".git")
	if r == "" || r == "." || r == ".." {
		return ""
	}
	return r
}

func (g *Git) token() string {
	g.b.st.mu.RLock()
	defer g.b.st.mu.RUnlock()
	return g.b.st.gitToken
}

// Status returns `git status --porcelain` of the working directory: one
// line per changed file, empty when the tree is clean. Outside a
// repository (the workspace root, for example) it is empty too.
func (g *Git) Status(ctx context.Context, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.GitStatusResponse](g.b.c.api.GitStatus(ctx, g.b.id, &gen.GitStatusParams{Folder: g.b.folder()}))
	if err != nil {
		return "", err
	}
	return r.Status, nil
}

// Diff returns the working directory's changes against HEAD, staged or
// not (`git diff HEAD`). Untracked files show up only in [Git.Status].
func (g *Git) Diff(ctx context.Context, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.GitDiffResponse](g.b.c.api.GitDiff(ctx, g.b.id, &gen.GitDiffParams{Folder: g.b.folder()}))
	if err != nil {
		return "", err
	}
	return r.Diff, nil
}

// CommitParams describes a commit.
type CommitParams struct {
	// Message is required.
	Message string
	// AuthorName and AuthorEmail override the box's git identity for
	// this commit (see [Git.UpdateConfig]).
	AuthorName  string
	AuthorEmail string
}

// GitCommitResult is a new commit.
type GitCommitResult struct {
	SHA     string
	Message string
}

// Commit stages every change in the repository (git add -A) and commits
// it. With nothing to commit, boxd answers 409.
func (g *Git) Commit(ctx context.Context, params *CommitParams, opts ...Option) (GitCommitResult, error) {
	ctx = withCallOptions(ctx, opts)
	if params == nil || strings.TrimSpace(params.Message) == "" {
		return GitCommitResult{}, invalidf("box: git commit: Message is required")
	}
	r, err := call[gen.GitCommitResult](g.b.c.api.GitCommit(ctx, g.b.id, gen.GitCommitRequest{
		Message:     params.Message,
		AuthorName:  nonEmpty(params.AuthorName),
		AuthorEmail: nonEmpty(params.AuthorEmail),
		Folder:      g.b.folder(),
	}))
	if err != nil {
		return GitCommitResult{}, err
	}
	return GitCommitResult{SHA: r.Sha, Message: r.Message}, nil
}

// PushParams says what to push. A nil *PushParams pushes the current
// branch.
type PushParams struct {
	// Branch is the local branch to push; empty means the one checked
	// out.
	Branch string
}

// ErrDetachedHead is returned by [Git.Push] without a branch when the
// working directory's repository has no branch checked out (a detached
// HEAD): there is no current branch to push. Check one out with
// [Git.Checkout], or name the branch in PushParams.
var ErrDetachedHead = errors.New("box: git push: HEAD is detached, so there is no current branch to push; check out a branch or set PushParams.Branch")

// Push pushes a branch to origin and makes it the branch's upstream (git
// push -u origin <branch>). A push the remote refuses as
// non-fast-forward is a 409.
//
// Without a branch, Push first asks the box which branch is checked out
// (git symbolic-ref, through POST …/git/exec) and sends that one, since the
// cloud, given no branch, pushes a new branch named after the box instead.
// On a detached HEAD it returns [ErrDetachedHead] and pushes nothing.
func (g *Git) Push(ctx context.Context, params *PushParams, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	var branch string
	if params != nil {
		branch = params.Branch
	}
	if branch == "" {
		var err error
		if branch, err = g.currentBranch(ctx); err != nil {
			return err
		}
	}
	return none(g.b.c.api.GitPush(ctx, g.b.id, gen.GitPushRequest{Branch: nonEmpty(branch), Folder: g.b.folder()}))
}

// currentBranch is the branch checked out in the working directory. It is
// empty, with no error, when git cannot tell (outside a repository, or a
// server that does not report git's exit code): the push then goes
// without a branch, and the server says what is wrong.
func (g *Git) currentBranch(ctx context.Context) (string, error) {
	r, err := call[gen.GitExecResponse](g.b.c.api.GitExec(withIdempotent(ctx), g.b.id, gen.GitExecRequest{
		Args:   []string{"symbolic-ref", "--quiet", "--short", "HEAD"},
		Folder: g.b.folder(),
	}))
	if err != nil {
		return "", err
	}
	switch {
	case r.ExitCode == nil:
		return "", nil
	case *r.ExitCode == 0:
		return strings.TrimSpace(r.Output), nil
	case *r.ExitCode == 1:
		// symbolic-ref --quiet exits 1, silently, when HEAD names a
		// commit rather than a branch.
		return "", ErrDetachedHead
	}
	return "", nil
}

// Checkout switches to branch. On boxd, an existing local branch is
// switched to, a branch that exists only on origin is created tracking
// it, and any other name creates a new branch at HEAD.
func (g *Git) Checkout(ctx context.Context, branch string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if strings.TrimSpace(branch) == "" {
		return invalidf("box: git checkout: branch is required")
	}
	return none(g.b.c.api.GitCheckout(withIdempotent(ctx), g.b.id, gen.GitCheckoutRequest{Branch: branch, Folder: g.b.folder()}))
}

// PRParams describes a pull request.
type PRParams struct {
	// Title is required.
	Title string
	Body  string
	// Base is the branch to merge into; empty means the repository's
	// default branch.
	Base string
	// Attach lists files to attach, relative to the working directory,
	// each as "path" or "path#alt text". Reference one in Body as
	// ![alt](./shot.png) to place it; the others are appended.
	Attach []string
}

// PullRequest is an opened pull request.
type PullRequest struct {
	URL    string
	Number int64
	Title  string
	Base   string
	// Warning is set when the pull request exists but something went
	// wrong on the way, for example an attachment that was not uploaded,
	// or a pull request for the branch that was already open (and is
	// the one returned).
	Warning string
}

// CreatePR opens a pull request from the current branch, which must have
// been pushed, on the GitHub repository of origin.
func (g *Git) CreatePR(ctx context.Context, params *PRParams, opts ...Option) (PullRequest, error) {
	ctx = withCallOptions(ctx, opts)
	if params == nil || strings.TrimSpace(params.Title) == "" {
		return PullRequest{}, invalidf("box: git create PR: Title is required")
	}
	r, err := call[gen.PullRequest](g.b.c.api.GitCreatePR(ctx, g.b.id, gen.CreatePullRequestRequest{
		Title:  params.Title,
		Body:   nonEmpty(params.Body),
		Base:   nonEmpty(params.Base),
		Attach: params.Attach,
		Folder: g.b.folder(),
	}))
	if err != nil {
		return PullRequest{}, err
	}
	return PullRequest{URL: r.URL, Number: r.Number, Title: r.Title, Base: r.Base, Warning: deref(r.Warning)}, nil
}

// IssueParams describes an issue.
type IssueParams struct {
	// Title is required.
	Title string
	Body  string
	// Attach is as in [PRParams].
	Attach []string
}

// Issue is an opened issue.
type Issue struct {
	URL    string
	Number int64
	Title  string
	// Warning is set when the issue exists but an attachment was not
	// uploaded.
	Warning string
}

// CreateIssue opens an issue on the GitHub repository of origin.
func (g *Git) CreateIssue(ctx context.Context, params *IssueParams, opts ...Option) (Issue, error) {
	ctx = withCallOptions(ctx, opts)
	if params == nil || strings.TrimSpace(params.Title) == "" {
		return Issue{}, invalidf("box: git create issue: Title is required")
	}
	r, err := call[gen.Issue](g.b.c.api.GitCreateIssue(ctx, g.b.id, gen.CreateIssueRequest{
		Title:  params.Title,
		Body:   nonEmpty(params.Body),
		Attach: params.Attach,
		Folder: g.b.folder(),
	}))
	if err != nil {
		return Issue{}, err
	}
	return Issue{URL: r.URL, Number: r.Number, Title: r.Title, Warning: deref(r.Warning)}, nil
}

// GitConfigParams changes the box-wide git identity; empty fields stay as
// they are, and at least one must be set.
type GitConfigParams struct {
	UserName  string
	UserEmail string
}

// GitConfig is the box-wide git identity.
type GitConfig struct {
	UserName  string
	UserEmail string
}

// UpdateConfig sets the identity commits are made with, box-wide (PUT
// /v2/box/{id}/config/git; not tied to the working directory). boxd also
// serves the path older SDKs call, /v2/box/{id}/git-config; today's cloud
// serves only this one.
func (g *Git) UpdateConfig(ctx context.Context, params *GitConfigParams, opts ...Option) (GitConfig, error) {
	ctx = withCallOptions(ctx, opts)
	if params == nil || (params.UserName == "" && params.UserEmail == "") {
		return GitConfig{}, invalidf("box: git update config: UserName or UserEmail is required")
	}
	r, err := call[gen.GitConfig](g.b.c.api.UpdateGitConfig(ctx, g.b.id, gen.GitConfig{
		GitUserName:  nonEmpty(params.UserName),
		GitUserEmail: nonEmpty(params.UserEmail),
	}))
	if err != nil {
		return GitConfig{}, err
	}
	return GitConfig{UserName: deref(r.GitUserName), UserEmail: deref(r.GitUserEmail)}, nil
}

// GitExecResult is what a git command printed and how it ended.
type GitExecResult struct {
	// Output is standard output and standard error, in order.
	Output string
	// ExitCode is git's exit code; -1 when the server did not report
	// one (the field is newer than some servers).
	ExitCode int
}

// Exec runs `git args...` in the working directory. A git that exits
// non-zero is not an error: ExitCode says so (128 outside a repository,
// for example).
func (g *Git) Exec(ctx context.Context, args []string, opts ...Option) (GitExecResult, error) {
	ctx = withCallOptions(ctx, opts)
	if len(args) == 0 {
		return GitExecResult{}, invalidf("box: git exec: args are required")
	}
	r, err := call[gen.GitExecResponse](g.b.c.api.GitExec(ctx, g.b.id, gen.GitExecRequest{Args: args, Folder: g.b.folder()}))
	if err != nil {
		return GitExecResult{}, err
	}
	code := -1
	if r.ExitCode != nil {
		code = *r.ExitCode
	}
	return GitExecResult{Output: r.Output, ExitCode: code}, nil
}
