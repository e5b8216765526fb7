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
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/upstash/box-go/local/internal/proxybuf"
)

// Rules are what the proxy applies to one box's traffic. The proxy asks
// for them (Config.Lookup) for every connection and request, so a change
// takes effect at once.
type Rules struct {
	Policy  *Policy
	Headers []HeaderRule
}

// HeaderRule adds Header to the HTTPS requests a box sends to hosts that
// match Pattern (see MatchHost).
type HeaderRule struct {
	Pattern string
	Header  http.Header
}

// CompileHeaders checks a box's attach_headers (host pattern → header
// name → value) and returns them as rules, wildcard patterns first and the
// longer of two wildcards later, so that when several match a host the
// most specific one's values win.
func CompileHeaders(m map[string]map[string]string) ([]HeaderRule, error) {
	out := make([]HeaderRule, 0, len(m))
	for pat, hs := range m {
		p, err := NormalizePattern(pat)
		if err != nil {
			return nil, err
		}
		h := http.Header{}
		for k, v := range hs {
			if !validHeaderName(k) {
				return nil, fmt.Errorf("%s: %q is not a valid header name", pat, k)
			}
			if !validHeaderValue(v) {
				return nil, fmt.Errorf("%s: the value of %s contains characters a header cannot carry", pat, k)
			}
			ck := http.CanonicalHeaderKey(k)
			switch ck {
			case "Host", "Connection", "Content-Length", "Transfer-Encoding", "Upgrade", "Te", "Trailer", "Keep-Alive", "Proxy-Connection":
				return nil, fmt.Errorf("%s: %s cannot be attached", pat, ck)
			}
			h.Set(ck, v)
		}
		out = append(out, HeaderRule{Pattern: p, Header: h})
	}
	sort.Slice(out, func(i, j int) bool {
		wi, wj := strings.HasPrefix(out[i].Pattern, "*."), strings.HasPrefix(out[j].Pattern, "*.")
		if wi != wj {
			return wi
		}
		if len(out[i].Pattern) != len(out[j].Pattern) {
			return len(out[i].Pattern) < len(out[j].Pattern)
		}
		return out[i].Pattern < out[j].Pattern
	})
	return out, nil
}

// headersFor returns the headers to add to requests for host, or nil.
func headersFor(rules []HeaderRule, host string) http.Header {
	var h http.Header
	for _, r := range rules {
		if !MatchHost(r.Pattern, host) {
			continue
		}
		if h == nil {
			h = http.Header{}
		}
		for k, v := range r.Header {
			h[k] = v
		}
	}
	return h
}

// Config configures a Proxy.
type Config struct {
	// CA signs the certificates shown to a box for hosts whose TLS the
	// proxy terminates to add headers. Required.
	CA *CA
	// Lookup returns a box's current rules. An error refuses the box's
	// traffic.
	Lookup func(boxID string) (*Rules, error)
	// Resolve maps a host name to addresses; nil uses the system
	// resolver. Addresses given as such, and HostAlias, never reach it.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// RootCAs, when set, is trusted for upstream TLS besides the system's
	// roots.
	RootCAs *x509.CertPool
	// Denied, when set, is told of every connection the policy refuses.
	Denied func(boxID string, err *DeniedError)
	// HostLoopback lets boxes reach this machine, where their policy
	// allows: its loopback and link-local addresses, and every address
	// of its network interfaces (its LAN address, a bridge's), which
	// reach it as surely. A box reaches services a test runs on
	// 127.0.0.1, say, under allow-all, as HostAlias, or by allowed_cidrs
	// that cover them (a name in allowed_domains alone does not lead
	// there; see Policy.Permits). Without it no box ever reaches them,
	// under any policy: allow-all means the network, not the machine
	// boxd runs on. Other machines, those of the LAN included, are the
	// network.
	HostLoopback bool
	// SelfPort reports whether port is one that boxd itself listens on
	// (its API, its SSH server). Boxes never reach such a port on this
	// machine, by a loopback address or any of its interfaces', whatever
	// else allows it.
	SelfPort func(port uint16) bool
	// MaxConns bounds the connections one box may have open to the
	// proxy at once (default 256); past it the box's new connections
	// wait, and other boxes are not affected. It bounds the connections
	// the proxy opens for the box too, tunnels included: at most
	// MaxConns+IdleUpstream at once. A connection of the box carries one
	// tunnel or one request at a time, and the proxy keeps up to
	// IdleUpstream idle ones for reuse, over all hosts, and gives them up
	// when the box needs more. A box thus holds at most
	// 2×MaxConns+IdleUpstream of boxd's descriptors through its proxy,
	// however many hosts it asks for.
	MaxConns int
	// Log receives the proxy's own problems (never headers).
	Log *slog.Logger

	// hostAddrs lists this machine's addresses; nil lists its
	// interfaces' (net.InterfaceAddrs). Tests set their own.
	hostAddrs func() ([]netip.Addr, error)
}

