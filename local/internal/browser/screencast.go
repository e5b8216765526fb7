package browser

import (
	"context"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Frame is one image of a tab's screencast.
type Frame struct {
	JPEG []byte
	At   time.Time
}

// Screencast frame limits: the live view and recordings show at most this.
const (
	castWidth   = 1280
	castHeight  = 720
	castQuality = 70
	// castInterval paces the screencast at the recordings' 10 fps: a
	// frame is acknowledged (and Chromium encodes the next one) at most
	// this often. An animated page would otherwise be encoded at its own
	// frame rate, up to 60 per second, which costs Chromium most of a core.
	castInterval = time.Second / 10
)

// caster runs a tab's screencast (Page.startScreencast) for as long as
// someone watches, and hands every frame to the watchers.
type caster struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	subs map[*watcher]struct{}
	last *Frame
	end  bool
}

// watcher receives the latest frame; one it has not read yet is replaced.
type watcher struct {
	ch     chan *Frame
	closed bool
}

func (w *watcher) offer(f *Frame) {
	select {
	case w.ch <- f:
		return
	default:
	}
	select { // replace the unread frame
	case <-w.ch:
	default:
	}
	select {
	case w.ch <- f:
	default:
	}
}

func (cs *caster) publish(f *Frame) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.last = f
	for w := range cs.subs {
		w.offer(f)
	}
}

// finish closes every watcher's channel: the screencast has ended.
func (cs *caster) finish() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.end = true
	for w := range cs.subs {
		if !w.closed {
			w.closed = true
			close(w.ch)
		}
	}
	clear(cs.subs)
}

// Watch returns the frames of a tab's screencast, starting with the
// current image of the page; stop ends the watch. The channel is closed
// when the tab or the browser goes away. Frames come when the page
// changes, so a still page sends none after the first.
//
// A JavaScript dialog that stands open in the tab, or in a page that
// shares its renderer, when the watch begins, or opens while boxd
// attaches to the tab, is dismissed as for boxd's other calls (see
// begin): it would block the attach. Watch does not report it: those who
// watch, the live view and recordings, show pages and have nobody to tell
// (only an action reports dialogs, those it met). Dialogs that open later,
// while the tab is watched, are left to the CDP client that caused them.
func (c *Controller) Watch(ctx context.Context, id string) (frames <-chan *Frame, stop func(), err error) {
	t, err := c.attachHeld(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	c.dialogs.release(id)
	c.mu.Lock()
	cs := t.cast
	if cs == nil || cs.ended() {
		cs = t.startCast()
		t.cast = cs
	}
	w := &watcher{ch: make(chan *Frame, 1)}
	cs.mu.Lock()
	if cs.end {
		w.closed = true
		close(w.ch)
	} else {
		cs.subs[w] = struct{}{}
		if cs.last != nil {
			w.offer(cs.last)
		}
	}
	cs.mu.Unlock()
	c.mu.Unlock()
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			c.mu.Lock()
			cs.mu.Lock()
			delete(cs.subs, w)
			if !w.closed {
				w.closed = true
				close(w.ch)
			}
			idle := len(cs.subs) == 0
			cs.mu.Unlock()
			if idle && t.cast == cs {
				t.cast = nil
			} else {
				idle = false
			}
			c.mu.Unlock()
			if idle {
				cs.stop()
			}
		})
	}, nil
}

func (cs *caster) ended() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.end
}

// stop ends the screencast and waits for its goroutine.
func (cs *caster) stop() {
	cs.cancel()
	<-cs.done
	cs.finish()
}

// takeCast detaches t's screencast, if it has one, for the caller to stop
// once it has let go of the controller's lock.
func (c *Controller) takeCast(t *tab) *caster {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := t.cast
	t.cast = nil
	return cs
}

// startCast starts t's screencast. The caller holds the controller's lock.
//
// The screencast is started again after each navigation of the main
// frame: a navigation to another site moves the page to another renderer,
// and the screencast (and a screenshot in flight) of the old one ends
// without a word.
func (t *tab) startCast() *caster {
	cctx, cancel := context.WithCancel(t.ctx)
	cs := &caster{cancel: cancel, done: make(chan struct{}), subs: map[*watcher]struct{}{}}
	frames := chromedp.Events(cctx, page.ScreencastFrame)
	navs := chromedp.Events(cctx, page.FrameNavigated)
	frameCh := make(chan page.EventScreencastFrame, 4)
	navCh := make(chan struct{}, 1)
	var pumps sync.WaitGroup
	pumps.Go(func() {
		for ev, err := range frames {
			if err != nil {
				return
			}
			select {
			case frameCh <- ev:
			case <-cctx.Done():
				return
			}
		}
	})
	pumps.Go(func() {
		for ev, err := range navs {
			if err != nil {
				return
			}
			if ev.Frame != nil && ev.Frame.ParentID == "" {
				select {
				case navCh <- struct{}{}:
				default:
				}
			}
		}
	})
	q := int64(castQuality)
	// begin (re)starts the screencast; a navigation cancels a begin that
	// has not finished (it may wait for a renderer that is gone).
	stopBegin := func() {}
	begin := func() {
		stopBegin()
		bctx, cancel := context.WithTimeout(cctx, 10*time.Second)
		stopBegin = cancel
		pumps.Go(func() {
			defer cancel()
			// The StartScreencast first: a screenshot waits for the
			// page to paint.
			_, _ = chromedp.Call(bctx, page.StartScreencast, page.StartScreencastParams{
				Format: page.StartScreencastFormatJpeg, Quality: &q, MaxWidth: castWidth, MaxHeight: castHeight, EveryNthFrame: 1,
				MaxFramesInFlight: 1,
			})
			// The page's current image: a still page sends no frame
			// until it changes.
			if shot, err := chromedp.Call(bctx, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatJpeg, Quality: &q}); err == nil {
				cs.publish(&Frame{JPEG: shot.Data, At: time.Now()})
			}
		})
	}
	go func() {
		defer close(cs.done)
		defer cs.finish()
		defer pumps.Wait()
		defer cancel()
		begin()
		var lastAck time.Time
		for {
			select {
			case <-cctx.Done():
				// Stop the screencast unless the tab itself is gone.
				if t.ctx.Err() == nil {
					sctx, cancel := context.WithTimeout(withValues(context.Background(), t.ctx), 2*time.Second)
					_, _ = chromedp.Call(sctx, page.StopScreencast, cdp.Empty{})
					cancel()
				}
				return
			case <-navCh:
				begin()
			case ev := <-frameCh:
				cs.publish(&Frame{JPEG: ev.Data, At: time.Now()})
				if wait := castInterval - time.Since(lastAck); wait > 0 {
					select {
					case <-time.After(wait):
					case <-cctx.Done():
						continue
					}
				}
				lastAck = time.Now()
				_, _ = chromedp.Call(cctx, page.ScreencastFrameAck, page.ScreencastFrameAckParams{SessionID: ev.SessionID})
			}
		}
	}()
	return cs
}
