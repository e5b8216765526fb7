package image

import (
	"net"
	"net/netip"
	"testing"
)

// TestRefusal: the addresses a pull does not connect to but at its
// registry: this machine's (also as IPv4-mapped IPv6, or by its
// interfaces' addresses), link-local ones (a cloud's metadata service),
// and private networks'.
func TestRefusal(t *testing.T) {
	refused := []string{"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::", "169.254.169.254", "fe80::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "fd00::1",
		"100.100.100.200", "100.64.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "2002:a9fe:a9fe::1"}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				refused = append(refused, n.IP.String())
			}
		}
	}
	for _, a := range refused {
		if refusal(netip.MustParseAddr(a)) == "" {
			t.Errorf("%s is not refused", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "104.16.0.1", "2606:4700::1", "64:ff9b::808:808", "100.128.0.1"} {
		if why := refusal(netip.MustParseAddr(a)); why != "" {
			t.Errorf("%s is refused: %s", a, why)
		}
	}
}
