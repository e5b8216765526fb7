package browsers

import (
	"context"
	"html/template"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/upstash/box-go/local/internal/browser"
)

// The live view is a page served by boxd that shows a tab's screencast:
// the page opens a WebSocket on the same URL plus /ws, over which boxd
// pushes every frame (a JPEG, as a binary message) of the tab — or of the
// foreground tab, when the URL was made without one. It sends nothing
// back: the view is read-only.

var liveViewPage = template.Must(template.New("live").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Box {{.Box}} — live view</title>
<style>
  html, body { margin: 0; height: 100%; background: #111; }
  body { display: flex; align-items: center; justify-content: center; }
  img { max-width: 100%; max-height: 100%; object-fit: contain; }
  #status { position: fixed; top: 8px; left: 8px; font: 12px system-ui, sans-serif; color: #ccc; }
</style>
</head>
<body>
<img id="view" alt="live view of the browser of box {{.Box}}">
<div id="status">connecting…</div>
<script>
(() => {
  const view = document.getElementById('view'), status = document.getElementById('status');
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + location.pathname + '/ws' + location.search;
  let shown = null;
  const connect = () => {
    const ws = new WebSocket(url);
    ws.binaryType = 'blob';
    ws.onopen = () => { status.textContent = 'live'; };
    ws.onmessage = (e) => {
      const next = URL.createObjectURL(e.data);
      view.src = next;
      if (shown) URL.revokeObjectURL(shown);
      shown = next;
    };
    ws.onclose = (e) => {
      if (e.code === 4401) { status.textContent = 'this live view link has expired'; return; }
      status.textContent = 'reconnecting…';
      setTimeout(connect, 1000);
    };
  };
  connect();
})();
</script>
</body>
</html>
`))

// ServeLive serves the live view page.
func (bs *Browsers) ServeLive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	_ = liveViewPage.Execute(w, map[string]string{"Box": id})
}

// ServeLiveWS pushes the screencast frames to a live view page.
func (bs *Browsers) ServeLiveWS(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	tok, ok := bs.token(r, id, "live")
	if !ok { // expired since the route's guard let it through
		refuseToken(w, r, "")
		return
	}
	_, ctl, ok := bs.running(w, r, id)
	if !ok {
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	defer bs.host.Busy(id)() // someone watches
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(bs.base, cancel)
	defer stop()
	ctx = c.CloseRead(ctx) // the page sends nothing; this notices it leave
	follow := time.NewTicker(500 * time.Millisecond)
	defer follow.Stop()
	var (
		cur     string
		frames  <-chan *browser.Frame
		unwatch = func() {}
	)
	defer func() { unwatch() }()
	watch := func() {
		want := tok.tab
		if want == "" {
			want = ctl.Foreground(ctx)
		}
		if want == "" || want == cur {
			return
		}
		unwatch()
		ch, stopWatch, err := ctl.Watch(ctx, want)
		if err != nil {
			frames, unwatch, cur = nil, func() {}, ""
			return
		}
		frames, unwatch, cur = ch, stopWatch, want
	}
	watch()
	for {
		select {
		case <-ctx.Done():
			c.Close(websocket.StatusGoingAway, "")
			return
		case <-ctl.Done():
			c.Close(websocket.StatusGoingAway, "the browser stopped")
			return
		case <-follow.C:
			watch()
		case f, ok := <-frames:
			if !ok {
				if tok.tab != "" {
					c.Close(websocket.StatusNormalClosure, "the tab was closed")
					return
				}
				frames, cur = nil, ""
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := c.Write(wctx, websocket.MessageBinary, f.JPEG)
			cancel()
			if err != nil {
				return
			}
		}
	}
}
