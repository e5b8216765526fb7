package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// DefaultStallTimeout is Options.StallTimeout when it is zero.
const DefaultStallTimeout = time.Minute

// ErrStalled is the cause of a pull that failed because its registry
// stopped sending (Options.StallTimeout).
var ErrStalled = errors.New("the registry stopped sending")

// Bounds of what a pull reads whole into memory.
const (
	// MaxManifestSize is the most a pull reads of a manifest or an index:
	// a larger one is refused (ErrTooLarge) before it is read, by its
	// Content-Length, or once that much is read without its end.
	MaxManifestSize = 4 << 20
	// MaxConfigSize is the most a pull reads of an image's configuration:
	// a manifest that names a larger one is refused (ErrTooLarge) before
	// the configuration is fetched. (Every blob is read to its size in the
	// manifest, and no further.)
	MaxConfigSize = 8 << 20
)

// pullTransport carries the requests of one pull (Store.transport).
type pullTransport struct {
	*http.Transport
}

// RoundTrip bounds the manifests it fetches to MaxManifestSize: an answer
// to a GET of a manifest, or to a redirect from one.
func (t pullTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Transport.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !isManifest(req) {
		return resp, err
	}
	if resp.ContentLength > MaxManifestSize {
		resp.Body.Close()
		return nil, manifestTooLarge(fmt.Sprintf("of %s", sizeText(resp.ContentLength)))
	}
	resp.Body = &manifestBody{ReadCloser: resp.Body, left: MaxManifestSize}
	return resp, nil
}

// isManifest reports whether req, or the request that a redirect made it
// from, is for a manifest (/v2/<name>/manifests/<reference>).
func isManifest(req *http.Request) bool {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	parts := strings.Split(strings.TrimSuffix(req.URL.Path, "/"), "/")
	return len(parts) >= 5 && parts[1] == "v2" && parts[len(parts)-2] == "manifests"
}

func manifestTooLarge(what string) error {
	return fmt.Errorf("%w: a manifest %s, more than the %s boxd reads", ErrTooLarge, what, sizeText(MaxManifestSize))
}

// manifestBody is a manifest's body, which fails past left bytes.
type manifestBody struct {
	io.ReadCloser
	left int64
}

func (b *manifestBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		// All it may have is read: more is too much.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, manifestTooLarge("that does not end there")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// ErrAddressRefused is the cause of a pull that a redirect, or a registry's
// pointer to another host (its token service), sent to an address of this
// machine or of its private networks.
var ErrAddressRefused = errors.New("address refused")

// transport returns the HTTP transport of one pull of an image of reg.
//
// It connects to reg, which the operator named, as it is, wherever it is
// (a registry on loopback included), and to the operator's proxy. Every
// other host (a redirect's, a token service's) is checked on the address
// actually dialled, after resolution (net.Dialer.Control), so that a name
// that resolves to this machine is refused as its address is: loopback,
// link-local (a cloud's metadata service), private and unspecified
// addresses and those of this machine's interfaces. go-containerregistry
// refuses such redirects only when they name an address.
//
// Its connections fail a read that gets nothing for the stall timeout. It
// speaks HTTP/1.1 alone: there a response body is read only when the pull
// asks for more, so a read that waits is a registry that does not send,
// never a pull busy unpacking (HTTP/2 reads every stream of a connection
// ahead, in a goroutine of its own).
func (s *Store) transport(reg name.Registry) pullTransport {
	stall := s.opts.StallTimeout
	g := &guard{trusted: map[string]bool{}}
	if _, _, err := net.SplitHostPort(reg.RegistryStr()); err == nil {
		g.trust(hostPort(&url.URL{Scheme: reg.Scheme(), Host: reg.RegistryStr()}))
	} else {
		for _, scheme := range []string{"https", "http"} {
			g.trust(hostPort(&url.URL{Scheme: scheme, Host: reg.RegistryStr()}))
		}
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	checked := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	tr := &http.Transport{
		Proxy: g.proxy,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dial := checked
			if g.trusts(addr) {
				dial = d
			}
			c, err := dial.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stallConn{Conn: c, stall: stall}, nil
		},
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          8,
		IdleConnTimeout:       30 * time.Second,
		Protocols:             new(http.Protocols),
	}
	tr.Protocols.SetHTTP1(true)
	return pullTransport{tr}
}

// stallConn is a connection whose reads fail with ErrStalled when nothing
// comes for stall: each read, and each write (a request, after which an
// answer is due), gives the peer that long again.
type stallConn struct {
	net.Conn
	stall time.Duration
}

func (c *stallConn) Read(p []byte) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%w: nothing came from %s for %v", ErrStalled, c.RemoteAddr(), c.stall)
	}
	return n, err
}

func (c *stallConn) Write(p []byte) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// guard keeps a pull off this machine and its networks, but for the hosts
// it trusts (Store.transport).
type guard struct {
	mu      sync.Mutex
	trusted map[string]bool // host:port, the host in lower case
}

func (g *guard) trust(hostport string) {
	g.mu.Lock()
	g.trusted[strings.ToLower(hostport)] = true
	g.mu.Unlock()
}

func (g *guard) trusts(hostport string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.trusted[strings.ToLower(hostport)]
}

// hostPort is u's host and port (the scheme's, when it has none).
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// control refuses to connect to a refused address.
func (g *guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	return refuse(ap.Addr())
}

// proxy is the proxy of the environment (HTTPS_PROXY and the others), the
// operator's, which is trusted. A request that goes through it is
// connected by it, not by boxd: boxd looks at the addresses of its host
// first.
func (g *guard) proxy(req *http.Request) (*url.URL, error) {
	u, err := http.ProxyFromEnvironment(req)
	if err != nil || u == nil {
		return u, err
	}
	g.trust(hostPort(u))
	if g.trusts(hostPort(req.URL)) {
		return u, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(req.Context(), "ip", req.URL.Hostname())
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := refuse(a); err != nil {
			return nil, fmt.Errorf("%s: %w", req.URL.Hostname(), err)
		}
	}
	return u, nil
}

// refuse says why a pull may not connect to ip (but at its registry), or
// returns nil.
func refuse(ip netip.Addr) error {
	why := refusal(ip)
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s is %s; a pull connects to such an address only at the registry its reference names, never by a redirect or at another host", ErrAddressRefused, ip, why)
}

// Address ranges that refusal decodes or refuses besides those netip
// names.
var (
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10")
)

// refusal says what ip is, when it is of this machine or of its
// networks, or returns "".
func refusal(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	// An IPv4 address carried in IPv6 (NAT64, 6to4) reaches that IPv4
	// address: it is what is checked.
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			ip = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(ip):
			ip = netip.AddrFrom4([4]byte(b[2:6]))
		}
	}
	switch {
	case sharedSpace.Contains(ip):
		return "a carrier-grade NAT address (where some clouds serve instance metadata)"
	case ip.IsUnspecified():
		return "unspecified (this machine)"
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "a link-local address"
	case ip.IsPrivate():
		return "a private address"
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if own, ok := netip.AddrFromSlice(n.IP); ok && own.Unmap() == ip {
				return "an address of this machine"
			}
		}
	}
	return ""
}
