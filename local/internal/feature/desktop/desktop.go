// Package desktop is the desktop feature: an X display (Xvfb) with a
// window manager (openbox), Chromium and a VNC server (x11vnc, on the
// box's loopback) in a box created with desktop: true, started on demand
// inside the box's sandbox from the host's /usr, and driven with xdotool
// (the mouse and keyboard primitives, and the computer-use actions).
// Screenshots are taken in the box and the pointer is drawn here. It
// owns each box's desktop session; it reaches boxes only through its
// Host, and its errors are errdefs kinds.
package desktop

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
)

// Host is what the desktop needs of boxd's core.
type Host interface {
	// Box returns the record of a box, or an error of kind not found.
	Box(idOrName string) (*store.Box, error)
	// EnsureRunning starts box b if it is not running and returns the
	// client of its agent.
	EnsureRunning(ctx context.Context, b *store.Box) (*agent.Client, error)
	// Busy marks a box in use until done is called.
	Busy(id string) (done func())
	// Logf appends an entry to a box's log.
	Logf(boxID, level, source, msg string)
	Logger() *slog.Logger
	// Context is boxd's lifetime; desktop sessions end with it.
	Context() context.Context
	// Agent returns the client of the agent of a box that has run.
	Agent(id string) (*agent.Client, error)
	// Running returns the client of a box's agent when the box runs now.
	Running(id string) (*agent.Client, bool)
	// OnBoxDeleted registers fn to run each time a box is deleted, once
	// its sandbox, files and record are gone.
	OnBoxDeleted(fn func(id string))
}

// Config configures the feature.
type Config struct {
	Host Host
	// ChromiumPath is the Chromium the desktop runs.
	ChromiumPath string
	// NoVNCDir is where noVNC's files are; empty is Debian's,
	// /usr/share/novnc.
	NoVNCDir string
	// ProviderURLs are the operator's model provider URLs; the computer-use
	// calls go to "anthropic"'s.
	ProviderURLs map[string]string
}

// Display is the X display of a box's desktop. Each box has its own /tmp
// and network namespace, so every box can use the same one.
const Display = ":1"

// The ports x11vnc listens on, on the box's loopback: one takes the
// viewer's input, the other drops it (-viewonly).
const (
	vncPort         = 5900
	vncViewOnlyPort = 5901
)

// DevtoolsPort is where the desktop's Chromium listens for DevTools, on
// the box's loopback; the browser feature attaches to it there.
const DevtoolsPort = 9223

// Programs are the host programs a desktop needs, with the Debian
// package of each.
var Programs = []struct{ Name, Package string }{
	{"Xvfb", "xvfb"},
	{"openbox", "openbox"},
	{"x11vnc", "x11vnc"},
	{"xdotool", "xdotool"},
	{"import", "imagemagick"},
}

