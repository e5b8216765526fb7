package git

// Pull requests and issues on boxd: boxd calls the GitHub REST API itself
// (Config.GitHubAPIURL) with the box's token, for the repository that the
// folder's `origin` remote names.
//
// Attachments. GitHub has no API to upload the files that its web editor
// attaches to issues and pull requests, so boxd stores them in the
// repository instead: every file goes, with the contents API, to the
// branch box-attachments (an orphan branch, made on first use, holding
// nothing but attachments), under {box id}/{time}-{random}/{file name}.
// References to an attached file in the body, as a Markdown link or image
// target (![alt](./shot.png), [clip](clip.mp4)) or an HTML src/href,
// relative to the folder or absolute, are rewritten to the stored file's
// URL ({blob URL}?raw=true, which GitHub shows to everyone who can read
// the repository); files the body does not mention are appended to it, an
// image as ![alt](url), anything else as a link. The files are part of the
// repository: they are as public as it is. A file that cannot be read in
// the box fails the request before anything is created; a file GitHub
// refuses leaves its reference as it was, and the pull request or issue is
// still created, with `warning` saying what went wrong.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/wire"
)

// Attachment limits.
const (
	maxIssueAttachments = 10
	maxAttachmentBytes  = 10 << 20
	attachmentBranch    = "box-attachments"
)

// ghClient calls the GitHub REST API with one token.
type ghClient struct {
	api    string
	token  string
	hc     *http.Client
	secret secrets
}

// ghError is a GitHub API answer other than 2xx.
type ghError struct {
	status int
	what   string // "POST /repos/o/r/pulls"
	msg    string
}

func (e *ghError) Error() string {
	return fmt.Sprintf("GitHub API %s: %d %s", e.what, e.status, e.msg)
}

