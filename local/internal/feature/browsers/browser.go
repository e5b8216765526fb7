package browsers

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/browser"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/egress"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// A box created with browser: true gets a headless Chromium, from the
// host's /usr (Debian's chromium package), started inside the box through
// its agent with the box: in the background whenever its sandbox starts
// (at create, at a restore, at a start after the box lost its processes),
// as the cloud pre-warms it. A create does not wait for it, and a
// Chromium that fails to start fails nothing but the box's log line; the
// next browser call starts it again and reports why it cannot. One that
// exits is started again by the next call. Its DevTools listen on the
// box's own loopback (127.0.0.1:9222 in an isolated box), which only the
// box and boxd (through the agent's bridge) reach; boxd drives it with
// chromedp, and the box's coding agent with the Chrome DevTools MCP server
// (runMCPServers). Its traffic leaves through the box's egress proxy,
// under the box's network policy.
//
// A box created with desktop: true (and not browser: true) has the
// desktop's headed Chromium as its browser, once its desktop runs: boxd
// attaches to its DevTools port (reading the browser target's path from
// /json/version) and serves the same operations, CDP URL and live view on
// it. The desktop owns that Chromium: boxd never starts or ends it, and a
// call while the desktop is stopped is a conflict that says to start it.
//
// The CDP URL and the live view are served by boxd without the API key,
// behind a random token that expires: cdpTokenTTL and liveTokenTTL after
// it was issued no new connection is accepted (open ones go on).

// Lifetimes of the tokens in CDP and live view URLs.
const (
	cdpTokenTTL  = 10 * time.Minute
	liveTokenTTL = time.Hour
)

// devtoolsPort is where Chromium's DevTools listen in an isolated box (as
// in the cloud); a box without isolation shares the host's ports and lets
// Chromium pick one.
const devtoolsPort = 9222

// defaultBrowserModel is the model of the AI operations when neither the
// request nor the box names one.
const defaultBrowserModel = "anthropic/claude-sonnet-4-5"

// Browsers runs the boxes' browsers and serves their CDP and live view
// URLs.
type Browsers struct {
	host        Host
	db          Recordings
	cfg         Config
	chromium    string
	chromiumErr error
	models      *http.Client
	base        context.Context // ends at Close: live views and proxies
	cancel      context.CancelFunc
	recs        *recordings

	mu     sync.Mutex
	boxes  map[string]*boxBrowser
	tokens map[string]*linkToken
	cache  map[string]browser.Action // act(instruction) answers by box, URL and instruction
	closed bool
}

// linkToken authorises the connections of a CDP or live view URL.
type linkToken struct {
	box     string
	kind    string // "cdp" or "live"
	tab     string // live view of one tab; "" follows the foreground
	expires time.Time
}

// boxBrowser is the Chromium of one box.
type boxBrowser struct {
	id    string
	start sync.Mutex // one start (or attach) at a time

	mu     sync.Mutex
	ctl    *browser.Controller
	port   int
	path   string             // the browser target's DevTools path
	stop   context.CancelFunc // ends the Chromium process; nil for a desktop's
	exited chan struct{}      // closed when it has ended; nil for a desktop's
	output *tailWriter
	conns  map[net.Conn]struct{} // CDP connections through boxd
}

// New returns the browsers feature.
func New(cfg Config) *Browsers {
	bs := &Browsers{
		host:   cfg.Host,
		db:     cfg.Recordings,
		cfg:    cfg,
		models: &http.Client{Timeout: 3 * time.Minute},
		boxes:  map[string]*boxBrowser{},
		tokens: map[string]*linkToken{},
		cache:  map[string]browser.Action{},
	}
	bs.base, bs.cancel = context.WithCancel(cfg.Host.Context())
	bs.chromium, bs.chromiumErr = findChromium(cfg.ChromiumPath, cfg.Isolation)
	bs.recs = newRecordings(bs)
	cfg.Host.OnStarted(bs.warm)
	cfg.Host.OnBoxDeleted(bs.forgetBox)
	return bs
}

