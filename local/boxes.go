package local

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/proc"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/store"
)

// runtime is the live state of one box: its sandbox when running, and the
// client that reaches its agent.
type runtime struct {
	id string

	// deleted is set, under mu, when a delete of the box begins, and is
	// never cleared: the runtime is then a tombstone. Nothing starts,
	// resumes or reaches the box through it, and boxes.runtime answers
	// errBoxNotFound for the box while it is in the map.
	deleted atomic.Bool

	mu       sync.Mutex
	sb       *sandbox.Sandbox
	starting chan struct{} // closed when a start attempt ends
	startErr error
	// deleting is closed when the delete that marked the runtime deleted
	// ends, with deleteErr its outcome.
	deleting  chan struct{}
	deleteErr error
	// held is set while a snapshot keeps the box still (see hold in
	// snapshots.go), and closed when it lets go.
	held chan struct{}

	// Idle pause (idle.go): the last use, a count of uses, the operations
	// running, and the idle timer's stop when it is armed.
	lastUse  time.Time
	useGen   uint64
	busyOps  int
	idleStop func() bool

	// agent reaches the box's agent, starting the box when it does not
	// run (see dialAgent).
	agent *agent.Client
}

// lockUnheld locks r.mu once no snapshot holds the box: starting,
// resuming and pausing it wait for the snapshot to end.
func (r *runtime) lockUnheld(ctx context.Context) error {
	r.mu.Lock()
	for r.held != nil {
		ch := r.held
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
	}
	return nil
}

// boxes manages the runtimes of all boxes.
type boxes struct {
	srv *Server
	// uids are the locks on the host uids of this boxd's boxes.
	uids uidLocks

	mu sync.Mutex
	// rt holds the runtime of each box that has been used, and the
	// tombstone of each box being deleted. A tombstone leaves the map
	// once the box's record is gone, when ended counts one more.
	rt      map[string]*runtime
	ended   uint64
	closing bool
	bg      sync.WaitGroup // background starts
}

func newBoxes(s *Server) *boxes {
	return &boxes{srv: s, rt: map[string]*runtime{}}
}

// warm starts a new box's sandbox in the background, so that its first
// call does not wait for it.
func (m *boxes) warm(b *store.Box) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		if _, err := m.ensure(m.srv.ctx, b, true); err != nil && !errors.Is(err, errBoxNotFound) && !errors.Is(err, errClosing) && !errors.Is(err, errPausedCold) {
			m.srv.log.Warn("box did not start", "box", b.ID, "err", err)
		}
	}()
}

var errClosing = errors.New("boxd is shutting down")

// runtime returns the runtime of box id, made on first use for a box that
// has a record. It fails with errBoxNotFound while the box is being
// deleted and once it is gone: a call that read the box's record before
// its delete can no longer start a sandbox for it.
func (m *boxes) runtime(id string) (*runtime, error) {
	m.mu.Lock()
	for {
		if r := m.rt[id]; r != nil {
			m.mu.Unlock()
			if r.deleted.Load() {
				return nil, errBoxNotFound
			}
			return r, nil
		}
		// Not under the lock: a store read. A delete that ends meanwhile
		// (ended moves) may have removed the record after it was read.
		ended := m.ended
		m.mu.Unlock()
		if b, err := m.srv.db.Box(id); errors.Is(err, store.ErrNotFound) || err == nil && b.ID != id {
			return nil, errBoxNotFound
		} else if err != nil {
			return nil, err
		}
		m.mu.Lock()
		if m.rt[id] == nil && m.ended == ended {
			r := m.newRuntime(id)
			m.rt[id] = r
			m.mu.Unlock()
			return r, nil
		}
	}
}

func (m *boxes) newRuntime(id string) *runtime {
	r := &runtime{id: id}
	r.agent = agent.NewClient(agent.ClientConfig{
		BoxID: id,
		Dial:  func(ctx context.Context) (net.Conn, error) { return m.dialAgent(ctx, r) },
	})
	return r
}

