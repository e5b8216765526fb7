package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCompile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode                     string
		domains, allowed, denied []string
		err                      string
	}{
		{mode: "allow-all"},
		{mode: "deny-all"},
		{mode: "custom", domains: []string{"api.example.com", "*.Example.org."}},
		{mode: "custom", allowed: []string{"10.0.0.0/8", "192.0.2.7", "::1", "::ffff:10.0.0.0/104"}},
		{mode: "custom", denied: []string{"169.254.169.254"}},
		{mode: "", err: "mode is required"},
		{mode: "open", err: `not "open"`},
		{mode: "allow-all", domains: []string{"x.com"}, err: "apply only to mode custom"},
		{mode: "deny-all", denied: []string{"10.0.0.0/8"}, err: "apply only to mode custom"},
		{mode: "custom", err: "needs allowed_domains"},
		{mode: "custom", domains: []string{"https://x.com"}, err: "not a host name"},
		{mode: "custom", domains: []string{"*"}, err: "not a host name"},
		{mode: "custom", domains: []string{"a..b"}, err: "not a host name"},
		{mode: "custom", domains: []string{"1.2.3.4"}, err: "is an IP address"},
		{mode: "custom", allowed: []string{"10.0.0.0/33"}, err: "allowed_cidrs"},
		{mode: "custom", denied: []string{"nope"}, err: "denied_cidrs"},
	} {
		_, err := Compile(tc.mode, tc.domains, tc.allowed, tc.denied)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Compile(%q, %q, %q, %q) = %v, want error containing %q", tc.mode, tc.domains, tc.allowed, tc.denied, err, tc.err)
		}
	}
}