// IdleUpstream is how many idle connections to upstream hosts the proxy
// keeps open for one box's reuse, over all hosts.
const IdleUpstream = 32

// Proxy is boxd's egress proxy. It serves each box on a listener of its
// own (Serve), so it always knows whose traffic it is carrying.
type Proxy struct {
	cfg      Config
	tlsUp    *tls.Config
	errorLog *log.Logger
	host     *hostAddrs

	mu     sync.Mutex
	boxes  map[string]*boxProxy
	closed bool
	wg     sync.WaitGroup // listeners and handlers
}

// New returns a proxy.
func New(cfg Config) *Proxy {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 256
	}
	p := &Proxy{cfg: cfg, boxes: map[string]*boxProxy{}, host: newHostAddrs(cfg.hostAddrs, cfg.Log)}
	p.errorLog = slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug)
	// Verification is done by verify, which also accepts RootCAs.
	p.tlsUp = &tls.Config{InsecureSkipVerify: true, VerifyConnection: p.verify, MinVersion: tls.VersionTLS12}
	return p
}

func (p *Proxy) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{DNSName: cs.ServerName, Intermediates: inter}
	_, err := cs.PeerCertificates[0].Verify(opts)
	if err != nil && p.cfg.RootCAs != nil {
		opts.Roots = p.cfg.RootCAs
		if _, err2 := cs.PeerCertificates[0].Verify(opts); err2 == nil {
			return nil
		}
	}
	return err
}

// enter registers a goroutine that Close must wait for; false once the
// proxy is closed.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// box returns the state of a box, creating it.
func (p *Proxy) box(id string) *boxProxy {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.boxes[id]
	if b == nil {
		b = p.newBox(id)
		if p.closed {
			b.stopped = true
		} else {
			p.boxes[id] = b
		}
	}
	return b
}

// Serve serves box boxID's proxy on ln until StopBox or Close. A listener
// the box already had is closed first, with its connections.
func (p *Proxy) Serve(boxID string, ln net.Listener) error {
	p.StopBox(boxID)
	b := p.box(boxID)
	if !p.enter() {
		ln.Close()
		return errors.New("egress proxy is closed")
	}
	hs := &http.Server{Handler: b, ReadHeaderTimeout: time.Minute, IdleTimeout: 5 * time.Minute, ErrorLog: p.errorLog}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		p.wg.Done()
		ln.Close()
		return errors.New("egress proxy is closed")
	}
	b.hs = hs
	b.mu.Unlock()
	go func() {
		defer p.wg.Done()
		_ = hs.Serve(netutil.LimitListener(ln, p.cfg.MaxConns))
	}()
	return nil
}

// StopBox closes box boxID's listener and every connection it carries.
func (p *Proxy) StopBox(boxID string) {
	p.mu.Lock()
	b := p.boxes[boxID]
	delete(p.boxes, boxID)
	p.mu.Unlock()
	if b != nil {
		b.stop()
	}
}

// Recheck applies box boxID's current policy to the connections the
// proxy holds open for it, closing those it no longer allows. Call it
// after changing the policy.
func (p *Proxy) Recheck(boxID string) {
	p.mu.Lock()
	b := p.boxes[boxID]
	p.mu.Unlock()
	if b == nil {
		return
	}
	pol := DenyAll
	if r, err := b.rules(); err == nil {
		pol = r.Policy
	}
	b.mu.Lock()
	var drop []*conn
	for c := range b.conns {
		if c.upstream && p.refuses(pol, c.host, c.ip, c.port) != "" {
			drop = append(drop, c)
		}
	}
	b.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}

