package browser

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// dialogWatch follows the JavaScript dialogs of every page of the browser,
// over a DevTools connection of its own.
//
// A dialog blocks its renderer: the page, and the pages that share its
// process (a popup and its opener), answer no Runtime or Page command
// while it is open. Chromium tells of a dialog only the sessions that had
// the Page domain enabled when it opened, and only those can answer it
// (Page.handleJavaScriptDialog on another says "No dialog is showing").
// So the watch attaches to each page target as it is created, paused
// until it has enabled Page there (Target.setAutoAttach with
// waitForDebuggerOnStart, at the browser level, where only flat sessions
// exist: hence a connection of its own, whose sessions chromedp does not
// route). boxd then knows every dialog, including those that open before
// it attaches to a tab, and can dismiss them.
type dialogWatch struct {
	conn *wsConn
	next atomic.Int64
	lost context.CancelFunc // called when the connection fails

	mu       sync.Mutex
	replies  map[int64]chan *cdproto.Message
	pages    map[string]*pageDialogs     // by target id
	sessions map[target.SessionID]string // the target of each session
	closed   bool
}

// pageDialogs is what the watch knows of one page target.
type pageDialogs struct {
	session target.SessionID // the watch's session, "" until attached
	opener  string           // the page that opened it and that it can script, or ""
	busy    int              // boxd operations that hold the page
	open    *Dialog          // the dialog showing
	handled bool             // boxd dismisses open
	met     []Dialog         // dialogs dismissed for the operations that hold the page
}

// watchDialogs opens the watch's connection and attaches it to every page,
// existing and to come. lost is called if the connection fails later.
func watchDialogs(ctx context.Context, dial Dialer, host, path string, lost context.CancelFunc) (*dialogWatch, error) {
	conn, err := dialWS(ctx, dial, host, path)
	if err != nil {
		return nil, err
	}
	d := &dialogWatch{
		conn:     conn,
		lost:     lost,
		replies:  map[int64]chan *cdproto.Message{},
		pages:    map[string]*pageDialogs{},
		sessions: map[target.SessionID]string{},
	}
	go d.read()
	err = d.call(ctx, "", target.SetAutoAttach.Method, target.SetAutoAttachParams{
		AutoAttach: true, WaitForDebuggerOnStart: true, Flatten: ptr(true),
		Filter: target.Filter{{Type: "page"}},
	})
	if err != nil {
		d.close()
		return nil, fmt.Errorf("watching the browser's dialogs: %w", err)
	}
	return d, nil
}

// close ends the watch's connection.
func (d *dialogWatch) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	_ = d.conn.Close()
}

// send sends a command without waiting for its answer.
func (d *dialogWatch) send(ctx context.Context, session target.SessionID, method string, params any) error {
	return d.write(ctx, d.next.Add(1), session, method, params)
}

func (d *dialogWatch) write(ctx context.Context, id int64, session target.SessionID, method string, params any) error {
	raw, err := jsonv2.Marshal(params, chromedp.DefaultMarshalOptions)
	if err != nil {
		return err
	}
	return d.conn.Write(ctx, &cdproto.Message{ID: id, SessionID: session, Method: cdproto.MethodType(method), Params: raw})
}

