package sshguard

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a time the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

var (
	srcA = netip.MustParsePrefix("192.0.2.1/32")
	srcB = netip.MustParsePrefix("192.0.2.2/32")
)

// attempt makes one attempt from src with a password that is right or
// not, and reports whether it was checked and passed.
func attempt(t *testing.T, g *Guard, src netip.Prefix, right bool) (checked, ok bool, err error) {
	t.Helper()
	ok, err = g.Check(src, func() bool { checked = true; return right })
	if err != nil && !errors.Is(err, ErrLockedOut) {
		t.Fatalf("Check: %v", err)
	}
	return checked, ok, err
}

// TestBackoff: a source has its first failures free, then every failure
// locks it out for twice as long as the one before, up to the maximum;
// while it is locked out, even the right password is refused unchecked,
// and another source logs in all the same.
func TestBackoff(t *testing.T) {
	clock := newClock()
	var lockouts []time.Duration
	g := New(Config{FreeFailures: 3, Backoff: time.Second, MaxBackoff: 8 * time.Second, Now: clock.Now,
		OnLockout: func(src netip.Prefix, failures int, d time.Duration) {
			if src != srcA {
				t.Errorf("OnLockout for %s", src)
			}
			lockouts = append(lockouts, d)
		}})
	for i := range 3 {
		if checked, ok, err := attempt(t, g, srcA, false); !checked || ok || err != nil {
			t.Fatalf("free failure %d: checked %v, ok %v, %v", i+1, checked, ok, err)
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	for i, d := range want {
		if checked, _, err := attempt(t, g, srcA, false); !checked || err != nil {
			t.Fatalf("failure %d: checked %v, %v", i+4, checked, err)
		}
		// Locked out: the right password is not even looked at.
		checked, ok, err := attempt(t, g, srcA, true)
		var le *LockedOutError
		if checked || ok || !errors.As(err, &le) || le.RetryAfter != d || le.Source != srcA {
			t.Fatalf("after failure %d: checked %v, ok %v, %v; want a lock-out of %v", i+4, checked, ok, err, d)
		}
		if err := g.LockedOut(srcA); err == nil {
			t.Fatalf("LockedOut(%s) = nil after failure %d", srcA, i+4)
		}
		// Another source is not affected.
		if checked, ok, err := attempt(t, g, srcB, true); !checked || !ok || err != nil {
			t.Fatalf("another source during the lock-out: checked %v, ok %v, %v", checked, ok, err)
		}
		clock.Add(d - time.Millisecond)
		if err := g.LockedOut(srcA); err == nil {
			t.Fatalf("the lock-out of %v is over %v early", d, time.Millisecond)
		}
		clock.Add(time.Millisecond)
		if err := g.LockedOut(srcA); err != nil {
			t.Fatalf("the lock-out of %v goes on after it: %v", d, err)
		}
	}
	if len(lockouts) != len(want) {
		t.Errorf("OnLockout called for %v, want %v", lockouts, want)
	}
	// The right password, once the lock-out is over, passes.
	if checked, ok, err := attempt(t, g, srcA, true); !checked || !ok || err != nil {
		t.Errorf("after the lock-out: checked %v, ok %v, %v", checked, ok, err)
	}
	// The count is forgotten once the source has gone quiet long enough.
	clock.Add(DefaultForget)
	for i := range 3 {
		if checked, _, err := attempt(t, g, srcA, false); !checked || err != nil {
			t.Fatalf("free failure %d after the count was forgotten: checked %v, %v", i+1, checked, err)
		}
	}
	if st := g.Stats(); st.Checked != 17 || st.Failed != 11 || st.LockedOut != 5 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestConcurrentAttempts: however many attempts one source makes at once,
// no more are checked than the free failures and the one that locks it.
func TestConcurrentAttempts(t *testing.T) {
	g := New(Config{FreeFailures: 5, Now: newClock().Now})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 200 {
		wg.Go(func() {
			<-start
			_, _ = g.Check(srcA, func() bool { return false })
		})
	}
	close(start)
	wg.Wait()
	if st := g.Stats(); st.Checked != 6 || st.LockedOut != 194 {
		t.Errorf("200 attempts at once: %d checked, %d locked out; want 6 and 194", st.Checked, st.LockedOut)
	}
}

// TestTableBound: the failures of at most MaxSources sources are kept,
// the most recent ones; a flood of sources cannot grow the table.
func TestTableBound(t *testing.T) {
	clock := newClock()
	g := New(Config{FreeFailures: 1, MaxSources: 64, Now: clock.Now})
	src := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
	}
	for i := range 10_000 {
		for range 2 {
			_, _ = g.Check(src(i), func() bool { return false })
		}
		if n := g.Stats().Sources; n > 64 {
			t.Fatalf("%d sources kept, want at most 64", n)
		}
	}
	if err := g.LockedOut(src(9_999)); err == nil {
		t.Error("the last source to fail is not locked out")
	}
	if err := g.LockedOut(src(0)); err != nil {
		t.Errorf("the first source is still remembered in a table of 64: %v", err)
	}
	clock.Add(DefaultForget)
	for range 2 {
		_, _ = g.Check(src(0), func() bool { return false })
	}
	if n := g.Stats().Sources; n != 1 {
		t.Errorf("%d sources kept after all but one were forgotten, want 1", n)
	}
}

func TestSource(t *testing.T) {
	for addr, want := range map[net.Addr]string{
		&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 22}:                      "192.0.2.7/32",
		&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 22}:               "192.0.2.7/32",
		&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 22}:           "2001:db8:1:2::/64",
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 22, Zone: "eth0"}:          "fe80::/64",
		&net.UDPAddr{IP: net.ParseIP("2001:db8:1:2:ffff:4:5:6"), Port: 22}:        "2001:db8:1:2::/64",
		&net.UnixAddr{Name: "/run/ssh.sock", Net: "unix"}:                         "invalid Prefix",
		&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3:3:4:5:6"), Port: 22, Zone: ""}: "2001:db8:1:3::/64",
	} {
		if got := Source(addr).String(); got != want {
			t.Errorf("Source(%v) = %s, want %s", addr, got, want)
		}
	}
}

