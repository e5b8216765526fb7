package previews

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/egress"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/proxybuf"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// defaultPreviewDomain is the domain public URLs live under unless
// Config.PublicURLBase says otherwise. Browsers and curl resolve every
// name under .localhost to the loopback address. Each public URL's host
// is right under it, {box-id}-{port}.localhost, so that each is a site of
// its own: browsers hold localhost, a name that is not in the public
// suffix list, to be a public suffix, and no page can set a cookie for
// it (Domain=localhost), from a header or from its script. Under one
// more label (preview.localhost, as public URLs once were), every URL
// would share that label's site, and a page's script could set cookies
// that every other box's URLs receive.
const defaultPreviewDomain = "localhost"

// previewUser is the user name of basic-auth public URLs.
const previewUser = "user"

// proxyPort is the port of the box's egress relay, which a public URL
// cannot expose.
var proxyPort = func() int {
	_, p, _ := net.SplitHostPort(agent.ProxyAddr)
	n, _ := strconv.Atoi(p)
	return n
}()

// Previews serves public URLs: requests whose Host is
// {box-id}-{port}.{domain} are not API requests; they go, with the
// preview's credentials checked, to the port inside the box. boxd reaches
// the port through the box's agent, which connects to it on the box's own
// loopback (the box's network namespace) and bridges the bytes, so two
// boxes can both serve port 3000.
type Previews struct {
	host     Host
	db       Records
	cfg      Config
	base     *url.URL // Config.PublicURLBase, or nil
	domain   string
	errorLog *log.Logger

	// transport keeps idle bridged connections per box and port; its
	// "hosts" are {box-id}:{port}.
	transport *http.Transport

	mu     sync.Mutex
	conns  map[previewKey]map[*previewConn]struct{}
	closed bool
}

type previewKey struct {
	box  string
	port int
}

// New returns the public URLs feature. It fails on a BaseURL that is not
// an http or https URL with a host and nothing else.
func New(cfg Config) (*Previews, error) {
	pv := &Previews{host: cfg.Host, db: cfg.Records, cfg: cfg, domain: defaultPreviewDomain, conns: map[previewKey]map[*previewConn]struct{}{}}
	pv.errorLog = slog.NewLogLogger(cfg.Host.Logger().Handler(), slog.LevelDebug)
	if raw := cfg.BaseURL; raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("PublicURLBase %q must be an http or https URL with a host and nothing else, such as http://localhost:8989", raw)
		}
		u.Host = strings.ToLower(u.Host)
		pv.base = u
		pv.domain = strings.TrimSuffix(u.Hostname(), ".")
	}
	pv.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			id, p, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, _ := strconv.Atoi(p)
			return pv.dial(ctx, id, port)
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return pv, nil
}

// Target parses a public URL's host, {box-id}-{port}.{domain}[:port],
// case-insensitively.
func (pv *Previews) Target(host string) (id string, port int, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	label, ok := strings.CutSuffix(host, "."+pv.domain)
	if !ok || strings.Contains(label, ".") {
		return "", 0, false
	}
	i := strings.LastIndexByte(label, '-')
	if i <= 0 {
		return "", 0, false
	}
	// The port is decimal digits alone, with no leading zero or sign, so
	// that each public URL has one name, one origin and one site.
	digits := label[i+1:]
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	port, err := strconv.Atoi(digits)
	if err != nil || port < 1 || port > 65535 || digits[0] == '0' {
		return "", 0, false
	}
	return label[:i], port, true
}

// url is the public URL of a box's port. Without Config.PublicURLBase it
// names the port the API request came in on.
func (pv *Previews) url(ctx context.Context, id string, port int) string {
	host := fmt.Sprintf("%s-%d", id, port)
	if pv.base != nil {
		return pv.base.Scheme + "://" + host + "." + pv.base.Host
	}
	host += "." + defaultPreviewDomain
	if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			host += ":" + p
		}
	}
	return "http://" + host
}

// listItem is a public URL as listed: which kinds of auth it has, never
// their credentials.
func (pv *Previews) listItem(ctx context.Context, p *store.Preview) gen.PublicURLListItem {
	return gen.PublicURLListItem{
		ID:          fmt.Sprintf("%s-%d", p.BoxID, p.Port),
		Port:        p.Port,
		URL:         pv.url(ctx, p.BoxID, p.Port),
		CreatedAt:   p.CreatedAt,
		BearerToken: p.Token != "",
		BasicAuth:   p.Username != "",
	}
}