// Available reports whether this machine can run desktops with the
// Chromium found (or the error of looking for it): nil, or an error of
// kind not implemented that names the packages to install.
func Available(chromiumErr error) error {
	var missing []string
	if chromiumErr != nil {
		missing = append(missing, "chromium")
	}
	for _, p := range Programs {
		if _, err := exec.LookPath(p.Name); err != nil {
			missing = append(missing, p.Package)
		}
	}
	if len(missing) > 0 {
		return errdefs.NotImplemented("this boxd cannot run desktops: install %s (apt-get install %s)", strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	return nil
}

// Desktops is the desktop feature; its methods serve the desktop
// operations.
type Desktops struct {
	host Host
	cfg  Config

	mu    sync.Mutex
	boxes map[string]*session
	// locks serialises the starts and stops of each box's desktop.
	locks map[string]*sync.Mutex
}

// New returns the desktop feature.
func New(cfg Config) *Desktops {
	ds := &Desktops{host: cfg.Host, cfg: cfg, boxes: map[string]*session{}, locks: map[string]*sync.Mutex{}}
	cfg.Host.OnBoxDeleted(ds.forgetBox)
	return ds
}

// session is a desktop running in a box: the process that started its
// programs and waits for them.
type session struct {
	width, height int
	opened        string
	stop          context.CancelFunc
	exited        chan struct{}
	output        *tail
	// view is the live viewer's grant; nil when the desktop is not
	// viewable. Guarded by Desktops.mu.
	view *grant
}

// Running reports whether the desktop of box id runs (it may be paused
// with its box).
func (ds *Desktops) Running(id string) bool {
	_, err := ds.running(id)
	return err == nil
}

func (s *session) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// forgetBox ends the desktop of a box that is deleted.
func (ds *Desktops) forgetBox(id string) {
	ds.mu.Lock()
	s := ds.boxes[id]
	delete(ds.boxes, id)
	delete(ds.locks, id)
	ds.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// lock locks box id's starts and stops.
func (ds *Desktops) lock(id string) (unlock func()) {
	ds.mu.Lock()
	l := ds.locks[id]
	if l == nil {
		l = new(sync.Mutex)
		ds.locks[id] = l
	}
	ds.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Close ends every desktop (boxd shutting down).
func (ds *Desktops) Close() {
	ds.mu.Lock()
	all := ds.boxes
	ds.boxes = map[string]*session{}
	ds.mu.Unlock()
	for _, s := range all {
		s.stop()
		<-s.exited
	}
}

// box returns the record of a desktop box, running, and its agent.
func (ds *Desktops) box(ctx context.Context, idOrName string) (*store.Box, *agent.Client, error) {
	b, err := ds.host.Box(idOrName)
	if err != nil {
		return nil, nil, err
	}
	if !b.Desktop {
		return nil, nil, errdefs.Conflict("the box has no desktop; create it with desktop: true")
	}
	rt, err := ds.host.EnsureRunning(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	return b, rt, nil
}

// running returns the desktop session of box id, or a conflict error
// when it has none.
func (ds *Desktops) running(id string) (*session, error) {
	ds.mu.Lock()
	s := ds.boxes[id]
	ds.mu.Unlock()
	if s == nil || !s.running() {
		return nil, errdefs.Conflict("the box's desktop is not running; start it with POST /v2/box/%s/desktop/start", id)
	}
	return s, nil
}

// startScript starts the desktop's programs in the box, says "ready" once
// the display answers, and waits for them: the session is this script's
// process, and its end (or its kill) ends them all. $1 is the screen's
// size, $2 the Chromium to run, $3 a URL to open.
var startScript = `
export DISPLAY=` + Display + `
size="$1"; chromium="$2"; open="$3"
rm -f /tmp/.X11-unix/X1 /tmp/.X1-lock
Xvfb ` + Display + ` -screen 0 "${size}x24" -nolisten tcp -ac >/tmp/.boxd-xvfb.log 2>&1 &
i=0
until xdotool getdisplaygeometry >/dev/null 2>&1; do
	i=$((i+1)); [ $i -gt 200 ] && { echo "the X display did not start:"; tail -n 5 /tmp/.boxd-xvfb.log; exit 1; }
	sleep 0.05
done
openbox >/dev/null 2>&1 &
x11vnc -display ` + Display + ` -localhost -rfbport 5900 -shared -forever -nopw -quiet -noxdamage >/tmp/.boxd-x11vnc.log 2>&1 &
x11vnc -display ` + Display + ` -localhost -rfbport 5901 -shared -forever -nopw -quiet -noxdamage -viewonly >/tmp/.boxd-x11vnc-view.log 2>&1 &
dir="${TMPDIR:-/tmp}/.boxd-desktop-chromium"
"$chromium" --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --no-default-browser-check \
	--disable-background-networking --disable-component-update --disable-sync --password-store=basic \
	--disable-breakpad --test-type --window-position=0,0 --window-size="$(echo "$size" | tr x ,)" --user-data-dir="$dir" \
	--remote-debugging-address=127.0.0.1 --remote-debugging-port=` + strconv.Itoa(DevtoolsPort) + ` \
	${HTTP_PROXY:+"--proxy-server=$HTTP_PROXY"} ${open:+"$open"} >/tmp/.boxd-chromium.log 2>&1 &
echo ready
wait
`

// start starts the desktop of box b at w×h, opening open.
func (ds *Desktops) start(ctx context.Context, b *store.Box, rt *agent.Client, w, h int, open string) (*session, error) {
	sctx, stop := context.WithCancel(ds.host.Context())
	p, err := rt.Process(sctx, agent.ProcessRequest{
		Argv:        []string{"sh", "-c", startScript, "sh", fmt.Sprintf("%dx%d", w, h), ds.cfg.ChromiumPath, open},
		MergeStderr: true,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("starting the desktop: %w", err)
	}
	s := &session{width: w, height: h, opened: open, stop: stop, exited: make(chan struct{}), output: &tail{max: 8 << 10}}
	ready := make(chan struct{})
	go func() {
		defer close(s.exited)
		defer p.Close()
		buf := make([]byte, 4096)
		said := false
		for {
			n, err := p.Output.Read(buf)
			s.output.Write(buf[:n])
			if !said && strings.Contains(s.output.String(), "ready\n") {
				said = true
				close(ready)
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	fail := func(err error) (*session, error) {
		stop()
		<-s.exited
		msg := strings.TrimSpace(s.output.String())
		ds.host.Logf(b.ID, "error", "system", "the desktop did not start: "+err.Error())
		if msg != "" {
			return nil, fmt.Errorf("the desktop did not start: %w: %s", err, msg)
		}
		return nil, fmt.Errorf("the desktop did not start: %w", err)
	}
	select {
	case <-ready:
	case <-s.exited:
		return fail(fmt.Errorf("its programs exited"))
	case <-timer.C:
		return fail(fmt.Errorf("the X display did not answer within 60 s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	ds.host.Logf(b.ID, "info", "system", fmt.Sprintf("desktop started at %dx%d", w, h))
	return s, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
