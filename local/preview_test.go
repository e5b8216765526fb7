package local_test

// Public URLs on the wire as the newest official SDKs use them: the list
// item without secrets, both kinds of auth at once, credentials replaced
// by a second create, and requests that wake a paused box and are held
// until its port listens. Every box runs a real HTTP server (python3's)
// in a real sandbox.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// publicURLItem is an item of GET /v2/box/{id}/preview.
type publicURLItem struct {
	ID          string `json:"id"`
	Port        int    `json:"port"`
	URL         string `json:"url"`
	CreatedAt   int64  `json:"created_at"`
	BasicAuth   bool   `json:"basic_auth"`
	BearerToken bool   `json:"bearer_token"`
}

// publicGet sends a GET to a public URL: to boxd at base, with host as
// the Host header and no API key. It may run outside the test goroutine.
func publicGet(ctx context.Context, base, host string, hdr map[string]string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/", nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func bearerAuth(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

func basicAuth(user, password string) map[string]string {
	return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))}
}

// previewHost is the Host of box id's public URL of port on srv.
func previewHost(t *testing.T, srv *boxtest.Server, id string, p int) string {
	return fmt.Sprintf("%s-%d.localhost:%s", id, p, port(t, srv.URL()))
}

// startWhenTold starts, in the background in box b, a web server on port
// that serves "served on <port>" once the file /tmp/go-<port> exists, and
// not before: the test decides when the port begins to listen.
func startWhenTold(t *testing.T, b *box.Box, port int) {
	t.Helper()
	r, err := b.Exec.Command(t.Context(), fmt.Sprintf(`mkdir -p /tmp/www-%[1]d && echo served on %[1]d > /tmp/www-%[1]d/index.html
nohup sh -c 'while [ ! -e /tmp/go-%[1]d ]; do sleep 0.05; done; exec python3 -m http.server %[1]d --bind 127.0.0.1 -d /tmp/www-%[1]d' >/tmp/server-%[1]d.log 2>&1 &`, port))
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("starting the waiting server: %+v, %v", r, err)
	}
}

// tell lets the server of startWhenTold start listening.
func tell(t *testing.T, b *box.Box, port int) {
	t.Helper()
	if r, err := b.Exec.Command(t.Context(), fmt.Sprintf("touch /tmp/go-%d", port)); err != nil || r.ExitCode != 0 {
		t.Fatalf("touch: %+v, %v", r, err)
	}
}

func boxStatus(t *testing.T, c *rawClient, id string) string {
	t.Helper()
	r := c.do("GET", "/v2/box/"+id+"/status", nil, nil)
	wantOK(t, "status", r)
	var s struct{ Status string }
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	return s.Status
}

