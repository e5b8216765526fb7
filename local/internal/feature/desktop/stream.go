package desktop

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/wire"
)

// grant is what lets a viewer see a desktop: its id is in the viewer's
// path, and with auth "token" it is the token; with auth "basic" the
// viewer also sends the user name and password.
type grant struct {
	id, auth       string
	user, password string
	viewOnly       bool
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// viewPath is the path under which boxd serves the viewer of box id with
// grant g.
func viewPath(id string, g *grant) string {
	return "/v2/box/" + url.PathEscape(id) + "/desktop/view/" + g.id
}

// DesktopStream makes the box's desktop viewable: noVNC, served by boxd,
// with its WebSocket bridged to the box's VNC server. A new grant
// replaces the one before; Stop revokes it.
func (ds *Desktops) DesktopStream(ctx context.Context, req gen.DesktopStreamRequestObject) (gen.DesktopStreamResponseObject, error) {
	var body gen.DesktopStreamRequest
	if req.Body != nil {
		body = *req.Body
	}
	auth := string(wire.DerefOr(body.Auth, gen.DesktopStreamRequestAuthBasic))
	switch auth {
	case "basic", "token", "none":
	default:
		return nil, errdefs.Invalid("auth must be basic, token or none, got %q", auth)
	}
	if _, err := ds.noVNC(); err != nil {
		return nil, err
	}
	b, _, s, err := ds.on(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	g := &grant{id: randomHex(24), auth: auth, viewOnly: wire.Deref(body.ViewOnly)}
	if auth == "basic" {
		g.user, g.password = "box", randomHex(16)
	}
	ds.mu.Lock()
	s.view = g
	ds.mu.Unlock()
	base := baseURL(ctx)
	path := viewPath(b.ID, g)
	q := url.Values{"autoconnect": {"1"}, "resize": {"scale"}, "reconnect": {"1"}, "path": {strings.TrimPrefix(path, "/") + "/websockify"}}
	if g.viewOnly {
		q.Set("view_only", "1")
	}
	out := gen.DesktopStream200JSONResponse{
		URL:      "http://" + base + path + "/vnc.html?" + q.Encode(),
		RawWsURL: wire.Ptr("ws://" + base + path + "/websockify"),
		Auth:     wire.Ptr(gen.DesktopStreamAuth(auth)),
	}
	switch auth {
	case "basic":
		out.Username, out.Password = &g.user, &g.password
	case "token":
		out.Token = &g.id
	}
	mode := "with input"
	if g.viewOnly {
		mode = "view only"
	}
	ds.host.Logf(b.ID, "info", "system", "desktop viewer opened ("+auth+" auth, "+mode+")")
	return out, nil
}

// baseURL is boxd's address as the API request in ctx reached it.
func baseURL(ctx context.Context) string {
	if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		return a.String()
	}
	return "127.0.0.1"
}

// noVNC returns the directory of noVNC's files, or a not implemented
// error that names the package.
func (ds *Desktops) noVNC() (string, error) {
	dir := ds.cfg.NoVNCDir
	if dir == "" {
		dir = "/usr/share/novnc"
	}
	if _, err := http.Dir(dir).Open("/vnc.html"); err != nil {
		return "", errdefs.NotImplemented("this boxd cannot serve the desktop's viewer: install novnc (apt-get install novnc)")
	}
	return dir, nil
}

// viewGrant returns the grant that request r's path names for its box,
// when it is the box's current one and r carries what it asks for.
func (ds *Desktops) viewGrant(r *http.Request) (*grant, bool) {
	ds.mu.Lock()
	s := ds.boxes[r.PathValue("id")]
	var g *grant
	if s != nil && s.running() {
		g = s.view
	}
	ds.mu.Unlock()
	if g == nil || subtle.ConstantTimeCompare([]byte(r.PathValue("grant")), []byte(g.id)) != 1 {
		return nil, false
	}
	if g.auth == "basic" {
		user, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(g.user))&subtle.ConstantTimeCompare([]byte(pass), []byte(g.password)) != 1 {
			return nil, false
		}
	}
	return g, true
}

// ServeView serves the desktop's viewer, GET
// /v2/box/{id}/desktop/view/{grant}/{rest...}: noVNC's files, and at
// websockify the VNC WebSocket. It needs no API key: the grant in its
// path (and, with basic auth, the user name and password) lets it
// through.
func (ds *Desktops) ServeView(w http.ResponseWriter, r *http.Request) {
	g, ok := ds.viewGrant(r)
	if !ok {
		// A viewer with a revoked or wrong grant, or without the password.
		w.Header().Set("WWW-Authenticate", `Basic realm="box desktop"`)
		api.Error(w, errdefs.Unauthenticated("this desktop viewer URL is not valid, or needs its user name and password; get a new one with POST /v2/box/{id}/desktop/stream"))
		return
	}
	if r.PathValue("rest") == "websockify" {
		ds.serveVNC(w, r, g)
		return
	}
	dir, err := ds.noVNC()
	if err != nil {
		api.Error(w, err)
		return
	}
	prefix := strings.TrimSuffix(r.URL.Path, r.PathValue("rest"))
	w.Header().Set("Cache-Control", "no-store")
	http.StripPrefix(prefix, http.FileServer(http.Dir(dir))).ServeHTTP(w, r)
}

// serveVNC bridges a viewer's WebSocket to the box's VNC server: the one
// that drops input for a view-only grant.
func (ds *Desktops) serveVNC(w http.ResponseWriter, r *http.Request, g *grant) {
	id := r.PathValue("id")
	rt, err := ds.host.Agent(id)
	if err != nil {
		api.Error(w, err)
		return
	}
	port := vncPort
	if g.viewOnly {
		port = vncViewOnlyPort
	}
	vnc, err := rt.DialPort(r.Context(), port)
	if err != nil {
		api.Error(w, errdefs.Unavailable("the desktop's VNC server does not answer: %v", err))
		return
	}
	defer vnc.Close()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"binary"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	defer ds.host.Busy(id)() // someone watches
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(ds.host.Context(), cancel)
	defer stop()
	c.SetReadLimit(1 << 20)
	ws := websocket.NetConn(ctx, c, websocket.MessageBinary)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(vnc, ws); done <- struct{}{} }()
	go func() { _, _ = io.Copy(ws, vnc); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	// The grant may be revoked while a viewer watches: Stop ends the
	// desktop, and with it the VNC server and this bridge.
	c.Close(websocket.StatusNormalClosure, "")
}
