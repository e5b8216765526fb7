package box_test

// End-to-end tests of box networking against a real boxd with real
// sandboxes: public URLs into boxes' ports (HTTP, auth, WebSocket) and
// the egress proxy out of them (network policies, attach_headers).
//
// Every destination is on this machine's loopback. Test host names
// (allowed.test, api.example.com, ...) are mapped to loopback addresses by
// the resolver boxd is given, so nothing ever reaches DNS; the name
// host.boxd.internal is boxd's own alias for the host's 127.0.0.1.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/local"
)

// netServer is boxd for these tests. It is set up by hand rather than
// with boxtest because it needs two settings boxtest does not offer: the
// resolver for test names and an extra trusted root for attach_headers.
type netServer struct {
	srv     *local.Server
	addr    string // host:port of boxd
	key     string
	client  *box.Client
	logs    *lockedBuffer
	dataDir string // boxd's
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type netOptions struct {
	names map[string]string // test host name → loopback address
	roots *x509.CertPool
	// offHost runs boxd as cmd/boxd does by default: boxes never reach
	// the host's loopback.
	offHost bool
	// lookups, when set, is told of every name boxd resolves for a box.
	lookups func(host string)
	// hold is local.Config.PublicURLHold (zero: boxd's default, 30 s).
	hold time.Duration
}

func newNetServer(t testing.TB, o netOptions) *netServer {
	t.Helper()
	if err := local.CheckIsolation(); err != nil {
		if os.Getenv("BOXTEST_REQUIRE_BWRAP") != "" {
			t.Fatalf("bubblewrap is required: %v", err)
		}
		t.Skipf("networking needs isolated boxes: %v", err)
	}
	var kb [16]byte
	_, _ = rand.Read(kb[:])
	ns := &netServer{key: "box_test_" + hex.EncodeToString(kb[:]), logs: &lockedBuffer{}, dataDir: t.TempDir()}
	srv, err := local.New(local.Config{
		AllowHostLoopback: !o.offHost, // the test servers on 127.0.0.1 stand in for the network
		DataDir:           ns.dataDir,
		APIKey:            ns.key,
		Logger:            slog.New(slog.NewTextHandler(ns.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		EgressRootCAs:     o.roots,
		PublicURLHold:     o.hold,
		EgressResolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if o.lookups != nil {
				o.lookups(host)
			}
			if a, ok := o.names[host]; ok {
				return []netip.Addr{netip.MustParseAddr(a)}, nil
			}
			return nil, fmt.Errorf("test resolver: %s is not a test name", host)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ns.srv, ns.addr = srv, l.Addr().String()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		_ = hs.Close()
		_ = srv.Close()
	})
	ns.client, err = box.NewClient(box.WithAPIKey(ns.key), box.WithBaseURL("http://"+ns.addr), box.WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func (ns *netServer) create(t testing.TB, p *box.CreateParams) *box.Box {
	t.Helper()
	b, err := ns.client.Create(t.Context(), p)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return b
}

// sh runs a command in the box and returns its result; a failed request
// fails the test, a failed command does not.
func sh(t testing.TB, b *box.Box, cmd string) *box.Run {
	t.Helper()
	r, err := b.Exec.Command(t.Context(), cmd)
	if err != nil {
		t.Fatalf("Exec.Command(%q): %v", cmd, err)
	}
	return r
}

// serveInBox starts cmd in the background in the box and waits until
// something answers HTTP on port inside the box.
func serveInBox(t testing.TB, b *box.Box, cmd string, port int) {
	t.Helper()
	r := sh(t, b, fmt.Sprintf(`nohup %s >/tmp/server-%d.log 2>&1 &
for i in $(seq 100); do curl -s --noproxy '*' -o /dev/null http://127.0.0.1:%d/ && exit 0; sleep 0.1; done
cat /tmp/server-%d.log; exit 1`, cmd, port, port, port))
	if r.ExitCode != 0 {
		t.Fatalf("server %q did not start on port %d in the box: %s%s", cmd, port, r.Stdout, r.Stderr)
	}
}

// previewClient reaches public URLs: Go's resolver, unlike browsers and
// curl, does not map *.localhost to the loopback address.
func previewClient(t testing.TB) *http.Client {
	tr := &http.Transport{DialContext: dialLocalhost, MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

func dialLocalhost(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if h := strings.ToLower(host); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// fetch GETs u with an optional Authorization header and returns the
// status and body.
func fetch(t testing.TB, c *http.Client, u, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPublicURLsSamePortInTwoBoxes(t *testing.T) {
	t.Parallel()
	ns := newNetServer(t, netOptions{})
	ctx := t.Context()
	hc := previewClient(t)
	boxes := []*box.Box{ns.create(t, nil), ns.create(t, nil)}
	urls := make([]*box.PublicURL, len(boxes))
	for i, b := range boxes {
		serveInBox(t, b, `sh -c 'mkdir -p /tmp/www && cd /tmp/www && echo "$BOX_ID" > who && exec python3 -m http.server 3000 --bind 127.0.0.1'`, 3000)
		u, err := b.GetPublicURL(ctx, 3000, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(ns.addr)
		if want := fmt.Sprintf("http://%s-3000.localhost:%s", b.ID(), port); u.URL != want || u.Port != 3000 || u.Token != "" || u.Username != "" {
			t.Errorf("public URL = %+v, want URL %s and no credentials", u, want)
		}
		urls[i] = u
	}
	for i, b := range boxes {
		if code, body := fetch(t, hc, urls[i].URL+"/who", ""); code != 200 || body != b.ID()+"\n" {
			t.Errorf("%s/who = %d %q, want the box's own id %s", urls[i].URL, code, body, b.ID())
		}
		// The host name is case-insensitive.
		if code, _ := fetch(t, hc, strings.ToUpper(urls[i].URL[:8])+strings.ToUpper(urls[i].URL[8:])+"/who", ""); code != 200 {
			t.Errorf("upper-case public URL = %d", code)
		}
		list, err := b.ListPublicURLs(ctx)
		want := box.PublicURLInfo{ID: b.ID() + "-3000", Port: 3000, URL: urls[i].URL}
		if err != nil || len(list) != 1 || time.Since(list[0].CreatedAt) > time.Hour || time.Until(list[0].CreatedAt) > time.Minute {
			t.Fatalf("ListPublicURLs = %+v, %v; want [%+v] created now", list, err, want)
		}
		if list[0].CreatedAt = (time.Time{}); list[0] != want {
			t.Errorf("ListPublicURLs = %+v, want [%+v]", list, want)
		}
	}

	// Deleting one box's URL leaves the other's working.
	if err := boxes[0].DeletePublicURL(ctx, 3000); err != nil {
		t.Fatal(err)
	}
	if code, body := fetch(t, hc, urls[0].URL+"/who", ""); code != 404 {
		t.Errorf("deleted public URL = %d %q, want 404", code, body)
	}
	if code, _ := fetch(t, hc, urls[1].URL+"/who", ""); code != 200 {
		t.Errorf("the other box's public URL = %d after the delete", code)
	}
	var apiErr *box.Error
	if err := boxes[0].DeletePublicURL(ctx, 3000); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("second DeletePublicURL = %v, want a 404 *box.Error", err)
	}
	if list, err := boxes[0].ListPublicURLs(ctx); err != nil || len(list) != 0 {
		t.Errorf("ListPublicURLs after delete = %+v, %v", list, err)
	}

	// Checked before any request.
	for _, port := range []int{0, -1, 65536} {
		if _, err := boxes[1].GetPublicURL(ctx, port, nil); err == nil || !strings.Contains(err.Error(), "between 1 and 65535") {
			t.Errorf("GetPublicURL(%d) = %v", port, err)
		}
	}
}

func TestPublicURLAuth(t *testing.T) {
	t.Parallel()
	const hold = time.Second
	ns := newNetServer(t, netOptions{hold: hold})
	ctx := t.Context()
	hc := previewClient(t)
	b := ns.create(t, nil)
	serveInBox(t, b, `sh -c 'mkdir -p /tmp/www && cd /tmp/www && echo secret page > index.html && exec python3 -m http.server 8080 --bind 127.0.0.1'`, 8080)
	basicOf := func(u *box.PublicURL) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username+":"+u.Password))
	}

	bearer, err := b.GetPublicURL(ctx, 8080, &box.PublicURLParams{BearerToken: true})
	if err != nil || bearer.Token == "" || bearer.Username != "" {
		t.Fatalf("bearer public URL = %+v, %v", bearer, err)
	}
	for _, auth := range []string{"", "Bearer wrong", "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+bearer.Token)), "Bearer " + bearer.Token + "x"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", bearer.URL+"/", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("bearer URL with Authorization %q = %d (WWW-Authenticate %q), want 401", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if code, body := fetch(t, hc, bearer.URL+"/", "Bearer "+bearer.Token); code != 200 || body != "secret page\n" {
		t.Errorf("bearer URL with its token = %d %q", code, body)
	}
	// Asking again with the same auth replaces the token.
	again, err := b.GetPublicURL(ctx, 8080, &box.PublicURLParams{BearerToken: true})
	if err != nil || again.Token == "" || again.Token == bearer.Token || again.URL != bearer.URL {
		t.Fatalf("second GetPublicURL = %+v, %v; want a new token for %s", again, err, bearer.URL)
	}
	if code, _ := fetch(t, hc, bearer.URL+"/", "Bearer "+bearer.Token); code != 401 {
		t.Errorf("the replaced token = %d, want 401", code)
	}
	if code, _ := fetch(t, hc, bearer.URL+"/", "Bearer "+again.Token); code != 200 {
		t.Errorf("the new token = %d, want 200", code)
	}

	// Switching to basic auth replaces the credentials.
	basic, err := b.GetPublicURL(ctx, 8080, &box.PublicURLParams{BasicAuth: true})
	if err != nil || basic.Username == "" || basic.Password == "" || basic.Token != "" || basic.URL != bearer.URL {
		t.Fatalf("basic public URL = %+v, %v", basic, err)
	}
	if code, _ := fetch(t, hc, basic.URL+"/", "Bearer "+again.Token); code != 401 {
		t.Errorf("old token after switching to basic auth = %d, want 401", code)
	}
	for _, up := range []string{"", basic.Username + ":wrong", "other:" + basic.Password} {
		auth := ""
		if up != "" {
			auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(up))
		}
		if code, _ := fetch(t, hc, basic.URL+"/", auth); code != 401 {
			t.Errorf("basic URL with %q = %d, want 401", up, code)
		}
	}
	u, _ := url.Parse(basic.URL)
	u.User = url.UserPassword(basic.Username, basic.Password)
	if code, body := fetch(t, hc, u.String()+"/", ""); code != 200 || body != "secret page\n" {
		t.Errorf("basic URL with its credentials = %d %q", code, body)
	}

	// Both kinds at once: either passes, and the list says which kinds
	// the URL has, without the credentials.
	both, err := b.GetPublicURL(ctx, 8080, &box.PublicURLParams{BearerToken: true, BasicAuth: true})
	if err != nil || both.Token == "" || both.Username == "" || both.Password == "" || both.Password == basic.Password {
		t.Fatalf("public URL with both auths = %+v, %v", both, err)
	}
	for _, auth := range []string{"Bearer " + both.Token, basicOf(both)} {
		if code, body := fetch(t, hc, both.URL+"/", auth); code != 200 || body != "secret page\n" {
			t.Errorf("URL with both auths, %.6s… = %d %q", auth, code, body)
		}
	}
	for _, auth := range []string{"", basicOf(basic), "Bearer " + again.Token} {
		if code, _ := fetch(t, hc, both.URL+"/", auth); code != 401 {
			t.Errorf("URL with both auths, old or no credentials %.6s… = %d, want 401", auth, code)
		}
	}
	list, err := b.ListPublicURLs(ctx)
	if err != nil || len(list) != 1 || !list[0].BearerToken || !list[0].BasicAuth || list[0].ID != b.ID()+"-8080" || list[0].URL != both.URL {
		t.Errorf("ListPublicURLs = %+v, %v; want the URL of 8080 with both kinds of auth", list, err)
	}

	// A port that nothing listens on is held for the hold, then 503.
	idle, err := b.GetPublicURL(ctx, 9999, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "GET", idle.URL+"/", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if d := time.Since(start); resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || !strings.Contains(string(body), "nothing listened on port 9999") || d < hold {
		t.Errorf("public URL of an idle port = %d (Retry-After %q) %q after %s, want 503 after %s", resp.StatusCode, resp.Header.Get("Retry-After"), body, d, hold)
	}
}

// TestPublicURLWakesBox: GetPublicURL resumes a paused box, and a request
// to a paused box's public URL wakes it and waits for the port to listen.
func TestPublicURLWakesBox(t *testing.T) {
	t.Parallel()
	ns := newNetServer(t, netOptions{})
	ctx := t.Context()
	hc := previewClient(t)
	b := ns.create(t, nil)
	serveInBox(t, b, `sh -c 'mkdir -p /tmp/www && cd /tmp/www && echo first > index.html && exec python3 -m http.server 3000 --bind 127.0.0.1'`, 3000)
	// A second server that listens only once /tmp/go exists.
	sh(t, b, `mkdir -p /tmp/www2 && echo second > /tmp/www2/index.html
nohup sh -c 'while [ ! -e /tmp/go ]; do sleep 0.05; done; exec python3 -m http.server 3001 --bind 127.0.0.1 -d /tmp/www2' >/dev/null 2>&1 &`)
	status := func() box.Status {
		t.Helper()
		st, err := b.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	u, err := b.GetPublicURL(ctx, 3000, &box.PublicURLParams{BearerToken: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := status(); st == box.StatusPaused {
		t.Fatalf("status after GetPublicURL on a paused box = %s", st)
	}
	if code, body := fetch(t, hc, u.URL+"/", "Bearer "+u.Token); code != 200 || body != "first\n" {
		t.Errorf("after GetPublicURL resumed the box: %d %q", code, body)
	}

	second, err := b.GetPublicURL(ctx, 3001, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		body string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", second.URL+"/", nil)
		resp, err := hc.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- answer{resp.StatusCode, string(b), err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for status() == box.StatusPaused {
		if time.Now().After(deadline) {
			t.Fatal("the request did not wake the paused box")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case a := <-done:
		t.Fatalf("the request was answered while nothing listened: %+v", a)
	case <-time.After(500 * time.Millisecond):
	}
	sh(t, b, "touch /tmp/go")
	if a := <-done; a.err != nil || a.code != 200 || a.body != "second\n" {
		t.Errorf("the held request = %+v, want 200 %q", a, "second\n")
	}
}

// TestPublicURLHoldsThirtySeconds runs the public URL's hold at boxd's
// default, 30 s. An authenticated request to a paused box's URL wakes the
// box: the processes the pause froze run again while the request waits.
// The port never listens, so after 30 s the request is answered 503 with
// Retry-After: 5, and the box stays awake. The other hold tests shorten
// the hold. This one keeps it, so it takes half a minute and runs
// beside the others.
func TestPublicURLHoldsThirtySeconds(t *testing.T) {
	t.Parallel()
	const hold = 30 * time.Second // the and the cloud's; boxd's default
	ns := newNetServer(t, netOptions{})
	ctx := t.Context()
	hc := previewClient(t)
	b := ns.create(t, nil)
	ticks := filepath.Join(ns.dataDir, "boxes", b.ID(), "fs", "workspace", "home", "ticks")
	count := func() int { raw, _ := os.ReadFile(ticks); return bytes.Count(raw, []byte("\n")) }
	sh(t, b, `nohup sh -c 'while :; do echo tick >> /workspace/home/ticks; sleep 0.1; done' >/dev/null 2>&1 &`)
	waitFor(t, "the box's ticker", func() bool { return count() > 0 })
	const port = 8765 // nothing in the box listens on it
	u, err := b.GetPublicURL(ctx, port, &box.PublicURLParams{BearerToken: true})
	if err != nil {
		t.Fatal(err)
	}
	status := func() box.Status {
		t.Helper()
		st, err := b.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	frozen := count()
	time.Sleep(500 * time.Millisecond)
	if st, n := status(), count(); st != box.StatusPaused || n != frozen {
		t.Fatalf("after the pause: status %s, %d ticks then %d; want paused and frozen", st, frozen, n)
	}

	type answer struct {
		code       int
		retryAfter string
		body       string
		took       time.Duration
		err        error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.URL+"/", nil)
		req.Header.Set("Authorization", "Bearer "+u.Token)
		resp, err := hc.Do(req)
		if err != nil {
			done <- answer{err: err, took: time.Since(start)}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		done <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(body), time.Since(start), err}
	}()
	for status() == box.StatusPaused {
		if time.Since(start) > 20*time.Second {
			t.Fatal("the request did not wake the paused box")
		}
		time.Sleep(20 * time.Millisecond)
	}
	woke := time.Since(start)
	waitFor(t, "the box's processes to run again", func() bool { return count() > frozen+2 })
	select {
	case a := <-done:
		t.Fatalf("answered %v after the request, while it should be held: %+v", a.took, a)
	default:
	}

	a := <-done
	t.Logf("the box woke %v after the request; the answer came after %v", woke, a.took)
	if a.err != nil {
		t.Fatalf("the held request: %v after %v", a.err, a.took)
	}
	if a.code != http.StatusServiceUnavailable || a.retryAfter != "5" || !strings.Contains(a.body, fmt.Sprintf("nothing listened on port %d", port)) {
		t.Errorf("the held request = %d, Retry-After %q, %q; want 503, 5", a.code, a.retryAfter, a.body)
	}
	if a.took < hold || a.took > 2*hold {
		t.Errorf("the held request was answered after %v; want the 30 s hold", a.took)
	}
	if st := status(); st != box.StatusRunning && st != box.StatusIdle {
		t.Errorf("the box the request woke is %s after the 503", st)
	}
	n := count()
	waitFor(t, "the box's processes to go on after the 503", func() bool { return count() > n })
}

// buildNetServer builds testdata/netserver for boxes (static, no cgo).
func buildNetServer(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "netserver")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/netserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build netserver: %v\n%s", err, b)
	}
	return out
}

// startNetServer uploads the netserver binary into the box and runs it on
// port.
func startNetServer(t testing.TB, b *box.Box, bin string, port int) {
	t.Helper()
	if err := b.Files.Upload(t.Context(), []box.UploadFile{{LocalPath: bin, Destination: "/workspace/home/netserver"}}); err != nil {
		t.Fatal(err)
	}
	sh(t, b, "chmod +x /workspace/home/netserver")
	serveInBox(t, b, fmt.Sprintf("/workspace/home/netserver -addr 127.0.0.1:%d", port), port)
}

// wsConn is the client side of a WebSocket, just enough for an echo test.
type wsConn struct {
	c  net.Conn
	br *bufio.Reader
}

// dialWS opens a WebSocket to rawURL (a public URL) through boxd at addr.
func dialWS(t testing.TB, addr, rawURL, auth string) *wsConn {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var kb [16]byte
	_, _ = rand.Read(kb[:])
	key := base64.StdEncoding.EncodeToString(kb[:])
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n", u.RequestURI(), u.Host, key)
	if auth != "" {
		fmt.Fprintf(c, "Authorization: %s\r\n", auth)
	}
	fmt.Fprint(c, "\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("WebSocket handshake: %s %q", resp.Status, b)
	}
	return &wsConn{c: c, br: br}
}

// send writes one masked text frame.
func (w *wsConn) send(msg string) error {
	h := []byte{0x81}
	switch n := len(msg); {
	case n < 126:
		h = append(h, 0x80|byte(n))
	case n < 1<<16:
		h = append(h, 0x80|126, byte(n>>8), byte(n))
	default:
		h = binary.BigEndian.AppendUint64(append(h, 0x80|127), uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	p := []byte(msg)
	for i := range p {
		p[i] ^= mask[i%4]
	}
	_, err := w.c.Write(append(append(h, mask[:]...), p...))
	return err
}

// recv reads one unmasked frame from the server.
func (w *wsConn) recv() (string, error) {
	var h [2]byte
	if _, err := io.ReadFull(w.br, h[:]); err != nil {
		return "", err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(w.br, b[:]); err != nil {
			return "", err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(w.br, b[:]); err != nil {
			return "", err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	p := make([]byte, n)
	_, err := io.ReadFull(w.br, p)
	return string(p), err
}

func TestPublicURLWebSocketAndDelete(t *testing.T) {
	t.Parallel()
	ns := newNetServer(t, netOptions{})
	ctx := t.Context()
	bin := buildNetServer(t)
	b := ns.create(t, nil)
	startNetServer(t, b, bin, 3000)
	pu, err := b.GetPublicURL(ctx, 3000, &box.PublicURLParams{BearerToken: true})
	if err != nil {
		t.Fatal(err)
	}
	ws := dialWS(t, ns.addr, pu.URL+"/ws", "Bearer "+pu.Token)
	for _, msg := range []string{"hello", strings.Repeat("x", 70000), "über 🙂"} {
		if err := ws.send(msg); err != nil {
			t.Fatal(err)
		}
		if got, err := ws.recv(); err != nil || got != msg {
			t.Fatalf("echo of %d bytes: got %d bytes, %v", len(msg), len(got), err)
		}
	}
	hc := previewClient(t)
	if code, body := fetch(t, hc, pu.URL+"/id", "Bearer "+pu.Token); code != 200 || body != b.ID()+"\n" {
		t.Errorf("GET /id = %d %q", code, body)
	}

	// Delete: the open WebSocket is cut and new requests get 404, at once.
	start := time.Now()
	if err := b.DeletePublicURL(ctx, 3000); err != nil {
		t.Fatal(err)
	}
	ws.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := ws.recv(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("WebSocket read after DeletePublicURL = %v, want the connection closed", err)
	}
	if code, _ := fetch(t, hc, pu.URL+"/id", "Bearer "+pu.Token); code != 404 {
		t.Errorf("GET after DeletePublicURL = %d, want 404", code)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the deleted public URL took %s to stop", d)
	}
}

// countingServer is a loopback HTTP server that counts its requests.
type countingServer struct {
	*httptest.Server
	hits atomic.Int32
	port string
}

func newCountingServer(t testing.TB, ip string, h http.HandlerFunc) *countingServer {
	t.Helper()
	cs := &countingServer{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached "+r.Host) }
	}
	cs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.hits.Add(1)
		h(w, r)
	}))
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	cs.Listener.Close()
	cs.Listener = l
	cs.Start()
	t.Cleanup(cs.Close)
	_, cs.port, _ = net.SplitHostPort(l.Addr().String())
	return cs
}

// curl fetches u from inside the box (through the proxy, as programs
// that honour HTTP_PROXY do) and returns curl's exit code and output.
func curl(t testing.TB, b *box.Box, u string) (int, string) {
	t.Helper()
	r := sh(t, b, "curl -sS -f --max-time 20 "+u)
	return r.ExitCode, r.Stdout + r.Stderr
}

func TestEgressDenyAll(t *testing.T) {
	t.Parallel()
	ns := newNetServer(t, netOptions{})
	srv := newCountingServer(t, "127.0.0.1", nil)
	b := ns.create(t, &box.CreateParams{NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkDenyAll}})
	if got := b.NetworkPolicy(); got.Mode != box.NetworkDenyAll {
		t.Errorf("NetworkPolicy() = %+v", got)
	}
	code, out := curl(t, b, "http://host.boxd.internal:"+srv.port+"/")
	if code == 0 || !strings.Contains(out, "403") {
		t.Errorf("curl through the proxy from a deny-all box: exit %d %q, want a 403 refusal", code, out)
	}
	// --noproxy '' sends even 127.0.0.1 (normally in NO_PROXY) to the
	// proxy, which refuses it.
	code, out = curl(t, b, "--noproxy '' http://127.0.0.1:"+srv.port+"/")
	if code == 0 || !strings.Contains(out, "403") {
		t.Errorf("curl to the host's loopback address through the proxy: exit %d %q", code, out)
	}
	// Without the proxy, 127.0.0.1 is the box's own loopback: the host's
	// server is not there.
	r := sh(t, b, "curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:"+srv.port+"/")
	if r.ExitCode == 0 {
		t.Errorf("curl bypassing the proxy reached something: %q", r.Stdout)
	}
	r = sh(t, b, `python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' https://host.boxd.internal:`+srv.port+`/`)
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "403") {
		t.Errorf("python urllib from a deny-all box: exit %d %q", r.ExitCode, r.Stderr)
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the host server saw %d requests from a deny-all box", n)
	}
	logs, err := b.Logs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range logs {
		found = found || strings.Contains(e.Message, "host.boxd.internal refused by the network policy (deny-all)")
	}
	if !found {
		t.Errorf("no refusal in the box's log: %+v", logs)
	}
}

// TestEgressNormalisesLoopback: a policy that denies the loopback ranges
// also denies the unspecified and IPv4-mapped forms that reach loopback.
func TestEgressNormalisesLoopback(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, "127.0.0.1", nil)
	ns := newNetServer(t, netOptions{})
	b := ns.create(t, &box.CreateParams{NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkCustom, DeniedCIDRs: []string{"127.0.0.0/8", "::1/128"}}})
	for _, host := range []string{"127.0.0.1", "0.0.0.0", "[::]", "[::1]", "[::ffff:0.0.0.0]", "[::ffff:127.0.0.1]"} {
		for _, scheme := range []string{"http", "https"} {
			u := scheme + "://" + host + ":" + srv.port + "/"
			if code, out := curl(t, b, "-g --noproxy '' "+u); code == 0 || !strings.Contains(out, "403") {
				t.Errorf("%s from a box that denies loopback: exit %d %q, want a 403", u, code, out)
			}
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the host's server got %d requests", n)
	}
}

// TestEgressHostAndBoxdOutOfReach runs boxd as cmd/boxd does: no box
// reaches the host's loopback, not by allow-all, not by a name its
// allowed_domains let through. And boxd's own API is out of reach even
// where the host's loopback is allowed.
func TestEgressHostAndBoxdOutOfReach(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, "127.0.0.1", nil)
	off := newNetServer(t, netOptions{offHost: true, names: map[string]string{"evil.example.test": "127.0.0.1"}})
	open := off.create(t, nil)
	wild := off.create(t, &box.CreateParams{NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkCustom, AllowedDomains: []string{"*.example.test"}}})
	for _, tc := range []struct {
		b   *box.Box
		url string
	}{
		{open, "http://host.boxd.internal:" + srv.port + "/"},
		{open, "--noproxy '' http://127.0.0.1:" + srv.port + "/"},
		{open, "--noproxy '' http://0.0.0.0:" + srv.port + "/"},
		{open, "https://host.boxd.internal:" + srv.port + "/"},
		{wild, "http://evil.example.test:" + srv.port + "/"},
		{wild, "https://evil.example.test:" + srv.port + "/"},
	} {
		if code, out := curl(t, tc.b, tc.url); code == 0 || !strings.Contains(out, "403") {
			t.Errorf("%s from a box on a boxd that keeps boxes off the host: exit %d %q, want a 403", tc.url, code, out)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the host's server got %d requests", n)
	}

	on := newNetServer(t, netOptions{names: map[string]string{"api.test": "127.0.0.1"}})
	_, boxdPort, _ := net.SplitHostPort(on.addr)
	b := on.create(t, &box.CreateParams{NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkCustom, AllowedDomains: []string{"api.test", "host.boxd.internal"}, AllowedCIDRs: []string{"0.0.0.0/0", "::/0"}}})
	for _, bx := range []*box.Box{b, on.create(t, nil)} {
		for _, host := range []string{"127.0.0.1", "0.0.0.0", "[::ffff:127.0.0.1]", "host.boxd.internal", "api.test"} {
			u := "-g --noproxy '' -H 'X-Box-Api-Key: " + on.key + "' http://" + host + ":" + boxdPort + "/v2/box"
			if code, out := curl(t, bx, u); code == 0 || !strings.Contains(out, "403") {
				t.Errorf("boxd's own API at %s from a box: exit %d %q, want a 403", host, code, out)
			}
		}
	}
}

// TestEgressLooksUpOnlyAllowedNames: a policy of addresses alone looks up
// no name for the box (a lookup carries the name to whoever answers for
// its domain).
func TestEgressLooksUpOnlyAllowedNames(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	ns := newNetServer(t, netOptions{lookups: func(h string) { mu.Lock(); asked = append(asked, h); mu.Unlock() }})
	b := ns.create(t, &box.CreateParams{NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkCustom, AllowedCIDRs: []string{"203.0.113.0/24"}}})
	for _, u := range []string{"http://secret-7f3a.exfil.test/", "https://secret-7f3a.exfil.test/"} {
		if code, out := curl(t, b, u); code == 0 || !strings.Contains(out, "403") {
			t.Errorf("%s from a box that allows addresses only: exit %d %q, want a 403", u, code, out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 0 {
		t.Errorf("boxd looked up %q for a box whose policy allows no name", asked)
	}
}

// TestEgressCustomPolicy: allowed_domains decide which names a box may
// reach, allowed_cidrs which addresses, and denied_cidrs win over both.
// The test servers are on the host's loopback, which a name reaches only
// where allowed_cidrs cover its address (TestEgressNamesDoNotLeadToTheHost):
// the listed names and denied.test resolve to the same allowed address,
// so the name alone decides between them.
func TestEgressCustomPolicy(t *testing.T) {
	t.Parallel()
	a := newCountingServer(t, "127.0.0.1", nil)
	byCIDR := newCountingServer(t, "127.0.0.2", nil)
	denied := newCountingServer(t, "127.0.0.3", nil)
	ns := newNetServer(t, netOptions{names: map[string]string{
		"allowed.test":  "127.0.0.2",
		"denied.test":   "127.0.0.2",
		"a.wild.test":   "127.0.0.2",
		"bad.wild.test": "127.0.0.3",
	}})
	b := ns.create(t, &box.CreateParams{NetworkPolicy: &box.NetworkPolicy{
		Mode:           box.NetworkCustom,
		AllowedDomains: []string{"allowed.test", "*.wild.test"},
		AllowedCIDRs:   []string{"127.0.0.2/32"},
		DeniedCIDRs:    []string{"127.0.0.3/32"},
	}})
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"http://allowed.test:" + byCIDR.port + "/", true},   // exact domain
		{"http://a.wild.test:" + byCIDR.port + "/", true},    // wildcard domain
		{"http://127.0.0.2:" + byCIDR.port + "/", true},      // allowed CIDR
		{"http://denied.test:" + byCIDR.port + "/", false},   // not listed, at the same address
		{"http://host.boxd.internal:" + a.port + "/", false}, // not listed, address not allowed
		{"--noproxy '' http://127.0.0.1:" + a.port + "/", false},
		{"http://bad.wild.test:" + denied.port + "/", false}, // listed domain, denied address
		{"http://127.0.0.3:" + denied.port + "/", false},
	} {
		before := a.hits.Load() + byCIDR.hits.Load() + denied.hits.Load()
		code, out := curl(t, b, tc.url)
		after := a.hits.Load() + byCIDR.hits.Load() + denied.hits.Load()
		if tc.want && (code != 0 || !strings.HasPrefix(out, "reached ")) {
			t.Errorf("%s: exit %d %q, want it reached", tc.url, code, out)
		}
		if !tc.want && (code == 0 || !strings.Contains(out, "403") || after != before) {
			t.Errorf("%s: exit %d %q (servers saw %d new requests), want a 403 and nothing reached", tc.url, code, out, after-before)
		}
	}
	// HTTPS goes through CONNECT and is decided the same way.
	if code, out := curl(t, b, "https://denied.test:"+byCIDR.port+"/"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("CONNECT to a refused host: exit %d %q", code, out)
	}
	if n := denied.hits.Load(); n != 0 {
		t.Errorf("the server on a denied address saw %d requests", n)
	}
}

// TestEgressNamesDoNotLeadToTheHost is DNS rebinding, on a boxd that lets
// boxes reach the host's loopback: a box allowed *.example.com asks for
// names of that domain that resolve to the host (as whoever answers for
// the domain may make them). A name in allowed_domains opens the
// network, not the host; the host is reached by its alias, by
// allowed_cidrs that cover its address, or under allow-all.
func TestEgressNamesDoNotLeadToTheHost(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, "127.0.0.1", nil)
	ns := newNetServer(t, netOptions{names: map[string]string{
		"evil.example.com":   "127.0.0.1",
		"zero.example.com":   "0.0.0.0",
		"mapped.example.com": "::ffff:127.0.0.1",
		"meta.example.com":   "169.254.169.254",
	}})
	ctx := t.Context()
	b := ns.create(t, &box.CreateParams{NetworkPolicy: &box.NetworkPolicy{Mode: box.NetworkCustom, AllowedDomains: []string{"*.example.com"}}})
	for _, name := range []string{"evil", "zero", "mapped", "meta"} {
		for _, scheme := range []string{"http", "https"} {
			u := scheme + "://" + name + ".example.com:" + srv.port + "/"
			if code, out := curl(t, b, u); code == 0 || !strings.Contains(out, "403") {
				t.Errorf("%s, allowed by name and resolving to the host: exit %d %q, want a 403", u, code, out)
			}
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("the host's server got %d requests through names that resolve to it", n)
	}
	for _, tc := range []struct {
		policy box.NetworkPolicy
		url    string
	}{
		{box.NetworkPolicy{Mode: box.NetworkCustom, AllowedDomains: []string{"*.boxd.internal"}}, "http://host.boxd.internal:" + srv.port + "/"},
		{box.NetworkPolicy{Mode: box.NetworkCustom, AllowedDomains: []string{"*.example.com"}, AllowedCIDRs: []string{"127.0.0.1/32"}}, "http://evil.example.com:" + srv.port + "/"},
		{box.NetworkPolicy{Mode: box.NetworkAllowAll}, "http://evil.example.com:" + srv.port + "/"},
	} {
		if err := b.UpdateNetworkPolicy(ctx, tc.policy); err != nil {
			t.Fatal(err)
		}
		if code, out := curl(t, b, tc.url); code != 0 || !strings.HasPrefix(out, "reached ") {
			t.Errorf("%s under %+v: exit %d %q, want it reached", tc.url, tc.policy, code, out)
		}
	}
}

func TestEgressPolicyUpdateOnRunningBox(t *testing.T) {
	t.Parallel()
	ns := newNetServer(t, netOptions{})
	ctx := t.Context()
	streaming := make(chan struct{}, 1)
	srv := newCountingServer(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			fmt.Fprint(w, "reached")
			return
		}
		select {
		case streaming <- struct{}{}:
		default:
		}
		for i := 0; i < 300; i++ { // 30 s unless the connection is cut
			if _, err := fmt.Fprintln(w, i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	b := ns.create(t, nil)
	if code, out := curl(t, b, "http://host.boxd.internal:"+srv.port+"/"); code != 0 || out != "reached" {
		t.Fatalf("allow-all box: exit %d %q", code, out)
	}

	// A download in progress when the policy changes is cut off.
	type result struct {
		r   *box.Run
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		r, err := b.Exec.Command(ctx, "curl -sS -N --max-time 40 -o /dev/null http://host.boxd.internal:"+srv.port+"/slow")
		done <- result{r, err, time.Now()}
	}()
	select {
	case <-streaming:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow download did not start")
	}
	changed := time.Now()
	if err := b.UpdateNetworkPolicy(ctx, box.NetworkPolicy{Mode: box.NetworkDenyAll}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.ExitCode == 0 || res.at.Sub(changed) > 10*time.Second {
		t.Errorf("download across the policy change: %+v, %v, ended %s after the change; want it cut off", res.r, res.err, res.at.Sub(changed))
	}
	if code, out := curl(t, b, "http://host.boxd.internal:"+srv.port+"/"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("after deny-all: exit %d %q", code, out)
	}
	if got := b.NetworkPolicy(); got.Mode != box.NetworkDenyAll {
		t.Errorf("NetworkPolicy() after the update = %+v", got)
	}
	if in, err := b.Refresh(ctx); err != nil || in.NetworkPolicy.Mode != box.NetworkDenyAll {
		t.Errorf("Refresh after the update = %+v, %v", in.NetworkPolicy, err)
	}

	custom := box.NetworkPolicy{Mode: box.NetworkCustom, AllowedDomains: []string{"host.boxd.internal"}}
	if err := b.UpdateNetworkPolicy(ctx, custom); err != nil {
		t.Fatal(err)
	}
	if code, out := curl(t, b, "http://host.boxd.internal:"+srv.port+"/"); code != 0 || out != "reached" {
		t.Errorf("after allowing host.boxd.internal: exit %d %q", code, out)
	}
	if in, err := b.Refresh(ctx); err != nil || in.NetworkPolicy.Mode != box.NetworkCustom || len(in.NetworkPolicy.AllowedDomains) != 1 {
		t.Errorf("Refresh = %+v, %v", in.NetworkPolicy, err)
	}

	// Checked before any request.
	for _, bad := range []box.NetworkPolicy{
		{},
		{Mode: "open"},
		{Mode: box.NetworkCustom},
		{Mode: box.NetworkAllowAll, AllowedDomains: []string{"x.com"}},
		{Mode: box.NetworkCustom, AllowedCIDRs: []string{"10.0.0.0/40"}},
	} {
		if err := b.UpdateNetworkPolicy(ctx, bad); err == nil {
			t.Errorf("UpdateNetworkPolicy(%+v) succeeded", bad)
		}
	}
	if got := b.NetworkPolicy(); got.Mode != box.NetworkCustom {
		t.Errorf("NetworkPolicy() after refused updates = %+v", got)
	}
}

func TestAttachHeaders(t *testing.T) {
	t.Parallel()
	var sb [12]byte
	_, _ = rand.Read(sb[:])
	secret := "sk_test_" + hex.EncodeToString(sb[:])
	var (
		mu   sync.Mutex
		seen []string // Authorization headers the stand-in API received
	)
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+strings.ReplaceAll(r.Header.Get("Authorization"), secret, "<the secret>"))
		mu.Unlock()
		if r.Header.Get("Authorization") == "Bearer "+secret {
			fmt.Fprint(w, "authorized")
			return
		}
		fmt.Fprint(w, "anonymous")
	}))
	api.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake curl abandons below
	api.StartTLS()
	defer api.Close()
	_, port, _ := net.SplitHostPort(api.Listener.Addr().String())
	roots := x509.NewCertPool()
	roots.AddCert(api.Certificate())
	// httptest's certificate is for example.com and *.example.com.
	ns := newNetServer(t, netOptions{roots: roots, names: map[string]string{"api.example.com": "127.0.0.1", "www.example.com": "127.0.0.1"}})
	b := ns.create(t, &box.CreateParams{AttachHeaders: map[string]map[string]string{"api.example.com": {"Authorization": "Bearer " + secret}}})

	// curl and python trust boxd's CA through the box's bundle and
	// environment; the box sends no credential, the API gets one.
	if code, out := curl(t, b, "https://api.example.com:"+port+"/"); code != 0 || out != "authorized" {
		t.Errorf("curl to api.example.com: exit %d %q, want authorized", code, out)
	}
	r := sh(t, b, `python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' https://api.example.com:`+port+`/`)
	if r.ExitCode != 0 || r.Stdout != "authorized\n" {
		t.Errorf("python to api.example.com: exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	// A header the box sets itself is replaced.
	if code, out := curl(t, b, "-H 'Authorization: Bearer mine' https://api.example.com:"+port+"/"); code != 0 || out != "authorized" {
		t.Errorf("curl with its own Authorization: exit %d %q", code, out)
	}
	// Another host is tunnelled untouched: the box sees the API's own
	// certificate (which it does not trust), and no header is added.
	if code, out := curl(t, b, "https://www.example.com:"+port+"/"); code == 0 || !strings.Contains(out, "certificate") {
		t.Errorf("curl to www.example.com without -k: exit %d %q, want a certificate error", code, out)
	}
	if code, out := curl(t, b, "-k https://www.example.com:"+port+"/"); code != 0 || out != "anonymous" {
		t.Errorf("curl -k to www.example.com: exit %d %q, want anonymous", code, out)
	}
	mu.Lock()
	withSecret := "api.example.com:" + port + " Bearer <the secret>"
	if want := []string{withSecret, withSecret, withSecret, "www.example.com:" + port + " "}; !slices.Equal(seen, want) {
		t.Errorf("the API saw %q, want %q", seen, want)
	}
	mu.Unlock()

	// The secret is nowhere the box can read: its environment, any
	// process's environment, its files, its run directory and /etc. The
	// command assembles it from two halves so that no argument of the
	// search is the secret itself.
	half := len(secret) / 2
	r = sh(t, b, fmt.Sprintf(`s="%s""%s"
env | grep -c -F -- "$s"
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c -F -- "$s"
echo files: $(grep -r -l -s -F -- "$s" /workspace /home /tmp /run /etc /var)
printf '%%s' "$s" > /tmp/control # the search does find it where it is
echo control: $(grep -r -l -s -F -- "$s" /workspace /home /tmp /run /etc /var)`, secret[:half], secret[half:]))
	if r.Stdout != "0\n0\nfiles:\ncontrol: /tmp/control\n" {
		t.Errorf("looking for the secret in the box: %q %q", r.Stdout, r.Stderr)
	}
	// Nor in what the API returns, nor in boxd's log.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+ns.addr+"/v2/box/"+b.ID(), nil)
	req.Header.Set("X-Box-Api-Key", ns.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(body), secret) || strings.Contains(string(body), "attach_headers") {
		t.Errorf("GET /v2/box/{id} = %d %s", resp.StatusCode, body)
	}
	if strings.Contains(ns.logs.String(), secret) {
		t.Error("boxd's log contains the secret")
	}
}
