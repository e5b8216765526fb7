package egress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Addresses of the machine in these tests (TEST-NET-2 and the IPv6
// documentation prefix stand in for a LAN address and a bridge's), and of
// another machine of its LAN.
var (
	testHostAddrs = []netip.Addr{
		netip.MustParseAddr("127.0.0.1"),
		netip.MustParseAddr("::1"),
		netip.MustParseAddr("198.51.100.7"),
		netip.MustParseAddr("::ffff:203.0.113.1"), // as a listing may give an IPv4 address
		netip.MustParseAddr("2001:db8::7"),
	}
	testNeighbour = "198.51.100.8"
)

func listTestHostAddrs() ([]netip.Addr, error) { return testHostAddrs, nil }

// TestProxyKeepsBoxesOffTheHostsAddresses: every address of the host's
// interfaces is the host, as its loopback is, and a neighbour on its LAN
// is not. With the operator's switch off, no policy reaches the host's
// LAN or bridge address, by literal, mapped form or a name that resolves
// to it; with it on, boxd's own ports stay out of reach there, and a name
// that allowed_domains lets through leads there only where allowed_cidrs
// cover the address. The decisions are the proxy's, before any dial.
func TestProxyKeepsBoxesOffTheHostsAddresses(t *testing.T) {
	t.Parallel()
	const selfPort = "4444"
	names := map[string]string{
		"lan.test":          "198.51.100.7",
		"bridge.test":       "203.0.113.1",
		"evil.example.test": "198.51.100.7",
		"v6.example.test":   "2001:db8::7",
		"far.example.test":  testNeighbour,
	}
	newProxy := func(loopback bool) *Proxy {
		p := New(Config{
			HostLoopback: loopback,
			SelfPort:     func(port uint16) bool { return port == 4444 },
			hostAddrs:    listTestHostAddrs,
			Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
				if a, ok := names[host]; ok {
					return []netip.Addr{netip.MustParseAddr(a)}, nil
				}
				return nil, errors.New("test resolver: unknown host " + host)
			},
		})
		t.Cleanup(p.Close)
		return p
	}
	off, on := newProxy(false), newProxy(true)
	mustCompile := func(domains, allowed, denied []string) *Policy {
		t.Helper()
		p, err := Compile(ModeCustom, domains, allowed, denied)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	lanCIDR := mustCompile(nil, []string{"198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"}, nil)
	onlyDenied := mustCompile(nil, nil, []string{"10.0.0.0/8"})
	wild := mustCompile([]string{"*.example.test"}, nil, nil)
	wildAndCIDR := mustCompile([]string{"*.example.test"}, []string{"198.51.100.7/32"}, nil)
	for _, tc := range []struct {
		p          *Proxy
		pol        *Policy
		host, port string
		why        string // "" when allowed
	}{
		{off, AllowAll, "198.51.100.7", "80", reasonHost},
		{off, AllowAll, "::ffff:198.51.100.7", "80", reasonHost},
		{off, AllowAll, "203.0.113.1", "80", reasonHost},
		{off, AllowAll, "2001:db8::7", "443", reasonHost},
		{off, AllowAll, "lan.test", "80", reasonHost},
		{off, AllowAll, "bridge.test", "80", reasonHost},
		{off, lanCIDR, "198.51.100.7", "80", reasonHost},
		{off, onlyDenied, "198.51.100.7", "80", reasonHost},
		{off, wild, "evil.example.test", "80", reasonHost},
		{off, AllowAll, "198.51.100.7", selfPort, reasonSelf},
		{off, AllowAll, testNeighbour, "80", ""},
		{off, lanCIDR, testNeighbour, "80", ""},
		{off, wild, "far.example.test", "80", ""},

		{on, AllowAll, "198.51.100.7", "80", ""},
		{on, AllowAll, "lan.test", "80", ""},
		{on, lanCIDR, "2001:db8::7", "80", ""},
		{on, AllowAll, "198.51.100.7", selfPort, reasonSelf},
		{on, AllowAll, "::ffff:198.51.100.7", selfPort, reasonSelf},
		{on, AllowAll, "203.0.113.1", selfPort, reasonSelf},
		{on, AllowAll, "2001:db8::7", selfPort, reasonSelf},
		{on, lanCIDR, "198.51.100.7", selfPort, reasonSelf},
		{on, AllowAll, testNeighbour, selfPort, ""}, // not boxd's
		{on, wild, "evil.example.test", "80", reasonNameToHost},
		{on, wild, "v6.example.test", "80", reasonNameToHost},
		{on, wild, "far.example.test", "80", ""},
		{on, wildAndCIDR, "evil.example.test", "80", ""},
	} {
		loopback := tc.p.cfg.HostLoopback
		addrs, err := tc.p.permitted(t.Context(), tc.pol, tc.host, tc.port)
		if tc.why == "" {
			if err != nil || len(addrs) != 1 {
				t.Errorf("loopback %v, %s policy: %s:%s = %v, %v; want it allowed", loopback, tc.pol.Mode(), tc.host, tc.port, addrs, err)
			}
			continue
		}
		var de *DeniedError
		if !errors.As(err, &de) || de.Reason != tc.why {
			t.Errorf("loopback %v, %s policy: %s:%s = %v, %v; want refused as %q", loopback, tc.pol.Mode(), tc.host, tc.port, addrs, err, tc.why)
		}
	}
}

// TestProxyHostAddressAnswer is what a box sees when it asks for the
// host's LAN address, by HTTP and CONNECT, with the operator's switch
// off: a 403 that says what was refused and what would open it. The
// proxy dials nothing (the address is the test's, not a real one).
func TestProxyHostAddressAnswer(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, Config{hostAddrs: listTestHostAddrs})
	r.names["lan.test"] = "198.51.100.7"
	for _, target := range []string{"198.51.100.7:8080", "[::ffff:198.51.100.7]:8080", "[2001:db8::7]:8080", "lan.test:8080"} {
		for _, connect := range []bool{false, true} {
			u := target
			if !connect {
				u = "http://" + target + "/"
			}
			start := time.Now()
			code, body := r.request(connect, u)
			host, _, _ := net.SplitHostPort(target)
			want := "boxd egress: " + normalizeHost(strings.Trim(host, "[]")) + " is not reachable from a box: " + reasonHost
			if code != 403 || strings.TrimSpace(body) != want {
				t.Errorf("%s (CONNECT %v) = %d %q after %v, want 403 %q", target, connect, code, body, time.Since(start).Round(time.Millisecond), want)
			}
		}
	}
	for _, s := range []string{"this machine's own address", "network interfaces", "-allow-host-loopback"} {
		if !strings.Contains(reasonHost, s) {
			t.Errorf("the refusal %q does not say %q", reasonHost, s)
		}
	}
}

