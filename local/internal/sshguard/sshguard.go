// Package sshguard bounds what an SSH server gives to clients that have
// not authenticated: how long a connection may take to authenticate, how
// many unauthenticated connections there may be, in all and from one
// source, and how often one source may have a password checked once it
// has guessed wrong a few times.
//
// A source is a client's IPv4 address, or its IPv6 /64 (one subscriber's
// usual allocation, so that a client cannot pick a new address for each
// connection). Every limit is per Guard: a server keeps one for all its
// listeners.
package sshguard

import (
	"container/list"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the rate limit on failed logins (Config).
const (
	DefaultFreeFailures = 5
	DefaultBackoff      = time.Second
	DefaultMaxBackoff   = 5 * time.Minute
	DefaultForget       = 15 * time.Minute
	DefaultMaxSources   = 4096
)

// Config sets a Guard's bounds.
type Config struct {
	// AuthTimeout is how long a connection may go from its accept to its
	// authentication; then it is closed. Zero or negative: no deadline.
	AuthTimeout time.Duration
	// MaxUnauthenticated bounds the connections that are accepted and
	// not yet authenticated, from all sources together; past it a new
	// connection is closed at once. Zero or negative: no bound.
	MaxUnauthenticated int
	// MaxUnauthenticatedPerSource is the same bound for each source.
	MaxUnauthenticatedPerSource int

	// FreeFailures is how many failed logins a source has before it is
	// locked out (DefaultFreeFailures when zero). Each failure past them
	// locks the source out for Backoff, doubled with every further one,
	// up to MaxBackoff. Attempts while a source is locked out are refused
	// unchecked, the right password too, and do not count.
	FreeFailures int
	// Backoff is the first lock-out (DefaultBackoff when zero).
	Backoff time.Duration
	// MaxBackoff bounds a lock-out (DefaultMaxBackoff when zero).
	MaxBackoff time.Duration
	// Forget is how long after its last failure a source's count is
	// forgotten (DefaultForget when zero; never less than MaxBackoff).
	Forget time.Duration
	// MaxSources bounds the sources whose failures are remembered
	// (DefaultMaxSources when zero); past it the one that failed least
	// recently is forgotten.
	MaxSources int
	// OnLockout, when set, is called as a failure locks src out for d.
	OnLockout func(src netip.Prefix, failures int, d time.Duration)

	// Now is the time of the rate limit; nil is time.Now.
	Now func() time.Time
}

// Guard keeps the count of a server's unauthenticated connections and of
// its sources' failed logins. It is safe for concurrent use.
type Guard struct {
	cfg Config

	mu        sync.Mutex
	pending   int
	perSource map[netip.Prefix]int
	sources   map[netip.Prefix]*list.Element // of *record
	recent    *list.List                     // most recent failure first
	stats     Stats
}

// record is a source's failed logins.
type record struct {
	src         netip.Prefix
	failures    int
	last        time.Time // of the last failure
	lockedUntil time.Time
}

// Stats are a Guard's counts.
type Stats struct {
	// Unauthenticated is the number of connections admitted and not yet
	// authenticated, closed or past their deadline.
	Unauthenticated int
	// Sources is the number of sources whose failures are remembered.
	Sources int
	// Refused counts the connections closed at accept for a cap.
	Refused uint64
	// Expired counts the connections closed at their deadline.
	Expired uint64
	// Checked counts the password attempts that were checked.
	Checked uint64
	// Failed counts the checked attempts that failed.
	Failed uint64
	// LockedOut counts the attempts refused unchecked.
	LockedOut uint64
}

// New returns a Guard with cfg's bounds.
func New(cfg Config) *Guard {
	if cfg.FreeFailures <= 0 {
		cfg.FreeFailures = DefaultFreeFailures
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.Backoff)
	if cfg.Forget <= 0 {
		cfg.Forget = DefaultForget
	}
	// A record expires with its lock-out at the earliest, so that the
	// least recently failed is always the first to expire.
	cfg.Forget = max(cfg.Forget, cfg.MaxBackoff)
	if cfg.MaxSources <= 0 {
		cfg.MaxSources = DefaultMaxSources
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guard{
		cfg:       cfg,
		perSource: map[netip.Prefix]int{},
		sources:   map[netip.Prefix]*list.Element{},
		recent:    list.New(),
	}
}

// Source is the source a connection from addr counts for: its IPv4
// address (IPv4-mapped IPv6 included), or its IPv6 /64. An address that is
// not IP (a unix socket's) is the zero Prefix, one source for all.
func Source(addr net.Addr) netip.Prefix {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case nil:
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return netip.Prefix{}
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// Admit counts c as unauthenticated, from the moment of the call until
// Authenticated or Close is called on the Conn it returns, or its
// deadline closes it. Over a cap it returns nil and c is the caller's to
// close, unread.
func (g *Guard) Admit(c net.Conn) *Conn {
	src := Source(c.RemoteAddr())
	g.mu.Lock()
	if over(g.pending, g.cfg.MaxUnauthenticated) || over(g.perSource[src], g.cfg.MaxUnauthenticatedPerSource) {
		g.stats.Refused++
		g.mu.Unlock()
		return nil
	}
	g.pending++
	g.perSource[src]++
	g.mu.Unlock()
	pc := &Conn{Conn: c, g: g, src: src}
	if g.cfg.AuthTimeout > 0 {
		pc.timer = time.AfterFunc(g.cfg.AuthTimeout, pc.expire)
	}
	return pc
}

func over(n, limit int) bool { return limit > 0 && n >= limit }

// release uncounts an unauthenticated connection from src.
func (g *Guard) release(src netip.Prefix, expired bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending--
	if g.perSource[src]--; g.perSource[src] <= 0 {
		delete(g.perSource, src)
	}
	if expired {
		g.stats.Expired++
	}
}

// LockedOutError is what Check returns for an attempt from a source that
// is locked out.
type LockedOutError struct {
	Source     netip.Prefix
	RetryAfter time.Duration // until the lock-out ends
}

func (e *LockedOutError) Error() string {
	from := "this address"
	switch {
	case e.Source.IsSingleIP():
		from = e.Source.Addr().String()
	case e.Source.IsValid():
		from = e.Source.String()
	}
	return fmt.Sprintf("too many failed logins from %s: try again in %s", from, max(e.RetryAfter.Round(time.Second), time.Second))
}

// ErrLockedOut is matched by every *LockedOutError (errors.Is).
var ErrLockedOut = errors.New("locked out")

// Is makes errors.Is(err, ErrLockedOut) true.
func (e *LockedOutError) Is(target error) bool { return target == ErrLockedOut }

// LockedOut returns a *LockedOutError when src is locked out now, and
// nil otherwise: a cheap look before the work of an attempt, which Check
// then makes for certain.
func (g *Guard) LockedOut(src netip.Prefix) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lockedOutLocked(src, g.cfg.Now())
}

func (g *Guard) lockedOutLocked(src netip.Prefix, now time.Time) error {
	r := g.lookupLocked(src, now)
	if r == nil || !now.Before(r.lockedUntil) {
		return nil
	}
	return &LockedOutError{Source: src, RetryAfter: r.lockedUntil.Sub(now)}
}

// lookupLocked returns src's record, forgetting it if it is too old.
func (g *Guard) lookupLocked(src netip.Prefix, now time.Time) *record {
	e, ok := g.sources[src]
	if !ok {
		return nil
	}
	r := e.Value.(*record)
	if !now.Before(r.last.Add(g.cfg.Forget)) {
		g.recent.Remove(e)
		delete(g.sources, src)
		return nil
	}
	return r
}

// Check makes a password attempt from src: unless src is locked out, it
// calls check, which says whether the password is right, and counts a
// failure against src when it is not. check runs under the Guard's lock,
// one attempt at a time, so that however many connections of a source
// make attempts at once, no more are checked than the limit lets
// through: it must be quick (a constant-time comparison). For a source
// that is locked out, check is not called and the error is a
// *LockedOutError.
func (g *Guard) Check(src netip.Prefix, check func() bool) (bool, error) {
	var locked func()
	defer func() {
		if locked != nil {
			locked()
		}
	}()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	if err := g.lockedOutLocked(src, now); err != nil {
		g.stats.LockedOut++
		return false, err
	}
	g.stats.Checked++
	if check() {
		return true, nil
	}
	g.stats.Failed++
	r := g.lookupLocked(src, now)
	if r == nil {
		// The least recent failures are at the back: forget those
		// that are too old, then, while the table is full, the least
		// recent.
		for old := g.recent.Back(); old != nil && !now.Before(old.Value.(*record).last.Add(g.cfg.Forget)); old = g.recent.Back() {
			g.recent.Remove(old)
			delete(g.sources, old.Value.(*record).src)
		}
		for g.recent.Len() >= g.cfg.MaxSources {
			old := g.recent.Back()
			g.recent.Remove(old)
			delete(g.sources, old.Value.(*record).src)
		}
		r = &record{src: src}
		g.sources[src] = g.recent.PushFront(r)
	} else {
		g.recent.MoveToFront(g.sources[src])
	}
	r.failures++
	r.last = now
	if n := r.failures - g.cfg.FreeFailures; n > 0 {
		d := g.cfg.Backoff
		for ; n > 1 && d < g.cfg.MaxBackoff; n-- {
			d = min(d, g.cfg.MaxBackoff/2) * 2
		}
		d = min(d, g.cfg.MaxBackoff)
		r.lockedUntil = now.Add(d)
		if g.cfg.OnLockout != nil {
			failures := r.failures
			locked = func() { g.cfg.OnLockout(src, failures, d) }
		}
	}
	return false, nil
}

// Stats returns g's counts.
func (g *Guard) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.Unauthenticated = g.pending
	s.Sources = g.recent.Len()
	return s
}

// Conn is a connection that counts as unauthenticated until Authenticated
// or Close is called, or its deadline closes it.
type Conn struct {
	net.Conn
	g     *Guard
	src   netip.Prefix
	timer *time.Timer // nil without a deadline

	mu    sync.Mutex
	state connState
}

type connState int

const (
	pending connState = iota
	authenticated
	closed
)

// Source is the source c counts for.
func (c *Conn) Source() netip.Prefix { return c.src }

// Authenticated ends c's count as unauthenticated and its deadline. It
// returns false when c is closed already, its deadline having passed:
// then the login must be refused.
func (c *Conn) Authenticated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != pending {
		return c.state == authenticated
	}
	c.state = authenticated
	if c.timer != nil {
		c.timer.Stop()
	}
	c.g.release(c.src, false)
	return true
}

// expire closes c at its deadline unless it has authenticated.
func (c *Conn) expire() {
	c.mu.Lock()
	if c.state != pending {
		c.mu.Unlock()
		return
	}
	c.state = closed
	c.g.release(c.src, true)
	c.mu.Unlock()
	_ = c.Conn.Close()
}

// Close closes the connection, and ends its count if it had not
// authenticated.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.state == pending {
		c.state = closed
		if c.timer != nil {
			c.timer.Stop()
		}
		c.g.release(c.src, false)
	}
	c.mu.Unlock()
	return c.Conn.Close()
}
