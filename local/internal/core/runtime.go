package core

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
	// ErrBoxNotFound for the box while it is in the map.
	deleted atomic.Bool

	mu       sync.Mutex
	sb       *sandbox.Sandbox
	starting chan struct{} // closed when a start attempt ends
	startErr error
	// deleting is closed when the delete that marked the runtime deleted
	// ends, with deleteErr its outcome.
	deleting  chan struct{}
	deleteErr error
	// held is set while a snapshot keeps the box still (see hold.go),
	// and closed when it lets go.
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

// warm starts a new box's sandbox in the background, so that its first
// call does not wait for it.
func (c *Core) warm(b *store.Box) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		if _, err := c.ensure(c.ctx, b, true); err != nil && !errors.Is(err, ErrBoxNotFound) && !errors.Is(err, ErrClosing) && !errors.Is(err, errPausedCold) {
			c.log.Warn("box did not start", "box", b.ID, "err", err)
		}
	}()
}

var ErrClosing = errors.New("boxd is shutting down")

// runtime returns the runtime of box id, made on first use for a box that
// has a record. It fails with ErrBoxNotFound while the box is being
// deleted and once it is gone: a call that read the box's record before
// its delete can no longer start a sandbox for it.
func (c *Core) runtime(id string) (*runtime, error) {
	c.mu.Lock()
	for {
		if r := c.rt[id]; r != nil {
			c.mu.Unlock()
			if r.deleted.Load() {
				return nil, ErrBoxNotFound
			}
			return r, nil
		}
		// Not under the lock: a store read. A delete that ends meanwhile
		// (ended moves) may have removed the record after it was read.
		ended := c.ended
		c.mu.Unlock()
		if b, err := c.db.Box(id); errors.Is(err, store.ErrNotFound) || err == nil && b.ID != id {
			return nil, ErrBoxNotFound
		} else if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.rt[id] == nil && c.ended == ended {
			r := c.newRuntime(id)
			c.rt[id] = r
			c.mu.Unlock()
			return r, nil
		}
	}
}

// agentHealth is the liveness watch's question to box id's agent: a
// client of its own, which keeps its own connection, asks Health.
func agentHealth(id string) sandbox.HealthFunc {
	return func(dial func(context.Context) (net.Conn, error)) (func(context.Context) error, func()) {
		c := agent.NewClient(agent.ClientConfig{BoxID: id, Dial: dial})
		return c.Health, c.CloseIdleConnections
	}
}

func (c *Core) newRuntime(id string) *runtime {
	r := &runtime{id: id}
	r.agent = agent.NewClient(agent.ClientConfig{
		BoxID: id,
		Dial:  func(ctx context.Context) (net.Conn, error) { return c.dialAgent(ctx, r) },
	})
	return r
}

// runningNow reports whether box id's sandbox runs and is not paused,
// without starting or resuming it.
func (c *Core) runningNow(id string) bool {
	r := c.existing(id)
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
func (c *Core) existing(id string) *runtime {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rt[id]
}

// dialAgent connects to the agent of r's box, starting the box if it
// is not running. An agent that no longer listens while its sandbox runs
// on (killed, with background jobs keeping the sandbox's init alive) is
// a broken box: its sandbox is replaced by a new one, once, and the
// connection made to that. Nothing has been sent yet when a dial fails,
// so the request that asked for it goes on unharmed.
func (c *Core) dialAgent(ctx context.Context, r *runtime) (net.Conn, error) {
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		sb := r.sb
		r.mu.Unlock()
		if r.deleted.Load() {
			return nil, ErrBoxNotFound
		}
		if sb == nil {
			b, err := c.db.Box(r.id)
			if err != nil {
				return nil, NotFoundAsBox(err)
			}
			if rt, err := c.ensureRunning(ctx, b); err != nil {
				return nil, err
			} else if rt != r {
				// r is a deleted box's, replaced since (a failed delete
				// leaves the box with a new runtime).
				return nil, ErrBoxNotFound
			}
			continue
		}
		conn, err := sb.Dial(ctx)
		if !errors.Is(err, sandbox.ErrAgentGone) || attempt > 0 || ctx.Err() != nil {
			return conn, err
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
			c.Logf(r.id, "warn", "system", msg)
			r.agent.CloseIdleConnections()
		}
	}
}

