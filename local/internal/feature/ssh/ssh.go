package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gssh "github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/sshguard"
	"github.com/upstash/box-go/session"
)

// SSH: `ssh <box-id>@<host> -p <port>`, with the API key as the password,
// as on the cloud, or with a public key of the account's or of the
// operator's authorized_keys file. A shell, a command (with its exit status), a terminal
// that follows the window, environment variables, signals, and the sftp
// subsystem (so scp and sftp work) all run through the box's exec
// sessions, the same in-box machinery as Exec.Session. The sftp server is
// boxd's own binary in the box (package agent, on github.com/pkg/sftp),
// running as the box user. A local forward (ssh -L, -W) reaches a port on
// the box's own loopback through the agent's bridge, as public URLs do;
// nothing else is forwarded.
//
// Authentication checks the credential alone: a client that has one
// learns that the box it names does not exist from the session
// ("no such box"), one that has none learns nothing of the boxes.

// SSH is the SSH feature: its servers, and the bounds on their clients.
type SSH struct {
	host Host
	cfg  Config
	// fileKeys is the operator's authorized_keys file; nil for none.
	fileKeys *authorizedKeys

	mu      sync.Mutex
	servers []*gssh.Server
	// addrs are where the servers listen, in the order they started.
	addrs  []net.Addr
	signer gssh.Signer // the host key, once loaded
	// capLogged is when boxd last said that SSH connections were closed
	// at a cap (unix seconds).
	capLogged atomic.Int64
}

// New returns the SSH feature; Serve serves it. It reads the
// authorized_keys file of cfg, and fails when it cannot.
func New(cfg Config) (*SSH, error) {
	s := &SSH{host: cfg.Host, cfg: cfg}
	if cfg.AuthorizedKeysFile != "" {
		ak, err := newAuthorizedKeys(cfg.AuthorizedKeysFile, cfg.Host.Logger())
		if err != nil {
			return nil, err
		}
		s.fileKeys = ak
	}
	return s, nil
}

// sshHostKeyName is the host key's file in the data directory.
const sshHostKeyName = "ssh_host_ed25519_key"

// ctxBoxID is where the password check leaves the box a connection is for.
type ctxBoxID struct{}

// ctxGuardConn is where a connection's *sshguard.Conn is kept, and
// ctxPreAuth its gossh.ServerPreAuthConn, until it authenticates.
type (
	ctxGuardConn struct{}
	ctxPreAuth   struct{}
)

// Serve serves boxes over SSH on l until ctx ends or Close is called.
// The host key is made on first use and kept in the data directory.
func (s *SSH) Serve(ctx context.Context, l net.Listener) error {
	signer, err := s.HostKey()
	if err != nil {
		l.Close()
		return err
	}
	srv := &gssh.Server{
		HostSigners:      []gssh.Signer{signer},
		Version:          "boxd",
		PasswordHandler:  s.sshPassword,
		PublicKeyHandler: s.sshPublicKey,
		Handler:          s.sshSession,
		ConnCallback:     s.sshAdmit,
		ServerConfigCallback: func(ctx gssh.Context) *gossh.ServerConfig {
			return &gossh.ServerConfig{
				PreAuthConnCallback: func(c gossh.ServerPreAuthConn) {
					ctx.SetValue(ctxPreAuth{}, c)
				},
				// A key counts as a login once the client has proved
				// that it holds it, not when it is merely offered.
				VerifiedPublicKeyCallback: func(conn gossh.ConnMetadata, _ gossh.PublicKey, perm *gossh.Permissions, _ string) (*gossh.Permissions, error) {
					if !s.loggedIn(ctx, conn.User()) {
						return nil, errors.New("permission denied")
					}
					return perm, nil
				},
			}
		},
		SubsystemHandlers: map[string]gssh.SubsystemHandler{
			"sftp": s.sshSFTP,
		},
		// Sessions, and local forwards to the box's loopback; no
		// remote forwards (there are no request handlers for them).
		ChannelHandlers: map[string]gssh.ChannelHandler{
			"session":      gssh.DefaultSessionHandler,
			"direct-tcpip": s.sshDirectTCPIP,
		},
	}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.addrs = append(s.addrs, l.Addr())
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.addrs = slices.DeleteFunc(s.addrs, func(a net.Addr) bool { return a == l.Addr() })
		s.mu.Unlock()
	}()
	err = srv.Serve(l)
	if errors.Is(err, gssh.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the SSH servers that Serve runs.
func (s *SSH) Close() {
	s.mu.Lock()
	srvs := s.servers
	s.servers = nil
	s.mu.Unlock()
	for _, srv := range srvs {
		_ = srv.Close()
	}
}

// HostKey returns the host key: the one in the data directory, or a new
// one, made and stored there.
func (s *SSH) HostKey() (gssh.Signer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signer != nil {
		return s.signer, nil
	}
	signer, err := s.sshHostKey()
	if err != nil {
		return nil, err
	}
	s.signer = signer
	return signer, nil
}

// sshHostKey loads the host key, or makes and stores one.
func (s *SSH) sshHostKey() (gssh.Signer, error) {
	path := filepath.Join(s.cfg.DataDir, sshHostKeyName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := gossh.MarshalPrivateKey(key, "boxd host key")
		if err != nil {
			return nil, err
		}
		raw = pem.EncodeToMemory(block)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return s.sshHostKey() // another start made it meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("boxd: SSH host key: %w", err)
		}
		_, err = f.Write(raw)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
			return nil, fmt.Errorf("boxd: SSH host key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("boxd: SSH host key: %w", err)
	}
	signer, err := gossh.ParsePrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("boxd: SSH host key %s: %w", path, err)
	}
	return signer, nil
}

