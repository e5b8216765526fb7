package local_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/local"
)

// hostLANAddr returns the first IPv4 address of this machine's interfaces
// that is neither loopback nor link-local: its LAN address, or a bridge's.
func hostLANAddr(t *testing.T) string {
	t.Helper()
	as, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if ip = ip.Unmap(); ok && ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
			return ip.String()
		}
	}
	t.Skip("this machine has no IPv4 address besides loopback and link-local ones")
	return ""
}

// TestEgressKeepsBoxesOffTheHostsLAN: a server on all of the host's
// interfaces is the host's, by its LAN address as by 127.0.0.1. A box of
// a boxd that keeps boxes off the host does not reach it that way under
// allow-all, by HTTP or CONNECT, and is told why. Where the operator lets
// boxes reach the host, a box does reach it by that address; a name in
// allowed_domains that resolves to the address still does not lead
// there, until allowed_cidrs cover it.
func TestEgressKeepsBoxesOffTheHostsLAN(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t) // the proxy relay listens in the box's own network namespace
	lan := hostLANAddr(t)
	var hits atomic.Int32
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "host server")
	}))
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	hs.Listener = l
	hs.Start()
	t.Cleanup(hs.Close)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	target := net.JoinHostPort(lan, port)
	// curl's output ends with the status of the answer to a request or a
	// CONNECT.
	curl := func(b *box.Box, args string) string {
		t.Helper()
		r, err := b.Exec.Command(t.Context(), "curl -sS --max-time 20 -w ' (status %{http_code} %{http_connect})' "+args)
		if err != nil {
			t.Fatal(err)
		}
		return r.Stdout + r.Stderr
	}
	newBox := func(s *browserServer) *box.Box {
		t.Helper()
		b, err := boxClient(t, s).Create(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	off := newBox(newBrowserServer(t, "", func(c *local.Config) { c.AllowHostLoopback = false }))
	if out := curl(off, "http://"+target+"/"); !strings.Contains(out, "boxd egress: "+lan+" is not reachable from a box: it is this machine's own address") ||
		!strings.Contains(out, "-allow-host-loopback") || !strings.Contains(out, "(status 403 000)") {
		t.Errorf("HTTP to the host's %s from a box of a boxd that keeps boxes off the host: %q, want a 403 saying it is this machine's and what opens it", target, out)
	}
	if out := curl(off, "-p http://"+target+"/"); !strings.Contains(out, "(status 000 403)") {
		t.Errorf("CONNECT to the host's %s from a box of a boxd that keeps boxes off the host: %q, want a 403", target, out)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the host's server got %d requests by its LAN address from a box of a boxd that keeps boxes off the host", n)
	}
	logs, err := off.Logs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	logged := false
	for _, e := range logs {
		logged = logged || strings.Contains(e.Message, "outbound connection to "+lan+" refused: it is this machine's own address")
	}
	if !logged {
		t.Errorf("the box's log does not say why %s was refused: %+v", lan, logs)
	}

	on := newBrowserServer(t, "", func(c *local.Config) {
		c.EgressResolver = func(_ context.Context, host string) ([]netip.Addr, error) {
			if host == "lan.example.test" {
				return []netip.Addr{netip.MustParseAddr(lan)}, nil
			}
			return nil, fmt.Errorf("test resolver: %s is not a test name", host)
		}
	})
	b := newBox(on)
	if out := curl(b, "http://"+target+"/"); out != "host server (status 200 000)" || hits.Load() != 1 {
		t.Fatalf("HTTP to the host's %s from a box of a boxd that lets boxes reach the host: %q (%d requests), want it reached", target, out, hits.Load())
	}
	byName := "http://lan.example.test:" + port + "/"
	for _, tc := range []struct {
		pol  box.NetworkPolicy
		want string
	}{
		{box.NetworkPolicy{Mode: box.NetworkCustom, AllowedDomains: []string{"*.example.test"}}, "allowed_cidrs that cover the address"},
		{box.NetworkPolicy{Mode: box.NetworkCustom, AllowedDomains: []string{"*.example.test"}, AllowedCIDRs: []string{lan + "/32"}}, "host server (status 200 000)"},
	} {
		if err := b.UpdateNetworkPolicy(t.Context(), tc.pol); err != nil {
			t.Fatal(err)
		}
		before := hits.Load()
		out := curl(b, byName)
		if reached := hits.Load() != before; !strings.Contains(out, tc.want) || reached != strings.HasPrefix(tc.want, "host server") {
			t.Errorf("%s resolving to the host's %s, policy %+v: %q (reached %v), want %q", byName, lan, tc.pol, out, reached, tc.want)
		}
	}
}