func (pv *Previews) publicURL(ctx context.Context, p *store.Preview) gen.PublicURL {
	u := gen.PublicURL{URL: pv.url(ctx, p.BoxID, p.Port), Port: p.Port}
	if p.Token != "" {
		u.Token = wire.Ptr(p.Token)
	}
	if p.Username != "" {
		u.Username, u.Password = wire.Ptr(p.Username), wire.Ptr(p.Password)
	}
	return u
}

func secret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CreatePreview exposes a port and returns the URL's new credentials.
// Asking again for a port that already has a URL replaces its credentials,
// as the cloud does: the old ones stop working at once, and the
// connections they opened are closed. bearer_token and basic_auth may both
// be set; either credential then passes. A paused box is resumed.
func (pv *Previews) CreatePreview(ctx context.Context, req gen.CreatePreviewRequestObject) (gen.CreatePreviewResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	port, bearer, basic := req.Body.Port, wire.Deref(req.Body.BearerToken), wire.Deref(req.Body.BasicAuth)
	if port < 1 || port > 65535 {
		return nil, errdefs.Invalid("port must be between 1 and 65535, got %d", port)
	}
	if port == proxyPort {
		return nil, errdefs.Invalid("port %d is the box's egress proxy and cannot be exposed", port)
	}
	b, err := pv.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if b.Status == "paused" {
		if _, err := pv.host.EnsureRunning(ctx, b); err != nil {
			return nil, err
		}
	}
	_, err = pv.db.Preview(b.ID, port)
	replaced := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	p := &store.Preview{BoxID: b.ID, Port: port, CreatedAt: time.Now().Unix()}
	if bearer {
		p.Token = secret()
	}
	if basic {
		p.Username, p.Password = previewUser, secret()
	}
	if err := pv.db.PutPreview(p); err != nil {
		return nil, err
	}
	if replaced {
		pv.closePort(b.ID, port)
		pv.host.Logf(b.ID, "info", "system", fmt.Sprintf("public URL of port %d made again, with new credentials", port))
	} else {
		pv.host.Logf(b.ID, "info", "system", fmt.Sprintf("port %d exposed on a public URL", port))
	}
	return gen.CreatePreview200JSONResponse(pv.publicURL(ctx, p)), nil
}

func (pv *Previews) ListPreviews(ctx context.Context, req gen.ListPreviewsRequestObject) (gen.ListPreviewsResponseObject, error) {
	b, err := pv.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	ps, err := pv.db.Previews(b.ID)
	if err != nil {
		return nil, err
	}
	out := gen.ListPreviews200JSONResponse{Previews: make([]gen.PublicURLListItem, 0, len(ps))}
	for _, p := range ps {
		out.Previews = append(out.Previews, pv.listItem(ctx, p))
	}
	return out, nil
}

// DeletePreview removes a public URL. It stops working at once: the
// connections it carries, WebSockets included, are closed.
func (pv *Previews) DeletePreview(ctx context.Context, req gen.DeletePreviewRequestObject) (gen.DeletePreviewResponseObject, error) {
	b, err := pv.host.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := pv.db.DeletePreview(b.ID, req.Port); errors.Is(err, store.ErrNotFound) {
		return nil, errdefs.NotFound("port %d of box %s has no public URL", req.Port, b.ID)
	} else if err != nil {
		return nil, err
	}
	pv.closePort(b.ID, req.Port)
	pv.host.Logf(b.ID, "info", "system", fmt.Sprintf("public URL of port %d deleted", req.Port))
	return gen.DeletePreview200JSONResponse(wire.Message("Preview deleted")), nil
}

// authorized checks a request against the preview's credentials, in
// constant time. A preview with both kinds passes with either.
func authorized(p *store.Preview, r *http.Request) bool {
	if p.Token == "" && p.Username == "" {
		return true
	}
	if p.Token != "" {
		h := r.Header.Get("Authorization")
		if len(h) >= 7 && strings.EqualFold(h[:7], "Bearer ") &&
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(h[7:])), []byte(p.Token)) == 1 {
			return true
		}
	}
	if p.Username != "" {
		u, pw, ok := r.BasicAuth()
		if ok && subtle.ConstantTimeCompare([]byte(u), []byte(p.Username))&subtle.ConstantTimeCompare([]byte(pw), []byte(p.Password)) == 1 {
			return true
		}
	}
	return false
}

var (
	errPreviewGone = errors.New("public URL deleted")
	// errNotListening is a held request's dial that found nothing
	// listening on the port until its hold ran out.
	errNotListening = errors.New("nothing listens on the port")
)

// publicURLRetryAfter is the Retry-After, in seconds, of a public URL
// request whose port did not listen within the hold.
const publicURLRetryAfter = "5"