// findChromium resolves the Chromium binary. Debian's /usr/bin/chromium
// is a shell wrapper that reads /etc/chromium.d, which a box does not
// have, so the binary behind it is preferred. An isolated box sees only
// the host's /usr.
func findChromium(configured string, mode sandbox.Mode) (string, error) {
	var path string
	if configured != "" {
		p, err := exec.LookPath(configured)
		if err != nil {
			return "", fmt.Errorf("Config.ChromiumPath %q: %w", configured, err)
		}
		path = p
	} else {
		for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser"} {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				path = p
				break
			}
		}
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
			if path != "" {
				break
			}
			if p, err := exec.LookPath(name); err == nil {
				path = p
			}
		}
		if path == "" {
			return "", errors.New("Chromium is not installed on this machine (on Debian: apt-get install chromium)")
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if mode == sandbox.ModeBwrap {
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return "", err
		}
		if !strings.HasPrefix(real, "/usr/") {
			return "", fmt.Errorf("Chromium at %s is outside /usr, the only part of this machine a box sees", real)
		}
	}
	return abs, nil
}

func (bs *Browsers) box(id string) *boxBrowser {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bb := bs.boxes[id]
	if bb == nil {
		bb = &boxBrowser{id: id, conns: map[net.Conn]struct{}{}}
		bs.boxes[id] = bb
	}
	return bb
}

// noBrowser is the answer for a box created without one.
func noBrowser(b *store.Box) error {
	return errdefs.Conflict("box %s has no browser: create it with browser: true (or desktop: true, for the desktop's Chromium)", b.ID)
}

// onDesktop reports whether b's browser is its desktop's Chromium.
func onDesktop(b *store.Box) bool { return b.Desktop && !b.Browser }

// ensure returns b's browser, starting the box and Chromium as needed (on
// a desktop box, attaching to the desktop's Chromium).
func (bs *Browsers) ensure(ctx context.Context, b *store.Box) (*boxBrowser, *browser.Controller, error) {
	if !b.Browser && !b.Desktop {
		return nil, nil, noBrowser(b)
	}
	if !onDesktop(b) && bs.chromiumErr != nil {
		return nil, nil, errdefs.NotImplemented("boxd cannot run a browser here: %v", bs.chromiumErr)
	}
	bs.mu.Lock()
	closed := bs.closed
	bs.mu.Unlock()
	if closed {
		return nil, nil, core.ErrClosing
	}
	rt, err := bs.host.EnsureRunning(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	if onDesktop(b) {
		return bs.attach(ctx, b)
	}
	return bs.startIn(ctx, rt, b)
}

// desktopRunning reports whether box id's desktop runs.
func (bs *Browsers) desktopRunning(id string) bool {
	return bs.cfg.Desktop != nil && bs.cfg.Desktop(id)
}

// attach returns the browser of desktop box b, whose sandbox runs:
// its desktop's Chromium, connected to unless it is already.
func (bs *Browsers) attach(ctx context.Context, b *store.Box) (*boxBrowser, *browser.Controller, error) {
	bb := bs.box(b.ID)
	bb.start.Lock()
	defer bb.start.Unlock()
	if !bs.desktopRunning(b.ID) {
		bb.shutdown()
		return nil, nil, errdefs.Conflict("the box's browser is its desktop's Chromium, and the desktop is not running: start it first with POST /v2/box/%s/desktop/start", b.ID)
	}
	if ctl := bb.alive(); ctl != nil {
		return bb, ctl, nil
	}
	bb.shutdown()
	port := bs.cfg.DesktopDevtoolsPort
	path, err := bs.desktopTarget(ctx, b.ID, port)
	if err != nil {
		return nil, nil, err
	}
	id := b.ID
	ctl, err := browser.Connect(ctx, func(ctx context.Context) (net.Conn, error) { return bs.dial(ctx, id, port) }, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), path)
	if err != nil {
		return nil, nil, fmt.Errorf("attaching to the desktop's Chromium: %w", err)
	}
	bb.mu.Lock()
	bb.ctl, bb.port, bb.path, bb.stop, bb.exited, bb.output = ctl, port, path, nil, nil, nil
	bb.mu.Unlock()
	bs.host.Logf(b.ID, "info", "system", "browser attached to the desktop's Chromium")
	go func() {
		<-ctl.Done()
		ctl.Close()
	}()
	return bb, ctl, nil
}

// desktopAttachWait bounds the wait for a desktop's Chromium to open its
// DevTools port: it starts in the background of the desktop's start.
const desktopAttachWait = 30 * time.Second

