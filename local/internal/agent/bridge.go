package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/upstash/box-go/local/internal/egress"
)

// BridgePath is the agent's internal route that boxd uses to reach a TCP
// port inside the box (a public URL's target): a GET with
// `Upgrade: boxd-tcp` and the query `port=N` is answered, once the agent
// has connected to 127.0.0.1:N in the box, with 101 Switching Protocols,
// after which the connection carries the raw bytes both ways. When nothing
// listens on the port the answer is 502 with the API's error body. Like
// ProcessPath it is not part of the public API.
const BridgePath = "/internal/bridge"

// HealthPath is the route that boxd's liveness check asks (Client.Health):
// the agent answers it at once, 204, touching nothing of the box. Like
// ProcessPath it is not part of the public API.
const HealthPath = "/internal/health"

// BridgeProtocol is the Upgrade token of BridgePath.
const BridgeProtocol = "boxd-tcp"

// ProxyAddr is where the agent listens, inside an isolated box, for the
// box's programs to reach boxd's egress proxy.
const ProxyAddr = "127.0.0.1:3128"

// maxRelays bounds the connections the agent relays to boxd's egress
// proxy at once: boxd serves as many per box (egress.Config.MaxConns).
const maxRelays = 256

// withInternal serves the agent's internal routes that take over the
// connection, and passes everything else to next.
func (a *Agent) withInternal(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case BridgePath:
			a.serveBridge(w, r)
			return
		case HealthPath:
			// boxd's liveness check: answered from memory, touching
			// nothing of the box.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Agent) serveBridge(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !strings.EqualFold(r.Header.Get("Upgrade"), BridgeProtocol) {
		writeError(w, http.StatusBadRequest, "bridge requests are GET with Upgrade: "+BridgeProtocol)
		return
	}
	port, err := strconv.Atoi(r.URL.Query().Get("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "port must be between 1 and 65535")
		return
	}
	if port == a.proxyPort {
		writeError(w, http.StatusForbidden, fmt.Sprintf("port %d is the box's egress proxy and cannot be exposed", port))
		return
	}
	up, err := dialBoxPort(r, port)
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("nothing is listening on port %d in the box (%v)", port, unwrapDial(err)))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		writeError(w, http.StatusInternalServerError, "cannot take over the connection")
		return
	}
	raw, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := io.WriteString(raw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+BridgeProtocol+"\r\n\r\n"); err != nil {
		raw.Close()
		up.Close()
		return
	}
	egress.Relay(egress.WithBuffered(raw, brw.Reader), up)
}

// dialBoxPort connects to a port on the box's loopback, over IPv4 and,
// for servers that listen only there, IPv6.
func dialBoxPort(r *http.Request, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(r.Context(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil, err
	}
	if c6, err6 := d.DialContext(r.Context(), "tcp", net.JoinHostPort("::1", strconv.Itoa(port))); err6 == nil {
		return c6, nil
	}
	return nil, err
}

func unwrapDial(err error) error {
	var se *net.OpError
	if errors.As(err, &se) && se.Err != nil {
		return se.Err
	}
	return err
}

// startEgress listens on cfg.ProxyListen and relays every connection to
// boxd's egress proxy at cfg.EgressSocket. Once it listens, env gives the
// box's processes the proxy variables.
func (a *Agent) startEgress() error {
	if a.cfg.EgressSocket == "" || a.cfg.ProxyListen == "" {
		return nil
	}
	l, err := net.Listen("tcp", a.cfg.ProxyListen)
	if err != nil {
		return fmt.Errorf("egress relay: %w", err)
	}
	a.proxyPort = l.Addr().(*net.TCPAddr).Port
	a.proxyURL = "http://" + l.Addr().String()
	a.noProxy = "localhost,127.0.0.1,::1"
	if h, err := os.Hostname(); err == nil && h != "" && a.cfg.HostRoot == "" {
		// In a box, its own name is its own loopback (/etc/hosts).
		a.noProxy += "," + h
	}
	// One slot per relayed connection: past maxRelays a box's new
	// connections wait in the listen queue, and the descriptors the
	// agent holds for them (six each, with splice's pipes) stay bounded.
	slots := make(chan struct{}, maxRelays)
	go func() {
		for {
			slots <- struct{}{}
			c, err := l.Accept()
			if err != nil {
				<-slots
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				if errors.Is(err, net.ErrClosed) {
					return
				}
				a.log.Warn("egress relay: accept", "err", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			go func() {
				defer func() { <-slots }()
				a.relayEgress(c)
			}()
		}
	}()
	return nil
}

func (a *Agent) relayEgress(c net.Conn) {
	up, err := net.DialTimeout("unix", a.cfg.EgressSocket, 5*time.Second)
	if err != nil {
		// Answer like a proxy would, so that the program says something
		// useful; it is reading an HTTP response to its request.
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nboxd egress proxy unreachable: "+err.Error()+"\n")
		c.Close()
		return
	}
	egress.Relay(c, up)
}

// proxyEnv is what a box's processes get to use the egress proxy and to
// trust boxd's CA.
func (a *Agent) proxyEnv(env map[string]string) {
	if a.proxyURL != "" {
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
			env[k] = a.proxyURL
			env[strings.ToLower(k)] = a.proxyURL
		}
		env["NO_PROXY"] = a.noProxy
		env["no_proxy"] = a.noProxy
		// Node 24 (and late 22.x) use the variables above for fetch and
		// http only when asked to; older Node ignores this one.
		env["NODE_USE_ENV_PROXY"] = "1"
	}
	if b := a.cfg.CABundle; b != "" {
		for _, k := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"} {
			env[k] = b
		}
	}
}
