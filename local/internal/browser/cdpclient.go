package browser

import (
	"bytes"
	"encoding/json"
	"sync"
)

// ClientWatch follows one DevTools connection of a client (Playwright,
// Puppeteer, chromedp...) to the browser, and tells the Controller which
// tab the client brings to the front: Page.bringToFront on a page's
// session, or Target.activateTarget. The browser reports neither as an
// event, so the foreground that recordings follow would not know.
//
// Feed it the client's messages with Command and the browser's with
// Event, whole (a message too large to hold is skipped; the ones that
// matter are small). It is safe for concurrent use.
type ClientWatch struct {
	c    *Controller
	page string // the target of a connection to a page's endpoint, or ""

	mu       sync.Mutex
	sessions map[string]string // session id → target id
}

// WatchClient returns a ClientWatch for a client connected to the
// browser's endpoint (page "") or to the endpoint of one page target.
func (c *Controller) WatchClient(page string) *ClientWatch {
	return &ClientWatch{c: c, page: page, sessions: map[string]string{}}
}

// cdpMessage is what ClientWatch reads of a DevTools message.
type cdpMessage struct {
	Method    string `json:"method"`
	SessionID string `json:"sessionId"`
	Params    struct {
		TargetID   string `json:"targetId"`
		SessionID  string `json:"sessionId"`
		Message    string `json:"message"` // Target.sendMessageToTarget
		TargetInfo struct {
			TargetID string `json:"targetId"`
		} `json:"targetInfo"`
	} `json:"params"`
}

// Command notes a message the client sends to the browser.
func (w *ClientWatch) Command(raw []byte) {
	if !bytes.Contains(raw, []byte("bringToFront")) && !bytes.Contains(raw, []byte("Target.activateTarget")) {
		return // most messages: not worth decoding
	}
	var m cdpMessage
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	switch m.Method {
	case "Target.activateTarget":
		w.c.Touch(m.Params.TargetID)
	case "Page.bringToFront":
		if id := w.target(m.SessionID); id != "" {
			w.c.Touch(id)
		}
	case "Target.sendMessageToTarget":
		// The older, unflattened sessions: the command travels as a
		// string inside this one.
		var inner cdpMessage
		if json.Unmarshal([]byte(m.Params.Message), &inner) == nil && inner.Method == "Page.bringToFront" {
			id := m.Params.TargetID
			if id == "" {
				id = w.target(m.Params.SessionID)
			}
			w.c.Touch(id)
		}
	}
}

// Event notes a message the browser sends to the client.
func (w *ClientWatch) Event(raw []byte) {
	if !bytes.Contains(raw, []byte(`"Target.`)) {
		return
	}
	var m cdpMessage
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	switch m.Method {
	case "Target.attachedToTarget":
		if m.Params.SessionID != "" && m.Params.TargetInfo.TargetID != "" {
			w.mu.Lock()
			w.sessions[m.Params.SessionID] = m.Params.TargetInfo.TargetID
			w.mu.Unlock()
		}
	case "Target.detachedFromTarget":
		w.mu.Lock()
		delete(w.sessions, m.Params.SessionID)
		w.mu.Unlock()
	}
}

// target returns the target of a session ("" is the connection's own:
// the page of a page endpoint, or the browser).
func (w *ClientWatch) target(session string) string {
	if session == "" {
		return w.page
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessions[session]
}
