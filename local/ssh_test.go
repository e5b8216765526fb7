package local_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/upstash/box-go/internal/ocitest"
	"github.com/upstash/box-go/local"
)

// sshd is a boxd serving SSH on a loopback port, for Debian's real
// OpenSSH client.
type sshd struct {
	*browserServer
	port string
	dir  string // the client's files: askpass, known hosts
}

func newSSHD(t *testing.T, dataDir string, cfg ...func(*local.Config)) *sshd {
	t.Helper()
	for _, tool := range []string{"ssh", "scp", "sftp"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI is set and %s is not installed (apt-get install openssh-client)", tool)
			}
			t.Skipf("%s is not installed (apt-get install openssh-client)", tool)
		}
	}
	var f func(*local.Config)
	if len(cfg) > 0 {
		f = cfg[0]
	}
	s := newBrowserServer(t, dataDir, f)
	return &sshd{browserServer: s, port: serveSSH(t, s), dir: t.TempDir()}
}

// serveSSH serves s's SSH on a loopback port until the test ends, and
// returns the port.
func serveSSH(t *testing.T, s *browserServer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.srv.ServeSSH(ctx, l) }()
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

// command is an OpenSSH tool run against the server as user, with
// password the answer to its password prompt.
func (d *sshd) command(tool, password string, args ...string) *exec.Cmd {
	askpass := filepath.Join(d.dir, "askpass-"+fmt.Sprint(len(password)))
	_ = os.WriteFile(askpass, []byte("#!/bin/sh\ncat "+askpass+".txt\n"), 0o700)
	_ = os.WriteFile(askpass+".txt", []byte(password+"\n"), 0o600)
	portFlag := "-p"
	if tool != "ssh" {
		portFlag = "-P"
	}
	common := []string{"-F", "/dev/null", portFlag, d.port,
		"-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile=" + filepath.Join(d.dir, "known_hosts"),
		"-o", "PreferredAuthentications=password", "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1",
		"-o", "LogLevel=ERROR"}
	cmd := exec.Command(tool, append(common, args...)...)
	cmd.Env = append(os.Environ(), "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=:0")
	return cmd
}

type sshResult struct {
	stdout, stderr string
	code           int
}

