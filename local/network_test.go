package local_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// hostRequest sends a request to boxd at base with the given Host header
// and no API key, as a browser opening a public URL would.
func hostRequest(t *testing.T, base, host, auth string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", base, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func port(t *testing.T, rawURL string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(rawURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type publicURL struct {
	URL      string `json:"url"`
	Port     int    `json:"port"`
	Token    string `json:"token,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// shortHold makes a public URL request wait 300 ms for its port, not 30 s.
var shortHold = boxtest.WithConfig(func(c *local.Config) { c.PublicURLHold = 300 * time.Millisecond })

// TestPreviewAPI checks the public URL endpoints on the wire, the routing
// by Host, and that public URLs survive a restart of boxd.
func TestPreviewAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var id string
	var created []publicURL
	t.Run("first", func(t *testing.T) {
		srv := boxtest.NewServer(t, boxtest.WithDataDir(dir), shortHold)
		c := rawFor(t, srv)
		id = newBox(t, srv, nil).ID()
		base := "/v2/box/" + id + "/preview"

		if r := c.do("GET", base, nil, nil); r.status != 200 || string(r.body) != `{"previews":[]}`+"\n" {
			t.Errorf("empty list = %s", r)
		}
		wantError(t, "no port", c.do("POST", base, `{}`, nil), 400, "port")
		wantError(t, "port too high", c.do("POST", base, `{"port": 70000}`, nil), 400, "65535")
		wantError(t, "proxy port", c.do("POST", base, `{"port": 3128}`, nil), 400, "egress proxy")
		wantError(t, "unknown box", c.do("POST", "/v2/box/box-nope/preview", `{"port": 3000}`, nil), 404, "box not found")
		wantError(t, "delete unknown port", c.do("DELETE", base+"/5000", nil, nil), 404, "5000")
		wantError(t, "delete bad port", c.do("DELETE", base+"/abc", nil, nil), 400)

		for _, body := range []string{`{"port": 3000, "bearer_token": true}`, `{"port": 8080, "basic_auth": true, "bearer_token": false}`, `{"port": 9000}`} {
			r := c.do("POST", base, body, nil)
			wantOK(t, body, r)
			var u publicURL
			if err := json.Unmarshal(r.body, &u); err != nil {
				t.Fatal(err)
			}
			created = append(created, u)
		}
		want := fmt.Sprintf("http://%s-3000.localhost:%s", id, port(t, srv.URL()))
		if u := created[0]; u.URL != want || u.Port != 3000 || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(u.Token) || u.Username != "" {
			t.Errorf("bearer public URL = %+v, want URL %s and a token", u, want)
		}
		if u := created[1]; u.Username != "user" || len(u.Password) != 32 || u.Token != "" {
			t.Errorf("basic public URL = %+v", u)
		}
		if u := created[2]; u.Token != "" || u.Username != "" || u.Password != "" {
			t.Errorf("open public URL = %+v", u)
		}

		// Public URL requests carry no API key; they are told apart by
		// Host alone.
		h := func(p int) string { return fmt.Sprintf("%s-%d.localhost:%s", id, p, port(t, srv.URL())) }
		wantError(t, "bearer without token", hostRequest(t, srv.URL(), h(3000), ""), 401, "unauthorized")
		wantError(t, "bearer, nothing listening", hostRequest(t, srv.URL(), h(3000), "Bearer "+created[0].Token), 503, "nothing listened on port 3000")
		wantError(t, "open, nothing listening", hostRequest(t, srv.URL(), strings.ToUpper(h(9000)), ""), 503, "port 9000")
		wantError(t, "port without a URL", hostRequest(t, srv.URL(), h(4000), ""), 404, "no public URL for port 4000")
		wantError(t, "unknown box", hostRequest(t, srv.URL(), "box-nope-3000.localhost", ""), 404, "no public URL")
		// Anything else is an API request, which needs the key: the
		// former names under preview.localhost too.
		for _, host := range []string{"localhost", "x.localhost", id + "-3000.other.localhost", id + "-3000.preview.localhost", id + "-0.localhost", "a." + h(3000)} {
			wantError(t, "Host "+host, hostRequest(t, srv.URL(), host, ""), 401, "unauthorized")
		}
	})

	// After a restart the URLs are there, with the same credentials, on
	// the new port.
	srv := boxtest.NewServer(t, boxtest.WithDataDir(dir), shortHold)
	c := rawFor(t, srv)
	r := c.do("GET", "/v2/box/"+id+"/preview", nil, nil)
	wantOK(t, "list after restart", r)
	var got struct{ Previews []publicURLItem }
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	var want []publicURLItem
	for _, u := range created {
		want = append(want, publicURLItem{
			ID: fmt.Sprintf("%s-%d", id, u.Port), Port: u.Port,
			URL:         strings.Replace(u.URL, port(t, u.URL), port(t, srv.URL()), 1),
			BearerToken: u.Token != "", BasicAuth: u.Username != "",
		})
	}
	if diff := cmp.Diff(want, got.Previews, cmpopts.IgnoreFields(publicURLItem{}, "CreatedAt")); diff != "" {
		t.Errorf("public URLs after restart (-want +got):\n%s", diff)
	}
	host := fmt.Sprintf("%s-3000.localhost", id)
	wantError(t, "after restart, with token", hostRequest(t, srv.URL(), host, "Bearer "+created[0].Token), 503, "nothing listened")
	wantError(t, "after restart, without token", hostRequest(t, srv.URL(), host, ""), 401)

	// Deleting the box deletes its public URLs.
	wantOK(t, "delete box", c.do("DELETE", "/v2/box/"+id, nil, nil))
	wantError(t, "after box delete", hostRequest(t, srv.URL(), host, "Bearer "+created[0].Token), 404)
}

func TestNetworkPolicyAPI(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	id := newBox(t, srv, nil).ID()
	path := "/v2/box/" + id + "/config/network-policy"
	for _, tc := range []struct{ body, msg string }{
		{`{}`, "mode is required"},
		{`{"mode": "open"}`, `"open"`},
		{`{"mode": "custom"}`, "needs allowed_domains"},
		{`{"mode": "allow-all", "allowed_domains": ["x.com"]}`, "only to mode custom"},
		{`{"mode": "custom", "allowed_cidrs": ["10.0.0.0/40"]}`, "allowed_cidrs"},
		{`{"mode": "custom", "allowed_domains": ["https://x.com/"]}`, "allowed_domains"},
	} {
		wantError(t, "PUT "+tc.body, c.do("PUT", path, tc.body, nil), 400, tc.msg)
	}
	wantError(t, "unknown box", c.do("PUT", "/v2/box/box-nope/config/network-policy", `{"mode": "deny-all"}`, nil), 404)

	policy := `{"mode":"custom","allowed_domains":["api.example.com","*.example.org"],"allowed_cidrs":["203.0.113.0/24"],"denied_cidrs":["10.0.0.0/8"]}`
	wantOK(t, "PUT custom", c.do("PUT", path, policy, nil))
	r := c.do("GET", "/v2/box/"+id, nil, nil)
	wantOK(t, "GET box", r)
	var data struct {
		NetworkPolicy json.RawMessage `json:"network_policy"`
	}
	var gotPolicy, wantPolicy any
	_ = json.Unmarshal([]byte(policy), &wantPolicy)
	if err := json.Unmarshal(r.body, &data); err != nil || json.Unmarshal(data.NetworkPolicy, &gotPolicy) != nil || !cmp.Equal(gotPolicy, wantPolicy) {
		t.Errorf("network_policy after PUT = %s, %v; want %s", data.NetworkPolicy, err, policy)
	}

	// Create checks the policy and attach_headers the same way, and never
	// echoes a header value.
	wantError(t, "create with empty custom", c.do("POST", "/v2/box", `{"network_policy": {"mode": "custom"}}`, nil), 400, "network_policy")
	r = c.do("POST", "/v2/box", `{"attach_headers": {"api.example.com": {"Authorization": "Bearer top\r\nsecret"}}}`, nil)
	wantError(t, "create with a bad header value", r, 400, "attach_headers", "Authorization")
	if strings.Contains(string(r.body), "top") {
		t.Errorf("the error quotes the header value: %s", r.body)
	}
	wantError(t, "create with a bad pattern", c.do("POST", "/v2/box", `{"attach_headers": {"https://x.com": {"A": "b"}}}`, nil), 400, "attach_headers")
}

// TestPublicURLBase runs boxd with its public URLs under a domain of the
// user's choosing.
func TestPublicURLBase(t *testing.T) {
	t.Parallel()
	if _, err := local.New(local.Config{DataDir: t.TempDir(), APIKey: "k", Isolation: isolation(t), PublicURLBase: "ftp://x"}); err == nil || !strings.Contains(err.Error(), "PublicURLBase") {
		t.Errorf("New with a bad PublicURLBase = %v", err)
	}
	key := "box_test_" + randHex(8)
	srv, err := local.New(local.Config{DataDir: t.TempDir(), APIKey: key, Isolation: isolation(t), PublicURLBase: "https://Preview.Example.test:8443", PublicURLHold: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	client, err := box.NewClient(box.WithAPIKey(key), box.WithBaseURL(ts.URL), box.WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Create(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := b.GetPublicURL(t.Context(), 3000, nil)
	if err != nil || u.URL != "https://"+b.ID()+"-3000.preview.example.test:8443" {
		t.Errorf("GetPublicURL = %+v, %v", u, err)
	}
	wantError(t, "routed by the configured domain", hostRequest(t, ts.URL, b.ID()+"-3000.preview.example.test:8443", ""), 503, "nothing listened")
	wantError(t, "the default domain is not", hostRequest(t, ts.URL, b.ID()+"-3000.localhost", ""), 401, "unauthorized")
}

// TestNetworkIsolationNone: without isolation a box shares the host's
// network, so nothing is enforced, but the proxy still serves programs
// that use it, on a free port.
func TestNetworkIsolationNone(t *testing.T) {
	t.Parallel()
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }))
	defer host.Close()
	srv := boxtest.NewServer(t, boxtest.WithIsolation(local.IsolationNone))
	b := newBox(t, srv, &box.CreateParams{NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkDenyAll}})
	r, err := b.Exec.Command(t.Context(), `echo "$HTTP_PROXY"; curl -sS -f --noproxy '' --max-time 10 `+host.URL+`/`)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+\n`).MatchString(r.Stdout) || r.Stdout == "http://127.0.0.1:3128\n" || !strings.Contains(r.Stderr, "403") {
		t.Errorf("deny-all box without isolation, through the proxy: %q %q", r.Stdout, r.Stderr)
	}
	if err := b.UpdateNetworkPolicy(t.Context(), box.NetworkPolicy{Mode: box.NetworkAllowAll}); err != nil {
		t.Fatal(err)
	}
	r, err = b.Exec.Command(t.Context(), `curl -sS --noproxy '' --max-time 10 `+host.URL+`/`)
	if err != nil || r.Stdout != "reached" {
		t.Errorf("allow-all box without isolation, through the proxy: %+v, %v", r, err)
	}
}
