package browsers

import (
	"context"
	"io"
	"net/http"

	"github.com/coder/websocket"

	"github.com/upstash/box-go/local/internal/api"
	"github.com/upstash/box-go/local/internal/browser"
	"github.com/upstash/box-go/local/internal/errdefs"
)

// cdpSniff is how much of each DevTools message the relay holds to read
// it: the messages that move the foreground are far smaller, and larger
// ones (screenshots, page content) stream through unread.
const cdpSniff = 64 << 10

// relayCDP carries a client's DevTools connection to the box's browser,
// message by message, in both directions, and shows each message to watch
// on its way. It returns when either side closes.
func relayCDP(ctx context.Context, w http.ResponseWriter, r *http.Request, dialBrowser func(context.Context) (*websocket.Conn, error), watch *browser.ClientWatch) {
	up, err := dialBrowser(ctx)
	if err != nil {
		api.Error(w, errdefs.Upstream("the box's browser is unreachable: %v", err))
		return
	}
	defer up.CloseNow()
	// The URL's token is the credential: pages of any origin may use it,
	// as they may use the browser's own endpoint.
	client, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer client.CloseNow()
	// Both sides stream: no message is held whole, whatever its size.
	up.SetReadLimit(-1)
	client.SetReadLimit(-1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fromClient, fromBrowser := make(chan error, 1), make(chan error, 1)
	go func() { fromClient <- pumpCDP(ctx, up, client, watch.Command) }()
	go func() { fromBrowser <- pumpCDP(ctx, client, up, watch.Event) }()
	select {
	case <-fromClient:
		// The client left: so does the relay.
		cancel()
		up.CloseNow()
		<-fromBrowser
	case err := <-fromBrowser:
		// The browser closed or went away: tell the client why.
		status := websocket.CloseStatus(err)
		if status == -1 {
			status = websocket.StatusGoingAway
		}
		_ = client.Close(status, "")
		cancel()
		<-fromClient
	}
}

// pumpCDP copies messages from src to dst, showing note each text message
// that fits in cdpSniff.
func pumpCDP(ctx context.Context, dst, src *websocket.Conn, note func([]byte)) error {
	head := make([]byte, cdpSniff)
	buf := make([]byte, 32<<10)
	for {
		typ, r, err := src.Reader(ctx)
		if err != nil {
			return err
		}
		n, err := io.ReadFull(r, head)
		whole := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !whole {
			return err
		}
		if whole && typ == websocket.MessageText {
			note(head[:n])
		}
		mw, err := dst.Writer(ctx, typ)
		if err != nil {
			return err
		}
		if _, err := mw.Write(head[:n]); err != nil {
			return err
		}
		if !whole {
			if _, err := io.CopyBuffer(mw, r, buf); err != nil {
				return err
			}
		}
		if err := mw.Close(); err != nil {
			return err
		}
	}
}