func createURL(t *testing.T, c *rawClient, id, body string) publicURL {
	t.Helper()
	r := c.do("POST", "/v2/box/"+id+"/preview", body, nil)
	wantOK(t, "POST preview "+body, r)
	var u publicURL
	if err := json.Unmarshal(r.body, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestPublicURLListItems: the list carries {id, port, url, created_at,
// basic_auth, bearer_token} and no credential; create returns them.
func TestPublicURLListItems(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	id := newBox(t, srv, nil).ID()
	before := time.Now().Unix()
	both := createURL(t, c, id, `{"port": 3000, "bearer_token": true, "basic_auth": true}`)
	bearer := createURL(t, c, id, `{"port": 8080, "bearer_token": true}`)
	basic := createURL(t, c, id, `{"port": 9000, "basic_auth": true, "wake_on_request": true}`)
	open := createURL(t, c, id, `{"port": 9001}`)
	after := time.Now().Unix()
	if both.Token == "" || both.Username == "" || both.Password == "" {
		t.Errorf("create with both auths = %+v, want a token, a user and a password", both)
	}

	r := c.do("GET", "/v2/box/"+id+"/preview", nil, nil)
	wantOK(t, "list", r)
	for _, secret := range []string{both.Token, both.Password, bearer.Token, basic.Password} {
		if strings.Contains(string(r.body), secret) {
			t.Errorf("the list carries a credential: %s", r.body)
		}
	}
	var raw struct{ Previews []map[string]any }
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, item := range raw.Previews {
		var keys []string
		for k := range item {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if want := []string{"basic_auth", "bearer_token", "created_at", "id", "port", "url"}; !slices.Equal(keys, want) {
			t.Errorf("list item keys = %v, want %v", keys, want)
		}
	}
	var got struct{ Previews []publicURLItem }
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := []publicURLItem{
		{ID: id + "-3000", Port: 3000, URL: both.URL, BasicAuth: true, BearerToken: true},
		{ID: id + "-8080", Port: 8080, URL: bearer.URL, BearerToken: true},
		{ID: id + "-9000", Port: 9000, URL: basic.URL, BasicAuth: true},
		{ID: id + "-9001", Port: 9001, URL: open.URL},
	}
	if len(got.Previews) != len(want) {
		t.Fatalf("list = %+v, want %+v", got.Previews, want)
	}
	for i, g := range got.Previews {
		if g.CreatedAt < before || g.CreatedAt > after {
			t.Errorf("%s created_at = %d, want between %d and %d", g.ID, g.CreatedAt, before, after)
		}
		g.CreatedAt = 0
		if g != want[i] {
			t.Errorf("list item %d = %+v, want %+v", i, g, want[i])
		}
	}
}

// TestPublicURLCredentials: a URL with both kinds of auth passes with
// either, and creating it again replaces the credentials, the old ones
// failing at once.
func TestPublicURLCredentials(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	id := b.ID()
	startWhenTold(t, b, 8000)
	tell(t, b, 8000)
	host := previewHost(t, srv, id, 8000)
	get := func(hdr map[string]string) response {
		t.Helper()
		r, err := publicGet(t.Context(), srv.URL(), host, hdr)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	u := createURL(t, c, id, `{"port": 8000, "bearer_token": true, "basic_auth": true}`)
	if r := get(bearerAuth(u.Token)); r.status != 200 || string(r.body) != "served on 8000\n" {
		t.Errorf("with the token: %s", r)
	}
	if r := get(basicAuth(u.Username, u.Password)); r.status != 200 || string(r.body) != "served on 8000\n" {
		t.Errorf("with the user and password: %s", r)
	}
	r := get(nil)
	wantError(t, "no credentials", r, 401, "unauthorized")
	if got := r.header.Values("WWW-Authenticate"); len(got) != 2 || !strings.HasPrefix(got[0], "Bearer ") || !strings.HasPrefix(got[1], "Basic ") {
		t.Errorf("WWW-Authenticate = %q, want a Bearer and a Basic challenge", got)
	}
	wantError(t, "wrong token", get(bearerAuth(u.Token+"x")), 401)
	wantError(t, "wrong password", get(basicAuth(u.Username, u.Token)), 401)

	// The same kinds again: new credentials, and only those pass.
	again := createURL(t, c, id, `{"port": 8000, "bearer_token": true, "basic_auth": true}`)
	if again.Token == u.Token || again.Password == u.Password || again.URL != u.URL {
		t.Errorf("second create = %+v, want new credentials for the same URL (first %+v)", again, u)
	}
	wantError(t, "old token", get(bearerAuth(u.Token)), 401)
	wantError(t, "old password", get(basicAuth(u.Username, u.Password)), 401)
	if r := get(bearerAuth(again.Token)); r.status != 200 {
		t.Errorf("new token: %s", r)
	}
	if r := get(basicAuth(again.Username, again.Password)); r.status != 200 {
		t.Errorf("new password: %s", r)
	}

	// Bearer alone: basic auth is gone.
	last := createURL(t, c, id, `{"port": 8000, "bearer_token": true}`)
	if last.Username != "" || last.Password != "" || last.Token == "" || last.Token == again.Token {
		t.Errorf("bearer-only create = %+v", last)
	}
	wantError(t, "basic auth after bearer-only", get(basicAuth(again.Username, again.Password)), 401)
	wantError(t, "previous token", get(bearerAuth(again.Token)), 401)
	if r := get(bearerAuth(last.Token)); r.status != 200 {
		t.Errorf("last token: %s", r)
	}
	if r := get(nil); r.header.Get("WWW-Authenticate") == "" || len(r.header.Values("WWW-Authenticate")) != 1 {
		t.Errorf("WWW-Authenticate of a bearer-only URL = %q", r.header.Values("WWW-Authenticate"))
	}
}

// TestPublicURLWakesPausedBox: a request to a paused box's public URL is
// checked first (bad credentials leave the box paused), then wakes the
// box and is held until the port listens; a request to a running box
// whose port does not listen yet is held the same way; creating a URL
// resumes a paused box.
func TestPublicURLWakesPausedBox(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t) // the default hold, 30 s
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	id := b.ID()
	startWhenTold(t, b, 8000)
	startWhenTold(t, b, 8001)
	u := createURL(t, c, id, `{"port": 8000, "bearer_token": true}`)
	createURL(t, c, id, `{"port": 8001}`)

	type result struct {
		r   response
		err error
		at  time.Time
	}
	send := func(p int, hdr map[string]string) <-chan result {
		ch := make(chan result, 1)
		host := previewHost(t, srv, id, p)
		go func() {
			r, err := publicGet(t.Context(), srv.URL(), host, hdr)
			ch <- result{r, err, time.Now()}
		}()
		return ch
	}
	// held checks that a request is still waiting, d after it was sent.
	held := func(what string, ch <-chan result, d time.Duration) {
		t.Helper()
		select {
		case res := <-ch:
			t.Fatalf("%s was answered while nothing listened: %s, %v", what, res.r, res.err)
		case <-time.After(d):
		}
	}
	answered := func(what string, ch <-chan result, told time.Time, body string) {
		t.Helper()
		res := <-ch
		if res.err != nil || res.r.status != 200 || string(res.r.body) != body {
			t.Fatalf("%s: %s, %v; want 200 %q", what, res.r, res.err, body)
		}
		if res.at.Before(told) {
			t.Errorf("%s was answered before the server was told to listen", what)
		}
	}

	// A running box whose port does not listen yet.
	ch := send(8001, nil)
	held("a request to a port that does not listen yet", ch, 700*time.Millisecond)
	told := time.Now()
	tell(t, b, 8001)
	answered("the held request to the running box", ch, told, "served on 8001\n")

	// A paused box: bad credentials do not wake it.
	wantOK(t, "pause", c.do("POST", "/v2/box/"+id+"/pause", nil, nil))
	if st := boxStatus(t, c, id); st != "paused" {
		t.Fatalf("status after pause = %s", st)
	}
	for _, hdr := range []map[string]string{nil, bearerAuth("wrong")} {
		r, err := publicGet(t.Context(), srv.URL(), previewHost(t, srv, id, 8000), hdr)
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, fmt.Sprintf("paused box, Authorization %q", hdr["Authorization"]), r, 401, "unauthorized")
	}
	time.Sleep(200 * time.Millisecond)
	if st := boxStatus(t, c, id); st != "paused" {
		t.Fatalf("a request with bad credentials woke the box: status %s", st)
	}

	// The right token wakes it, and the request waits for the port.
	ch = send(8000, bearerAuth(u.Token))
	if !waitFor(20*time.Second, func() bool { return boxStatus(t, c, id) != "paused" }) {
		t.Fatal("the public URL request did not wake the paused box")
	}
	held("the request that woke the box", ch, 700*time.Millisecond)
	told = time.Now()
	tell(t, b, 8000)
	answered("the request that woke the box", ch, told, "served on 8000\n")

	// POST /preview on a paused box resumes it; its server, frozen while
	// it was paused, answers the new token at once.
	wantOK(t, "pause again", c.do("POST", "/v2/box/"+id+"/pause", nil, nil))
	if st := boxStatus(t, c, id); st != "paused" {
		t.Fatalf("status after the second pause = %s", st)
	}
	again := createURL(t, c, id, `{"port": 8000, "bearer_token": true}`)
	if st := boxStatus(t, c, id); st == "paused" {
		t.Errorf("status after POST /preview on a paused box = %s, want it resumed", st)
	}
	start := time.Now()
	r, err := publicGet(t.Context(), srv.URL(), previewHost(t, srv, id, 8000), bearerAuth(again.Token))
	if err != nil || r.status != 200 {
		t.Errorf("after the resume: %s, %v", r, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the resumed box's server took %s to answer", d)
	}
}

// TestPublicURLHoldRunsOut: a request whose port does not listen within
// the hold is answered 503 with Retry-After: 5 (a page that reloads
// itself for a browser); the box it woke stays awake.
func TestPublicURLHoldRunsOut(t *testing.T) {
	t.Parallel()
	const hold = time.Second
	srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) { c.PublicURLHold = hold }))
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	id := b.ID()
	createURL(t, c, id, `{"port": 8000}`)
	wantOK(t, "pause", c.do("POST", "/v2/box/"+id+"/pause", nil, nil))

	host := previewHost(t, srv, id, 8000)
	for _, accept := range []string{"", "text/html,application/xhtml+xml,*/*;q=0.8"} {
		start := time.Now()
		r, err := publicGet(t.Context(), srv.URL(), host, map[string]string{"Accept": accept})
		d := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if d < hold || d > hold+10*time.Second {
			t.Errorf("Accept %q: answered after %s, want about the hold (%s)", accept, d, hold)
		}
		if r.status != 503 || r.header.Get("Retry-After") != "5" {
			t.Errorf("Accept %q: %d with Retry-After %q, want 503 and 5", accept, r.status, r.header.Get("Retry-After"))
		}
		if accept == "" {
			wantError(t, "a port that never listens", r, 503, "nothing listened on port 8000", "try again")
		} else if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(string(r.body), `http-equiv="refresh" content="5"`) {
			t.Errorf("for a browser: Content-Type %q, body %q; want a page that reloads itself", ct, r.body)
		}
	}
	if st := boxStatus(t, c, id); st == "paused" {
		t.Errorf("the box the request woke is %s", st)
	}
}

// startApp runs the Python program app in b, in the background, and
// waits until it listens on port.
func startApp(t *testing.T, b *box.Box, port int, app string) {
	t.Helper()
	if err := b.Files.WriteText(t.Context(), "/tmp/app.py", app); err != nil {
		t.Fatal(err)
	}
	r, err := b.Exec.Command(t.Context(), fmt.Sprintf(`nohup python3 /tmp/app.py >/tmp/app.log 2>&1 &
for i in $(seq 100); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", %d))' 2>/dev/null && exit 0; sleep 0.1; done; cat /tmp/app.log; exit 1`, port))
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("starting the app: %+v, %v", r, err)
	}
}