// desktopTarget returns the DevTools path of the browser target of the
// Chromium on port in box id, from its /json/version, waiting for the
// port to open while the desktop runs.
func (bs *Browsers) desktopTarget(ctx context.Context, id string, port int) (string, error) {
	client := &http.Client{
		Transport: &http.Transport{
			DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return bs.dial(ctx, id, port) },
			DisableKeepAlives: true,
		},
		Timeout: 5 * time.Second,
	}
	defer client.CloseIdleConnections()
	u := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/json/version"
	var last error
	for deadline := time.Now().Add(desktopAttachWait); ; {
		path, err := readTarget(ctx, client, u)
		if err == nil {
			return path, nil
		}
		last = err
		if !bs.desktopRunning(id) {
			return "", errdefs.Conflict("the box's desktop stopped: start it first with POST /v2/box/%s/desktop/start", id)
		}
		if time.Now().After(deadline) {
			return "", errdefs.Unavailable("the desktop's Chromium does not answer on its DevTools port %d: %v", port, last)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readTarget reads the browser target's path from a /json/version URL.
func readTarget(ctx context.Context, client *http.Client, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/json/version answered %s", resp.Status)
	}
	var v struct {
		URL string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&v); err != nil {
		return "", fmt.Errorf("/json/version: %w", err)
	}
	ws, err := url.Parse(v.URL)
	if err != nil || !strings.HasPrefix(ws.Path, "/devtools/browser/") {
		return "", fmt.Errorf("/json/version gave no browser target: %q", v.URL)
	}
	return ws.Path, nil
}

// startIn returns the browser of box b, whose sandbox runs, starting
// Chromium unless it runs.
func (bs *Browsers) startIn(ctx context.Context, rt *agent.Client, b *store.Box) (*boxBrowser, *browser.Controller, error) {
	bb := bs.box(b.ID)
	bb.start.Lock()
	defer bb.start.Unlock()
	if ctl := bb.alive(); ctl != nil {
		return bb, ctl, nil
	}
	bb.shutdown()
	if err := bs.launch(ctx, rt, b, bb); err != nil {
		return nil, nil, err
	}
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return bb, bb.ctl, nil
}

// warm starts the Chromium of box b, whose sandbox has just started, in
// the background. It does nothing for a box without a browser, and skips
// a box that was paused or stopped in the meantime.
func (bs *Browsers) warm(b *store.Box) {
	if !b.Browser {
		return
	}
	if bs.chromiumErr != nil {
		bs.host.Logf(b.ID, "warn", "system", "the box's browser cannot start: "+bs.chromiumErr.Error())
		return
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.closed {
		return
	}
	// Close marks bs closed (under bs.mu, held here) before it waits, so
	// Go refuses no warm of an open bs.
	bs.host.Go(func(context.Context) {
		// Not ensureRunning: a box paused, stopped or deleted since is
		// left as it is.
		rt, ok := bs.host.Running(b.ID)
		if !ok {
			return
		}
		// A failure is in the box's log (launch); the next browser call
		// tries again and answers with it.
		_, _, _ = bs.startIn(bs.base, rt, b)
	})
}

// DevtoolsURL is where box b's processes reach its Chromium's DevTools
// (http://127.0.0.1:port), starting Chromium if it is not running.
func (bs *Browsers) DevtoolsURL(ctx context.Context, b *store.Box) (string, error) {
	bb, _, err := bs.ensure(ctx, b)
	if err != nil {
		return "", err
	}
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(bb.port)), nil
}

// alive returns the controller of a browser that runs, or nil.
func (bb *boxBrowser) alive() *browser.Controller {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if bb.ctl == nil {
		return nil
	}
	select {
	case <-bb.exited:
		return nil
	case <-bb.ctl.Done():
		return nil
	default:
		return bb.ctl
	}
}

// controller returns the controller of a running browser without starting
// one.
func (bs *Browsers) controller(id string) *browser.Controller {
	bs.mu.Lock()
	bb := bs.boxes[id]
	bs.mu.Unlock()
	if bb == nil {
		return nil
	}
	return bb.alive()
}

// shutdown ends the browser's process and its connections.
func (bb *boxBrowser) shutdown() {
	bb.mu.Lock()
	ctl, stop, exited := bb.ctl, bb.stop, bb.exited
	bb.ctl, bb.stop = nil, nil
	conns := bb.conns
	bb.conns = map[net.Conn]struct{}{}
	bb.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	if ctl != nil {
		ctl.Close()
	}
	if stop != nil {
		stop()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	}
}

var devtoolsLine = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// chromiumFlags are the flags Chromium runs with in a box.
func chromiumFlags(port int) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-dev-shm-usage", "--disable-breakpad", "--mute-audio",
		"--password-store=basic", "--use-mock-keychain", "--window-size=1280,720",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=" + strconv.Itoa(port),
	}
}

// launchScript starts Chromium with a fresh profile in the box's /tmp and
// the box's egress proxy (the agent gives every process HTTP_PROXY).
const launchScript = `dir="${TMPDIR:-/tmp}/.boxd-chromium"; rm -rf "$dir"; exec "$@" --user-data-dir="$dir" ${HTTP_PROXY:+"--proxy-server=$HTTP_PROXY"} about:blank`