// do sends a JSON request and decodes a JSON answer into out (when not
// nil). A non-2xx answer is a *ghError.
func (gh *ghClient) do(ctx context.Context, method, p string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, gh.api+p, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "boxd")
	req.Header.Set("Authorization", "Bearer "+gh.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := gh.hc.Do(req)
	if err != nil {
		return fmt.Errorf("GitHub API %s %s: %s", method, p, gh.secret.scrub(err.Error()))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("GitHub API %s %s: %w", method, p, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Message string `json:"message"`
			Errors  []struct {
				Message string `json:"message"`
				Field   string `json:"field"`
				Code    string `json:"code"`
			} `json:"errors"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Message != "" {
			msg = e.Message
			for _, d := range e.Errors {
				switch {
				case d.Message != "":
					msg += "; " + d.Message
				case d.Field != "":
					msg += "; " + d.Field + " " + d.Code
				}
			}
		}
		if len(msg) > 1000 {
			msg = msg[:1000] + "..."
		}
		return &ghError{status: resp.StatusCode, what: method + " " + p, msg: gh.secret.scrub(msg)}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("GitHub API %s %s: decoding the answer: %w", method, p, err)
		}
	}
	return nil
}

// apiErr turns a failed GitHub call into the API's error: what GitHub
// refused is 400 (never GitHub's own 401 or 404, which would read as
// boxd's), an unreachable or failing GitHub 502.
func apiErr(err error, hint string) error {
	var ge *ghError
	if errors.As(err, &ge) && ge.status < 500 {
		return errdefs.Invalid("%s%s", ge.Error(), hint)
	}
	return errdefs.Upstream("%s", err.Error())
}

// repoRef is a repository on GitHub.
type repoRef struct{ owner, name string }

func (r repoRef) path() string {
	return "/repos/" + url.PathEscape(r.owner) + "/" + url.PathEscape(r.name)
}

// parseRemote reads the host and owner/repo of a remote URL: https and
// http URLs, ssh:// URLs and git's user@host:owner/repo form. The last two
// path segments are the owner and the repository.
func parseRemote(remote string) (host string, repo repoRef, ok bool) {
	var p string
	if scpLike.MatchString(remote) && !strings.Contains(remote, "://") {
		rest := remote[strings.IndexByte(remote, '@')+1:]
		host, p, _ = strings.Cut(rest, ":")
	} else {
		u, err := url.Parse(remote)
		if err != nil || u.Host == "" {
			return "", repo, false
		}
		host, p = u.Hostname(), u.Path
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	parts := strings.Split(p, "/")
	if len(parts) < 2 || parts[len(parts)-2] == "" || parts[len(parts)-1] == "" {
		return "", repo, false
	}
	return host, repoRef{owner: parts[len(parts)-2], name: parts[len(parts)-1]}, true
}

// github prepares a pull request or an issue: the token, the repository
// of the folder's origin, and the client for the API.
func (g *gitBox) github(ctx context.Context, what string) (*ghClient, repoRef, func(), error) {
	var repo repoRef
	if g.token == "" {
		return nil, repo, nil, errdefs.Invalid("creating %s needs a GitHub token: give the box one at create (git.token), or with a clone (github_token)", what)
	}
	r, err := g.git(ctx, gitOpts{}, "remote", "get-url", "origin")
	if err != nil {
		return nil, repo, nil, err
	}
	if r.code != 0 {
		if notRepo(r) {
			return nil, repo, nil, g.failed("remote", r)
		}
		return nil, repo, nil, errdefs.Invalid("creating %s: the repository in %s has no remote named origin", what, g.dir())
	}
	remote := strings.TrimSpace(r.out)
	host, repo, ok := parseRemote(remote)
	web, api := g.f.githubURLs()
	wu, _ := url.Parse(web)
	if !ok || wu == nil || !strings.EqualFold(host, wu.Hostname()) {
		return nil, repo, nil, errdefs.Invalid("creating %s: origin (%s) is not a repository on %s", what, g.secret.scrub(remote), web)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	gh := &ghClient{api: api, token: g.token, hc: &http.Client{Transport: tr, Timeout: 2 * time.Minute}, secret: g.secret}
	return gh, repo, tr.CloseIdleConnections, nil
}

// ghAttachment is one file to attach to a pull request or an issue, read
// from the box.
type ghAttachment struct {
	spec string // as given: path#alt
	abs  string // absolute path in the box
	alt  string
	data []byte
	url  string // where it was stored, once uploaded
}

// readAttachments reads the files of attach ("path" or "path#alt text",
// relative to the folder) from the box, through its agent.
func (g *gitBox) readAttachments(ctx context.Context, attach []string) ([]*ghAttachment, error) {
	if len(attach) > maxIssueAttachments {
		return nil, errdefs.Invalid("at most %d attachments, got %d", maxIssueAttachments, len(attach))
	}
	var out []*ghAttachment
	for _, spec := range attach {
		p, alt, _ := strings.Cut(spec, "#")
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, errdefs.Invalid("attachment %q has no path", spec)
		}
		a := &ghAttachment{spec: spec, abs: g.abs(p), alt: strings.TrimSpace(alt)}
		data, err := g.readFile(ctx, a.abs)
		if err != nil {
			return nil, err
		}
		a.data = data
		out = append(out, a)
	}
	return out, nil
}

// abs resolves p against the folder.
func (g *gitBox) abs(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(g.dir(), p)
}

// readFile reads a regular file of at most maxAttachmentBytes from the
// box.
func (g *gitBox) readFile(ctx context.Context, abs string) ([]byte, error) {
	var buf bytes.Buffer
	_, err := g.rt.ReadFile(ctx, abs, &buf, maxAttachmentBytes)
	var ae *agent.Error
	switch {
	case errors.Is(err, agent.ErrTooLarge):
		return nil, errdefs.TooLarge("attachment %s is larger than %d bytes", abs, maxAttachmentBytes)
	case errors.As(err, &ae) && errors.Is(ae, errdefs.ErrUpstream):
		// The agent failed, not the request.
		return nil, errdefs.Upstream("attachment %s cannot be read: %s", abs, ae.Message)
	case errors.As(err, &ae):
		return nil, errdefs.Invalid("attachment %s cannot be read: %s", abs, ae.Message)
	case err != nil:
		return nil, fmt.Errorf("reading attachment %s: %w", abs, err)
	}
	return buf.Bytes(), nil
}

const attachmentsReadme = "# Attachments\n\nFiles attached to issues and pull requests by Upstash Box (boxd).\nThis branch holds nothing else; it shares no history with the code.\n"

// ensureAttachmentBranch makes the orphan branch for attachments unless it
// exists.
func (gh *ghClient) ensureAttachmentBranch(ctx context.Context, repo repoRef) error {
	err := gh.do(ctx, http.MethodGet, repo.path()+"/git/ref/heads/"+attachmentBranch, nil, nil)
	var ge *ghError
	if err == nil || !errors.As(err, &ge) || ge.status != http.StatusNotFound {
		return err
	}
	type entry struct {
		Path    string `json:"path"`
		Mode    string `json:"mode"`
		Type    string `json:"type"`
		Content string `json:"content"`
	}
	var tree, commit struct {
		SHA string `json:"sha"`
	}
	err = gh.do(ctx, http.MethodPost, repo.path()+"/git/trees", map[string]any{
		"tree": []entry{{Path: "README.md", Mode: "100644", Type: "blob", Content: attachmentsReadme}},
	}, &tree)
	if err != nil {
		return err
	}
	err = gh.do(ctx, http.MethodPost, repo.path()+"/git/commits", map[string]any{
		"message": "Start the attachments branch", "tree": tree.SHA, "parents": []string{},
	}, &commit)
	if err != nil {
		return err
	}
	err = gh.do(ctx, http.MethodPost, repo.path()+"/git/refs", map[string]any{
		"ref": "refs/heads/" + attachmentBranch, "sha": commit.SHA,
	}, nil)
	if errors.As(err, &ge) && ge.status == http.StatusUnprocessableEntity && strings.Contains(ge.msg, "already exists") {
		return nil // made meanwhile by another request
	}
	return err
}

// upload stores the attachments on the attachment branch and sets their
// URLs. It returns what went wrong, for the warning.
func (gh *ghClient) upload(ctx context.Context, repo repoRef, boxID string, atts []*ghAttachment) []string {
	if len(atts) == 0 {
		return nil
	}
	if err := gh.ensureAttachmentBranch(ctx, repo); err != nil {
		return []string{"no attachment was uploaded: " + err.Error()}
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	dir := boxID + "/" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(rnd[:])
	var problems []string
	used := map[string]bool{}
	for i, a := range atts {
		name := path.Base(a.abs)
		if used[name] {
			name = fmt.Sprintf("%d-%s", i+1, name)
		}
		used[name] = true
		p := dir + "/" + name
		var res struct {
			Content struct {
				HTMLURL     string `json:"html_url"`
				DownloadURL string `json:"download_url"`
			} `json:"content"`
		}
		escaped := make([]string, 0, 3)
		for _, seg := range strings.Split(p, "/") {
			escaped = append(escaped, url.PathEscape(seg))
		}
		err := gh.do(ctx, http.MethodPut, repo.path()+"/contents/"+strings.Join(escaped, "/"), map[string]any{
			"message": "Attach " + name + " (" + boxID + ")",
			"content": base64.StdEncoding.EncodeToString(a.data),
			"branch":  attachmentBranch,
		}, &res)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("attachment %s was not uploaded: %v", a.spec, err))
		case res.Content.HTMLURL != "":
			a.url = res.Content.HTMLURL + "?raw=true"
		case res.Content.DownloadURL != "":
			a.url = res.Content.DownloadURL
		default:
			problems = append(problems, fmt.Sprintf("attachment %s: GitHub returned no URL for it", a.spec))
		}
	}
	return problems
}

// References in a body: Markdown link and image targets, and HTML src and
// href attributes.
var (
	mdTarget   = regexp.MustCompile(`(\]\(\s*)(<[^>\n]*>|[^)\s]+)`)
	htmlTarget = regexp.MustCompile(`(\b(?:src|href)\s*=\s*)("[^"\n]*"|'[^'\n]*')`)
)

var imageExt = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".svg": true, ".bmp": true, ".avif": true}