// The identity commits get when neither the request, the box nor the
// box's git configuration names one.
const (
	DefaultGitUserName  = "Upstash Box"
	DefaultGitUserEmail = "box@upstash.com"
)

// hungMessage is logged when a box's sandbox is replaced because its
// agent stopped answering (sandbox.LivenessTimeout).
var hungMessage = fmt.Sprintf("the box's agent did not answer for %v; starting a new sandbox", sandbox.LivenessTimeout)

// NewID returns a box id: "box-" and ten lower-case letters and digits, so
// that it can be a DNS label in preview host names.
func NewID(prefix string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [10]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b[:])
}

// prepare creates the box's directories, owned by its user.
func (c *Core) prepare(b *store.Box) error {
	owner, err := c.owner(b.ID)
	if err != nil {
		return err
	}
	return c.Layout(b.ID).Prepare(owner)
}

// Host uids of the box users, when boxd runs as root: each box has one of
// its own from this range, which no host user or other box has.
const (
	UIDFirst = 0x60000000
	UIDCount = 1 << 24
)

// ProbeUID is the host uid as which the check that bubblewrap works here
// (sandbox.Available) runs its sandbox. It lies outside the boxes' range:
// a check made while a box runs (a second boxd starting, a test asking
// whether isolation is there) never runs a process as that box's user,
// nor charges that user's kernel counts.
const ProbeUID = UIDFirst - 1

