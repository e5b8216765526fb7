package box

import (
	"context"
	"net/netip"
	"slices"
	"strings"
)

// validate checks a policy the way the server does, so that a mistake is
// reported before any request.
func (p NetworkPolicy) validate() error {
	lists := len(p.AllowedDomains) + len(p.AllowedCIDRs) + len(p.DeniedCIDRs)
	switch p.Mode {
	case NetworkAllowAll, NetworkDenyAll:
		if lists > 0 {
			return invalidf("box: AllowedDomains, AllowedCIDRs and DeniedCIDRs apply only to NetworkCustom, not %s", p.Mode)
		}
		return nil
	case NetworkCustom:
	case "":
		return invalidf("box: NetworkPolicy.Mode is required")
	default:
		return invalidf("box: unknown network mode %q (want allow-all, deny-all or custom)", p.Mode)
	}
	if lists == 0 {
		return invalidf("box: a custom network policy needs AllowedDomains, AllowedCIDRs or DeniedCIDRs (NetworkDenyAll refuses everything)")
	}
	for _, d := range p.AllowedDomains {
		name := strings.TrimPrefix(strings.TrimSpace(d), "*.")
		if name == "" || strings.ContainsAny(name, "/:*@ ") {
			return invalidf("box: AllowedDomains: %q is not a host name or a *.domain pattern", d)
		}
	}
	for _, list := range [][]string{p.AllowedCIDRs, p.DeniedCIDRs} {
		for _, c := range list {
			if _, err := netip.ParsePrefix(c); err != nil {
				if _, err := netip.ParseAddr(c); err != nil {
					return invalidf("box: %q is not a CIDR range such as 203.0.113.0/24 or an IP address", c)
				}
			}
		}
	}
	return nil
}

func (p NetworkPolicy) clone() NetworkPolicy {
	p.AllowedDomains = slices.Clone(p.AllowedDomains)
	p.AllowedCIDRs = slices.Clone(p.AllowedCIDRs)
	p.DeniedCIDRs = slices.Clone(p.DeniedCIDRs)
	return p
}

// NetworkPolicy returns the box's outbound network policy as last known
// to this Box: from creation, Get, Refresh or a successful
// UpdateNetworkPolicy. It makes no request.
func (b *Box) NetworkPolicy() NetworkPolicy {
	b.st.mu.RLock()
	defer b.st.mu.RUnlock()
	return b.st.info.NetworkPolicy.clone()
}

// UpdateNetworkPolicy replaces the box's outbound network policy (PUT
// /v2/box/{id}/config/network-policy) after checking it: the mode must be
// known, the lists go only with NetworkCustom, which needs at least one,
// and CIDRs must parse.
//
// A custom policy with AllowedDomains or AllowedCIDRs lets the box reach
// only hosts matching a domain ("api.example.com", or "*.example.com" for
// its subdomains) or addresses in a range; DeniedCIDRs always wins; with
// only DeniedCIDRs, everything outside them is allowed. On boxd the change
// applies at once, to new connections and to open ones.
func (b *Box) UpdateNetworkPolicy(ctx context.Context, p NetworkPolicy, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := p.validate(); err != nil {
		return err
	}
	if err := none(b.c.api.UpdateNetworkPolicy(ctx, b.id, *p.wire())); err != nil {
		return err
	}
	b.st.mu.Lock()
	b.st.info.NetworkPolicy = p.clone()
	b.st.mu.Unlock()
	return nil
}
