// Package egress is boxd's outbound proxy. A box's network namespace has
// only loopback; its programs reach everything else through an HTTP proxy
// (absolute-URI requests and CONNECT) that boxd serves for that box on a
// unix socket, and that the in-box agent relays from 127.0.0.1:3128. The
// proxy applies the box's network policy to every connection it opens,
// reading the policy afresh each time, and adds the box's attach_headers
// to HTTPS requests for matching hosts by terminating TLS with a
// certificate from boxd's own CA.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Network policy modes, as on the wire.
const (
	ModeAllowAll = "allow-all"
	ModeDenyAll  = "deny-all"
	ModeCustom   = "custom"
)

// HostAlias is a name the proxy resolves to the host's loopback address,
// so that a box can reach a service listening on 127.0.0.1 of the machine
// boxd runs on (a test server, say) when its policy allows it. It is the
// one name that allowed_domains can open the host with: any other name
// that resolves to a loopback or link-local address leads there only if
// allowed_cidrs cover the address (see Policy.Permits).
const HostAlias = "host.boxd.internal"

// Policy is a compiled network policy.
type Policy struct {
	mode    string
	domains []string // lower case, exact or "*.suffix"
	allowed []netip.Prefix
	denied  []netip.Prefix
}

// Mode returns the policy's mode.
func (p *Policy) Mode() string { return p.mode }

// AllowAll and DenyAll are the two policies without lists.
var (
	AllowAll = &Policy{mode: ModeAllowAll}
	DenyAll  = &Policy{mode: ModeDenyAll}
)

// Compile checks a policy and prepares it for matching. The three lists
// apply only to ModeCustom; with another mode they must be empty. A custom
// policy needs at least one entry: with allowed_domains or allowed_cidrs
// it allows only what they name, and with only denied_cidrs it allows
// every destination outside them.
func Compile(mode string, domains, allowedCIDRs, deniedCIDRs []string) (*Policy, error) {
	switch mode {
	case ModeAllowAll, ModeDenyAll:
		if len(domains)+len(allowedCIDRs)+len(deniedCIDRs) > 0 {
			return nil, fmt.Errorf("allowed_domains, allowed_cidrs and denied_cidrs apply only to mode custom, not %s", mode)
		}
		if mode == ModeAllowAll {
			return AllowAll, nil
		}
		return DenyAll, nil
	case ModeCustom:
	case "":
		return nil, errors.New("mode is required (allow-all, deny-all or custom)")
	default:
		return nil, fmt.Errorf("mode must be allow-all, deny-all or custom, not %q", mode)
	}
	if len(domains)+len(allowedCIDRs)+len(deniedCIDRs) == 0 {
		return nil, errors.New("a custom policy needs allowed_domains, allowed_cidrs or denied_cidrs (use deny-all to refuse everything)")
	}
	p := &Policy{mode: ModeCustom}
	for _, d := range domains {
		n, err := NormalizePattern(d)
		if err != nil {
			return nil, fmt.Errorf("allowed_domains: %w", err)
		}
		p.domains = append(p.domains, n)
	}
	var err error
	if p.allowed, err = parsePrefixes(allowedCIDRs); err != nil {
		return nil, fmt.Errorf("allowed_cidrs: %w", err)
	}
	if p.denied, err = parsePrefixes(deniedCIDRs); err != nil {
		return nil, fmt.Errorf("denied_cidrs: %w", err)
	}
	return p, nil
}