func TestPermits(t *testing.T) {
	t.Parallel()
	ip := netip.MustParseAddr
	custom, err := Compile("custom", []string{"api.example.com", "*.svc.test"}, []string{"203.0.113.0/24"}, []string{"203.0.113.66/32", "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	onlyDenied, err := Compile("custom", nil, nil, []string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	hostByCIDR, err := Compile("custom", []string{"*.svc.test", HostAlias}, []string{"127.0.0.0/8"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    *Policy
		host string
		ip   netip.Addr
		want bool
	}{
		{AllowAll, "anything", ip("10.1.2.3"), true},
		{DenyAll, "anything", ip("203.0.113.5"), false},
		{custom, "api.example.com", ip("198.51.100.1"), true},
		{custom, "API.Example.COM.", ip("198.51.100.1"), true},
		{custom, "example.com", ip("198.51.100.1"), false},
		{custom, "x.api.example.com", ip("198.51.100.1"), false},
		{custom, "a.svc.test", ip("198.51.100.1"), true},
		{custom, "a.b.svc.test", ip("198.51.100.1"), true},
		{custom, "svc.test", ip("198.51.100.1"), false},
		{custom, "other.test", ip("203.0.113.5"), true},                // by address
		{custom, "203.0.113.5", ip("203.0.113.5"), true},               // literal
		{custom, "::ffff:203.0.113.5", ip("::ffff:203.0.113.5"), true}, // mapped
		{custom, "api.example.com", ip("203.0.113.66"), false},         // denied wins over a domain
		{custom, "api.example.com", ip("10.0.0.1"), false},
		{custom, "other.test", ip("198.51.100.1"), false},
		// A name leads to the host only through allowed_cidrs, or as
		// the host's alias.
		{custom, "a.svc.test", ip("127.0.0.1"), false},
		{custom, "a.svc.test", ip("0.0.0.0"), false},
		{custom, "a.svc.test", ip("::ffff:127.0.0.1"), false},
		{custom, "a.svc.test", ip("169.254.169.254"), false},
		{custom, "a.svc.test", ip("fe80::1"), false},
		{hostByCIDR, "a.svc.test", ip("127.0.0.1"), true},
		{hostByCIDR, "a.svc.test", ip("::1"), false},
		{hostByCIDR, HostAlias, ip("::1"), true},
		{hostByCIDR, "HOST.boxd.internal.", ip("127.0.0.1"), true},
		{onlyDenied, "anything", ip("127.0.0.1"), true}, // everything outside denied_cidrs
		{onlyDenied, "anything", ip("198.51.100.1"), true},
		{onlyDenied, "anything", ip("10.9.9.9"), false},
	} {
		if got := tc.p.Permits(tc.host, tc.ip); got != tc.want {
			t.Errorf("%s.Permits(%q, %s) = %v, want %v", tc.p.Mode(), tc.host, tc.ip, got, tc.want)
		}
	}
}

func TestCompileHeaders(t *testing.T) {
	t.Parallel()
	rules, err := CompileHeaders(map[string]map[string]string{
		"api.example.com": {"authorization": "Bearer exact"},
		"*.example.com":   {"Authorization": "Bearer wild", "X-Team": "a"},
		"*.com":           {"X-Team": "broad", "X-Other": "o"},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := headersFor(rules, "API.example.com")
	if h.Get("Authorization") != "Bearer exact" || h.Get("X-Team") != "a" || h.Get("X-Other") != "o" {
		t.Errorf("headers for api.example.com = %v", h)
	}
	if h := headersFor(rules, "www.example.com"); h.Get("Authorization") != "Bearer wild" {
		t.Errorf("headers for www.example.com = %v", h)
	}
	if h := headersFor(rules, "example.org"); h != nil {
		t.Errorf("headers for example.org = %v", h)
	}
	for _, bad := range []map[string]map[string]string{
		{"https://x.com": {"A": "b"}},
		{"x.com": {"Bad Name": "v"}},
		{"x.com": {"Host": "v"}},
		{"x.com": {"A": "line\r\nInjected: topsecret"}},
	} {
		_, err := CompileHeaders(bad)
		if err == nil {
			t.Errorf("CompileHeaders(%q) succeeded", bad)
		} else if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("error quotes a header value: %v", err)
		}
	}
}

func TestCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	again, err := LoadCA(dir)
	if err != nil || !again.Certificate().Equal(ca.Certificate()) {
		t.Fatalf("second LoadCA: %v (same cert: %v)", err, err == nil && again.Certificate().Equal(ca.Certificate()))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	for _, host := range []string{"api.example.com", "127.0.0.1"} {
		leaf, err := ca.leafFor(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("leaf for %s: %v", host, err)
		}
		if c2, _ := ca.leafFor(host); c2 != leaf {
			t.Errorf("leaf for %s not cached", host)
		}
	}
	bundle := filepath.Join(dir, "bundle.crt")
	if err := ca.WriteBundle(bundle); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(bundle)
	if !strings.HasSuffix(string(b), string(ca.PEM())) {
		t.Error("the bundle does not end with the CA")
	}
	// A half-present CA is an error, not a silent new one.
	os.Remove(filepath.Join(dir, CACertFile))
	if _, err := LoadCA(dir); err == nil {
		t.Error("LoadCA with only the key succeeded")
	}
}

// rig is a proxy for one box ("b1") on a loopback listener, with rules the
// test changes, and a resolver that knows only the test's names.
type rig struct {
	t       *testing.T
	p       *Proxy
	ca      *CA
	url     *url.URL
	mu      sync.Mutex
	rules   *Rules
	names   map[string]string
	lookups []string // names the resolver was asked for
}

func newRig(t *testing.T, roots *x509.CertPool) *rig {
	// The test servers on 127.0.0.1 stand in for the network.
	return newRigWith(t, Config{RootCAs: roots, HostLoopback: true})
}

// newRigWith is newRig with cfg's HostLoopback, SelfPort, MaxConns,
// RootCAs and hostAddrs.
func newRigWith(t *testing.T, cfg Config) *rig {
	t.Helper()
	ca, err := LoadCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ca: ca, rules: &Rules{Policy: AllowAll}, names: map[string]string{}}
	r.p = New(Config{
		CA:           ca,
		RootCAs:      cfg.RootCAs,
		HostLoopback: cfg.HostLoopback,
		SelfPort:     cfg.SelfPort,
		MaxConns:     cfg.MaxConns,
		hostAddrs:    cfg.hostAddrs,
		Lookup: func(id string) (*Rules, error) {
			if id != "b1" {
				return nil, errors.New("no such box")
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			cp := *r.rules
			return &cp, nil
		},
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.lookups = append(r.lookups, host)
			if a, ok := r.names[host]; ok {
				return []netip.Addr{netip.MustParseAddr(a)}, nil
			}
			return nil, fmt.Errorf("test resolver: unknown host %s", host)
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.p.Serve("b1", ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.p.Close)
	r.url = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	return r
}

func (r *rig) set(p *Policy, headers map[string]map[string]string) {
	r.t.Helper()
	hr, err := CompileHeaders(headers)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.rules = &Rules{Policy: p, Headers: hr}
	r.mu.Unlock()
	r.p.Recheck("b1")
}

// client is what a program in the box would be: it uses the proxy and
// trusts roots.
func (r *rig) client(roots *x509.CertPool) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(r.url), TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}
	r.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyPolicy(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "hello "+r.Host)
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	r := newRig(t, nil)
	r.names["allowed.test"] = "127.0.0.1"
	r.names["denied.test"] = "127.0.0.1"
	c := r.client(nil)

	check := func(host string, wantOK bool) {
		t.Helper()
		before := hits.Load()
		code, body := get(t, c, "http://"+host+":"+port+"/")
		if wantOK && (code != 200 || !strings.HasPrefix(body, "hello ")) {
			t.Errorf("GET %s = %d %q, want 200", host, code, body)
		}
		if !wantOK && (code != 403 || !strings.Contains(body, "network policy") || hits.Load() != before) {
			t.Errorf("GET %s = %d %q (upstream hits %d→%d), want 403 and no request", host, code, body, before, hits.Load())
		}
	}
	check("allowed.test", true)
	check("127.0.0.1", true)

	r.set(DenyAll, nil)
	check("allowed.test", false)
	check("127.0.0.1", false)

	// The test servers are on the host's loopback, which a listed name
	// reaches only when allowed_cidrs cover its address too (see
	// TestProxyNamesDoNotLeadToTheHost): the name still decides, as
	// denied.test, at the same address, is refused.
	custom, _ := Compile("custom", []string{"allowed.test"}, []string{"127.0.0.1/32"}, nil)
	r.set(custom, nil)
	check("allowed.test", true)
	check("denied.test", false)
	// The host's alias is a name like any other, which means the host.
	byAlias, _ := Compile("custom", []string{"*.boxd.internal"}, nil, nil)
	r.set(byAlias, nil)
	check(HostAlias, true)
	check("denied.test", false)
	check("127.0.0.1", false)

	byCIDR, _ := Compile("custom", []string{"allowed.test"}, []string{"127.0.0.0/8"}, []string{"127.0.0.1/32"})
	r.set(byCIDR, nil)
	check("allowed.test", false) // resolves into the denied /32

	// CONNECT is decided the same way.
	r.set(custom, nil)
	for host, want := range map[string]string{"allowed.test": "200", "denied.test": "403"} {
		conn, err := net.Dial("tcp", r.url.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, port, host, port)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || !strings.HasPrefix(resp.Status, want) {
			t.Errorf("CONNECT %s: %v %v, want %s", host, resp, err, want)
		}
		conn.Close()
	}

	// A request that is not a proxy request is refused.
	code, _ := get(t, &http.Client{}, r.url.String()+"/")
	if code != 400 {
		t.Errorf("origin-form request = %d, want 400", code)
	}
}

func TestProxyAttachHeaders(t *testing.T) {
	t.Parallel()
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "echo" {
			// An upgraded connection (as a WebSocket would be) that
			// echoes lines, after saying which credential it got.
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nauth=%s\n", r.Header.Get("Authorization"))
			brw.Flush()
			for {
				line, err := brw.ReadString('\n')
				if err != nil {
					return
				}
				brw.WriteString(line)
				brw.Flush()
			}
		}
		fmt.Fprintf(w, "auth=%s team=%s host=%s", r.Header.Get("Authorization"), r.Header.Get("X-Team"), r.Host)
	}))
	up.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	up.StartTLS()
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	upRoots := x509.NewCertPool()
	upRoots.AddCert(up.Certificate())
	r := newRig(t, upRoots)
	r.names["api.example.com"] = "127.0.0.1"
	r.names["www.example.com"] = "127.0.0.1"
	r.set(AllowAll, map[string]map[string]string{"api.example.com": {"Authorization": "Bearer s3cret", "X-Team": "core"}})

	// The box trusts boxd's CA only: a matching host is intercepted.
	boxRoots := x509.NewCertPool()
	boxRoots.AddCert(r.ca.Certificate())
	c := r.client(boxRoots)
	req, _ := http.NewRequest("GET", "https://api.example.com:"+port+"/x", nil)
	req.Header.Set("Authorization", "Bearer from-the-box")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "auth=Bearer s3cret team=core host=api.example.com:" + port; string(b) != want {
		t.Errorf("intercepted request reached upstream as %q, want %q", b, want)
	}

	// Upgrades work through an interception, with the headers added.
	raw, err := net.Dial("tcp", r.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "CONNECT api.example.com:%s HTTP/1.1\r\nHost: api.example.com:%s\r\n\r\n", port, port)
	rbr := bufio.NewReader(raw)
	if resp, err := http.ReadResponse(rbr, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: "api.example.com", RootCAs: boxRoots})
	fmt.Fprint(tc, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	tbr := bufio.NewReader(tc)
	resp, err = http.ReadResponse(tbr, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade through the interception: %v %v", resp, err)
	}
	if line, _ := tbr.ReadString('\n'); line != "auth=Bearer s3cret\n" {
		t.Errorf("upgraded request reached upstream with %q", line)
	}
	fmt.Fprint(tc, "ping\n")
	if line, err := tbr.ReadString('\n'); line != "ping\n" {
		t.Errorf("echo over the upgraded connection: %q %v", line, err)
	}
	tc.Close()

	// Another host is tunnelled untouched: the box sees the real
	// certificate and the upstream no header.
	code, body := get(t, r.client(upRoots), "https://www.example.com:"+port+"/")
	if code != 200 || body != "auth= team= host=www.example.com:"+port {
		t.Errorf("tunnelled request = %d %q", code, body)
	}

	// The policy still applies to intercepted hosts.
	custom, _ := Compile("custom", []string{"other.test"}, nil, nil)
	r.set(custom, map[string]map[string]string{"api.example.com": {"Authorization": "Bearer s3cret"}})
	if code, body := get(t, c, "https://api.example.com:"+port+"/"); code != 0 || !strings.Contains(body, "Forbidden") {
		t.Errorf("intercepted host under a policy that refuses it = %d %q", code, body)
	}

	// An upstream that boxd cannot verify is a 502, not a silent
	// downgrade.
	r2 := newRig(t, nil)
	r2.names["api.example.com"] = "127.0.0.1"
	r2.set(AllowAll, map[string]map[string]string{"api.example.com": {"Authorization": "Bearer s3cret"}})
	roots2 := x509.NewCertPool()
	roots2.AddCert(r2.ca.Certificate())
	if code, body := get(t, r2.client(roots2), "https://api.example.com:"+port+"/"); code != 502 || strings.Contains(body, "s3cret") {
		t.Errorf("unverifiable upstream = %d %q, want 502", code, body)
	}
}