// sshAdmit counts a new connection as unauthenticated, or has it closed
// at once, unread, when there are too many.
func (s *SSH) sshAdmit(ctx gssh.Context, c net.Conn) net.Conn {
	pc := s.cfg.Guard.Admit(c)
	if pc == nil {
		// Said at most once a minute: a flood is not to flood the log.
		now, last := time.Now().Unix(), s.capLogged.Load()
		if now-last >= 60 && s.capLogged.CompareAndSwap(last, now) {
			st := s.cfg.Guard.Stats()
			s.host.Logger().Warn("SSH: too many connections that have not authenticated; new ones are closed at once",
				"from", sshguard.Source(c.RemoteAddr()), "unauthenticated", st.Unauthenticated, "closed", st.Refused)
		}
		return nil // gssh closes c
	}
	ctx.SetValue(ctxGuardConn{}, pc)
	ctx.SetValue(ctxForwards{}, new(atomic.Int32))
	return pc
}

// sshPassword admits a connection whose password is the API key, unless
// its address is locked out for its failed logins; every refusal counts
// as one of them.
func (s *SSH) sshPassword(ctx gssh.Context, password string) bool {
	pc, _ := ctx.Value(ctxGuardConn{}).(*sshguard.Conn)
	if pc == nil {
		return false
	}
	src := pc.Source()
	if err := s.cfg.Guard.LockedOut(src); err != nil {
		s.sshBanner(ctx, err)
		return false
	}
	ok, err := s.cfg.Guard.Check(src, func() bool {
		return subtle.ConstantTimeCompare([]byte(password), []byte(s.cfg.APIKey)) == 1
	})
	if err != nil {
		s.sshBanner(ctx, err)
		return false
	}
	return ok && s.loggedIn(ctx, ctx.User())
}

// sshPublicKey says whether key may log in: it is one of the account's
// or of the authorized_keys file. The client has yet to prove that it
// holds the key (see loggedIn). Keys do not count as failed logins: a
// key cannot be guessed, and a client offers each of its keys in turn.
func (s *SSH) sshPublicKey(ctx gssh.Context, key gssh.PublicKey) bool {
	if _, ok := ctx.Value(ctxGuardConn{}).(*sshguard.Conn); !ok {
		return false
	}
	wire := key.Marshal()
	if s.fileKeys != nil && s.fileKeys.has(wire) {
		return true
	}
	k, err := s.cfg.Keys.SSHKeyByWire(wire)
	return err == nil && subtle.ConstantTimeCompare(k.Wire, wire) == 1
}

// loggedIn ends the connection's time as unauthenticated, once its
// credential is right, and notes the box it names, when there is one.
// It reports false when the connection is closed already, its deadline
// having passed: then the login must be refused.
func (s *SSH) loggedIn(ctx gssh.Context, user string) bool {
	pc, _ := ctx.Value(ctxGuardConn{}).(*sshguard.Conn)
	if pc == nil || !pc.Authenticated() {
		return false
	}
	if b, err := s.host.Box(user); err == nil {
		ctx.SetValue(ctxBoxID{}, b.ID)
	}
	return true
}