// launch starts Chromium in the box and connects to it.
func (bs *Browsers) launch(ctx context.Context, rt *agent.Client, b *store.Box, bb *boxBrowser) error {
	port := devtoolsPort
	if bs.cfg.Isolation == sandbox.ModeNone {
		port = 0
	}
	argv := append([]string{"sh", "-c", launchScript, "sh", bs.chromium}, chromiumFlags(port)...)
	pctx, stop := context.WithCancel(bs.host.Context())
	p, err := rt.Process(pctx, agent.ProcessRequest{Argv: argv, MergeStderr: true})
	if err != nil {
		stop()
		return fmt.Errorf("starting the browser: %w", err)
	}
	out := &tailWriter{max: 8 << 10}
	exited := make(chan struct{})
	found := make(chan string, 1)
	go func() {
		defer close(exited)
		defer p.Close()
		br := bufio.NewReader(p.Output)
		for {
			line, err := br.ReadString('\n')
			out.Write([]byte(line))
			if m := devtoolsLine.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	fail := func(err error) error {
		stop()
		<-exited
		msg := strings.TrimSpace(out.String())
		if i := strings.LastIndex(msg[:max(0, len(msg)-2000)], "\n"); len(msg) > 2000 && i >= 0 {
			msg = msg[i+1:]
		}
		bs.host.Logf(b.ID, "error", "system", "the browser did not start: "+err.Error())
		if msg != "" {
			return fmt.Errorf("the browser did not start: %w; its output ends with: %s", err, msg)
		}
		return fmt.Errorf("the browser did not start: %w", err)
	}
	var wsURL string
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case wsURL = <-found:
	case <-exited:
		return fail(errors.New("Chromium exited"))
	case <-timer.C:
		return fail(errors.New("Chromium did not open its DevTools port within 30s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	u, err := url.Parse(wsURL)
	if err != nil {
		return fail(err)
	}
	port, _ = strconv.Atoi(u.Port())
	id := b.ID
	ctl, err := browser.Connect(ctx, func(ctx context.Context) (net.Conn, error) { return bs.dial(ctx, id, port) }, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), u.Path)
	if err != nil {
		return fail(err)
	}
	bb.mu.Lock()
	bb.ctl, bb.port, bb.path, bb.stop, bb.exited, bb.output = ctl, port, u.Path, stop, exited, out
	bb.mu.Unlock()
	bs.host.Logf(b.ID, "info", "system", "browser started")
	go func() {
		select {
		case <-exited:
			bs.host.Logf(id, "info", "system", "browser exited")
		case <-ctl.Done():
		}
		ctl.Close()
	}()
	return nil
}

// dial connects to port inside box id through its agent's bridge.
func (bs *Browsers) dial(ctx context.Context, id string, port int) (net.Conn, error) {
	ac, err := bs.host.Agent(id) // callers start the box first
	if err != nil {
		return nil, err
	}
	return ac.DialPort(ctx, port)
}

// touch notes browser activity on a box, which keeps its recording from
// stopping as idle.
func (bs *Browsers) touch(id string) { bs.recs.touch(id) }

// secret is 128 random bits, in hex.
func secret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// mint issues a token for a CDP or live view URL.
func (bs *Browsers) mint(boxID, kind, tab string, ttl time.Duration) string {
	now := bs.host.Clock().Now()
	tok := secret() + secret()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for k, t := range bs.tokens {
		if now.After(t.expires) {
			delete(bs.tokens, k)
		}
	}
	bs.tokens[tok] = &linkToken{box: boxID, kind: kind, tab: tab, expires: now.Add(ttl)}
	return tok
}

// token returns the token of r when it is valid for box and kind.
func (bs *Browsers) token(r *http.Request, boxID, kind string) (*linkToken, bool) {
	tok := r.URL.Query().Get("token")
	if tok == "" {
		return nil, false
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	t := bs.tokens[tok]
	if t == nil || t.box != boxID || t.kind != kind || bs.host.Clock().Now().After(t.expires) {
		return nil, false
	}
	return t, true
}

// baseURL is boxd's address as the API request in ctx reached it, with
// scheme (http or ws).
func baseURL(ctx context.Context, scheme string) string {
	host := "127.0.0.1"
	if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		host = a.String()
	}
	return scheme + "://" + host
}

// TokenGuard lets through to next the requests whose URL carries an
// unexpired token of kind for the box of the path, and refuses the others
// with 401 (a WebSocket handshake is accepted and closed with 4401, as a
// WebSocket client cannot read the status of a refused handshake).
func (bs *Browsers) TokenGuard(kind, refusal string, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := bs.token(r, r.PathValue("id"), kind); !ok {
			refuseToken(w, r, refusal)
			return
		}
		next(w, r)
	})
}

// refuseToken answers a request whose URL token is not (or no longer)
// valid.
func refuseToken(w http.ResponseWriter, r *http.Request, msg string) {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		if c, err := websocket.Accept(w, r, nil); err == nil {
			c.Close(4401, "token expired")
		}
		return
	}
	api.Error(w, errdefs.Unauthenticated("%s", msg))
}