func TestRecheckClosesTunnels(t *testing.T) {
	t.Parallel()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := echo.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	r := newRig(t, nil)
	conn, err := net.Dial("tcp", r.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", echo.Addr(), echo.Addr())
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	fmt.Fprint(conn, "ping\n")
	if line, err := br.ReadString('\n'); line != "ping\n" {
		t.Fatalf("echo: %q %v", line, err)
	}
	// Still allowed: the tunnel stays.
	stillOK, _ := Compile("custom", nil, []string{"127.0.0.0/8"}, nil)
	r.set(stillOK, nil)
	fmt.Fprint(conn, "pong\n")
	if line, err := br.ReadString('\n'); line != "pong\n" {
		t.Fatalf("echo after an update that still allows it: %q %v", line, err)
	}
	r.set(DenyAll, nil)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("read after deny-all = %v, want EOF (tunnel closed)", err)
	}
}

func TestRelayHalfClose(t *testing.T) {
	t.Parallel()
	a1, a2 := tcpPair(t)
	b1, b2 := tcpPair(t)
	done := make(chan struct{})
	go func() { Relay(a2, b1); close(done) }()
	// a1 → (relay) → b2: the writer half-closes, the reader still answers.
	fmt.Fprint(a1, "request")
	a1.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(b2)
	fmt.Fprint(b2, "response to "+string(got))
	b2.Close()
	back, _ := io.ReadAll(a1)
	if string(back) != "response to request" {
		t.Errorf("got %q", back)
	}
	a1.Close()
	<-done
}

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c1, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c2, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c1.Close(); c2.Close() })
	return c1, c2
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0.0.0.0":          "127.0.0.1",
		"::":               "::1",
		"::ffff:0.0.0.0":   "127.0.0.1",
		"::ffff:127.0.0.2": "127.0.0.2",
		"::ffff:10.1.2.3":  "10.1.2.3",
		"fe80::1%eth0":     "fe80::1",
		"203.0.113.9":      "203.0.113.9",
		"2001:db8::1":      "2001:db8::1",
	} {
		if got := Canonical(netip.MustParseAddr(in)); got != netip.MustParseAddr(want) {
			t.Errorf("Canonical(%s) = %s, want %s", in, got, want)
		}
	}
}