// call sends a command and waits for its answer.
func (d *dialogWatch) call(ctx context.Context, session target.SessionID, method string, params any) error {
	id := d.next.Add(1)
	ch := make(chan *cdproto.Message, 1)
	d.mu.Lock()
	d.replies[id] = ch
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.replies, id)
		d.mu.Unlock()
	}()
	if err := d.write(ctx, id, session, method, params); err != nil {
		return err
	}
	select {
	case msg := <-ch:
		if msg.Error != nil {
			return msg.Error
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read handles the messages of the watch's connection until it ends.
func (d *dialogWatch) read() {
	ctx := context.Background()
	for {
		var msg cdproto.Message
		if err := d.conn.Read(ctx, &msg); err != nil {
			d.mu.Lock()
			closed := d.closed
			d.mu.Unlock()
			if !closed {
				d.lost()
			}
			return
		}
		switch {
		case msg.ID != 0:
			d.mu.Lock()
			if ch := d.replies[msg.ID]; ch != nil {
				ch <- &msg
			}
			d.mu.Unlock()
		case msg.SessionID == "" && (msg.Method == cdproto.EventTargetAttachedToTarget || msg.Method == cdproto.EventTargetDetachedFromTarget),
			msg.Method == cdproto.EventPageJavascriptDialogOpening, msg.Method == cdproto.EventPageJavascriptDialogClosed:
			ev, err := cdproto.UnmarshalMessage(&msg, chromedp.DefaultUnmarshalOptions)
			if err == nil {
				d.event(msg.SessionID, ev)
			}
		}
	}
}

// event handles one event of the browser or of a page's session. It runs
// in the read loop: what it sends, it sends from a goroutine.
func (d *dialogWatch) event(session target.SessionID, ev any) {
	switch ev := ev.(type) {
	case *target.EventAttachedToTarget:
		info := ev.TargetInfo
		if info == nil || info.Type != "page" {
			return
		}
		id := string(info.TargetID)
		d.mu.Lock()
		p := d.page(id)
		p.session = ev.SessionID
		if info.CanAccessOpener {
			p.opener = string(info.OpenerID)
		}
		d.sessions[ev.SessionID] = id
		d.mu.Unlock()
		// In this order: the page runs only once Page is enabled.
		go func() {
			ctx := context.Background()
			if d.send(ctx, ev.SessionID, page.Enable.Method, page.EnableParams{}) == nil {
				_ = d.send(ctx, ev.SessionID, runtime.RunIfWaitingForDebugger.Method, cdp.Empty{})
			}
		}()
	case *target.EventDetachedFromTarget:
		d.mu.Lock()
		if id, ok := d.sessions[ev.SessionID]; ok {
			delete(d.sessions, ev.SessionID)
			if p := d.pages[id]; p != nil && p.session == ev.SessionID {
				p.session, p.open = "", nil
				d.drop(id)
			}
		}
		d.mu.Unlock()
	case *page.EventJavascriptDialogOpening:
		d.mu.Lock()
		id, ok := d.sessions[session]
		if !ok {
			d.mu.Unlock()
			return
		}
		dl := Dialog{Type: string(ev.Type), Message: ev.Message}
		held := false
		for _, q := range d.group(id) {
			if q.busy > 0 {
				held = true
				q.note(dl)
			}
		}
		p := d.page(id)
		p.open, p.handled = &dl, held
		d.mu.Unlock()
		if held {
			go d.dismiss(session)
		}
	case *page.EventJavascriptDialogClosed:
		d.mu.Lock()
		if id, ok := d.sessions[session]; ok {
			p := d.page(id)
			p.open, p.handled = nil, false
		}
		d.mu.Unlock()
	}
}

// page returns the state of page id, creating it. d.mu is held.
func (d *dialogWatch) page(id string) *pageDialogs {
	p := d.pages[id]
	if p == nil {
		p = &pageDialogs{}
		d.pages[id] = p
	}
	return p
}

// drop forgets page id once it is neither attached nor held. d.mu is held.
func (d *dialogWatch) drop(id string) {
	if p := d.pages[id]; p != nil && p.session == "" && p.busy == 0 {
		delete(d.pages, id)
	}
}

// group returns the pages whose dialogs block page id: itself, and the
// pages linked to it by openers that can script each other, which share
// its renderer. d.mu is held.
func (d *dialogWatch) group(id string) []*pageDialogs {
	seen := map[string]bool{id: true}
	queue := []string{id}
	var out []*pageDialogs
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p := d.pages[cur]
		if p == nil {
			continue
		}
		out = append(out, p)
		link := func(next string) {
			if next != "" && !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
		link(p.opener)
		for qid, q := range d.pages {
			if q.opener == cur {
				link(qid)
			}
		}
	}
	return out
}

// note records a dialog dismissed for the operations that hold p.
func (p *pageDialogs) note(dl Dialog) {
	if len(p.met) < maxDialogs {
		p.met = append(p.met, dl)
	}
}

// hold marks page id as used by an operation of boxd until release: its
// dialogs, and those of the pages that block it, are dismissed from now
// on, and those that stand open now, first.
func (d *dialogWatch) hold(id string) {
	d.mu.Lock()
	p := d.page(id)
	p.busy++
	var sessions []target.SessionID
	for _, q := range d.group(id) {
		if q.open != nil && !q.handled && q.session != "" {
			q.handled = true
			p.note(*q.open)
			sessions = append(sessions, q.session)
		}
	}
	d.mu.Unlock()
	for _, s := range sessions {
		d.dismiss(s)
	}
}

// release ends a hold of page id and returns the dialogs dismissed for it
// since the hold before it ended.
func (d *dialogWatch) release(id string) []Dialog {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pages[id]
	if p == nil {
		return nil
	}
	met := p.met
	p.met = nil
	p.busy--
	d.drop(id)
	return met
}

// dismiss dismisses the dialog open in the page of session: an alert is
// closed, a confirm answers false, a prompt null, and a beforeunload
// keeps the page. Chromium reports the close as an event; if someone else
// answered first, the command fails, which does not matter.
func (d *dialogWatch) dismiss(session target.SessionID) {
	// A write fails only once the connection is gone, and with it the
	// dialog's page or the Controller.
	_ = d.send(context.Background(), session, page.HandleJavaScriptDialog.Method, page.HandleJavaScriptDialogParams{Accept: false})
}
