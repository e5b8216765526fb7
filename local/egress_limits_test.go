package local_test

// Attacks from a box on what boxd keeps for it and of itself behind its
// egress proxy: upstream connections that pile up, and boxd's own
// listeners besides its API.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/local"
)

// boxClient is an SDK client of s.
func boxClient(t *testing.T, s *browserServer) *box.Client {
	t.Helper()
	c, err := box.NewClient(box.WithAPIKey(s.key), box.WithBaseURL(s.url), box.WithTelemetry(false))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keepAliveProbe sends n keep-alive requests on one connection to the
// box's proxy relay, each to a host name of its own (h0.test, h1.test,
// ...) at port, and prints how many were answered 200 "ok".
const keepAliveProbe = `import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
f = s.makefile("rb")
ok = 0
for i in range(n):
    h = "h%d.test:%d" % (i, port)
    s.sendall(("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n" % (h, h)).encode())
    status, length = f.readline(), 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode().partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    if f.read(length) == b"ok" and status.startswith(b"HTTP/1.1 200"):
        ok += 1
print(ok)
`

// TestEgressIdleUpstreamStaysInItsBox: a box sends 2,000 keep-alive
// requests on one connection to its proxy, each to a host name of its
// own that a wildcard resolves to a server on the host. boxd keeps a few
// of the upstream connections for reuse, not one per host: its
// descriptors grow by a bounded number, and another box keeps its
// network.
//
// It counts the whole test binary's descriptors, so it does not run in
// parallel (see TestEgressFloodStaysInItsBox).
func TestEgressIdleUpstreamStaysInItsBox(t *testing.T) {
	requireRootSandbox(t) // the proxy relay listens in the box's own network namespace
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	s := newBrowserServer(t, "", func(c *local.Config) {
		// Wildcard DNS: every name of .test is the host's loopback.
		c.EgressResolver = func(_ context.Context, host string) ([]netip.Addr, error) {
			if strings.HasSuffix(host, ".test") {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, fmt.Errorf("test resolver: %s is not a test name", host)
		}
	})
	c := boxClient(t, s)
	probe, err := c.Create(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Create(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	curl := "curl -sS --max-time 20 http://other.test:" + port + "/"
	if got := mustExec(t, other, curl); got != "ok" {
		t.Fatalf("egress before the probe = %q", got)
	}
	if err := probe.Files.WriteText(t.Context(), "/tmp/probe.py", keepAliveProbe); err != nil {
		t.Fatal(err)
	}
	mustExec(t, probe, "true") // the exec path's own connections are open before the count

	before := openFDs(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
				peak.Store(max(peak.Load(), int64(len(ents))))
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	const hosts = 2000
	got := mustExec(t, probe, "python3 /tmp/probe.py "+port+" "+strconv.Itoa(hosts))
	after := openFDs(t)
	close(stop)
	wg.Wait()
	if strings.TrimSpace(got) != strconv.Itoa(hosts) {
		t.Errorf("the probe's requests answered 200 ok: %s, want %d", got, hosts)
	}
	t.Logf("descriptors: %d before the probe, %d at most during it, %d after it", before, peak.Load(), after)
	// The proxy keeps 32 idle upstream connections of a box and has one
	// in use; this process holds both of their ends (the server is the
	// test's), and the rest of the test binary needs some slack.
	const bound = 2*(32+1) + 64
	if grew := int(max(peak.Load(), int64(after))) - before; grew > bound {
		t.Errorf("boxd's descriptors grew by %d with one box asking for %d hosts on one connection; want at most %d", grew, hosts, bound)
	}
	if got := mustExec(t, other, curl); got != "ok" {
		t.Errorf("the other box's egress after the probe = %q", got)
	}
}

// TestEgressKeepsBoxesOffSSH: boxd's SSH server, like its API, is out of
// every box's reach, even where boxes may reach the host's loopback and
// their policy allows everything: by the host's alias, by loopback
// addresses, by HTTP and by CONNECT.
func TestEgressKeepsBoxesOffSSH(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t) // the proxy relay listens in the box's own network namespace
	// A boxd whose boxes may reach the host's loopback.
	s := newBrowserServer(t, "", nil)
	sshPort := serveSSH(t, s)
	hostPort, hits := hostServer(t)
	b, err := boxClient(t, s).Create(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Through the proxy relay, as any program of the box may: the status
	// line of a CONNECT, and whether an SSH server spoke behind it.
	const connect = `import socket, sys
for target in sys.argv[1:]:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    got = b""
    try:
        while b"\r\n\r\n" not in got or got.startswith(b"HTTP/1.1 200") and b"SSH-" not in got:
            if b"\r\n\r\n" in got:
                s.settimeout(2) # for the server behind the tunnel to speak
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    s.close()
    print(target, got.split(b"\r\n")[0].decode(), "ssh" if b"SSH-" in got else "-")
`
	if err := b.Files.WriteText(t.Context(), "/tmp/connect.py", connect); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, h := range []string{"host.boxd.internal", "127.0.0.1", "0.0.0.0", "[::ffff:127.0.0.1]"} {
		targets = append(targets, h+":"+sshPort)
	}
	out := mustExec(t, b, "python3 /tmp/connect.py "+strings.Join(targets, " ")+" host.boxd.internal:"+hostPort)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(targets)+1 {
		t.Fatalf("CONNECT probe printed %q", out)
	}
	for i, target := range targets {
		if want := target + " HTTP/1.1 403 Forbidden -"; lines[i] != want {
			t.Errorf("CONNECT to boxd's SSH port from a box: %q, want %q", lines[i], want)
		}
	}
	// The switch is on: the host's other services are reached.
	if want := "host.boxd.internal:" + hostPort + " HTTP/1.1 200 Connection established -"; lines[len(targets)] != want {
		t.Errorf("CONNECT to a host server from a box: %q, want %q", lines[len(targets)], want)
	}
	r, err := b.Exec.Command(t.Context(), "curl -sS --max-time 10 http://host.boxd.internal:"+sshPort+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Stdout, "boxd itself") {
		t.Errorf("HTTP to boxd's SSH port from a box: exit %d, %q %q; want a 403 saying it is boxd itself", r.ExitCode, r.Stdout, r.Stderr)
	}
	if got := mustExec(t, b, "curl -sS --max-time 10 http://host.boxd.internal:"+hostPort+"/"); got != "host server\n" || hits.Load() != 1 {
		t.Errorf("HTTP to a host server from a box = %q (%d requests), want it reached", got, hits.Load())
	}
}
