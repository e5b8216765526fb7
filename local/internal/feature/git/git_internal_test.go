package git

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/upstash/box-go/local/internal/errdefs"
)

func TestResolveRepo(t *testing.T) {
	gh := &Git{}
	ghe := &Git{}
	ghe.cfg.GitHubURL = "http://host.boxd.internal:8080/"
	for _, tc := range []struct {
		s          *Git
		repo, want string
	}{
		{gh, "octo/hello", "https://github.com/octo/hello"},
		{gh, "octo/hello.git", "https://github.com/octo/hello.git"},
		{gh, "github.com/octo/hello", "https://github.com/octo/hello"},
		{gh, "https://github.com/octo/hello", "https://github.com/octo/hello"},
		{gh, "gitlab.com/octo/hello", "https://gitlab.com/octo/hello"},
		{gh, "git@github.com:octo/hello.git", "git@github.com:octo/hello.git"},
		{gh, "ssh://git@github.com/octo/hello.git", "ssh://git@github.com/octo/hello.git"},
		{gh, "http://127.0.0.1:9000/x/y", "http://127.0.0.1:9000/x/y"},
		{ghe, "octo/hello", "http://host.boxd.internal:8080/octo/hello"},
		{ghe, "host.boxd.internal:8080/octo/hello", "http://host.boxd.internal:8080/octo/hello"},
		{ghe, "github.com/octo/hello", "https://github.com/octo/hello"},
	} {
		got, err := tc.s.resolveRepo(tc.repo)
		if err != nil || got != tc.want {
			t.Errorf("resolveRepo(%q) = %q, %v; want %q", tc.repo, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "hello", "-u/x", "--upload-pack=x", "a b/c", "ext::sh -c x", "octo/hello/extra", "a/b/c/d"} {
		if got, err := gh.resolveRepo(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("resolveRepo(%q) = %q, %v; want an invalid argument", bad, got, err)
		}
	}
}

func TestGitHubURLs(t *testing.T) {
	for _, tc := range []struct{ web, api, wantWeb, wantAPI string }{
		{"", "", "https://github.com", "https://api.github.com"},
		{"https://github.com/", "", "https://github.com", "https://api.github.com"},
		{"https://ghe.example.com", "", "https://ghe.example.com", "https://ghe.example.com/api/v3"},
		{"http://h:1", "http://127.0.0.1:2/", "http://h:1", "http://127.0.0.1:2"},
	} {
		s := &Git{}
		s.cfg.GitHubURL, s.cfg.GitHubAPIURL = tc.web, tc.api
		if web, api := s.githubURLs(); web != tc.wantWeb || api != tc.wantAPI {
			t.Errorf("githubURLs(%q, %q) = %q, %q", tc.web, tc.api, web, api)
		}
	}
}

func TestParseRemote(t *testing.T) {
	for _, tc := range []struct {
		remote, host, owner, name string
	}{
		{"https://github.com/octo/hello", "github.com", "octo", "hello"},
		{"https://github.com/octo/hello.git", "github.com", "octo", "hello"},
		{"https://user@github.com/octo/hello.git/", "github.com", "octo", "hello"},
		{"http://host.boxd.internal:4000/octo/hello", "host.boxd.internal", "octo", "hello"},
		{"git@github.com:octo/hello.git", "github.com", "octo", "hello"},
		{"ssh://git@github.com:22/octo/hello.git", "github.com", "octo", "hello"},
		{"https://ghe.example.com/scm/octo/hello", "ghe.example.com", "octo", "hello"},
	} {
		host, repo, ok := parseRemote(tc.remote)
		if !ok || host != tc.host || repo.owner != tc.owner || repo.name != tc.name {
			t.Errorf("parseRemote(%q) = %q %+v %v", tc.remote, host, repo, ok)
		}
	}
	for _, bad := range []string{"", "/srv/repo", "https://github.com/octo", "file:///srv/repo"} {
		if host, repo, ok := parseRemote(bad); ok {
			t.Errorf("parseRemote(%q) = %q %+v, want not ok", bad, host, repo)
		}
	}
}

func TestScrub(t *testing.T) {
	tok := "ghp_abcdefghijklmnop"
	s := secretsOf(tok, "", "x")
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok))
	in := "token " + tok + " header Authorization: Basic " + basic + " url https://x-access-token:" + tok + "@github.com/o/r and https://me:pw@h/x"
	got := s.scrub(in)
	if strings.Contains(got, tok) || strings.Contains(got, basic) || strings.Contains(got, ":pw@") {
		t.Errorf("scrub left a secret: %q", got)
	}
	if !strings.Contains(got, "https://me:***@h/x") {
		t.Errorf("scrub(%q) = %q", in, got)
	}
	if got := secretsOf("").scrub("plain text"); got != "plain text" {
		t.Errorf("scrub without secrets = %q", got)
	}
}