// loopback returns a listener on 127.0.0.1 and a dialler from src.
func loopback(t *testing.T) (net.Listener, func(src string) (client, server net.Conn)) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, func(src string) (net.Conn, net.Conn) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return c, s
	}
}

// closedByPeer waits until c's peer has closed it.
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the connection is not closed: %v", err)
	}
}

// TestCaps: past the bound in all or from one source, Admit refuses; a
// connection that authenticates or closes leaves room for another.
func TestCaps(t *testing.T) {
	_, dial := loopback(t)
	g := New(Config{MaxUnauthenticated: 4, MaxUnauthenticatedPerSource: 2})
	var admitted []*Conn
	admit := func(src string, want bool) {
		t.Helper()
		_, s := dial(src)
		pc := g.Admit(s)
		if (pc != nil) != want {
			t.Fatalf("Admit from %s = %v, want admitted %v (stats %+v)", src, pc, want, g.Stats())
		}
		if pc != nil {
			admitted = append(admitted, pc)
		}
	}
	admit("127.0.0.2", true)
	admit("127.0.0.2", true)
	admit("127.0.0.2", false) // the source's bound
	admit("127.0.0.3", true)
	admit("127.0.0.3", true)
	admit("127.0.0.4", false) // the bound of all
	if !admitted[0].Authenticated() {
		t.Fatal("Authenticated = false")
	}
	admit("127.0.0.2", true) // room again, for the source and in all
	admit("127.0.0.4", false)
	admitted[3].Close()
	admit("127.0.0.4", true)
	if st := g.Stats(); st.Unauthenticated != 4 || st.Refused != 3 {
		t.Errorf("Stats = %+v", st)
	}
	for _, c := range admitted {
		c.Close()
	}
	if st := g.Stats(); st.Unauthenticated != 0 {
		t.Errorf("Stats after closing all = %+v", st)
	}
}

// TestDeadline: a connection that has not authenticated by its deadline
// is closed, and its room freed; one that has stays open.
func TestDeadline(t *testing.T) {
	_, dial := loopback(t)
	g := New(Config{AuthTimeout: 200 * time.Millisecond, MaxUnauthenticated: 1})
	authedC, authedS := dial("127.0.0.2")
	authed := g.Admit(authedS)
	if authed == nil || !authed.Authenticated() {
		t.Fatal("no room for the first connection")
	}
	c, s := dial("127.0.0.2")
	idle := g.Admit(s)
	if idle == nil {
		t.Fatal("no room for a connection once the other authenticated")
	}
	closedByPeer(t, c) // at its deadline, later than authed's
	if idle.Authenticated() {
		t.Error("Authenticated = true after the deadline closed the connection")
	}
	if st := g.Stats(); st.Unauthenticated != 0 || st.Expired != 1 {
		t.Errorf("Stats = %+v", st)
	}
	if _, err := authedS.Write([]byte("x")); err != nil {
		t.Fatalf("the authenticated connection is closed: %v", err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(authedC, b); err != nil {
		t.Errorf("the authenticated connection: %v", err)
	}
	_, s = dial("127.0.0.2")
	if pc := g.Admit(s); pc == nil {
		t.Error("no room after the deadline")
	} else {
		pc.Close()
	}
	authed.Close()
}