// Close stops every box and waits for the proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	boxes := make([]*boxProxy, 0, len(p.boxes))
	for _, b := range p.boxes {
		boxes = append(boxes, b)
	}
	clear(p.boxes)
	p.mu.Unlock()
	for _, b := range boxes {
		b.stop()
	}
	p.wg.Wait()
}

// resolve returns the addresses of host.
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if host == HostAlias {
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1})}, nil
	}
	if p.cfg.Resolve != nil {
		return p.cfg.Resolve(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// refuses says why a box with policy pol may not connect to the
// canonical address ip at port under the name host: "" when it may, a
// reason for a destination refused whatever the policy, or the policy's
// own refusal (see Policy.refusal).
//
// The host is every address that reaches this machine: loopback, any
// address of its interfaces, and link-local ones (which reach it or its
// link: a cloud's metadata service). boxd's own ports at this machine's
// addresses are refused whatever the policy, the rest of the host unless
// Config.HostLoopback.
func (p *Proxy) refuses(pol *Policy, host string, ip netip.Addr, port uint16) string {
	own := ip.IsLoopback() || p.host.has(ip)
	toHost := own || hostOnly(ip)
	switch {
	case own && p.cfg.SelfPort != nil && p.cfg.SelfPort(port):
		return reasonSelf
	case toHost && !p.cfg.HostLoopback:
		return reasonHost
	}
	return pol.refusal(host, ip, toHost)
}

// reasonRank orders the reasons a destination is refused by how much
// they tell the box.
func reasonRank(why string) int {
	switch why {
	case reasonSelf:
		return 3
	case reasonHost:
		return 2
	case reasonNameToHost:
		return 1
	}
	return 0
}

// permitted returns the canonical addresses of host that the box may
// connect to at port, or a *DeniedError when there are none. The
// addresses are checked after resolution, every one; a name the policy
// could not allow is not even looked up.
func (p *Proxy) permitted(ctx context.Context, pol *Policy, host, port string) ([]netip.Addr, error) {
	host = normalizeHost(host)
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", port)
	}
	denied := &DeniedError{Host: host, Mode: pol.Mode()}
	if _, err := netip.ParseAddr(host); err != nil && !pol.mayResolve(host) {
		return nil, denied
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s: %w", host, err)
	}
	var ok []netip.Addr
	for _, a := range addrs {
		a = Canonical(a)
		switch why := p.refuses(pol, host, a, uint16(pn)); why {
		case "":
			if !slices.Contains(ok, a) {
				ok = append(ok, a)
			}
		case reasonSelf, reasonHost, reasonNameToHost:
			// The most telling reason wins: boxd itself, then the
			// operator's switch, then the policy's own.
			if reasonRank(why) > reasonRank(denied.Reason) {
				denied.Reason = why
			}
		}
	}
	if len(ok) == 0 {
		return nil, denied
	}
	// IPv4 first: it is what a machine without IPv6 routes can reach, and
	// the addresses are tried in turn.
	slices.SortStableFunc(ok, func(a, b netip.Addr) int {
		switch {
		case a.Is4() == b.Is4():
			return 0
		case a.Is4():
			return -1
		}
		return 1
	})
	return ok, nil
}

// boxProxy is the proxy of one box.
type boxProxy struct {
	p  *Proxy
	id string
	// transport carries plain HTTP requests and the requests of
	// intercepted TLS connections; its connections are the box's own, so
	// no other box ever reuses one.
	transport *http.Transport
	// upstream holds a token for each connection open to an upstream
	// host (dial), idle ones included: MaxConns+IdleUpstream at most.
	upstream chan struct{}
	done     chan struct{} // closed by stop

	mu      sync.Mutex
	hs      *http.Server
	conns   map[*conn]struct{}
	stopped bool
}

func (p *Proxy) newBox(id string) *boxProxy {
	b := &boxProxy{p: p, id: id, conns: map[*conn]struct{}{},
		upstream: make(chan struct{}, p.cfg.MaxConns+IdleUpstream), done: make(chan struct{})}
	b.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return b.dial(ctx, host, port)
		},
		// HTTP/1.1 only: the box speaks it to the proxy, and it keeps
		// upgrades (WebSockets) working through an interception.
		TLSClientConfig:       p.tlsUp.Clone(),
		MaxIdleConns:          IdleUpstream,
		MaxIdleConnsPerHost:   IdleUpstream / 2,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return b
}

