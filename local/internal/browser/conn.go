// Package browser drives the Chromium of a box over the Chrome DevTools
// Protocol with chromedp: tabs, navigation, page content, screenshots,
// replayable actions, screencasts and recordings, and the model-provider
// calls behind the AI operations (extract, observe, act).
//
// Chromium runs inside the box; boxd reaches its DevTools port through the
// box's agent, so a Controller is given a Dialer rather than an address.
package browser

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/chromedp/cdproto"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// Dialer opens a connection to the browser's DevTools port. The address is
// fixed by whoever builds the Dialer (for boxd: a port inside a box).
type Dialer func(ctx context.Context) (net.Conn, error)

// maxMessage bounds one DevTools message: a full-page screenshot of a long
// page is tens of megabytes of base64.
const maxMessage = 512 << 20

// wsConn is a chromedp.Transport over a WebSocket that was dialled through
// a Dialer.
type wsConn struct {
	ws *websocket.Conn

	encMu sync.Mutex
}

// dialWS opens the DevTools WebSocket at path (such as
// /devtools/browser/<id>) over dial. host is the Host header Chromium
// sees; it accepts only IP addresses and localhost.
func dialWS(ctx context.Context, dial Dialer, host, path string) (*wsConn, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}}
	ws, _, err := websocket.Dial(ctx, "ws://"+host+path, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("connecting to the browser's DevTools: %w", err)
	}
	ws.SetReadLimit(maxMessage)
	return &wsConn{ws: ws}, nil
}

func (c *wsConn) Read(ctx context.Context, msg *cdproto.Message) error {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return err
	}
	if typ != websocket.MessageText {
		return errors.New("browser: unexpected binary DevTools message")
	}
	return jsonv2.Unmarshal(data, msg, chromedp.DefaultUnmarshalOptions)
}

func (c *wsConn) Write(ctx context.Context, msg *cdproto.Message) error {
	buf, err := jsonv2.Marshal(msg, chromedp.DefaultMarshalOptions)
	if err != nil {
		return err
	}
	// Chromium takes each message as one frame, and coder/websocket
	// writes one message at a time anyway; the lock keeps the order.
	c.encMu.Lock()
	defer c.encMu.Unlock()
	return c.ws.Write(ctx, websocket.MessageText, buf)
}

func (c *wsConn) Close() error { return c.ws.CloseNow() }

// allocator is a chromedp.Allocator that attaches to a browser that runs
// already (in a box), over a WebSocket opened through a Dialer. The
// connection lives until life ends, whatever the context of the call that
// first used it.
type allocator struct {
	life context.Context
	dial Dialer
	host string
	path string
}

func (a *allocator) Allocate(ctx context.Context, opts ...chromedp.BrowserOption) (*chromedp.Browser, error) {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := dialWS(dctx, a.dial, a.host, a.path)
	if err != nil {
		return nil, err
	}
	return chromedp.NewBrowserTransport(a.life, conn, opts...)
}

func (a *allocator) Wait() {}

// Attaches tells chromedp that cancelling a context does not own the
// browser process.
func (a *allocator) Attaches() bool { return true }
