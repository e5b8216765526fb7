package local_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/upstash/box-go/local"
)

// sshTarget is a boxd serving SSH on a loopback port, with a box to log
// into, for golang.org/x/crypto/ssh clients dialling from chosen source
// addresses (the whole of 127.0.0.0/8 is loopback on Linux).
type sshTarget struct {
	*browserServer
	addr string
	box  string
}

func newSSHTarget(t *testing.T, cfg func(*local.Config)) *sshTarget {
	t.Helper()
	s := newBrowserServer(t, "", cfg)
	port := serveSSH(t, s)
	id := decodeJSON[wireTab](t, "create", s.raw(t).do("POST", "/v2/box", map[string]any{}, nil)).ID
	return &sshTarget{browserServer: s, addr: "127.0.0.1:" + port, box: id}
}

// dialFrom opens a TCP connection to the SSH server from src.
func (d *sshTarget) dialFrom(t *testing.T, src string) net.Conn {
	t.Helper()
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 30 * time.Second}
	c, err := dialer.Dial("tcp", d.addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	return c
}

// login logs in from src with passwords, one attempt per call of next
// (at most tries), and reports the banners the server sent.
func (d *sshTarget) login(t *testing.T, src string, tries int, next func() string, banner func(string)) (*gossh.Client, error) {
	t.Helper()
	return d.loginOn(d.dialFrom(t, src), tries, next, banner)
}

// loginOn is login on a connection of the caller's.
func (d *sshTarget) loginOn(c net.Conn, tries int, next func() string, banner func(string)) (*gossh.Client, error) {
	cfg := &gossh.ClientConfig{
		User:            d.box,
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		Auth: []gossh.AuthMethod{gossh.RetryableAuthMethod(gossh.PasswordCallback(func() (string, error) {
			return next(), nil
		}), tries)},
		BannerCallback: func(msg string) error {
			if banner != nil {
				banner(msg)
			}
			return nil
		},
	}
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	sc, chans, reqs, err := gossh.NewClientConn(c, d.addr, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return gossh.NewClient(sc, chans, reqs), nil
}

// watchedConn notes when a read fails: the server closed the connection.
type watchedConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { close(c.closed) })
	}
	return n, err
}

// loginWithKey logs in from src with the API key.
func (d *sshTarget) loginWithKey(t *testing.T, src string) (*gossh.Client, error) {
	t.Helper()
	return d.login(t, src, 1, func() string { return d.key }, func(msg string) {
		t.Errorf("a banner for a login with the key from %s: %q", src, msg)
	})
}

// echo runs a command in the box over c.
func echo(t *testing.T, c *gossh.Client, word string) {
	t.Helper()
	ss, err := c.NewSession()
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	defer ss.Close()
	out, err := ss.Output("echo " + word)
	if err != nil || string(out) != word+"\n" {
		t.Fatalf("echo %s over ssh: %q, %v", word, out, err)
	}
}

// kept says whether the server keeps c: it then speaks first, its version
// line; a connection it closes at once gets nothing but the end. A
// connection closed later, at its deadline, also speaks first: only the
// caps close one unread.
func kept(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	line, err := bufio.NewReader(c).ReadString('\n')
	switch {
	case err == nil && strings.HasPrefix(line, "SSH-2.0-boxd"):
		return true
	case line == "" && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)):
		return false
	}
	t.Fatalf("neither the server's version nor its close: %q, %v", line, err)
	return false
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

// flood opens n connections from each of srcs that never send a byte,
// and returns those the server keeps; it closes the others.
func (d *sshTarget) flood(t *testing.T, n int, srcs ...string) []net.Conn {
	t.Helper()
	var all, keep []net.Conn
	for _, src := range srcs {
		for range n {
			all = append(all, d.dialFrom(t, src))
		}
	}
	for _, c := range all {
		if kept(t, c) {
			keep = append(keep, c)
		} else {
			c.Close()
		}
	}
	t.Cleanup(func() {
		for _, c := range keep {
			c.Close()
		}
	})
	return keep
}