// runningNow reports whether box id's sandbox runs and is not paused,
// without starting or resuming it.
func (m *boxes) runningNow(id string) bool {
	r := m.existing(id)
	if r == nil {
		return false
	}
	r.mu.Lock()
	sb := r.sb
	r.mu.Unlock()
	if sb == nil || sb.Paused() {
		return false
	}
	select {
	case <-sb.Done():
		return false
	default:
		return true
	}
}

// existing returns the runtime of box id if it has one.
func (m *boxes) existing(id string) *runtime {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rt[id]
}

// dialAgent connects to the agent of r's box, starting the box if it
// is not running. An agent that no longer listens while its sandbox runs
// on (killed, with background jobs keeping the sandbox's init alive) is
// a broken box: its sandbox is replaced by a new one, once, and the
// connection made to that. Nothing has been sent yet when a dial fails,
// so the request that asked for it goes on unharmed.
func (m *boxes) dialAgent(ctx context.Context, r *runtime) (net.Conn, error) {
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		sb := r.sb
		r.mu.Unlock()
		if r.deleted.Load() {
			return nil, errBoxNotFound
		}
		if sb == nil {
			b, err := m.srv.db.Box(r.id)
			if err != nil {
				return nil, notFoundAsBox(err)
			}
			if rt, err := m.ensureRunning(ctx, b); err != nil {
				return nil, err
			} else if rt != r {
				// r is a deleted box's, replaced since (a failed delete
				// leaves the box with a new runtime).
				return nil, errBoxNotFound
			}
			continue
		}
		c, err := sb.Dial(ctx)
		if !errors.Is(err, sandbox.ErrAgentGone) || attempt > 0 || ctx.Err() != nil {
			return c, err
		}
		// The old sandbox is wholly gone before the box runs again: it
		// stays the box's, so that no call starts another meanwhile,
		// until Kill has ended and reaped every process of it.
		sb.Kill()
		r.mu.Lock()
		current := r.sb == sb
		if current {
			r.sb = nil
		}
		r.mu.Unlock()
		if current {
			msg := "the box's agent does not answer; starting a new sandbox"
			if sb.Hung() {
				msg = hungMessage
			}
			m.srv.logf(r.id, "warn", "system", msg)
			r.agent.CloseIdleConnections()
		}
	}
}

// hungMessage is logged when a box's sandbox is replaced because its
// agent stopped answering (sandbox.LivenessTimeout).
var hungMessage = fmt.Sprintf("the box's agent did not answer for %v; starting a new sandbox", sandbox.LivenessTimeout)

// newID returns a box id: "box-" and ten lower-case letters and digits, so
// that it can be a DNS label in preview host names.
func newID(prefix string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [10]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b[:])
}

// prepare creates the box's directories, owned by its user.
func (m *boxes) prepare(b *store.Box) error {
	owner, err := m.owner(b.ID)
	if err != nil {
		return err
	}
	return m.srv.layout(b.ID).Prepare(owner)
}

// Host uids of the box users, when boxd runs as root: each box has one of
// its own from this range, which no host user or other box has.
const (
	boxUIDFirst = 0x60000000
	boxUIDCount = 1 << 24
)

// owner returns the host uid that box id's user is, or 0 when boxes run
// as boxd's own user (boxd is not root, or does not isolate). A box that
// has none yet is given one that no other box has and no live process
// has either: one that something still runs as (a sandbox being killed,
// a process another program started) is passed over.
func (m *boxes) owner(id string) (int, error) {
	if os.Geteuid() != 0 || m.srv.cfg.Isolation != sandbox.ModeBwrap {
		return 0, nil
	}
	if uid, err := m.srv.db.UID(id); err == nil {
		if m.uids.lock(uid) {
			return int(uid), nil
		}
		// Another boxd of the machine took the uid while this one was
		// down: the box gets a new one, and Prepare gives it its files.
		m.srv.log.Warn("another boxd of this machine holds the host uid of a box of this one; the box gets a new uid", "box", id, "uid", uid)
		if err := m.srv.db.ReleaseUID(id); err != nil {
			return 0, fmt.Errorf("host uid for the box: %w", err)
		}
	}
	live := proc.UIDs()
	uid, err := m.srv.db.ReserveUID(id, boxUIDFirst, boxUIDCount, func(uid uint32) bool { return live[uid] || !m.uids.lock(uid) })
	if err != nil {
		return 0, fmt.Errorf("host uid for the box: %w", err)
	}
	return int(uid), nil
}