// rewriteBody points the body's references to uploaded attachments at
// their URLs, and appends the uploaded attachments it does not mention.
func rewriteBody(body, dir string, atts []*ghAttachment) string {
	byPath := map[string]*ghAttachment{}
	for _, a := range atts {
		if a.url != "" {
			byPath[a.abs] = a
		}
	}
	if len(byPath) == 0 {
		return body
	}
	mentioned := map[*ghAttachment]bool{}
	lookup := func(target string) *ghAttachment {
		if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
			return nil
		}
		t, _, _ := strings.Cut(target, "#")
		if u, err := url.PathUnescape(t); err == nil {
			t = u
		}
		if t == "" {
			return nil
		}
		abs := path.Join(dir, t)
		if strings.HasPrefix(t, "/") {
			abs = path.Clean(t)
		}
		a := byPath[abs]
		if a != nil {
			mentioned[a] = true
		}
		return a
	}
	body = mdTarget.ReplaceAllStringFunc(body, func(m string) string {
		sub := mdTarget.FindStringSubmatch(m)
		target := strings.TrimSuffix(strings.TrimPrefix(sub[2], "<"), ">")
		if a := lookup(target); a != nil {
			return sub[1] + a.url
		}
		return m
	})
	body = htmlTarget.ReplaceAllStringFunc(body, func(m string) string {
		sub := htmlTarget.FindStringSubmatch(m)
		q := sub[2][:1]
		if a := lookup(sub[2][1 : len(sub[2])-1]); a != nil {
			return sub[1] + q + a.url + q
		}
		return m
	})
	var extra []string
	for _, a := range atts {
		if a.url == "" || mentioned[a] {
			continue
		}
		name := path.Base(a.abs)
		label := a.alt
		if label == "" {
			label = name
		}
		label = strings.NewReplacer("[", "", "]", "").Replace(label)
		if imageExt[strings.ToLower(path.Ext(name))] {
			extra = append(extra, "!["+label+"]("+a.url+")")
		} else {
			extra = append(extra, "["+label+"]("+a.url+")")
		}
	}
	if len(extra) > 0 {
		if strings.TrimSpace(body) != "" {
			body = strings.TrimRight(body, "\n") + "\n\n"
		}
		body += strings.Join(extra, "\n") + "\n"
	}
	return body
}

