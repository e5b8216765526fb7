package egress

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// hostAddrsTTL is how long the proxy keeps its list of this machine's
// addresses before listing them again: an address that an interface
// gains (a VPN, a new bridge) counts as the host's within it.
const hostAddrsTTL = time.Second

// hostAddrs is the set of addresses assigned to this machine's network
// interfaces: its LAN address, a bridge's (docker0), any other. A box
// that dials one of them reaches the host, whichever interface it is on,
// as surely as by 127.0.0.1. Asking is a map lookup; once the set is
// hostAddrsTTL old, the first caller lists the interfaces again while the
// others wait for it.
type hostAddrs struct {
	list func() ([]netip.Addr, error)
	log  *slog.Logger

	cur     atomic.Pointer[addrSet]
	mu      sync.Mutex // held while listing
	failing bool       // the last listing failed; under mu
}

// addrSet is one listing of the host's addresses, never changed after.
type addrSet struct {
	at    time.Time
	addrs map[netip.Addr]struct{}
}

func newHostAddrs(list func() ([]netip.Addr, error), log *slog.Logger) *hostAddrs {
	if list == nil {
		list = interfaceAddrs
	}
	return &hostAddrs{list: list, log: log}
}

// has reports whether the canonical address ip is one of this machine's.
func (h *hostAddrs) has(ip netip.Addr) bool {
	s := h.cur.Load()
	if s == nil || time.Since(s.at) >= hostAddrsTTL {
		s = h.refresh()
	}
	_, ok := s.addrs[ip]
	return ok
}

// refresh lists the host's addresses, unless another caller just did. If
// listing fails, the last good set stays in use and the next caller
// tries again.
func (h *hostAddrs) refresh() *addrSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.cur.Load()
	if old != nil && time.Since(old.at) < hostAddrsTTL {
		return old
	}
	as, err := h.list()
	if err != nil {
		if !h.failing {
			h.log.Warn("egress: cannot list this machine's addresses; using the last list", "err", err)
		}
		h.failing = true
		if old == nil {
			return &addrSet{}
		}
		return old
	}
	h.failing = false
	s := &addrSet{at: time.Now(), addrs: make(map[netip.Addr]struct{}, len(as))}
	for _, a := range as {
		s.addrs[Canonical(a)] = struct{}{}
	}
	h.cur.Store(s)
	return s
}

// interfaceAddrs returns the addresses of every interface of this
// machine, up or down.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr)
		}
	}
	return out, nil
}