// TestHostAddrs: the set of the host's addresses is listed once for many
// questions, again once it is hostAddrsTTL old, and kept when a listing
// fails; the questions of many goroutines while it is listed again get
// one listing or the next, never a partial one.
func TestHostAddrs(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		list  = []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("::ffff:203.0.113.1")}
		fail  error
		calls atomic.Int32
	)
	h := newHostAddrs(func() ([]netip.Addr, error) {
		calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if fail != nil {
			return nil, fail
		}
		return list, nil
	}, slog.New(slog.DiscardHandler))
	set := func(l []netip.Addr, err error) {
		mu.Lock()
		list, fail = l, err
		mu.Unlock()
	}
	// age makes the current listing hostAddrsTTL old.
	age := func() {
		s := h.cur.Load()
		h.cur.Store(&addrSet{at: s.at.Add(-hostAddrsTTL), addrs: s.addrs})
	}
	ip := netip.MustParseAddr
	check := func(when string, a string, want bool) {
		t.Helper()
		if got := h.has(ip(a)); got != want {
			t.Errorf("%s: has(%s) = %v, want %v", when, a, got, want)
		}
	}
	check("first listing", "198.51.100.7", true)
	check("first listing", "203.0.113.1", true) // canonical form
	check("first listing", "198.51.100.8", false)
	if n := calls.Load(); n != 1 {
		t.Errorf("%d listings for three questions within %v, want 1", n, hostAddrsTTL)
	}

	set([]netip.Addr{ip("198.51.100.9")}, nil)
	check("before the listing is old", "198.51.100.9", false)
	age()
	check("after a new listing", "198.51.100.9", true)
	check("after a new listing", "198.51.100.7", false)
	if n := calls.Load(); n != 2 {
		t.Errorf("%d listings, want 2", n)
	}

	set(nil, errors.New("too many open files"))
	age()
	check("while listing fails", "198.51.100.9", true)
	check("while listing fails", "198.51.100.9", true)
	if n := calls.Load(); n != 4 {
		t.Errorf("%d listings after two questions while listing fails, want 4: each of them lists again", n)
	}
	set([]netip.Addr{ip("198.51.100.10")}, nil)
	check("once listing works again", "198.51.100.10", true)

	// Many questions while the listing changes under them: each sees
	// one set or the other, whole (a listing holds both addresses or
	// neither).
	a, b := ip("192.0.2.1"), ip("192.0.2.2")
	var wg sync.WaitGroup
	var torn atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				if i == 0 {
					set([]netip.Addr{a, b}, nil)
					age()
					set(nil, nil)
					age()
					continue
				}
				s := h.cur.Load()
				_, hasA := s.addrs[a]
				_, hasB := s.addrs[b]
				if hasA != hasB {
					torn.Add(1)
				}
				h.has(a)
			}
		})
	}
	wg.Wait()
	if n := torn.Load(); n != 0 {
		t.Errorf("%d questions saw half a listing", n)
	}
}
