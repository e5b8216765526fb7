package local_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/local"
)

// sshKeyPair is a key made by ssh-keygen: its private key's file, its
// public key's line and its fingerprint as ssh-keygen -l shows it.
type sshKeyPair struct {
	file, pub, fingerprint string
}

func newSSHKeyPair(t *testing.T, typ string) sshKeyPair {
	t.Helper()
	file := filepath.Join(t.TempDir(), "id_"+typ)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", typ, "-N", "", "-C", "tester@"+typ, "-f", file).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(file + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return sshKeyPair{file: file, pub: strings.TrimSpace(string(pub)), fingerprint: keygenFingerprint(t, file+".pub")}
}

// keygenFingerprint is the SHA-256 fingerprint of the key in file, as
// ssh-keygen -l prints it.
func keygenFingerprint(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", file).Output()
	if err != nil {
		t.Fatalf("ssh-keygen -l %s: %v", file, err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || !strings.HasPrefix(f[1], "SHA256:") {
		t.Fatalf("ssh-keygen -l: %q", out)
	}
	return f[1]
}

// keyRun runs ssh with key alone (no agent, no password) and args.
func (d *sshd) keyRun(t *testing.T, key string, args ...string) sshResult {
	t.Helper()
	return d.keyTool(t, "ssh", key, args...)
}

// keyTool runs tool (ssh, scp or sftp) with key alone (no agent, no
// password: batch mode, where a password prompt fails) and args.
func (d *sshd) keyTool(t *testing.T, tool, key string, args ...string) sshResult {
	t.Helper()
	portFlag := "-p"
	if tool != "ssh" {
		portFlag = "-P"
	}
	common := []string{"-F", "/dev/null", portFlag, d.port, "-i", key, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile=" + filepath.Join(d.dir, "known_hosts"),
		"-o", "PreferredAuthentications=publickey", "-o", "PasswordAuthentication=no", "-o", "BatchMode=yes",
		// INFO: ssh says why a channel could not be opened.
		"-o", "LogLevel=INFO"}
	cmd := exec.Command(tool, append(common, args...)...)
	// No askpass either: nothing but the key can answer.
	cmd.Env = append(os.Environ(), "SSH_ASKPASS=/bin/false", "SSH_ASKPASS_REQUIRE=never")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return sshResult{out.String(), errb.String(), code}
}

type wireSSHKey struct {
	ID          string `json:"id"`
	PublicKey   string `json:"public_key"`
	Type        string `json:"type"`
	Fingerprint string `json:"fingerprint"`
	Comment     string `json:"comment"`
	CreatedAt   int64  `json:"created_at"`
}

// TestSSHPublicKeys logs in with OpenSSH's ssh and keys made by
// ssh-keygen: the account's keys, added and removed over the API, and
// the keys of an authorized_keys file, read again when it changes; a key
// of neither is refused, and the API key still works as a password.
func TestSSHPublicKeys(t *testing.T) {
	t.Parallel()
	account, rsa, fromFile, later, stranger := newSSHKeyPair(t, "ed25519"), newSSHKeyPair(t, "rsa"), newSSHKeyPair(t, "ecdsa"), newSSHKeyPair(t, "ed25519"), newSSHKeyPair(t, "ed25519")
	authorized := filepath.Join(t.TempDir(), "authorized_keys")
	restricted := newSSHKeyPair(t, "ed25519")
	if err := os.WriteFile(authorized, []byte("# the operator's keys\n"+fromFile.pub+"\nnot a key\ncommand=\"true\" "+restricted.pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newSSHD(t, "", func(c *local.Config) { c.SSHAuthorizedKeys = authorized })
	c := d.raw(t)
	id := decodeJSON[wireTab](t, "create", c.do("POST", "/v2/box", map[string]any{"name": "keybox"}, nil)).ID
	host := id + "@127.0.0.1"
	loggedIn := func(key sshKeyPair) sshResult {
		t.Helper()
		return d.keyRun(t, key.file, host, "echo in $BOX_ID")
	}
	refused := func(what string, r sshResult) {
		t.Helper()
		if r.code != 255 || !strings.Contains(r.stderr, "Permission denied (") {
			t.Errorf("%s: %+v, want Permission denied", what, r)
		}
	}

	refused("the account's key before it is added", loggedIn(account))
	if r := loggedIn(fromFile); r.code != 0 || r.stdout != "in "+id+"\n" {
		t.Errorf("a key of the authorized_keys file: %+v", r)
	}
	refused("a key with options in the file", loggedIn(restricted))
	refused("a key of nobody's", loggedIn(stranger))

	// The account's keys, over the API.
	added := decodeJSON[wireSSHKey](t, "add", c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": account.pub}, nil))
	if added.Fingerprint != account.fingerprint || added.Type != "ssh-ed25519" || added.Comment != "tester@ed25519" ||
		!strings.HasPrefix(account.pub, added.PublicKey+" ") || !strings.HasPrefix(added.ID, "sshkey_") || added.CreatedAt == 0 {
		t.Errorf("the added key = %+v; ssh-keygen says %s for %s", added, account.fingerprint, account.pub)
	}
	addedRSA := decodeJSON[wireSSHKey](t, "add rsa", c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": rsa.pub + "\n"}, nil))
	if r := loggedIn(account); r.code != 0 || r.stdout != "in "+id+"\n" {
		t.Errorf("the account's key: %+v", r)
	}
	if r := d.keyRun(t, rsa.file, "keybox@127.0.0.1", "echo by-name"); r.code != 0 || r.stdout != "by-name\n" {
		t.Errorf("the account's RSA key, to the box's name: %+v", r)
	}
	list := decodeJSON[[]wireSSHKey](t, "list", c.do("GET", "/v2/ssh-keys", nil, nil))
	if len(list) != 2 || list[0] != added || list[1] != addedRSA {
		t.Errorf("the account's keys = %+v, want %+v and %+v", list, added, addedRSA)
	}

	// Bad keys: a clear 400, and nothing added.
	private, _ := os.ReadFile(stranger.file)
	for _, bad := range []struct{ key, want string }{
		{"", "public_key is required"},
		{"ssh-ed25519 not-base64", "not an OpenSSH public key"},
		{"hello world", "not an OpenSSH public key"},
		{string(private), "private key"},
		{`from="10.0.0.1" ` + stranger.pub, "options"},
		{stranger.pub + "\n" + later.pub, "more than one key"},
	} {
		r := c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": bad.key}, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), bad.want) {
			t.Errorf("adding %.40q: %s, want 400 saying %q", bad.key, r, bad.want)
		}
	}
	if r := c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": account.pub}, nil); r.status != http.StatusConflict || !strings.Contains(string(r.body), added.ID) {
		t.Errorf("adding a key twice: %s", r)
	}
	if r := c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": account.pub}, map[string]string{"X-Box-Api-Key": "wrong"}); r.status != http.StatusUnauthorized {
		t.Errorf("adding a key without the API key: %s", r)
	}
	if list := decodeJSON[[]wireSSHKey](t, "list", c.do("GET", "/v2/ssh-keys", nil, nil)); len(list) != 2 {
		t.Errorf("after the refusals, the account has %d keys: %+v", len(list), list)
	}

	// A removed key logs in no more.
	wantOK(t, "delete", c.do("DELETE", "/v2/ssh-keys/"+added.ID, nil, nil))
	refused("the account's key once removed", loggedIn(account))
	if r := c.do("DELETE", "/v2/ssh-keys/"+added.ID, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("removing a key twice: %s", r)
	}

	// The file is read again when it changes.
	refused("a key before it is in the file", loggedIn(later))
	if err := os.WriteFile(authorized+".new", []byte(later.pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(authorized+".new", authorized); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for loggedIn(later).code != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a key written to the authorized_keys file never logs in")
		}
		time.Sleep(200 * time.Millisecond)
	}
	refused("a key taken out of the file", loggedIn(fromFile))

	// The API key is still a password.
	if r := d.run(t, "ssh", d.key, host, "echo by-password"); r.code != 0 || r.stdout != "by-password\n" {
		t.Errorf("the API key as the password: %+v", r)
	}
}

// TestSCPAndSFTPWithKeys: OpenSSH's scp (over SFTP and over the classic
// protocol) and sftp -b log in with a key alone, the account's or one of
// the authorized_keys file, and move a file both ways byte for byte; a
// key of nobody's is refused and moves nothing.
func TestSCPAndSFTPWithKeys(t *testing.T) {
	t.Parallel()
	account, fromFile, stranger := newSSHKeyPair(t, "ed25519"), newSSHKeyPair(t, "ecdsa"), newSSHKeyPair(t, "ed25519")
	authorized := filepath.Join(t.TempDir(), "authorized_keys")
	if err := os.WriteFile(authorized, []byte(fromFile.pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newSSHD(t, "", func(c *local.Config) { c.SSHAuthorizedKeys = authorized })
	c := d.raw(t)
	decodeJSON[wireSSHKey](t, "add", c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": account.pub}, nil))
	id := decodeJSON[wireTab](t, "create", c.do("POST", "/v2/box", map[string]any{"name": "scpbox"}, nil)).ID
	host := id + "@127.0.0.1"

	dir := t.TempDir()
	payload := bytes.Repeat([]byte("key login\x00\xff\r\n"), 200_000) // 2.6 MB
	up := filepath.Join(dir, "payload.bin")
	if err := os.WriteFile(up, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	same := func(what, file string) {
		t.Helper()
		got, err := os.ReadFile(file)
		if err != nil || !bytes.Equal(got, payload) {
			t.Errorf("%s: %d bytes back of %d, %v", what, len(got), len(payload), err)
		}
	}
	inBox := func(what, name string) {
		t.Helper()
		st := decodeJSON[map[string]any](t, "stat", c.do("GET", "/v2/box/"+id+"/files/stat?path=/workspace/home/"+name, nil, nil))
		if st["size"] != float64(len(payload)) {
			t.Errorf("%s: the box's %s is %v", what, name, st)
		}
	}

	for _, k := range []struct {
		what, name string
		key        sshKeyPair
	}{{"the account's key", "account", account}, {"a key of the file", "file", fromFile}} {
		name := k.name
		// scp over SFTP (OpenSSH's default), both ways.
		if r := d.keyTool(t, "scp", k.key.file, up, host+":"+name+".scp"); r.code != 0 {
			t.Fatalf("scp up with %s: %+v", k.what, r)
		}
		inBox("scp up with "+k.what, name+".scp")
		back := filepath.Join(dir, name+".scp.back")
		if r := d.keyTool(t, "scp", k.key.file, host+":"+name+".scp", back); r.code != 0 {
			t.Fatalf("scp down with %s: %+v", k.what, r)
		}
		same("scp round trip with "+k.what, back)
		// The classic protocol runs scp in the box, through a command;
		// to the box's name.
		if r := d.keyTool(t, "scp", k.key.file, "-O", up, "scpbox@127.0.0.1:"+name+".classic"); r.code != 0 {
			t.Fatalf("scp -O up with %s: %+v", k.what, r)
		}
		inBox("scp -O up with "+k.what, name+".classic")
		back = filepath.Join(dir, name+".classic.back")
		if r := d.keyTool(t, "scp", k.key.file, "-O", "scpbox@127.0.0.1:"+name+".classic", back); r.code != 0 {
			t.Fatalf("scp -O down with %s: %+v", k.what, r)
		}
		same("scp -O round trip with "+k.what, back)
		// sftp -b: a batch file, which stops at the first command that
		// fails.
		batch := filepath.Join(dir, name+".batch")
		back = filepath.Join(dir, name+".sftp.back")
		if err := os.WriteFile(batch, []byte("mkdir "+name+"\nput "+up+" "+name+"/p.bin\nget "+name+"/p.bin "+back+"\nrm "+name+"/p.bin\nrmdir "+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := d.keyTool(t, "sftp", k.key.file, "-b", batch, host); r.code != 0 {
			t.Fatalf("sftp -b with %s: %+v", k.what, r)
		}
		same("sftp -b round trip with "+k.what, back)
		if r := c.do("GET", "/v2/box/"+id+"/files/stat?path=/workspace/home/"+name, nil, nil); r.status != http.StatusNotFound {
			t.Errorf("sftp -b with %s left its directory: %s", k.what, r)
		}
	}

	// A key of nobody's: refused, and nothing lands in the box.
	if r := d.keyTool(t, "scp", stranger.file, up, host+":stranger.bin"); r.code == 0 || !strings.Contains(r.stderr, "Permission denied (") {
		t.Errorf("scp with a key of nobody's: %+v", r)
	}
	batch := filepath.Join(dir, "stranger.batch")
	if err := os.WriteFile(batch, []byte("put "+up+" stranger.bin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := d.keyTool(t, "sftp", stranger.file, "-b", batch, host); r.code == 0 || !strings.Contains(r.stderr, "Permission denied (") {
		t.Errorf("sftp -b with a key of nobody's: %+v", r)
	}
	if r := c.do("GET", "/v2/box/"+id+"/files/stat?path=/workspace/home/stranger.bin", nil, nil); r.status != http.StatusNotFound {
		t.Errorf("a refused key's file is in the box: %s", r)
	}
}

// TestSSHNoSuchBox: a client whose credential is right and whose user
// names no box is told so, by ssh and sftp, whatever its credential;
// one whose credential is wrong learns nothing of the boxes.
func TestSSHNoSuchBox(t *testing.T) {
	t.Parallel()
	key := newSSHKeyPair(t, "ed25519")
	d := newSSHD(t, "")
	c := d.raw(t)
	decodeJSON[wireSSHKey](t, "add", c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": key.pub}, nil))
	const user = "box-nosuchbox"
	want := "no such box: " + user
	if r := d.keyRun(t, key.file, user+"@127.0.0.1", "true"); r.code != 255 || !strings.Contains(r.stderr, want) {
		t.Errorf("ssh with a key to a box that does not exist: %+v, want %q", r, want)
	}
	if r := d.run(t, "ssh", d.key, user+"@127.0.0.1"); r.code != 255 || !strings.Contains(r.stderr, want) {
		t.Errorf("ssh with the API key to a box that does not exist: %+v, want %q", r, want)
	}
	sftp := d.command("sftp", d.key, user+"@127.0.0.1")
	sftp.Stdin = strings.NewReader("ls\n")
	if out, err := sftp.CombinedOutput(); err == nil || !strings.Contains(string(out), want) {
		t.Errorf("sftp to a box that does not exist: %v\n%s", err, out)
	}
	if r := d.keyRun(t, key.file, "-N", "-o", "ExitOnForwardFailure=yes", "-W", "127.0.0.1:80", user+"@127.0.0.1"); r.code != 255 || !strings.Contains(r.stderr, want) {
		t.Errorf("a forward into a box that does not exist: %+v, want %q", r, want)
	}
	if r := d.run(t, "ssh", "wrong-key", user+"@127.0.0.1", "true"); r.code != 255 || !strings.Contains(r.stderr, "Permission denied") || strings.Contains(r.stderr, "no such box") {
		t.Errorf("a wrong password to a box that does not exist: %+v, want Permission denied alone", r)
	}
}

// TestSSHInfo: boxd tells its SSH server's address and host key, the
// key ssh-keygen reads from the data directory and the one the client
// was shown.
func TestSSHInfo(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s := newBrowserServer(t, data, nil)
	c := s.raw(t)
	if r := c.do("GET", "/v2/ssh", nil, nil); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "-ssh-addr") {
		t.Errorf("GET /v2/ssh before SSH is served: %s", r)
	}
	port := serveSSH(t, s)
	info := decodeJSON[struct {
		Address     string `json:"address"`
		Port        int    `json:"port"`
		HostKey     string `json:"host_key"`
		Fingerprint string `json:"fingerprint"`
	}](t, "ssh info", c.do("GET", "/v2/ssh", nil, nil))
	want := keygenFingerprint(t, filepath.Join(data, "ssh_host_ed25519_key"))
	if info.Address != "127.0.0.1:"+port || fmt.Sprint(info.Port) != port || info.Fingerprint != want || !strings.HasPrefix(info.HostKey, "ssh-ed25519 ") {
		t.Errorf("GET /v2/ssh = %+v; want port %s and fingerprint %s", info, port, want)
	}
	pub, fp, err := s.srv.SSHHostKey()
	if err != nil || pub != info.HostKey || fp != want {
		t.Errorf("SSHHostKey() = %q, %q, %v; want %q, %q", pub, fp, err, info.HostKey, want)
	}
	// The key the client is shown is that one: a known_hosts with it
	// alone lets ssh in with strict checking.
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, []byte("[127.0.0.1]:"+port+" "+info.HostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := decodeJSON[wireTab](t, "create", c.do("POST", "/v2/box", map[string]any{}, nil)).ID
	d := &sshd{browserServer: s, port: port, dir: t.TempDir()}
	r := d.run(t, "ssh", s.key, "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+known, id+"@127.0.0.1", "echo trusted")
	if r.code != 0 || r.stdout != "trusted\n" {
		t.Errorf("ssh with the host key of GET /v2/ssh alone in known_hosts: %+v", r)
	}
}

// TestSSHLocalForward: ssh -L reaches a web server listening on the box's
// own loopback; a forward to the host's loopback lands in the box (where
// the host's server is not), one to any other address is refused, and so
// is a remote forward (-R).
func TestSSHLocalForward(t *testing.T) {
	t.Parallel()
	if isolation(t) == local.IsolationNone {
		t.Skip("forwards need isolation; TestSSHLocalForwardWithoutIsolation covers isolation none")
	}
	key := newSSHKeyPair(t, "ed25519")
	d := newSSHD(t, "")
	c := d.raw(t)
	decodeJSON[wireSSHKey](t, "add", c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": key.pub}, nil))
	id := decodeJSON[wireTab](t, "create", c.do("POST", "/v2/box", map[string]any{}, nil)).ID
	host := id + "@127.0.0.1"
	token := "in-the-box-" + randHex(8)
	const boxPort = 18123
	if r := d.keyRun(t, key.file, host, fmt.Sprintf(`mkdir -p /tmp/www && echo %s > /tmp/www/index.html && (nohup python3 -m http.server %d --bind 127.0.0.1 -d /tmp/www >/tmp/www.log 2>&1 &)`, token, boxPort)); r.code != 0 {
		t.Fatalf("starting a server in the box: %+v", r)
	}
	// A server on the host's loopback that the box must not reach.
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "the host") })}
	go hs.Serve(hl)
	t.Cleanup(func() { hs.Close() })
	hostPort := hl.Addr().(*net.TCPAddr).Port

	localPort := freePort(t)
	cmd := exec.Command("ssh", "-F", "/dev/null", "-p", d.port, "-i", key.file, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile="+filepath.Join(d.dir, "known_hosts"), "-o", "BatchMode=yes",
		"-o", "ExitOnForwardFailure=yes", "-N", "-L", fmt.Sprintf("127.0.0.1:%d:127.0.0.1:%d", localPort, boxPort), host)
	var sshErr bytes.Buffer
	cmd.Stderr = &sshErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d/", localPort)
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if body = string(b); resp.StatusCode == http.StatusOK && body == token+"\n" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssh -L never reached the box's server: %q, %v; ssh says %s", body, err, sshErr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Several connections at once, each its own.
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			resp, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != token+"\n" {
					err = fmt.Errorf("body %q", b)
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("a forwarded connection: %v", err)
		}
	}

	// 127.0.0.1 is the box's loopback: the host's server is not there.
	if r := d.keyRun(t, key.file, "-W", fmt.Sprintf("127.0.0.1:%d", hostPort), host); r.code != 255 || strings.Contains(r.stdout, "the host") || !strings.Contains(r.stderr, "nothing is listening") {
		t.Errorf("-W to the host's loopback port: %+v", r)
	}
	// Any other destination is refused before anything is dialled.
	for _, dest := range []string{"10.255.255.1:80", "example.com:80", "host.boxd.internal:" + d.port, "0.0.0.0:" + fmt.Sprint(hostPort)} {
		if r := d.keyRun(t, key.file, "-W", dest, host); r.code != 255 || !strings.Contains(r.stderr, "administratively prohibited") || !strings.Contains(r.stderr, "only to the box's own loopback") {
			t.Errorf("-W %s: %+v", dest, r)
		}
	}
	// Remote forwards are refused.
	if r := d.keyRun(t, key.file, "-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:0:127.0.0.1:22", host, "true"); r.code != 255 || !strings.Contains(r.stderr, "forwarding failed") {
		t.Errorf("-R: %+v", r)
	}
}

// TestSSHLocalForwardWithoutIsolation: with isolation none a box's
// loopback is the host's, so boxd forwards nothing.
func TestSSHLocalForwardWithoutIsolation(t *testing.T) {
	t.Parallel()
	key := newSSHKeyPair(t, "ed25519")
	d := newSSHD(t, "", func(c *local.Config) { c.Isolation = local.IsolationNone })
	c := d.raw(t)
	decodeJSON[wireSSHKey](t, "add", c.do("POST", "/v2/ssh-keys", map[string]any{"public_key": key.pub}, nil))
	id := decodeJSON[wireTab](t, "create", c.do("POST", "/v2/box", map[string]any{}, nil)).ID
	if r := d.keyRun(t, key.file, "-W", "127.0.0.1:"+d.port, id+"@127.0.0.1"); r.code != 255 || !strings.Contains(r.stderr, "isolation none") {
		t.Errorf("-W with isolation none: %+v", r)
	}
}

// freePort is a TCP port on 127.0.0.1 that nothing listened on a
// moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