// owner returns the host uid that box id's user is, or 0 when boxes run
// as boxd's own user (boxd is not root, or does not isolate). A box that
// has none yet is given one that no other box has and no live process
// has either: one that something still runs as (a sandbox being killed,
// a process another program started) is passed over.
func (c *Core) owner(id string) (int, error) {
	if os.Geteuid() != 0 || c.cfg.Isolation != sandbox.ModeBwrap {
		return 0, nil
	}
	if uid, err := c.db.UID(id); err == nil {
		if c.uids.lock(uid) {
			return int(uid), nil
		}
		// Another boxd of the machine took the uid while this one was
		// down: the box gets a new one, and Prepare gives it its files.
		c.log.Warn("another boxd of this machine holds the host uid of a box of this one; the box gets a new uid", "box", id, "uid", uid)
		if err := c.db.ReleaseUID(id); err != nil {
			return 0, fmt.Errorf("host uid for the box: %w", err)
		}
	}
	live := proc.UIDs()
	uid, err := c.db.ReserveUID(id, UIDFirst, UIDCount, func(uid uint32) bool { return live[uid] || !c.uids.lock(uid) })
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
func (c *Core) ensureRunning(ctx context.Context, b *store.Box) (*runtime, error) {
	return c.ensure(ctx, b, false)
}

// errPausedCold is warm's answer for a box that was paused before its
// first start began.
var errPausedCold = errors.New("box paused before it started")

// ensure is ensureRunning; with warm, it only starts a box that has no
// sandbox yet and is not recorded paused. That check and the start's
// beginning are made under r.mu, where pause records its status too, so
// a pause either comes first and the box is not started, or finds the
// start under way and freezes what it starts.
func (c *Core) ensure(ctx context.Context, b *store.Box, warm bool) (*runtime, error) {
	r, err := c.runtime(b.ID)
	if err != nil {
		return nil, err
	}
	// A use, before the box is found paused or not (see idle.go).
	r.mu.Lock()
	c.touchLocked(r)
	r.mu.Unlock()
	for {
		if err := r.lockUnheld(ctx); err != nil {
			return nil, err
		}
		if r.deleted.Load() {
			r.mu.Unlock()
			return nil, ErrBoxNotFound
		}
		if r.sb != nil {
			select {
			case <-r.sb.Done():
				// The sandbox died (killed from outside, or crashed, or
				// for an agent that stopped answering): start a new one.
				if r.sb.Hung() {
					c.Logf(b.ID, "warn", "system", hungMessage)
				} else {
					c.Logf(b.ID, "warn", "system", "box sandbox exited; restarting it")
				}
				r.sb = nil
				// Kept connections led to the old agent.
				r.agent.CloseIdleConnections()
			default:
				sb := r.sb
				r.mu.Unlock()
				if sb.Paused() && !warm {
					if err := c.resume(ctx, b.ID); err != nil {
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
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if closing {
			r.mu.Unlock()
			return nil, ErrClosing
		}
		if warm {
			if cur, err := c.db.Box(b.ID); err != nil || cur.Status == "paused" {
				r.mu.Unlock()
				if err != nil {
					return nil, NotFoundAsBox(err)
				}
				return nil, errPausedCold
			}
		}
		ch := make(chan struct{})
		r.starting = ch
		r.mu.Unlock()

		sb, err := c.start(b)

		r.mu.Lock()
		c.mu.Lock()
		closing = c.closing
		c.mu.Unlock()
		if err == nil && (r.deleted.Load() || closing) {
			// The box went away while it started. Its sandbox dies before
			// the waiters are released: destroy waits for this start, and
			// must then find nothing left writing into the box's files.
			sb.Kill()
			r.starting = nil
			close(ch)
			r.mu.Unlock()
			if closing {
				return nil, ErrClosing
			}
			return nil, ErrBoxNotFound
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
		cur, err := c.db.Box(b.ID)
		if err == nil && cur.Status == "paused" {
			err = c.SetStatus(b.ID, "idle")
		}
		r.mu.Unlock()
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrBoxNotFound
		} else if err != nil {
			return nil, err
		}
		c.Logf(b.ID, "info", "system", "box started")
		c.inits.started(b.ID, sb)
		c.runStarted(b)
		return r, nil
	}
}

// start launches a sandbox for b. It is not bound to the request that
// triggered it: a box that starts keeps running.
func (c *Core) start(b *store.Box) (*sandbox.Sandbox, error) {
	l := c.Layout(b.ID)
	owner, err := c.owner(b.ID)
	if err != nil {
		return nil, fmt.Errorf("start box: %w", err)
	}
	// Create prepared the box; this also mends one restored from
	// elsewhere or laid out by an older boxd.
	if err := l.Prepare(owner); err != nil {
		return nil, fmt.Errorf("prepare box: %w", err)
	}
	root, path, imageEnv, err := c.cfg.Images.Of(b)
	if err != nil {
		return nil, fmt.Errorf("start box: %w", err)
	}
	cfg := agent.Config{BoxID: b.ID, ImageEnv: imageEnv, Env: Env(b), Path: path}
	if c.cfg.Isolation == sandbox.ModeNone {
		cfg.HostRoot = l.Files().Dir
	}
	bn, err := c.cfg.Network.StartBox(b.ID, l, c.cfg.Isolation)
	if err != nil {
		return nil, fmt.Errorf("start box: %w", err)
	}
	limits := c.cfg.Limits(b.Size)
	if c.cfg.Isolation == sandbox.ModeBwrap {
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
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	sb, err := sandbox.Start(ctx, sandbox.Spec{
		ID:           b.ID,
		Layout:       l,
		Hostname:     hostnameOf(b),
		Mode:         c.cfg.Isolation,
		Agent:        c.cfg.AgentBinary,
		AgentConfig:  raw,
		Log:          logf,
		CABundle:     bn.HostCABundle,
		EgressSocket: bn.HostSocket,
		UID:          owner,
		GitUserName:  cmp.Or(b.GitUserName, DefaultGitUserName),
		GitUserEmail: cmp.Or(b.GitUserEmail, DefaultGitUserEmail),
		Limits:       limits,
		Image:        root,
		Path:         path,
		Health:       agentHealth(b.ID),
	})
	if err != nil {
		c.cfg.Network.StopBox(b.ID)
		c.Logf(b.ID, "error", "system", "box failed to start: "+err.Error())
		return nil, fmt.Errorf("start box: %w", err)
	}
	if miss := sb.Unenforced(); len(miss) > 0 {
		c.warnUnenforced(miss)
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
func (c *Core) pause(ctx context.Context, id string) error {
	r, err := c.runtime(id)
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
		return ErrBoxNotFound
	}
	if sb := r.sb; sb != nil {
		if err := sb.Pause(); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("pause: %w", err)
		}
	}
	// Recorded under r.mu, so that a start that follows sees it.
	err = c.SetStatus(id, "paused")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	c.Logf(id, "info", "system", "box paused")
	return nil
}

// resume thaws a paused box. A box whose processes are gone (boxd
// restarted since it was paused) is started again when it has an init
// command, which runs then; otherwise it starts on its next use.
func (c *Core) resume(ctx context.Context, id string) error {
	r, err := c.runtime(id)
	if err != nil {
		return err
	}
	if err := r.lockUnheld(ctx); err != nil {
		return err
	}
	if r.deleted.Load() {
		r.mu.Unlock()
		return ErrBoxNotFound
	}
	sb := r.sb
	if sb != nil {
		if err := sb.Resume(); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("resume: %w", err)
		}
	}
	r.mu.Unlock()
	c.Logf(id, "info", "system", "box resumed")
	if sb != nil {
		c.inits.resumed(id)
	}
	if err := c.SetStatus(id, "idle"); err != nil {
		return err
	}
	if sb == nil {
		if b, err := c.db.Box(id); err == nil && b.InitCommand != "" {
			c.warm(b)
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
func (c *Core) destroy(id string, drop func() error) error {
	c.mu.Lock()
	r := c.rt[id]
	if r == nil {
		r = c.newRuntime(id)
		c.rt[id] = r
	}
	c.mu.Unlock()
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

	err := c.remove(id, r, sb, starting, drop)

	c.mu.Lock()
	if c.rt[id] == r {
		delete(c.rt, id)
	}
	c.ended++
	c.mu.Unlock()
	r.deleteErr = err
	close(done)
	return err
}

// remove does destroy's work on runtime r, marked deleted.
func (c *Core) remove(id string, r *runtime, sb *sandbox.Sandbox, starting chan struct{}, drop func() error) error {
	if sb != nil {
		sb.Kill()
	}
	// A start in progress sees the mark when it ends, and kills what it
	// started before it closes starting. It is bounded (sandbox.Start
	// gives up after 30 seconds).
	if starting != nil {
		<-starting
	}
	// Read the uid after the start: one in progress may have just given
	// the box its uid, whose lock must go with it.
	uid, uidErr := c.db.UID(id)
	r.agent.CloseIdleConnections()
	c.cfg.Network.ForgetBox(id)
	root := c.Layout(id).Root
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
	if err := c.db.ReleaseUID(id); err != nil {
		c.log.Warn("cannot release the box's host uid", "box", id, "err", err)
	}
	if uidErr == nil {
		c.uids.unlock(uid)
	}
	return nil
}

// closeAll stops every running sandbox (boxd shutting down). Box files
// and records stay.
func (c *Core) closeAll() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.pool.mu.Lock()
	c.pool.closed = true
	c.pool.notifyLocked()
	c.pool.mu.Unlock()
	c.bg.Wait()
	c.closePool()
	c.mu.Lock()
	rts := make([]*runtime, 0, len(c.rt))
	for _, r := range c.rt {
		rts = append(rts, r)
	}
	c.mu.Unlock()
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