// holdTime is the public URL hold; 0 means none.
func (pv *Previews) holdTime() time.Duration {
	switch d := pv.cfg.Hold; {
	case d < 0:
		return 0
	case d == 0:
		return DefaultHold
	default:
		return d
	}
}

// hold is how long a public URL request may wait for its port to listen.
// It travels in the request's context to the transport's dial, whose own
// context outlives the request (net/http keeps dialing for the pool), so
// it also carries the request's end.
type hold struct {
	until time.Time
	done  <-chan struct{}
}

type holdKey struct{}

// Serve proxies one public URL request (or WebSocket) into the box. The
// credentials are checked before anything else, so a request without
// them never wakes a paused box. Then the box is started or resumed, and
// the request is held until something listens on the port, for up to
// Config.PublicURLHold from its arrival; after that it is answered 503
// with Retry-After, as the cloud does.
func (pv *Previews) Serve(w http.ResponseWriter, r *http.Request, id string, port int) {
	arrived := time.Now()
	p, err := pv.db.Preview(id, port)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			api.Error(w, errdefs.NotFound("no public URL for port %d of box %s", port, id))
			return
		}
		api.StoreError(pv.host.Logger(), w, err)
		return
	}
	if !authorized(p, r) {
		if p.Token != "" {
			w.Header().Add("WWW-Authenticate", `Bearer realm="box public URL"`)
		}
		if p.Username != "" {
			w.Header().Add("WWW-Authenticate", `Basic realm="box public URL", charset="UTF-8"`)
		}
		api.Error(w, errdefs.Unauthenticated("unauthorized"))
		return
	}
	b, err := pv.host.Box(id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		api.Error(w, err)
		return
	case err != nil:
		api.StoreError(pv.host.Logger(), w, err)
		return
	}
	if _, err := pv.host.EnsureRunning(r.Context(), b); err != nil {
		switch {
		case errors.Is(err, core.ErrBoxNotFound):
			api.Error(w, core.ErrBoxNotFound)
		case r.Context().Err() != nil:
		default:
			api.Error(w, errdefs.Unavailable("%v", err))
		}
		return
	}
	defer pv.host.Busy(b.ID)()
	// The Authorization header goes on to the app unless it is boxd's:
	// the URL's own credential, or boxd's API key as a bearer token.
	stripAuth := p.Token != "" || p.Username != "" || pv.cfg.IsAPICredential(r)
	held := pv.holdTime()
	r = r.WithContext(context.WithValue(r.Context(), holdKey{}, &hold{until: arrived.Add(held), done: r.Context().Done()}))
	rp := &httputil.ReverseProxy{
		Transport:  pv.transport,
		BufferPool: proxybuf.Pool,
		ErrorLog:   pv.errorLog,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort(id, strconv.Itoa(port))
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Del(pv.cfg.APIKeyHeader)
			if stripAuth {
				pr.Out.Header.Del("Authorization")
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			scopeCookies(resp.Header, r.Host)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var ae *agent.Error
			switch {
			case r.Context().Err() != nil:
			case errors.Is(err, errPreviewGone):
				api.Error(w, errdefs.NotFound("no public URL for port %d of box %s", port, id))
			case errors.Is(err, errdefs.ErrNotFound), errors.Is(err, store.ErrNotFound):
				api.Error(w, core.ErrBoxNotFound) // deleted since it was found
			case errors.Is(err, errNotListening):
				unavailable(w, r, fmt.Sprintf("nothing listened on port %d of box %s within %s; try again", port, id, held))
			case errors.As(err, &ae):
				api.Error(w, errdefs.Upstream("%s", ae.Message))
			default:
				api.Error(w, errdefs.Upstream("port %d of box %s is unreachable: %v", port, id, err))
			}
		},
	}
	rp.ServeHTTP(w, r)
}

// unavailable answers a request whose port did not listen in time: 503
// with Retry-After, and for a browser a page that reloads itself then.
func unavailable(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Retry-After", publicURLRetryAfter)
	w.Header().Set("Cache-Control", "no-store")
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		api.Error(w, errdefs.Unavailable("%s", msg))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(api.Status(errdefs.Unavailable("%s", msg)))
	fmt.Fprintf(w, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"%s\"><title>Starting</title></head>\n<body><p>%s</p><p>This page reloads itself.</p></body></html>\n",
		publicURLRetryAfter, html.EscapeString(msg))
}