// ghItem is what a pull request or issue creation answered.
type ghItem struct {
	HTMLURL string `json:"html_url"`
	Number  int64  `json:"number"`
	Title   string `json:"title"`
	Base    struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

func warning(problems []string) *string {
	if len(problems) == 0 {
		return nil
	}
	w := strings.Join(problems, "; ")
	return &w
}

// GitCreatePR opens a pull request from the folder's current branch (which
// must have been pushed: a branch origin does not have is a 400) into
// base, or the repository's default branch.
// When one is already open for the branch, that one is answered, with a
// warning.
func (f *Git) GitCreatePR(ctx context.Context, req gen.GitCreatePRRequestObject) (gen.GitCreatePRResponseObject, error) {
	body := req.Body
	if body == nil || strings.TrimSpace(body.Title) == "" {
		return nil, errdefs.Invalid("title is required")
	}
	base := wire.Deref(body.Base)
	g, err := f.gitBox(ctx, req.ID, body.Folder)
	if err != nil {
		return nil, err
	}
	gh, repo, done, err := g.github(ctx, "a pull request")
	if err != nil {
		return nil, err
	}
	defer done()
	head, err := g.currentBranch(ctx)
	if err != nil {
		return nil, err
	}
	// A branch GitHub does not have yet fails now, before any attachment
	// is stored. (If origin cannot be asked, GitHub will say.)
	r, err := g.git(ctx, gitOpts{auth: true}, "ls-remote", "--exit-code", "--heads", "origin", "refs/heads/"+head)
	if err != nil {
		return nil, err
	}
	if r.code == 2 {
		return nil, errdefs.Invalid("the branch %s is not on origin: push it first", head)
	}
	atts, err := g.readAttachments(ctx, body.Attach)
	if err != nil {
		return nil, err
	}
	if base == "" {
		var info struct {
			DefaultBranch string `json:"default_branch"`
		}
		if err := gh.do(ctx, http.MethodGet, repo.path(), nil, &info); err != nil {
			return nil, apiErr(err, "")
		}
		base = info.DefaultBranch
	}
	problems := gh.upload(ctx, repo, g.b.ID, atts)
	text := rewriteBody(wire.Deref(body.Body), g.dir(), atts)
	var pr ghItem
	err = gh.do(ctx, http.MethodPost, repo.path()+"/pulls", map[string]string{"title": body.Title, "body": text, "head": head, "base": base}, &pr)
	var ge *ghError
	if errors.As(err, &ge) && ge.status == http.StatusUnprocessableEntity && strings.Contains(ge.msg, "already exists") {
		var open []ghItem
		q := url.Values{"state": {"open"}, "head": {repo.owner + ":" + head}, "base": {base}}
		if lerr := gh.do(ctx, http.MethodGet, repo.path()+"/pulls?"+q.Encode(), nil, &open); lerr == nil && len(open) > 0 {
			pr, err = open[0], nil
			problems = append(problems, "a pull request from "+head+" into "+base+" was already open: this is that one, unchanged")
		}
	}
	if err != nil {
		hint := ""
		if errors.As(err, &ge) && ge.status == http.StatusUnprocessableEntity && strings.Contains(ge.msg, "head") {
			hint = " (push the branch " + head + " first)"
		}
		return nil, apiErr(err, hint)
	}
	if pr.Base.Ref != "" {
		base = pr.Base.Ref
	}
	f.host.Logf(g.b.ID, "info", "system", "git: pull request "+pr.HTMLURL)
	return gen.GitCreatePR200JSONResponse{URL: pr.HTMLURL, Number: pr.Number, Title: pr.Title, Base: base, Warning: warning(problems)}, nil
}

// GitCreateIssue opens an issue on the repository of the folder's origin.
func (f *Git) GitCreateIssue(ctx context.Context, req gen.GitCreateIssueRequestObject) (gen.GitCreateIssueResponseObject, error) {
	body := req.Body
	if body == nil || strings.TrimSpace(body.Title) == "" {
		return nil, errdefs.Invalid("title is required")
	}
	g, err := f.gitBox(ctx, req.ID, body.Folder)
	if err != nil {
		return nil, err
	}
	gh, repo, done, err := g.github(ctx, "an issue")
	if err != nil {
		return nil, err
	}
	defer done()
	atts, err := g.readAttachments(ctx, body.Attach)
	if err != nil {
		return nil, err
	}
	problems := gh.upload(ctx, repo, g.b.ID, atts)
	text := rewriteBody(wire.Deref(body.Body), g.dir(), atts)
	var is ghItem
	if err := gh.do(ctx, http.MethodPost, repo.path()+"/issues", map[string]string{"title": body.Title, "body": text}, &is); err != nil {
		return nil, apiErr(err, "")
	}
	f.host.Logf(g.b.ID, "info", "system", "git: issue "+is.HTMLURL)
	return gen.GitCreateIssue200JSONResponse{URL: is.HTMLURL, Number: is.Number, Title: is.Title, Warning: warning(problems)}, nil
}