func (b *boxProxy) stop() {
	b.mu.Lock()
	if !b.stopped {
		close(b.done)
	}
	b.stopped = true
	hs := b.hs
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	if hs != nil {
		hs.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	b.transport.CloseIdleConnections()
}

func (b *boxProxy) rules() (*Rules, error) {
	if b.p.cfg.Lookup == nil {
		return &Rules{Policy: AllowAll}, nil
	}
	r, err := b.p.cfg.Lookup(b.id)
	if err != nil {
		return nil, err
	}
	if r.Policy == nil {
		r.Policy = AllowAll
	}
	return r, nil
}

// dial connects to host:port for the box if its current policy allows
// it. Every connection the proxy opens for a box comes from here.
func (b *boxProxy) dial(ctx context.Context, host, port string) (net.Conn, error) {
	r, err := b.rules()
	if err != nil {
		return nil, err
	}
	addrs, err := b.p.permitted(ctx, r.Policy, host, port)
	if err != nil {
		return nil, err
	}
	pn, _ := strconv.ParseUint(port, 10, 16)
	if err := b.reserve(ctx); err != nil {
		return nil, err
	}
	var lastErr error
	for _, a := range addrs {
		d := net.Dialer{Timeout: 10 * time.Second}
		// The address checked is the one dialled.
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return b.track(c, normalizeHost(host), a, uint16(pn), true)
		}
		lastErr = err
	}
	<-b.upstream
	return nil, lastErr
}

// reserve takes a token for a new upstream connection, waiting while the
// box has its most open. Idle connections hold tokens too, so it gives
// them up first: a box that asks for ever more hosts keeps few of them.
func (b *boxProxy) reserve(ctx context.Context) error {
	select {
	case b.upstream <- struct{}{}:
		return nil
	default:
	}
	b.transport.CloseIdleConnections()
	select {
	case b.upstream <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-b.done:
		return errStopped
	}
}

var errStopped = errors.New("the box's egress proxy is stopped")

// track registers c so that StopBox and Recheck can close it. An
// upstream connection brings its token (reserve), which Close returns.
func (b *boxProxy) track(c net.Conn, host string, ip netip.Addr, port uint16, upstream bool) (*conn, error) {
	tc := &conn{Conn: c, b: b, host: host, ip: ip, port: port, upstream: upstream}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		c.Close()
		if upstream {
			<-b.upstream
		}
		return nil, errStopped
	}
	b.conns[tc] = struct{}{}
	return tc, nil
}

// conn is a connection the proxy holds for a box: an upstream one (to
// host, at ip) or the box's end of a tunnel.
type conn struct {
	net.Conn
	b        *boxProxy
	host     string
	ip       netip.Addr
	port     uint16
	upstream bool
	once     sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.b.mu.Lock()
		delete(c.b.conns, c)
		c.b.mu.Unlock()
		if c.upstream {
			<-c.b.upstream
		}
	})
	return err
}

func (c *conn) CloseWrite() error { return CloseWrite(c.Conn) }