// noSuchBox is what a client whose user names no box is told.
func noSuchBox(user string) string {
	return "no such box: " + safeName(user)
}

// safeName is a name a client gave, fit to be shown back to it: at most
// 100 characters, without control characters.
func safeName(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// sshBanner tells the client why its login is refused, before the
// refusal: ssh shows it.
func (s *SSH) sshBanner(ctx gssh.Context, err error) {
	if c, ok := ctx.Value(ctxPreAuth{}).(gossh.ServerPreAuthConn); ok {
		_ = c.SendAuthBanner("boxd: " + err.Error() + "\r\n")
	}
}

// sshSession runs a shell or a command.
func (s *SSH) sshSession(ss gssh.Session) {
	start := &session.Start{Env: sshEnv(ss.Environ())}
	if cmd := ss.RawCommand(); cmd != "" {
		start.Cmd = cmd
	} else {
		start.Argv = loginShellArgv
	}
	pty, winCh, isPty := ss.Pty()
	if isPty {
		start.TTY, start.Rows, start.Cols = true, clampSize(pty.Window.Height), clampSize(pty.Window.Width)
		if pty.Term != "" {
			start.Env = append(start.Env, "TERM="+pty.Term)
		}
	}
	_ = ss.Exit(s.sshRun(ss, start, winCh))
}

// loginShellArgv runs the box's login shell: bash, or sh in an image
// without bash.
var loginShellArgv = []string{"sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l"}

// sshSFTP serves the sftp subsystem with boxd's sftp server in the box.
func (s *SSH) sshSFTP(ss gssh.Session) {
	id, _ := ss.Context().Value(ctxBoxID{}).(string)
	b, err := s.host.Box(id)
	if id == "" || err != nil {
		fmt.Fprintf(ss.Stderr(), "boxd: %s\n", noSuchBox(ss.User()))
		_ = ss.Exit(255)
		return
	}
	argv, err := sandbox.AgentArgv(s.cfg.Isolation, s.cfg.AgentBinary, b.Image != "")
	if err != nil {
		fmt.Fprintf(ss.Stderr(), "boxd: sftp: %v\n", err)
		_ = ss.Exit(255)
		return
	}
	start := &session.Start{Argv: argv, Env: []string{agent.EnvSFTP + "=1"}}
	_ = ss.Exit(s.sshRun(ss, start, nil))
}

// sshRun runs start in the connection's box, wired to the SSH channel,
// and returns the exit status to report.
func (s *SSH) sshRun(ss gssh.Session, start *session.Start, winCh <-chan gssh.Window) int {
	ctx := ss.Context()
	fail := func(msg string) int {
		fmt.Fprintln(ss.Stderr(), "boxd: "+msg)
		return 255
	}
	id, _ := ctx.Value(ctxBoxID{}).(string)
	b, err := s.host.Box(id)
	if id == "" || err != nil {
		return fail(noSuchBox(ss.User()))
	}
	rt, err := s.host.EnsureRunning(ctx, b)
	if err != nil {
		return fail(err.Error())
	}
	defer s.host.Busy(b.ID)()
	start.Cwd = "/workspace/home"
	sess, err := rt.Session(ctx, start)
	if err != nil {
		return fail(err.Error())
	}
	defer sess.Close()

	go func() {
		_, _ = io.Copy(sess.Stdin, ss)
		_ = sess.Stdin.Close()
	}()
	if winCh != nil {
		go func() {
			for w := range winCh {
				_ = sess.Resize(ctx, clampSize(w.Height), clampSize(w.Width))
			}
		}()
	}
	sigs := make(chan gssh.Signal, 8)
	ss.Signals(sigs)
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = sess.Signal(ctx, string(sig))
			case <-ctx.Done():
				return
			}
		}
	}()
	var out sync.WaitGroup
	out.Add(2)
	go func() { defer out.Done(); _, _ = io.Copy(ss, sess.Stdout) }()
	go func() { defer out.Done(); _, _ = io.Copy(ss.Stderr(), sess.Stderr) }()
	out.Wait()
	code, err := sess.Wait(ctx)
	if err != nil {
		return fail(err.Error())
	}
	return code
}

// sshEnv keeps the client's environment entries a session can take.
func sshEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" && !strings.ContainsRune(kv, 0) {
			out = append(out, kv)
		}
	}
	return out
}

// clampSize keeps a terminal dimension in the range a session takes.
func clampSize(n int) int {
	return min(max(n, 1), 65535)
}