// request sends one proxy request for target (an absolute http:// URL, or
// host:port for CONNECT) and returns the status code and body.
func (r *rig) request(connect bool, target string) (int, string) {
	r.t.Helper()
	c, err := net.Dial("tcp", r.url.Host)
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	if connect {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	} else {
		u, _ := url.Parse(target)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, u.Host)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	if connect && resp.StatusCode == 200 {
		return 200, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// loopbackForms are ways to write the host's loopback address that a box
// may try, with the port.
func loopbackForms(port string) []string {
	return []string{"127.0.0.1:" + port, "127.9.9.9:" + port, "0.0.0.0:" + port, "[::]:" + port, "[::1]:" + port, "[::ffff:0.0.0.0]:" + port, "[::ffff:127.0.0.1]:" + port}
}

// TestProxyKeepsBoxesOffTheHost checks every form of the host's loopback
// address, by HTTP and CONNECT, with the operator's switch off (no box
// reaches the host, whatever its policy), and with it on under a policy
// that denies 127.0.0.0/8 and ::1 (the unspecified and mapped forms are
// the loopback they reach).
func TestProxyKeepsBoxesOffTheHost(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	off := newRigWith(t, Config{})
	off.names["evil.example.test"] = "127.0.0.1"
	wild, _ := Compile("custom", []string{"*.example.test"}, nil, nil)
	on := newRigWith(t, Config{HostLoopback: true})
	deny, _ := Compile("custom", nil, nil, []string{"127.0.0.0/8", "::1/128"})
	on.set(deny, nil)
	on.names["local.test"] = "127.0.0.1"
	for _, tc := range []struct {
		r      *rig
		pol    *Policy
		target string
		why    string
	}{
		{off, AllowAll, "", "this machine's own"},
		{off, wild, "", "this machine's own"},
		{off, wild, "evil.example.test:" + port, "this machine's own"},
		{off, AllowAll, HostAlias + ":" + port, "this machine's own"},
		{on, deny, "", "network policy"},
		{on, deny, "local.test:" + port, "network policy"},
	} {
		tc.r.set(tc.pol, nil)
		targets := loopbackForms(port)
		if tc.target != "" {
			targets = []string{tc.target}
		}
		for _, target := range targets {
			for _, connect := range []bool{false, true} {
				u := target
				if !connect {
					u = "http://" + target + "/"
				}
				code, body := tc.r.request(connect, u)
				if code != 403 || !strings.Contains(body, tc.why) {
					t.Errorf("%s policy, loopback %v: %s (CONNECT %v) = %d %q, want 403 (%s)", tc.pol.Mode(), tc.r.p.cfg.HostLoopback, target, connect, code, body, tc.why)
				}
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's server got %d requests", n)
	}
	// With the switch on and a policy that allows it, the host is reached.
	on.set(AllowAll, nil)
	if code, _ := on.request(false, "http://0.0.0.0:"+port+"/"); code != 200 || hits.Load() != 1 {
		t.Errorf("allowed loopback: %d, %d requests", code, hits.Load())
	}
}

// TestProxyKeepsBoxesOffBoxd: boxd's own ports are out of reach in every
// mode, by any address of this machine.
func TestProxyKeepsBoxesOffBoxd(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	pn, _ := strconv.Atoi(port)
	r := newRigWith(t, Config{HostLoopback: true, SelfPort: func(p uint16) bool { return int(p) == pn }})
	r.names["api.test"] = "127.0.0.1"
	targets := append(loopbackForms(port), "api.test:"+port, HostAlias+":"+port)
	if as, err := net.InterfaceAddrs(); err == nil {
		for _, a := range as {
			if pf, err := netip.ParsePrefix(a.String()); err == nil && !pf.Addr().IsLoopback() && !pf.Addr().IsLinkLocalUnicast() {
				targets = append(targets, net.JoinHostPort(pf.Addr().String(), port))
			}
		}
	}
	custom, _ := Compile("custom", []string{"api.test", HostAlias}, []string{"0.0.0.0/0", "::/0"}, nil)
	for _, pol := range []*Policy{AllowAll, custom} {
		r.set(pol, nil)
		for _, target := range targets {
			for _, connect := range []bool{false, true} {
				u := target
				if !connect {
					u = "http://" + target + "/"
				}
				if code, body := r.request(connect, u); code != 403 || !strings.Contains(body, "boxd itself") {
					t.Errorf("%s: %s (CONNECT %v) = %d %q, want 403", pol.Mode(), target, connect, code, body)
				}
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("boxd's port got %d requests", n)
	}
}

// TestProxyResolvesOnlyAllowedNames: a lookup is traffic too. A name is
// looked up only when the policy could allow it by name.
func TestProxyResolvesOnlyAllowedNames(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	byCIDR, _ := Compile("custom", nil, []string{"127.0.0.0/8"}, nil)
	byName, _ := Compile("custom", []string{"ok.test"}, []string{"127.0.0.0/8"}, nil)
	onlyDenied, _ := Compile("custom", nil, nil, []string{"10.0.0.0/8"})
	for _, tc := range []struct {
		pol    *Policy
		host   string
		lookup bool
	}{
		{byCIDR, "secret-data.exfil.test", false},
		{DenyAll, "secret-data.exfil.test", false},
		{byName, "secret-data.exfil.test", false},
		{byName, "ok.test", true},
		{onlyDenied, "anything.test", true},
		{AllowAll, "anything.test", true},
	} {
		r.set(tc.pol, nil)
		r.mu.Lock()
		r.lookups = nil
		r.mu.Unlock()
		for _, connect := range []bool{false, true} {
			u := tc.host + ":80"
			if !connect {
				u = "http://" + u + "/"
			}
			code, _ := r.request(connect, u)
			if code != 403 && code != 502 {
				t.Errorf("%s %s = %d", tc.pol.Mode(), u, code)
			}
		}
		r.mu.Lock()
		n := len(r.lookups)
		r.mu.Unlock()
		if tc.lookup != (n > 0) {
			t.Errorf("%s policy, %s: %d lookups, want lookup %v", tc.pol.Mode(), tc.host, n, tc.lookup)
		}
	}
}

// TestProxyNamesDoNotLeadToTheHost is DNS rebinding: with the host's
// loopback open to boxes, a box whose policy allows *.example.com points
// a name of that domain at the host (127.0.0.1, 0.0.0.0, a mapped form,
// link-local) and asks for it, by HTTP and CONNECT. A name in
// allowed_domains opens the network, not the host: only allowed_cidrs
// that cover the address do, or the host's own alias, which means the
// host by design.
func TestProxyNamesDoNotLeadToTheHost(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	r := newRigWith(t, Config{HostLoopback: true})
	for name, addr := range map[string]string{
		"a.example.com":   "127.0.0.1",
		"b.example.com":   "127.9.9.9",
		"c.example.com":   "0.0.0.0",
		"d.example.com":   "::",
		"e.example.com":   "::1",
		"f.example.com":   "::ffff:127.0.0.1",
		"g.example.com":   "169.254.169.254",
		"h.example.com":   "fe80::1",
		"api.example.com": "127.0.0.1",
	} {
		r.names[name] = addr
	}
	wild, _ := Compile("custom", []string{"*.example.com"}, nil, nil)
	exact, _ := Compile("custom", []string{"api.example.com"}, []string{"203.0.113.0/24"}, nil)
	for _, tc := range []struct {
		pol   *Policy
		names []string
	}{
		{wild, []string{"a", "b", "c", "d", "e", "f", "g", "h"}},
		{exact, []string{"api"}},
	} {
		r.set(tc.pol, nil)
		for _, n := range tc.names {
			target := n + ".example.com:" + port
			for _, connect := range []bool{false, true} {
				u := target
				if !connect {
					u = "http://" + target + "/"
				}
				if code, body := r.request(connect, u); code != 403 || !strings.Contains(body, "allowed_cidrs") {
					t.Errorf("%s (CONNECT %v), resolving to %s, allowed by name only = %d %q, want 403 saying allowed_cidrs open it", target, connect, r.names[n+".example.com"], code, body)
				}
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the host's server got %d requests from names that resolve to it", n)
	}

	// Where the operator's switch and the policy both allow the host, it
	// is reached: by the host's alias, by an allowed_cidrs that covers
	// the address, and under allow-all.
	byAlias, _ := Compile("custom", []string{"*.boxd.internal"}, nil, nil)
	byCIDR, _ := Compile("custom", []string{"*.example.com"}, []string{"127.0.0.1/32"}, nil)
	for _, tc := range []struct {
		pol  *Policy
		host string
	}{
		{byAlias, HostAlias},
		{byCIDR, "a.example.com"},
		{AllowAll, "a.example.com"},
	} {
		r.set(tc.pol, nil)
		for _, connect := range []bool{false, true} {
			before := hits.Load()
			target := tc.host + ":" + port
			u := target
			if !connect {
				u = "http://" + target + "/"
			}
			code, body := r.request(connect, u)
			if code != 200 || !connect && hits.Load() != before+1 {
				t.Errorf("%s policy %v: %s (CONNECT %v) = %d %q, want it reached", tc.pol.Mode(), tc.pol.domains, target, connect, code, body)
			}
		}
	}
}

// connCounter counts a test server's open connections, and the most it
// had open at once.
type connCounter struct {
	mu         sync.Mutex
	open, peak int
}

func (c *connCounter) state(_ net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew:
		c.open++
		c.peak = max(c.peak, c.open)
	case http.StateClosed, http.StateHijacked:
		c.open--
	}
}

func (c *connCounter) counts() (open, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.peak
}

// TestProxyBoundsIdleUpstream: a box sends keep-alive requests on one
// connection to ever new host names (a wildcard domain resolves them
// all). The proxy keeps IdleUpstream of the upstream connections for
// reuse, not one per host.
func TestProxyBoundsIdleUpstream(t *testing.T) {
	t.Parallel()
	var cc connCounter
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	up.Config.ConnState = cc.state
	up.Start()
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	r := newRig(t, nil)
	const hosts = 300
	for i := range hosts {
		r.names[fmt.Sprintf("h%d.test", i)] = "127.0.0.1"
	}
	c, err := net.Dial("tcp", r.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range hosts {
		h := fmt.Sprintf("h%d.test:%s", i, port)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", h, h)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, b)
		}
	}
	// Closing is seen by the server a moment after the proxy closes.
	var open, peak int
	waitUntil(5*time.Second, func() bool { open, peak = cc.counts(); return open <= IdleUpstream+1 })
	t.Logf("%d hosts: %d upstream connections open after, %d at most at once", hosts, open, peak)
	if open > IdleUpstream+1 || peak > IdleUpstream+8 {
		t.Errorf("after %d requests to as many hosts on one connection, the upstream has %d connections open (at most %d at once), want at most %d", hosts, open, peak, IdleUpstream+1)
	}
}

// waitUntil polls cond for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// synSent counts this machine's IPv4 connections to 127.0.0.1:port
// that wait for the peer's answer (SYN_SENT).
func synSent(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("cannot read the connection table: %v", err)
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == want && f[3] == "02" {
			n++
		}
	}
	return n
}

// TestProxyBoundsAbandonedDials: a box asks for a host that never
// answers and hangs up at once, again and again. Each request leaves a
// dial behind in the proxy; they stay within the box's bound, and the
// box's next request is still served.
func TestProxyBoundsAbandonedDials(t *testing.T) {
	t.Parallel()
	hole := blackhole(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer up.Close()
	const maxConns = 2
	r := newRigWith(t, Config{HostLoopback: true, MaxConns: maxConns})
	const tries = 80
	peak := 0
	for range tries {
		c, err := net.Dial("tcp", r.url.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", hole, hole)
		time.Sleep(30 * time.Millisecond) // the proxy is dialling
		c.Close()
		peak = max(peak, synSent(t, hole))
	}
	t.Logf("%d abandoned requests: at most %d dials open at once", tries, peak)
	if bound := maxConns + IdleUpstream; peak > bound {
		t.Errorf("%d abandoned requests to a host that never answers left up to %d dials open, want at most %d", tries, peak, bound)
	}
	// Failed dials give their share back.
	for range 2 * (maxConns + IdleUpstream) {
		if code, _ := r.request(false, "http://127.0.0.1:1/"); code != 502 {
			t.Fatalf("request to a closed port = %d, want 502", code)
		}
	}
	if code, body := r.request(false, up.URL+"/"); code != 200 || body != "ok" {
		t.Errorf("the box's request after the abandoned ones = %d %q, want 200", code, body)
	}
}