// running returns the box of a token URL with its browser running.
func (bs *Browsers) running(w http.ResponseWriter, r *http.Request, id string) (*boxBrowser, *browser.Controller, bool) {
	b, err := bs.host.Box(id)
	if err != nil {
		api.Error(w, core.ErrBoxNotFound)
		return nil, nil, false
	}
	bb, ctl, err := bs.ensure(r.Context(), b)
	if err != nil {
		if r.Context().Err() == nil {
			api.Error(w, err)
		}
		return nil, nil, false
	}
	return bb, ctl, true
}

// ServeCDP is the CDP URL: a WebSocket to the box's browser target (or to
// a page target, at devtools/page/<id>), and /json/version for tools that
// start from an http URL.
func (bs *Browsers) ServeCDP(w http.ResponseWriter, r *http.Request) {
	id, rest := r.PathValue("id"), r.PathValue("rest")
	bb, ctl, ok := bs.running(w, r, id)
	if !ok {
		return
	}
	bb.mu.Lock()
	port, path := bb.port, bb.path
	bb.mu.Unlock()
	switch strings.TrimSuffix(rest, "/") {
	case "json/version":
		scheme := "ws"
		ws := scheme + "://" + r.Host + "/v2/box/" + id + "/browser/cdp" + path + "?token=" + url.QueryEscape(r.URL.Query().Get("token"))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"Browser": "Chromium", "Protocol-Version": "1.3", "webSocketDebuggerUrl": ws})
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		api.Error(w, errdefs.NotFound("the CDP URL serves the DevTools WebSocket and /json/version only"))
		return
	}
	target, page := path, ""
	if p, ok := strings.CutPrefix(rest, "devtools/page/"); ok {
		target, page = "/"+rest, p
	}
	hostport := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dial := func(ctx context.Context) (*websocket.Conn, error) {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				c, err := bs.dial(ctx, id, port)
				if err != nil {
					return nil, err
				}
				return bb.track(c)
			},
			DisableKeepAlives: true,
		}
		// Chromium accepts DevTools connections for an IP host without an
		// Origin; the token was boxd's to check, and no header of the
		// client's goes on.
		c, _, err := websocket.Dial(ctx, "ws://"+hostport+target, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
		return c, err
	}
	defer bs.host.Busy(id)() // a CDP client keeps the box awake
	relayCDP(r.Context(), w, r, dial, ctl.WatchClient(page))
}

// track registers a connection to close when the browser stops.
func (bb *boxBrowser) track(c net.Conn) (net.Conn, error) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if bb.ctl == nil {
		c.Close()
		return nil, errors.New("the browser stopped")
	}
	tc := &trackedConn{Conn: c, bb: bb}
	bb.conns[tc] = struct{}{}
	return tc, nil
}

type trackedConn struct {
	net.Conn
	bb   *boxBrowser
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.bb.mu.Lock()
		delete(c.bb.conns, c)
		c.bb.mu.Unlock()
	})
	return c.Conn.Close()
}

func (c *trackedConn) CloseWrite() error { return egress.CloseWrite(c.Conn) }

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Close stops every recording, then every browser.
func (bs *Browsers) Close() {
	bs.mu.Lock()
	bs.closed = true
	bs.mu.Unlock()
	bs.recs.close()
	bs.cancel()
	// Starts in the background end with bs.base; what they started is
	// stopped below with the rest. The recordings' goroutines have ended
	// (recs.close), or end as soon as the stop they run returns.
	bs.host.Wait()
	bs.mu.Lock()
	all := make([]*boxBrowser, 0, len(bs.boxes))
	for _, bb := range bs.boxes {
		all = append(all, bb)
	}
	bs.mu.Unlock()
	var wg sync.WaitGroup
	for _, bb := range all {
		wg.Go(bb.shutdown)
	}
	wg.Wait()
}