// ServeHTTP serves one proxy request from the box: CONNECT, or a request
// with an absolute URI.
func (b *boxProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !b.p.enter() {
		http.Error(w, "boxd egress proxy is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer b.p.wg.Done()
	if r.Method == http.MethodConnect {
		b.connect(w, r)
		return
	}
	if (r.URL.Scheme != "http" && r.URL.Scheme != "https") || r.URL.Host == "" {
		http.Error(w, "boxd egress proxy: send CONNECT or a request with an absolute http:// URI", http.StatusBadRequest)
		return
	}
	r.Header.Del("Proxy-Authorization")
	var add http.Header
	if r.URL.Scheme == "https" {
		rules, err := b.rules()
		if err != nil {
			b.refuse(w, err)
			return
		}
		add = headersFor(rules.Headers, r.URL.Hostname())
	}
	b.forward(w, r, r.URL.Scheme, r.URL.Host, add)
}

// refuse answers a request the proxy could not carry: 403 when the policy
// refused it, 502 when the destination could not be reached.
func (b *boxProxy) refuse(w http.ResponseWriter, err error) {
	var de *DeniedError
	if errors.As(err, &de) {
		if b.p.cfg.Denied != nil {
			b.p.cfg.Denied(b.id, de)
		}
		http.Error(w, de.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "boxd egress: "+err.Error(), http.StatusBadGateway)
}

// forward sends r to scheme://authority, adding the headers in add, and
// copies the answer back (WebSocket upgrades included).
func (b *boxProxy) forward(w http.ResponseWriter, r *http.Request, scheme, authority string, add http.Header) {
	rp := &httputil.ReverseProxy{
		Transport:  b.transport,
		BufferPool: proxybuf.Pool,
		ErrorLog:   b.p.errorLog,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = authority
			pr.Out.Host = ""
			for k, v := range add {
				pr.Out.Header[k] = slices.Clone(v)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			b.refuse(w, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// connect serves a CONNECT request: a plain tunnel, or, when the box has
// headers to attach for the host, a TLS interception that adds them.
func (b *boxProxy) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil || host == "" || port == "" {
		http.Error(w, "boxd egress proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	rules, err := b.rules()
	if err != nil {
		b.refuse(w, err)
		return
	}
	add := headersFor(rules.Headers, host)
	var up net.Conn
	if add == nil {
		if up, err = b.dial(r.Context(), host, port); err != nil {
			b.refuse(w, err)
			return
		}
	} else if _, err := b.p.permitted(r.Context(), rules.Policy, host, port); err != nil {
		// The interception dials for each request; refuse up front so
		// the box gets a clear answer to its CONNECT.
		b.refuse(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		if up != nil {
			up.Close()
		}
		http.Error(w, "boxd egress proxy: cannot take over the connection", http.StatusInternalServerError)
		return
	}
	raw, brw, err := hj.Hijack()
	if err != nil {
		if up != nil {
			up.Close()
		}
		return
	}
	client, err := b.track(WithBuffered(raw, brw.Reader), "", netip.Addr{}, 0, false)
	if err != nil {
		if up != nil {
			up.Close()
		}
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	if up != nil {
		Relay(client, up)
		return
	}
	b.intercept(client, host, port)
}

// intercept terminates the box's TLS connection to host with a
// certificate from boxd's CA and forwards each request in it to the real
// host over TLS, adding the box's headers for host.
func (b *boxProxy) intercept(client net.Conn, host, port string) {
	defer client.Close()
	cert, err := b.p.cfg.CA.leafFor(host)
	if err != nil {
		b.p.cfg.Log.Warn("egress: cannot make a certificate", "host", host, "err", err)
		return
	}
	tc := tls.Server(client, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tc.Handshake(); err != nil {
		return
	}
	_ = tc.SetDeadline(time.Time{})
	authority := host
	if port != "443" {
		authority = net.JoinHostPort(host, port)
	}
	ln := &oneConnListener{c: tc, done: make(chan struct{})}
	hs := &http.Server{
		ReadHeaderTimeout: 5 * time.Minute,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          b.p.errorLog,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !b.p.enter() {
				http.Error(w, "boxd egress proxy is shutting down", http.StatusServiceUnavailable)
				return
			}
			defer b.p.wg.Done()
			rules, err := b.rules()
			if err != nil {
				b.refuse(w, err)
				return
			}
			// An upgrade (a WebSocket) takes the connection over; the
			// interception ends when it does.
			hw := &hijackWatch{ResponseWriter: w}
			defer func() {
				if hw.hijacked {
					ln.Close()
				}
			}()
			b.forward(hw, r, "https", authority, headersFor(rules.Headers, host))
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				ln.Close()
			}
		},
	}
	_ = hs.Serve(ln)
}

// hijackWatch notes whether the handler took the connection over.
type hijackWatch struct {
	http.ResponseWriter
	hijacked bool
}

func (h *hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.hijacked = true
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

func (h *hijackWatch) Flush() { _ = http.NewResponseController(h.ResponseWriter).Flush() }

func (h *hijackWatch) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// oneConnListener hands out one connection, then waits until closed.
type oneConnListener struct {
	c    net.Conn
	mu   sync.Mutex
	used bool
	once sync.Once
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.used {
		l.used = true
		l.mu.Unlock()
		return l.c, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// validHeaderName reports whether s is an HTTP token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s can be sent as a header value.
func validHeaderValue(s string) bool {
	for _, c := range []byte(s) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