// TestSSHPreAuthFlood floods boxd's SSH port with connections that never
// send a byte: past 16 from one address, and past the bound of all, they
// are closed at once, unread, so the flood holds no more descriptors than
// the caps; a client from another address logs in and runs a command
// all the while; and the room of a connection that goes is free again.
// Before the caps, boxd kept every such connection open for ever.
func TestSSHPreAuthFlood(t *testing.T) {
	t.Parallel()
	d := newSSHTarget(t, func(c *local.Config) {
		c.SSHAuthTimeout = -1 // no deadline: only the caps close connections here
		c.SSHMaxUnauthenticated = 48
	})
	one := d.flood(t, 200, "127.0.0.2")
	if len(one) != local.DefaultSSHMaxUnauthenticatedPerIP {
		t.Fatalf("200 silent connections from one address: the server keeps %d, want %d", len(one), local.DefaultSSHMaxUnauthenticatedPerIP)
	}
	c, err := d.loginWithKey(t, "127.0.0.1")
	if err != nil {
		t.Fatalf("a login from another address during the flood: %v", err)
	}
	echo(t, c, "during-the-flood")
	c.Close()

	// Ten more addresses, ten each: the bound of all keeps 48 - 16.
	var srcs []string
	for i := range 10 {
		srcs = append(srcs, fmt.Sprintf("127.0.1.%d", i+1))
	}
	many := d.flood(t, 10, srcs...)
	if len(many) != 48-len(one) {
		t.Fatalf("100 silent connections from ten addresses with %d of 48 places taken: the server keeps %d, want %d", len(one), len(many), 48-len(one))
	}
	if c, err := d.loginWithKey(t, "127.0.0.1"); err == nil {
		c.Close()
		t.Fatal("a login with every place taken went through")
	}
	// The room of the connections that go is free again.
	for _, c := range one {
		c.Close()
	}
	for i := 0; ; i++ {
		c, err := d.loginWithKey(t, "127.0.0.1")
		if err == nil {
			echo(t, c, "after-the-flood")
			c.Close()
			break
		}
		if i == 300 {
			t.Fatalf("no login once the first flood's connections closed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSSHAuthDeadline: a connection that has not authenticated within
// SSHAuthTimeout of its accept is closed, whether it is silent, stops
// after its version, or after a wrong password; one that authenticated
// stays, and the room of those closed is free again.
func TestSSHAuthDeadline(t *testing.T) {
	t.Parallel()
	d := newSSHTarget(t, func(c *local.Config) { c.SSHAuthTimeout = 3 * time.Second })
	early, err := d.loginWithKey(t, "127.0.0.1")
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	defer early.Close()

	silent := d.flood(t, 20, "127.0.0.2")
	if len(silent) != local.DefaultSSHMaxUnauthenticatedPerIP {
		t.Fatalf("the server keeps %d of 20 silent connections from one address, want %d", len(silent), local.DefaultSSHMaxUnauthenticatedPerIP)
	}
	versioned := d.dialFrom(t, "127.0.0.3")
	defer versioned.Close()
	if _, err := versioned.Write([]byte("SSH-2.0-stops-here\r\n")); err != nil {
		t.Fatal(err)
	}
	// A client that, after a wrong password, waits: x/crypto/ssh reads
	// on meanwhile, and so sees the server close the connection.
	wc := &watchedConn{Conn: d.dialFrom(t, "127.0.0.4"), closed: make(chan struct{})}
	wrong := make(chan error, 1)
	go func() {
		calls := 0
		c, err := d.loginOn(wc, 2, func() string {
			if calls++; calls > 1 {
				select {
				case <-wc.closed:
				case <-time.After(60 * time.Second):
				}
			}
			return "wrong"
		}, nil)
		if err == nil {
			c.Close()
		}
		wrong <- err
	}()

	for i, c := range append(silent, versioned) {
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("unauthenticated connection %d is not closed: %v", i, err)
		}
	}
	if err := <-wrong; err == nil {
		t.Error("a client that stopped after a wrong password got in")
	}
	select {
	case <-wc.closed:
	default:
		t.Error("the connection of a client that stopped after a wrong password is not closed")
	}
	echo(t, early, "past-its-deadline") // the connection of 'early' is older than the others
	c, err := d.loginWithKey(t, "127.0.0.2")
	if err != nil {
		t.Fatalf("a login from the flood's address once its connections were closed: %v", err)
	}
	c.Close()
}

// TestSSHBruteForce guesses the key from one address as fast as
// x/crypto/ssh can: after 5 failures the address is locked out for a time
// that doubles with each failure, while which its attempts are refused
// unchecked, with a banner that says so, the right key's too; a client
// from another address logs in all the while. No password reaches the
// log. Before, every guess was checked, thousands a second.
func TestSSHBruteForce(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	d := newSSHTarget(t, func(c *local.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	const guesses = 240
	attempts, refused := 0, 0
	start := time.Now()
	for attempts < guesses {
		_, err := d.login(t, "127.0.0.2", 6, func() string {
			attempts++
			return "guess-" + randHex(4)
		}, func(msg string) {
			if !strings.Contains(msg, "too many failed logins from 127.0.0.2") {
				t.Errorf("banner %q", msg)
			}
			refused++
		})
		if err == nil {
			t.Fatal("a guess got in")
		}
	}
	elapsed := time.Since(start)
	// Checked: 5 free failures, then one each time a lock-out of 1 s,
	// 2 s, 4 s... ends, which is at most 1+log2(elapsed+1) in the time
	// the guesses took; slowness only lowers the count.
	checked := attempts - refused
	if limit := 6 + int(math.Log2(elapsed.Seconds()+1)) + 1; checked > limit {
		t.Errorf("%d guesses from one address in %v: %d checked, want at most %d", attempts, elapsed.Round(time.Millisecond), checked, limit)
	}
	t.Logf("%d guesses from one address in %v: %d checked, %d refused unchecked", attempts, elapsed.Round(time.Millisecond), checked, refused)

	// Another address logs in, and runs a command.
	c, err := d.loginWithKey(t, "127.0.0.1")
	if err != nil {
		t.Fatalf("a login from another address: %v", err)
	}
	echo(t, c, "unaffected")
	c.Close()

	// The right key from the locked-out address is refused too: sent
	// right after a refusal's banner, it gets one of its own. (Should
	// the lock-out end in between, it gets in; then the next failure
	// locks the address out for longer, and the test tries again.)
	for i := 0; ; i++ {
		sawBanner, sentKey, refusedKey := false, false, false
		c, err := d.login(t, "127.0.0.2", 6, func() string {
			if sawBanner && !sentKey {
				sentKey = true
				return d.key
			}
			return "guess-" + randHex(4)
		}, func(string) {
			sawBanner = true
			if sentKey {
				refusedKey = true
			}
		})
		if err == nil {
			c.Close()
		} else if refusedKey {
			break
		}
		if i == 20 {
			t.Fatal("the key from the locked-out address was never refused")
		}
	}
	// OpenSSH's ssh shows the banner: the user learns why.
	if _, err := exec.LookPath("ssh"); err == nil {
		dir := t.TempDir()
		askpass := filepath.Join(dir, "askpass")
		if err := os.WriteFile(askpass, []byte("#!/bin/sh\necho "+d.key+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(d.addr)
		for i := 0; ; i++ {
			cmd := exec.Command("ssh", "-F", "/dev/null", "-p", port, "-b", "127.0.0.2",
				"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
				"-o", "PreferredAuthentications=password", "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1",
				d.box+"@127.0.0.1", "true")
			cmd.Env = append(os.Environ(), "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force")
			out, err := cmd.CombinedOutput()
			if err != nil && strings.Contains(string(out), "boxd: too many failed logins from 127.0.0.2: try again in") {
				break
			}
			if i == 20 {
				t.Fatalf("ssh from the locked-out address: %v\n%s", err, out)
			}
			// The lock-out ended: a wrong guess starts the next.
			_, _ = d.login(t, "127.0.0.2", 1, func() string { return "guess-" + randHex(4) }, nil)
		}
	}
	if out := logs.String(); strings.Contains(out, "guess-") || strings.Contains(out, d.key) {
		t.Errorf("a password in the log:\n%s", out)
	} else if !strings.Contains(out, "source=127.0.0.2/32") {
		t.Errorf("no lock-out of 127.0.0.2 in the log:\n%s", out)
	}
}