// TestPublicURLCookiesStayWithTheirBox: box A's app sets, in its
// answers' headers, cookies for every name above its host (the preview
// domain, and .localhost), for its host and for no domain. A cookie jar
// that keeps whatever domain it is given (Go's without a public suffix
// list, like curl without libpsl) and that visited A's URL sends none of
// them to box B's URL, and still sends A's to A: boxd takes the Domain
// off a cookie that reaches above the URL's host. That holds under the
// default name of public URLs and under an operator's PublicURLBase.
func TestPublicURLCookiesStayWithTheirBox(t *testing.T) {
	t.Parallel()
	for name, base := range map[string]string{"default": "", "operator": "http://preview.localhost"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) { c.PublicURLBase = base }))
			c := rawFor(t, srv)
			const p = 8123
			var hosts []string
			for range 2 {
				b := newBox(t, srv, nil)
				startApp(t, b, p, fmt.Sprintf(`import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        host = self.headers.get("Host", "").split(":")[0]
        self.send_response(200)
        self.send_header("Set-Cookie", "wide=1; Domain=" + host.split(".", 1)[1] + "; Path=/")
        self.send_header("Set-Cookie", "wider=1; domain=.localhost; Path=/; HttpOnly")
        self.send_header("Set-Cookie", "own=1; Domain=" + host + "; Path=/")
        self.send_header("Set-Cookie", "plain=1; Path=/")
        self.end_headers()
        self.wfile.write(("cookies: " + self.headers.get("Cookie", "") + "\n").encode())
http.server.HTTPServer(("127.0.0.1", %d), H).serve_forever()
`, p))
				u := createURL(t, c, b.ID(), fmt.Sprintf(`{"port": %d}`, p))
				hosts = append(hosts, strings.TrimPrefix(u.URL, "http://"))
			}
			jar, err := cookiejar.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			addr := strings.TrimPrefix(srv.URL(), "http://")
			tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}}
			t.Cleanup(tr.CloseIdleConnections)
			hc := &http.Client{Transport: tr, Jar: jar}
			get := func(host string) string {
				t.Helper()
				resp, err := hc.Get("http://" + host + "/")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %d %s", host, resp.StatusCode, body)
				}
				hostname, _, _ := strings.Cut(host, ":")
				for _, sc := range resp.Header.Values("Set-Cookie") {
					for attr := range strings.SplitSeq(sc, ";") {
						name, value, _ := strings.Cut(strings.TrimSpace(attr), "=")
						if strings.EqualFold(name, "domain") && !strings.EqualFold(value, hostname) {
							t.Errorf("GET %s: Set-Cookie %q reaches above the URL's host", host, sc)
						}
					}
				}
				return string(body)
			}
			get(hosts[0])
			if got := get(hosts[1]); got != "cookies: \n" {
				t.Errorf("box B's app got %q: cookies of box A's app reached it", got)
			}
			got := get(hosts[0])
			for _, want := range []string{"wide=1", "wider=1", "own=1", "plain=1"} {
				if !strings.Contains(got, want) {
					t.Errorf("box A's app got %q, want its own cookie %s back", got, want)
				}
			}
		})
	}
}