func parsePrefixes(in []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(in))
	for _, s := range in {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Addr().Is4In6() {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		// A single address stands for itself.
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR range such as 203.0.113.0/24 or an IP address", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// NormalizePattern checks a host pattern, an exact host name
// ("api.example.com") or a wildcard for its subdomains ("*.example.com"),
// and returns it in lower case without a trailing dot.
func NormalizePattern(s string) (string, error) {
	orig := s
	s = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
	name, wild := strings.CutPrefix(s, "*.")
	if _, err := netip.ParseAddr(name); err == nil {
		return "", fmt.Errorf("%q is an IP address, not a domain (use a CIDR range)", orig)
	}
	if !validHostname(name) {
		return "", fmt.Errorf("%q is not a host name or a *.domain pattern", orig)
	}
	if wild {
		return "*." + name, nil
	}
	return name, nil
}

func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// normalizeHost lower-cases a destination host and drops a trailing dot.
func normalizeHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// MatchHost reports whether host matches pattern (as returned by
// NormalizePattern): exactly, or for "*.example.com" as any subdomain of
// example.com at any depth (but not example.com itself).
func MatchHost(pattern, host string) bool {
	host = normalizeHost(host)
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return host == pattern
}

// allowsName reports whether host is one of the policy's allowed domains.
func (p *Policy) allowsName(host string) bool {
	for _, d := range p.domains {
		if MatchHost(d, host) {
			return true
		}
	}
	return false
}

// Canonical returns the address a connection to ip really reaches: an
// IPv4-mapped IPv6 address is its IPv4 address, and the unspecified
// addresses (0.0.0.0, ::), which Linux connects to the local host, are
// the loopback ones. Policies are checked, and connections made, on it.
func Canonical(ip netip.Addr) netip.Addr {
	ip = ip.Unmap().WithZone("")
	switch {
	case ip == netip.IPv4Unspecified():
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case ip == netip.IPv6Unspecified():
		return netip.IPv6Loopback()
	}
	return ip
}

// hostOnly reports whether the canonical address ip reaches the machine
// boxd runs on, or its link (a cloud's metadata service), rather than the
// network, whatever the machine's interfaces: a loopback or link-local
// address. The proxy counts the addresses of this machine's interfaces
// as the host's too (see Proxy.refuses).
func hostOnly(ip netip.Addr) bool {
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast()
}

// Permits reports whether the policy lets the box connect to ip, reached
// under the name host (which may be the address itself). It decides by
// the box's policy alone, taking loopback and link-local addresses for
// the host's; the proxy also counts every address of this machine's
// interfaces as the host's, and keeps boxes off the host (see
// Config.HostLoopback) and off boxd itself.
func (p *Policy) Permits(host string, ip netip.Addr) bool {
	return p.refusal(host, ip, hostOnly(Canonical(ip))) == ""
}

// refusal says why the policy refuses ip under the name host, where
// toHost tells whether ip is the host's (see Proxy.refuses): "" when it
// allows it, reasonNameToHost when only the address keeps an allowed name
// from it, and otherwise the policy's mode.
//
// A name in allowed_domains opens the network, not the machine boxd runs
// on: whoever answers for the name's domain picks its addresses, and may
// point it at the host's loopback or LAN address (DNS rebinding). Such an
// address is allowed only by allowed_cidrs that cover it, or under
// HostAlias, which boxd resolves itself and which means the host by
// design.
func (p *Policy) refusal(host string, ip netip.Addr, toHost bool) string {
	switch p.mode {
	case ModeAllowAll:
		return ""
	case ModeCustom:
	default:
		return p.mode
	}
	ip = Canonical(ip)
	for _, d := range p.denied {
		if d.Contains(ip) {
			return p.mode
		}
	}
	if len(p.domains) == 0 && len(p.allowed) == 0 {
		return ""
	}
	for _, a := range p.allowed {
		if a.Contains(ip) {
			return ""
		}
	}
	if p.allowsName(host) {
		if toHost && normalizeHost(host) != HostAlias {
			return reasonNameToHost
		}
		return ""
	}
	return p.mode
}

// mayResolve reports whether the policy lets the box have host looked
// up: a lookup is itself traffic that leaves the box (a name can carry
// data to whoever answers for its domain). Allow-all, and a custom policy
// with only denied_cidrs, allow every destination and so every lookup; a
// custom policy with allow lists allows looking up only the names in
// allowed_domains (with allowed_cidrs alone, only addresses can be
// reached); deny-all allows none.
func (p *Policy) mayResolve(host string) bool {
	switch p.mode {
	case ModeAllowAll:
		return true
	case ModeCustom:
		return len(p.domains) == 0 && len(p.allowed) == 0 || p.allowsName(host)
	}
	return false
}

// DeniedError is returned when a destination is refused: by the box's
// network policy, or because it is the host or boxd itself.
type DeniedError struct {
	Host string
	Mode string
	// Reason, when set, is why a destination that the policy may allow is
	// refused anyway.
	Reason string
}

func (e *DeniedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("boxd egress: %s is not reachable from a box: %s", e.Host, e.Reason)
	}
	return fmt.Sprintf("boxd egress: %s is not allowed by the box's network policy (%s)", e.Host, e.Mode)
}

// Reasons a destination is refused that the policy's mode alone does not
// explain.
const (
	reasonSelf = "it is boxd itself"
	reasonHost = "it is this machine's own address (loopback, link-local or one of its network interfaces'), " +
		"which boxd keeps boxes off unless its operator opens it to them (boxd -allow-host-loopback)"
	// reasonNameToHost is the policy's own refusal of a name it allows
	// that resolves to the host.
	reasonNameToHost = "it resolves to this machine's own address (loopback, link-local or one of its network interfaces'), " +
		"which a name in allowed_domains does not open; only allowed_cidrs that cover the address do"
)
