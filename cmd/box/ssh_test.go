package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/upstash/box-go/boxtest"
)

// requireOpenSSH skips a test without OpenSSH's client (it fails in CI).
func requireOpenSSH(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI is set and %s is not installed", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// serveSSH serves srv's SSH on a loopback port until the test ends, and
// returns the port.
func serveSSH(t *testing.T, srv *boxtest.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Backend().ServeSSH(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeSSH: %v", err)
		}
	})
	// ServeSSH runs in its own goroutine, and the listener answers dials
	// before it serves: the server's version line says it serves (and
	// GET /v2/ssh knows its address).
	c, err := net.DialTimeout("tcp", l.Addr().String(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
		t.Fatalf("boxd's SSH server did not send its version line: %q, %v", line, err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// TestSSHCommand: box ssh runs OpenSSH's ssh into a box with nothing to
// answer (no host key to trust, no password), exits with the command's
// status, replaces a stale host key it kept, and names a box that is not
// there.
func TestSSHCommand(t *testing.T) {
	t.Parallel()
	requireOpenSSH(t)
	srv := boxtest.NewServer(t)
	if r := cli(t, srv, "", "ssh", "box-x", "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "serves no SSH") {
		t.Errorf("box ssh to a server without SSH: %+v", r)
	}
	port := serveSSH(t, srv)
	b, err := srv.Client().Create(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	environ := env(t, srv, "HOME="+home, "XDG_CONFIG_HOME=")
	r := runBox(t, environ, "", "ssh", b.ID(), "--", "echo hi from $BOX_ID; exit 3")
	if r.code != 3 || r.stdout != "hi from "+b.ID()+"\n" {
		t.Errorf("box ssh <id> -- cmd = %+v", r)
	}
	known := filepath.Join(home, ".config", "box", "ssh_known_hosts")
	info, err := srv.Client().SSHInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	entry := "[127.0.0.1]:" + port + " " + info.HostKey + "\n"
	if got, err := os.ReadFile(known); err != nil || string(got) != entry {
		t.Errorf("box's known hosts = %q, %v; want %q", got, err, entry)
	}
	if strings.Contains(r.stderr, srv.APIKey()) {
		t.Errorf("the API key on stderr: %q", r.stderr)
	}

	// A stale key of the same host is replaced; other hosts' stay.
	other := "[10.0.0.9]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO8lgFV0JmCWfnWDCXc2JwSRp5GNB6lI/OErrBa77C/O\n"
	stale := "[127.0.0.1]:" + port + " ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO8lgFV0JmCWfnWDCXc2JwSRp5GNB6lI/OErrBa77C/O\n"
	if err := os.WriteFile(known, []byte(other+stale), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runBox(t, environ, "", "ssh", b.ID(), "--", "echo again"); r.code != 0 || r.stdout != "again\n" {
		t.Errorf("box ssh with a stale host key kept: %+v", r)
	}
	if got, _ := os.ReadFile(known); string(got) != other+entry {
		t.Errorf("box's known hosts after a stale key = %q, want %q", got, other+entry)
	}

	// In a terminal, ssh asks nothing: no host key to confirm, no
	// password to type.
	cmd := exec.Command(boxBin, "ssh", b.ID(), "--", "echo in-a-terminal")
	cmd.Env = environ
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	var mu sync.Mutex
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		<-read
		mu.Lock()
		s := screen.String()
		mu.Unlock()
		if err != nil || !strings.Contains(s, "in-a-terminal") || strings.Contains(strings.ToLower(s), "password") || strings.Contains(s, "authenticity") {
			t.Errorf("box ssh in a terminal: %v; the terminal shows %q", err, s)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		mu.Lock()
		t.Errorf("box ssh in a terminal is waiting; the terminal shows %q", screen.String())
		mu.Unlock()
	}
	f.Close()

	if r := runBox(t, environ, "", "ssh", "box-nosuchbox", "--", "true"); r.code != 255 || !strings.Contains(r.stderr, "no such box: box-nosuchbox") {
		t.Errorf("box ssh to a box that is not there: %+v", r)
	}
	if r := runBox(t, environ, "", "ssh"); r.code != 2 {
		t.Errorf("box ssh without a box: %+v", r)
	}
}

// TestSSHKeyCommands: box ssh-key add, ls and rm, with keys made by
// ssh-keygen, and OpenSSH's ssh logging in with the key added.
func TestSSHKeyCommands(t *testing.T) {
	t.Parallel()
	requireOpenSSH(t)
	srv := boxtest.NewServer(t)
	port := serveSSH(t, srv)
	b, err := srv.Client().Create(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	environ := env(t, srv, "HOME="+home)
	if r := runBox(t, environ, "", "ssh-key", "add"); r.code != 2 || !strings.Contains(r.stderr, "id_ed25519.pub") {
		t.Errorf("ssh-key add without a key: %+v", r)
	}
	key := filepath.Join(home, ".ssh", "id_ed25519")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "me@laptop", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", key+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	fp := strings.Fields(string(out))[1]

	login := func() error {
		c := exec.Command("ssh", "-F", "/dev/null", "-p", port, "-i", key, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "BatchMode=yes",
			"-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile="+filepath.Join(home, "known"), b.ID()+"@127.0.0.1", "true")
		return c.Run()
	}
	if err := login(); err == nil {
		t.Fatal("the key logs in before it is added")
	}

	// The default key, ~/.ssh/id_ed25519.pub.
	r := runBox(t, environ, "", "ssh-key", "add")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "added sshkey_") || !strings.Contains(r.stdout, fp+" me@laptop") {
		t.Fatalf("ssh-key add = %+v, want the key %s", r, fp)
	}
	id := strings.Fields(r.stdout)[1]
	if err := login(); err != nil {
		t.Errorf("ssh with the key added: %v", err)
	}
	r = runBox(t, environ, "", "ssh-key", "ls", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 || len(list) != 1 || list[0]["id"] != id || list[0]["fingerprint"] != fp || list[0]["type"] != "ssh-ed25519" || list[0]["comment"] != "me@laptop" {
		t.Errorf("ssh-key ls --json = %+v (%v)", r, err)
	}
	if r := runBox(t, environ, "", "ssh-key", "ls"); r.code != 0 || !strings.Contains(r.stdout, "FINGERPRINT") || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, fp) {
		t.Errorf("ssh-key ls = %+v", r)
	}
	// The same key again, from standard input: the server refuses it.
	pub, _ := os.ReadFile(key + ".pub")
	if r := runBox(t, environ, string(pub), "ssh-key", "add", "-"); r.code != 1 || !strings.Contains(r.stderr, "already") || !strings.Contains(r.stderr, id) {
		t.Errorf("ssh-key add of a key the account has: %+v", r)
	}

	// Bad keys: exit 2, and a private key is never sent.
	bad := filepath.Join(t.TempDir(), "bad.pub")
	for _, c := range []struct{ content, want string }{
		{"hello world\n", "not an OpenSSH public key"},
		{"command=\"ls\" " + string(pub), "options"},
		{"\n# nothing\n", "holds no public key"},
	} {
		if err := os.WriteFile(bad, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := runBox(t, environ, "", "ssh-key", "add", bad); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("ssh-key add of %q = %+v, want exit 2 saying %q", c.content, r, c.want)
		}
	}
	if r := runBox(t, environ, "", "ssh-key", "add", key); r.code != 2 || !strings.Contains(r.stderr, "private key") {
		t.Errorf("ssh-key add of a private key = %+v", r)
	}
	if r := runBox(t, environ, "", "ssh-key", "add", filepath.Join(home, "missing.pub")); r.code != 2 {
		t.Errorf("ssh-key add of a file that is not there = %+v", r)
	}
	keys, err := srv.Client().ListSSHKeys(t.Context())
	if err != nil || len(keys) != 1 {
		t.Errorf("after the refusals the account has %v, %v; want the one key", keys, err)
	}

	if r := runBox(t, environ, "", "ssh-key", "rm", id); r.code != 0 || r.stdout != "removed "+id+"\n" {
		t.Errorf("ssh-key rm = %+v", r)
	}
	if err := login(); err == nil {
		t.Error("the key still logs in once removed")
	}
	if r := runBox(t, environ, "", "ssh-key", "rm", id); r.code != 1 || !strings.Contains(r.stderr, id) {
		t.Errorf("ssh-key rm of a key that is gone = %+v", r)
	}
	if r := runBox(t, environ, "", "ssh-key", "ls"); r.code != 0 || strings.Contains(r.stdout, id) {
		t.Errorf("ssh-key ls after rm = %+v", r)
	}
}