// cookieApp serves, on the port fmt puts in it, /set: a page whose script
// sets a cookie for each name above its host (js1 for the first, js2 for
// the next...) and one for its host alone (own), and names in its title
// the domains it tried; and any other path: a page that shows the
// Cookie header it came with.
const cookieApp = `import html, http.server
PAGE = """<!doctype html><script>
const parts = location.hostname.split(".");
const tried = [];
for (let i = 1; i < parts.length; i++) {
  const d = parts.slice(i).join(".");
  document.cookie = "js" + i + "=1; path=/; domain=" + d;
  tried.push(d);
}
document.cookie = "own=1; path=/";
document.title = "tried " + tried.join(" ");
</script>"""
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PAGE if self.path == "/set" else "<!doctype html><title>shown</title><pre id=got>" + html.escape(self.headers.get("Cookie", "")) + "</pre>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(body.encode())
http.server.HTTPServer(("127.0.0.1", %d), H).serve_forever()
`

// TestPublicURLsAreSitesOfTheirOwn: in a real browser (Chromium), box A's
// page sets from its script, where boxd never sees it, a cookie for every
// name above its URL's host. Box B's page, visited next in the same
// browser, receives none of them, neither in its request nor in its
// script: each public URL's host is a site of its own, a name right
// under localhost, which browsers hold to be a public suffix, so no page
// can set a cookie above its host. (Under the former names,
// {box-id}-{port}.preview.localhost, the cookie for preview.localhost
// reached every box.) A's host-only cookie still comes back to A.
func TestPublicURLsAreSitesOfTheirOwn(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	const p = 8124
	var urls []string
	for range 2 {
		b := newBox(t, srv, nil)
		startApp(t, b, p, fmt.Sprintf(cookieApp, p))
		urls = append(urls, createURL(t, c, b.ID(), fmt.Sprintf(`{"port": %d}`, p)).URL)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.Flag("no-proxy-server", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	visit := func(url, expr string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatalf("Chromium at %s: %v", url, err)
		}
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("Chromium at %s: %s: %v", url, expr, err)
		}
		return v
	}

	tried := visit(urls[0]+"/set", "document.title")
	if !strings.HasPrefix(tried, "tried ") || len(strings.Fields(tried)) < 2 {
		t.Fatalf("box A's page: %q, want the domains it set cookies for", tried)
	}
	if got := visit(urls[0]+"/set", "document.cookie"); !strings.Contains(got, "own=1") {
		t.Fatalf("box A's page kept no cookie of its own (%q): the browser keeps no cookies at all", got)
	}
	if got := visit(urls[1]+"/", "document.getElementById('got').textContent + ' | ' + document.cookie"); got != " | " {
		t.Errorf("box B's app got the cookies %q (request | script) after box A's page %s", got, tried)
	}
	if got := visit(urls[0]+"/", "document.getElementById('got').textContent"); !strings.Contains(got, "own=1") {
		t.Errorf("box A's app got %q, want its own cookie back", got)
	}
}