func (d *sshd) run(t *testing.T, tool, password string, args ...string) sshResult {
	t.Helper()
	cmd := d.command(tool, password, args...)
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

// TestSSH drives boxd's SSH server with OpenSSH's ssh, scp and sftp:
// commands with their status and environment, a terminal that follows the
// window, file transfers both ways, a wrong key refused and an unknown
// box named as such.
func TestSSH(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	d := newSSHD(t, data)
	c := d.raw(t)
	id := decodeJSON[wireTab](t, "create", c.do("POST", "/v2/box", map[string]any{"name": "sshbox"}, nil)).ID
	host := id + "@127.0.0.1"

	r := d.run(t, "ssh", d.key, "-o", "SetEnv=GREETING=hello", host, `echo "$GREETING from $(pwd) as $(id -un)"; echo to-stderr >&2; exit 3`)
	if r.code != 3 || r.stdout != "hello from /workspace/home as boxuser\n" || !strings.Contains(r.stderr, "to-stderr") {
		t.Errorf("ssh with a command = %+v", r)
	}
	if r := d.run(t, "ssh", d.key, "sshbox@127.0.0.1", "echo $BOX_ID"); r.code != 0 || r.stdout != id+"\n" {
		t.Errorf("ssh to the box's name = %+v", r)
	}
	r = d.run(t, "ssh", "wrong-key", host, "true")
	if r.code != 255 || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("a wrong key = %+v", r)
	}
	// The key is right: the client learns that the box is not there.
	r = d.run(t, "ssh", d.key, "box-nosuchbox@127.0.0.1", "true")
	if r.code != 255 || !strings.Contains(r.stderr, "no such box: box-nosuchbox") {
		t.Errorf("an unknown box = %+v", r)
	}
	if strings.Contains(r.stderr, d.key) {
		t.Errorf("the key in the client's output: %q", r.stderr)
	}

	// scp and sftp, both ways, byte for byte.
	payload := bytes.Repeat([]byte("0123456789abcdef\x00\xff"), 300_000) // 5.4 MB
	local := filepath.Join(t.TempDir(), "payload.bin")
	if err := os.WriteFile(local, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := d.run(t, "scp", d.key, local, host+":up.bin"); r.code != 0 {
		t.Fatalf("scp up = %+v", r)
	}
	if got := decodeJSON[map[string]any](t, "stat", c.do("GET", "/v2/box/"+id+"/files/stat?path=/workspace/home/up.bin", nil, nil)); got["size"] != float64(len(payload)) {
		t.Errorf("the uploaded file: %v", got)
	}
	back := filepath.Join(t.TempDir(), "back.bin")
	if r := d.run(t, "scp", d.key, host+":up.bin", back); r.code != 0 {
		t.Fatalf("scp down = %+v", r)
	}
	if got, _ := os.ReadFile(back); !bytes.Equal(got, payload) {
		t.Errorf("scp round trip: %d bytes back of %d", len(got), len(payload))
	}
	// The classic scp protocol runs scp in the box, through a command.
	if r := d.run(t, "scp", d.key, "-O", local, host+":classic.bin"); r.code != 0 {
		t.Fatalf("scp -O up = %+v", r)
	}
	if r := d.run(t, "ssh", d.key, host, "cmp classic.bin up.bin && echo same"); r.stdout != "same\n" {
		t.Errorf("scp -O: %+v", r)
	}
	// Tunnels into or out of the machine boxd runs on are refused: a
	// direct connection (what -L and -W open) and a remote listener (-R).
	if r := d.run(t, "ssh", d.key, "-W", "127.0.0.1:"+d.port, host); r.code != 255 || !strings.Contains(r.stderr, "forwarding failed") {
		t.Errorf("a direct TCP channel: %+v", r)
	}
	if r := d.run(t, "ssh", d.key, "-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:0:127.0.0.1:22", host, "true"); r.code != 255 || !strings.Contains(r.stderr, "forwarding failed") {
		t.Errorf("a remote port forward: %+v", r)
	}
	// (sftp -b would turn password authentication off: the commands
	// come on standard input instead.)
	sftpBack := filepath.Join(t.TempDir(), "sftp.bin")
	sftpCmd := d.command("sftp", d.key, host)
	sftpCmd.Stdin = strings.NewReader("mkdir dir\nput " + local + " dir/p.bin\nls -l dir\nget dir/p.bin " + sftpBack + "\nrm dir/p.bin\nrmdir dir\nls\n")
	out, err := sftpCmd.CombinedOutput()
	_, final, _ := strings.Cut(string(out), "sftp> ls\n")
	if err != nil || !strings.Contains(string(out), "5400000") || !strings.Contains(final, "up.bin") || strings.Contains(final, "dir") {
		t.Errorf("sftp: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(sftpBack); !bytes.Equal(got, payload) {
		t.Errorf("sftp round trip: %d bytes back of %d", len(got), len(payload))
	}

	// An interactive shell in a real terminal.
	cmd := d.command("ssh", d.key, "-tt", host)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
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
	seen := 0
	expect := func(re *regexp.Regexp) []string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			s := screen.String()
			mu.Unlock()
			if m := re.FindStringSubmatchIndex(s[seen:]); m != nil {
				out := []string{}
				for i := 0; i < len(m); i += 2 {
					out = append(out, s[seen+m[i]:seen+m[i+1]])
				}
				seen += m[1]
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("the terminal never showed %s; it shows:\n%s", re, s[seen:])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	type_ := func(s string) {
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	size := regexp.MustCompile(`<(\d+) (\d+)>`)
	type_("echo \"<$(stty size)>\"; tty\r")
	if m := expect(size); m[1] != "30" || m[2] != "100" {
		t.Errorf("the box's terminal is %sx%s, want 30x100", m[1], m[2])
	}
	expect(regexp.MustCompile(`/dev/pts/\d+`))
	if err := pty.Setsize(f, &pty.Winsize{Rows: 42, Cols: 132}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		type_("echo \"<$(stty size)>\"\r")
		if m := expect(size); m[1] == "42" && m[2] == "132" {
			break
		} else if i == 50 {
			t.Fatalf("the box's terminal stays %sx%s after a resize to 42x132", m[1], m[2])
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Ctrl-C reaches the program in the box, and the shell goes on.
	type_("sleep 100\r")
	time.Sleep(500 * time.Millisecond)
	type_("\x03")
	type_("echo after-$((6*7))\r")
	expect(regexp.MustCompile(`after-42`))
	type_("exit 4\r")
	werr := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 4 {
		t.Errorf("the interactive ssh ended with %v, want the shell's status 4", werr)
	}

	// The host key stays with the data directory: a new boxd on it is
	// the same host to the client (its known_hosts has the key now).
	d.close()
	again := newSSHD(t, data)
	again.dir = d.dir
	cmdArgs := []string{"-o", "StrictHostKeyChecking=yes", host, "echo same-host"}
	if r := again.run(t, "ssh", again.key, cmdArgs...); r.code != 0 || r.stdout != "same-host\n" {
		t.Errorf("after a restart on the same data directory: %+v", r)
	}
}

// TestSSHInRuntimeImage: in a box whose root is an image with busybox and
// nothing of the host's, ssh runs the image's sh (there is no bash), with
// a terminal too, and scp and sftp work: boxd's sftp server runs in the
// image through the host's loader.
func TestSSHInRuntimeImage(t *testing.T) {
	t.Parallel()
	requireImages(t)
	reg := ocitest.NewRegistry(t)
	ref, _ := reg.Push(t, "test/busybox:1", v1.Config{Env: []string{"PATH=/bin"}}, ocitest.BusyboxLayer(t))
	d := newSSHD(t, "", func(c *local.Config) {
		c.Root = local.RootImage
		c.Images = map[string]string{"node": ref}
	})
	id := decodeJSON[wireTab](t, "create", d.raw(t).do("POST", "/v2/box", map[string]any{"runtime": "node"}, nil)).ID
	host := id + "@127.0.0.1"
	if r := d.run(t, "ssh", d.key, host, "cat /etc/os-release; echo $SHELL; exit 4"); r.code != 4 || r.stdout != "ID=busybox\nNAME=\"Busybox test image\"\n/bin/sh\n" {
		t.Errorf("ssh with a command in the image = %+v", r)
	}
	cmd := d.command("ssh", d.key, "-tt", host)
	cmd.Stdin = strings.NewReader("echo shell in $0; exit 6\n")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 6 || !strings.Contains(string(out), "shell in sh") {
		t.Errorf("an interactive ssh shell in the image: %v\n%s", err, out)
	}
	payload := bytes.Repeat([]byte("image\x00"), 100_000)
	src := filepath.Join(t.TempDir(), "p.bin")
	if err := os.WriteFile(src, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := d.run(t, "scp", d.key, src, host+":p.bin"); r.code != 0 {
		t.Fatalf("scp (sftp) into the image's box = %+v", r)
	}
	back := filepath.Join(t.TempDir(), "back.bin")
	sftp := d.command("sftp", d.key, host)
	sftp.Stdin = strings.NewReader("get p.bin " + back + "\n")
	if out, err := sftp.CombinedOutput(); err != nil {
		t.Fatalf("sftp get: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("sftp round trip in the image's box: %d bytes, %v", len(got), err)
	}
}