func TestRewriteBody(t *testing.T) {
	dir := "/workspace/home/app"
	shot := &ghAttachment{abs: "/workspace/home/app/shots/a b.png", alt: "the screen", url: "https://u/shot?raw=true"}
	clip := &ghAttachment{abs: "/workspace/home/app/clip.mp4", url: "https://u/clip?raw=true"}
	tmp := &ghAttachment{abs: "/tmp/log.txt", alt: "log", url: "https://u/log?raw=true"}
	failed := &ghAttachment{abs: "/workspace/home/app/failed.png"}
	atts := []*ghAttachment{shot, clip, tmp, failed}
	for _, tc := range []struct{ body, want string }{
		{
			"![x](./shots/a%20b.png) <video src='clip.mp4'></video> ![f](failed.png)",
			"![x](https://u/shot?raw=true) <video src='https://u/clip?raw=true'></video> ![f](failed.png)\n\n[log](https://u/log?raw=true)\n",
		},
		{
			"see ![x](<shots/a b.png>) and [log](/tmp/log.txt) [ext](https://example.com/clip.mp4) [frag](#clip.mp4)",
			"see ![x](https://u/shot?raw=true) and [log](https://u/log?raw=true) [ext](https://example.com/clip.mp4) [frag](#clip.mp4)\n\n[clip.mp4](https://u/clip?raw=true)\n",
		},
		{
			"",
			"![the screen](https://u/shot?raw=true)\n[clip.mp4](https://u/clip?raw=true)\n[log](https://u/log?raw=true)\n",
		},
		{
			"<img src=\"../app/shots/a b.png\" width=200>\n\n",
			"<img src=\"https://u/shot?raw=true\" width=200>\n\n[clip.mp4](https://u/clip?raw=true)\n[log](https://u/log?raw=true)\n",
		},
	} {
		if got := rewriteBody(tc.body, dir, atts); got != tc.want {
			t.Errorf("rewriteBody(%q) =\n%q\nwant\n%q", tc.body, got, tc.want)
		}
	}
	if got := rewriteBody("![x](./failed.png)", dir, []*ghAttachment{failed}); got != "![x](./failed.png)" {
		t.Errorf("a body with nothing uploaded changed: %q", got)
	}
}

func TestRepoDirNameAndSameRepo(t *testing.T) {
	for u, want := range map[string]string{
		"https://github.com/octo/hello":      "hello",
		"https://github.com/octo/hello.git":  "hello",
		"https://github.com/octo/hello/.git": "hello",
		"git@github.com:octo/hello.git":      "hello",
		"http://127.0.0.1:9000/x/y/":         "y",
	} {
		if got := repoDirName(u); got != want {
			t.Errorf("repoDirName(%q) = %q, want %q", u, got, want)
		}
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://github.com/octo/hello", "https://github.com/octo/hello.git", true},
		{"https://github.com/octo/hello/", "https://github.com/octo/hello", true},
		{"https://github.com/octo/hello", "https://github.com/octo/hello2", false},
		{"https://github.com/octo/hello", "https://github.com/other/hello", false},
	} {
		if got := sameRepo(tc.a, tc.b); got != tc.want {
			t.Errorf("sameRepo(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