// dial opens a connection to port inside box id through its agent. When
// nothing listens on the port yet and the request holds (see serve), it
// tries again, more slowly each time, until the port listens, the hold
// runs out (errNotListening) or the request ends.
func (pv *Previews) dial(ctx context.Context, id string, port int) (net.Conn, error) {
	h, _ := ctx.Value(holdKey{}).(*hold)
	wait := 20 * time.Millisecond
	for {
		// A public URL deleted since the request was routed must not
		// open a new connection.
		if _, err := pv.db.Preview(id, port); err != nil {
			return nil, errPreviewGone
		}
		c, err := pv.dialBox(ctx, id, port)
		if err == nil {
			return pv.track(previewKey{id, port}, c)
		}
		if !errors.Is(err, agent.ErrNotListening) {
			return nil, err
		}
		if h == nil {
			return nil, err
		}
		left := time.Until(h.until)
		if left <= 0 {
			return nil, errNotListening
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-t.C:
		case <-h.done:
			t.Stop()
			return nil, context.Canceled
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// dialBox connects to port inside box id through its agent.
func (pv *Previews) dialBox(ctx context.Context, id string, port int) (net.Conn, error) {
	ac, err := pv.host.Agent(id) // serve started the box
	if err != nil {
		return nil, err
	}
	return ac.DialPort(ctx, port)
}

// previewConn is a bridged connection to a box's port.
type previewConn struct {
	net.Conn
	pv   *Previews
	key  previewKey
	once sync.Once
}

func (c *previewConn) Close() error {
	c.once.Do(func() {
		c.pv.mu.Lock()
		if m := c.pv.conns[c.key]; m != nil {
			delete(m, c)
			if len(m) == 0 {
				delete(c.pv.conns, c.key)
			}
		}
		c.pv.mu.Unlock()
	})
	return c.Conn.Close()
}

func (c *previewConn) CloseWrite() error { return egress.CloseWrite(c.Conn) }

func (pv *Previews) track(k previewKey, c net.Conn) (net.Conn, error) {
	pc := &previewConn{Conn: c, pv: pv, key: k}
	pv.mu.Lock()
	defer pv.mu.Unlock()
	if pv.closed {
		c.Close()
		return nil, core.ErrClosing
	}
	m := pv.conns[k]
	if m == nil {
		m = map[*previewConn]struct{}{}
		pv.conns[k] = m
	}
	m[pc] = struct{}{}
	return pc, nil
}

// closeWhere closes the tracked connections whose key passes match.
func (pv *Previews) closeWhere(match func(previewKey) bool) {
	pv.mu.Lock()
	var cs []*previewConn
	for k, m := range pv.conns {
		if match(k) {
			for c := range m {
				cs = append(cs, c)
			}
		}
	}
	pv.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// closePort closes every connection of a box port's public URL.
func (pv *Previews) closePort(id string, port int) {
	pv.closeWhere(func(k previewKey) bool { return k == previewKey{id, port} })
}

// CloseBox closes every public URL connection of a box.
func (pv *Previews) CloseBox(id string) {
	pv.closeWhere(func(k previewKey) bool { return k.box == id })
}

func (pv *Previews) Close() {
	pv.mu.Lock()
	pv.closed = true
	pv.mu.Unlock()
	pv.closeWhere(func(previewKey) bool { return true })
	pv.transport.CloseIdleConnections()
}

// scopeCookies keeps the cookies that a box's app sets in its answers'
// headers within the host of its public URL. Every public URL is a name
// under one domain (the preview domain): a cookie set for that domain, or
// for any name above the URL's own host, would be sent to every other
// box's URLs by a client that takes it. Browsers refuse one for localhost,
// the default domain, which they hold to be a public suffix; a cookie jar
// without the public suffix list (curl without libpsl, Go's without one)
// does not, and neither does a browser under an operator's PublicURLBase
// that is no public suffix. Such a cookie loses its Domain attribute and
// so belongs to the URL's host alone; a cookie scoped to the host itself,
// or with no Domain, is left as it is. What a page's script sets, boxd
// never sees: only the domain's being a public suffix bounds that.
func scopeCookies(h http.Header, host string) {
	cookies := h.Values("Set-Cookie")
	if len(cookies) == 0 {
		return
	}
	if hn, _, err := net.SplitHostPort(host); err == nil {
		host = hn
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	out := make([]string, 0, len(cookies))
	for _, c := range cookies {
		parts := strings.Split(c, ";")
		kept := parts[:1]
		for _, attr := range parts[1:] {
			name, value, _ := strings.Cut(strings.TrimSpace(attr), "=")
			if strings.EqualFold(strings.TrimSpace(name), "domain") {
				d := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(value), "."), "."))
				if d != host {
					continue
				}
			}
			kept = append(kept, attr)
		}
		out = append(out, strings.Join(kept, ";"))
	}
	h.Del("Set-Cookie")
	for _, c := range out {
		h.Add("Set-Cookie", c)
	}
}