func validHostname(s string) bool {
	if len(s) > 63 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return s != "" && s[0] != '-'
}

// ensureRunning starts the box's sandbox if it is not running and waits
// until its agent is ready. A paused box is resumed.
func (m *boxes) ensureRunning(ctx context.Context, b *store.Box) (*runtime, error) {
	return m.ensure(ctx, b, false)
}

// errPausedCold is warm's answer for a box that was paused before its
// first start began.
var errPausedCold = errors.New("box paused before it started")

// ensure is ensureRunning; with warm, it only starts a box that has no
// sandbox yet and is not recorded paused. That check and the start's
// beginning are made under r.mu, where pause records its status too, so
// a pause either comes first and the box is not started, or finds the
// start under way and freezes what it starts.
func (m *boxes) ensure(ctx context.Context, b *store.Box, warm bool) (*runtime, error) {
	r, err := m.runtime(b.ID)
	if err != nil {
		return nil, err
	}
	// A use, before the box is found paused or not (see idle.go).
	r.mu.Lock()
	m.touchLocked(r)
	r.mu.Unlock()
	for {
		if err := r.lockUnheld(ctx); err != nil {
			return nil, err
		}
		if r.deleted.Load() {
			r.mu.Unlock()
			return nil, errBoxNotFound
		}
		if r.sb != nil {
			select {
			case <-r.sb.Done():
				// The sandbox died (killed from outside, or crashed, or
				// for an agent that stopped answering): start a new one.
				if r.sb.Hung() {
					m.srv.logf(b.ID, "warn", "system", hungMessage)
				} else {
					m.srv.logf(b.ID, "warn", "system", "box sandbox exited; restarting it")
				}
				r.sb = nil
				// Kept connections led to the old agent.
				r.agent.CloseIdleConnections()
			default:
				sb := r.sb
				r.mu.Unlock()
				if sb.Paused() && !warm {
					if err := m.resume(ctx, b.ID); err != nil {
						return nil, err
					}
				}
				return r, nil
			}
		}
		if r.starting != nil {
			ch := r.starting
			r.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		m.mu.Lock()
		closing := m.closing
		m.mu.Unlock()
		if closing {
			r.mu.Unlock()
			return nil, errClosing
		}
		if warm {
			if cur, err := m.srv.db.Box(b.ID); err != nil || cur.Status == "paused" {
				r.mu.Unlock()
				if err != nil {
					return nil, notFoundAsBox(err)
				}
				return nil, errPausedCold
			}
		}
		ch := make(chan struct{})
		r.starting = ch
		r.mu.Unlock()

		sb, err := m.start(b)

		r.mu.Lock()
		m.mu.Lock()
		closing = m.closing
		m.mu.Unlock()
		if err == nil && (r.deleted.Load() || closing) {
			// The box went away while it started. Its sandbox dies before
			// the waiters are released: destroy waits for this start, and
			// must then find nothing left writing into the box's files.
			sb.Kill()
			r.starting = nil
			close(ch)
			r.mu.Unlock()
			if closing {
				return nil, errClosing
			}
			return nil, errBoxNotFound
		}
		r.starting = nil
		close(ch)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.sb = sb
		// The sandbox runs: a record that says paused (the box was paused
		// before this start, or while it began) is wrong now. It is read
		// again, b may be older than that pause, and mended before a
		// pause waiting for r.mu can freeze the sandbox and record that.
		cur, err := m.srv.db.Box(b.ID)
		if err == nil && cur.Status == "paused" {
			err = m.srv.setStatus(b.ID, "idle")
		}
		r.mu.Unlock()
		if errors.Is(err, store.ErrNotFound) {
			return nil, errBoxNotFound
		} else if err != nil {
			return nil, err
		}
		m.srv.logf(b.ID, "info", "system", "box started")
		m.srv.inits.started(b.ID, sb)
		m.srv.browsers.warm(b)
		return r, nil
	}
}

// start launches a sandbox for b. It is not bound to the request that
// triggered it: a box that starts keeps running.
func (m *boxes) start(b *store.Box) (*sandbox.Sandbox, error) {
	l := m.srv.layout(b.ID)
	owner, err := m.owner(b.ID)
	if err != nil {
		return nil, fmt.Errorf("start box: %w", err)
	}
	// Create prepared the box; this also mends one restored from
	// elsewhere or laid out by an older boxd.
	if err := l.Prepare(owner); err != nil {
		return nil, fmt.Errorf("prepare box: %w", err)
	}
	root, path, imageEnv, err := m.srv.images.of(b)
	if err != nil {
		return nil, fmt.Errorf("start box: %w", err)
	}
	cfg := agent.Config{BoxID: b.ID, ImageEnv: imageEnv, Env: m.srv.boxEnv(b), Path: path}
	if m.srv.cfg.Isolation == sandbox.ModeNone {
		cfg.HostRoot = l.Files().Dir
	}
	bn, err := m.srv.net.startBox(b.ID, l, m.srv.cfg.Isolation)
	if err != nil {
		return nil, fmt.Errorf("start box: %w", err)
	}
	limits := m.srv.cfg.Sizes.of(b.Size)
	if m.srv.cfg.Isolation == sandbox.ModeBwrap {
		// Without isolation a box's processes are the operator's own,
		// and the agent would start the host's programs traced, without
		// their file capabilities.
		soft, hard := sandbox.BoxNoFile(limits.Pids)
		cfg.OpenFiles = &agent.OpenFiles{Soft: soft, Hard: hard}
	}
	cfg.EgressSocket, cfg.ProxyListen, cfg.CABundle = sandbox.EgressPath, bn.ProxyListen, bn.CABundle
	if root != "" {
		cfg.CABundle = sandbox.ImageCABundle
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(l.Root, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(m.srv.ctx, 30*time.Second)
	defer cancel()
	sb, err := sandbox.Start(ctx, sandbox.Spec{
		ID:           b.ID,
		Layout:       l,
		Hostname:     hostnameOf(b),
		Mode:         m.srv.cfg.Isolation,
		Agent:        m.srv.agentBinary,
		AgentConfig:  raw,
		Log:          logf,
		CABundle:     bn.HostCABundle,
		EgressSocket: bn.HostSocket,
		UID:          owner,
		GitUserName:  cmp.Or(b.GitUserName, defaultGitUserName),
		GitUserEmail: cmp.Or(b.GitUserEmail, defaultGitUserEmail),
		Limits:       limits,
		Image:        root,
		Path:         path,
	})
	if err != nil {
		m.srv.net.stopBox(b.ID)
		m.srv.logf(b.ID, "error", "system", "box failed to start: "+err.Error())
		return nil, fmt.Errorf("start box: %w", err)
	}
	if miss := sb.Unenforced(); len(miss) > 0 {
		m.srv.warnUnenforced(miss)
	}
	return sb, nil
}

func hostnameOf(b *store.Box) string {
	if validHostname(b.Name) {
		return b.Name
	}
	return b.ID
}

// pause freezes a running box. A box whose sandbox is not running is only
// marked paused.
func (m *boxes) pause(ctx context.Context, id string) error {
	r, err := m.runtime(id)
	if err != nil {
		return err
	}
	for {
		if err := r.lockUnheld(ctx); err != nil {
			return err
		}
		if r.starting == nil {
			break
		}
		// A start under way is waited for, and what it started frozen:
		// marking the box paused alone would leave its sandbox running.
		ch := r.starting
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if r.deleted.Load() {
		r.mu.Unlock()
		return errBoxNotFound
	}
	if sb := r.sb; sb != nil {
		if err := sb.Pause(); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("pause: %w", err)
		}
	}
	// Recorded under r.mu, so that a start that follows sees it.
	err = m.srv.setStatus(id, "paused")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	m.srv.logf(id, "info", "system", "box paused")
	return nil
}

// resume thaws a paused box. A box whose processes are gone (boxd
// restarted since it was paused) is started again when it has an init
// command, which runs then; otherwise it starts on its next use.
func (m *boxes) resume(ctx context.Context, id string) error {
	r, err := m.runtime(id)
	if err != nil {
		return err
	}
	if err := r.lockUnheld(ctx); err != nil {
		return err
	}
	if r.deleted.Load() {
		r.mu.Unlock()
		return errBoxNotFound
	}
	sb := r.sb
	if sb != nil {
		if err := sb.Resume(); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("resume: %w", err)
		}
	}
	r.mu.Unlock()
	m.srv.logf(id, "info", "system", "box resumed")
	if sb != nil {
		m.srv.inits.resumed(id)
	}
	if err := m.srv.setStatus(id, "idle"); err != nil {
		return err
	}
	if sb == nil {
		if b, err := m.srv.db.Box(id); err == nil && b.InitCommand != "" {
			m.warm(b)
		}
	}
	return nil
}

// destroy deletes box id, and wins over every call that races it. It
// marks the box's runtime deleted (a tombstone, made if the box had no
// runtime), so that from then on nothing starts, resumes or reaches the
// box; kills its sandbox, and waits for a start in progress, which kills
// what it started; removes its files; calls drop, when not nil, to remove
// its record; and releases its host uid, which nothing runs as any more.
// Only then does the tombstone go: a runtime is made again only for a box
// that has a record (see runtime). A delete of a box that another delete
// is deleting waits for that one, and has its outcome.
func (m *boxes) destroy(id string, drop func() error) error {
	m.mu.Lock()
	r := m.rt[id]
	if r == nil {
		r = m.newRuntime(id)
		m.rt[id] = r
	}
	m.mu.Unlock()
	r.mu.Lock()
	if ch := r.deleting; ch != nil {
		r.mu.Unlock()
		<-ch
		return r.deleteErr
	}
	r.deleted.Store(true)
	done := make(chan struct{})
	r.deleting = done
	sb := r.sb
	r.sb = nil
	starting := r.starting
	if r.idleStop != nil {
		r.idleStop()
		r.idleStop = nil
	}
	r.mu.Unlock()

	err := m.remove(id, r, sb, starting, drop)

	m.mu.Lock()
	if m.rt[id] == r {
		delete(m.rt, id)
	}
	m.ended++
	m.mu.Unlock()
	r.deleteErr = err
	close(done)
	return err
}

// remove does destroy's work on runtime r, marked deleted.
func (m *boxes) remove(id string, r *runtime, sb *sandbox.Sandbox, starting chan struct{}, drop func() error) error {
	uid, uidErr := m.srv.db.UID(id)
	if sb != nil {
		sb.Kill()
	}
	// A start in progress sees the mark when it ends, and kills what it
	// started before it closes starting. It is bounded (sandbox.Start
	// gives up after 30 seconds).
	if starting != nil {
		<-starting
	}
	r.agent.CloseIdleConnections()
	m.srv.net.forgetBox(id)
	root := m.srv.layout(id).Root
	// Processes killed a moment ago may still be closing files; try again
	// briefly before giving up.
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = os.RemoveAll(root); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("remove box files: %w", err)
	}
	if drop != nil {
		if err := drop(); err != nil {
			return err
		}
	}
	// Its host uid is free once nothing of it is left (a box whose
	// creation failed has no record to take it with it).
	if err := m.srv.db.ReleaseUID(id); err != nil {
		m.srv.log.Warn("cannot release the box's host uid", "box", id, "err", err)
	}
	if uidErr == nil {
		m.uids.unlock(uid)
	}
	return nil
}

// closeAll stops every running sandbox (boxd shutting down). Box files
// and records stay.
func (m *boxes) closeAll() {
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	m.bg.Wait()
	m.mu.Lock()
	rts := make([]*runtime, 0, len(m.rt))
	for _, r := range m.rt {
		rts = append(rts, r)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rts {
		r.mu.Lock()
		sb := r.sb
		r.sb = nil
		if r.idleStop != nil {
			r.idleStop()
			r.idleStop = nil
		}
		r.mu.Unlock()
		if sb != nil {
			wg.Add(1)
			go func() { defer wg.Done(); sb.Kill() }()
		}
		r.agent.CloseIdleConnections()
	}
	wg.Wait()
}

var errBoxNotFound = errors.New("box not found")
