package local

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/upstash/box-go/local/internal/sshguard"
)

// Defaults of the bounds on SSH clients before they authenticate.
const (
	// DefaultSSHAuthTimeout is long enough for a person to paste the
	// key at ssh's prompt, and short enough that a client that never
	// authenticates holds its place for little time.
	DefaultSSHAuthTimeout             = 20 * time.Second
	DefaultSSHMaxUnauthenticated      = 256
	DefaultSSHMaxUnauthenticatedPerIP = 16
)

// newSSHGuard returns the bounds of cfg on SSH clients before they
// authenticate. The rate limit on failed logins is sshguard's default:
// after 5 failures from an address, each further one locks the address
// out for twice as long as the one before, from 1 second to 5 minutes,
// and the count is forgotten after 15 quiet minutes; 4,096 addresses are
// remembered, those that failed most recently.
func newSSHGuard(cfg Config, log *slog.Logger) *sshguard.Guard {
	bound := func(v, def int) int {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0 // none
		}
		return v
	}
	timeout := cfg.SSHAuthTimeout
	switch {
	case timeout == 0:
		timeout = DefaultSSHAuthTimeout
	case timeout < 0:
		timeout = 0 // none
	}
	return sshguard.New(sshguard.Config{
		AuthTimeout:                 timeout,
		MaxUnauthenticated:          bound(cfg.SSHMaxUnauthenticated, DefaultSSHMaxUnauthenticated),
		MaxUnauthenticatedPerSource: bound(cfg.SSHMaxUnauthenticatedPerIP, DefaultSSHMaxUnauthenticatedPerIP),
		OnLockout: func(src netip.Prefix, failures int, d time.Duration) {
			log.Warn("SSH: failed logins; the address's logins are refused for a while", "source", src, "failures", failures, "for", d)
		},
	})
}

// ServeSSH serves boxes over SSH on l until ctx ends or Close is called:
// `ssh <box-id>@<host> -p <port>`, with the API key as the password, or a
// public key of the account's (GET/POST /v2/ssh-keys) or of
// Config.SSHAuthorizedKeys. The host key is made on first use and kept in
// the data directory. Like the API's, l's port is out of every box's
// reach. `ssh -L` reaches ports on a box's own loopback; no other
// forward is made.
func (s *Server) ServeSSH(ctx context.Context, l net.Listener) error {
	s.ownPort(l.Addr())
	return s.ssh.Serve(ctx, l)
}

// SSHHostKey returns the SSH server's host key, as a line of known_hosts
// after the host name ("ssh-ed25519 AAAA…"), and its SHA-256
// fingerprint, as ssh-keygen -l shows it ("SHA256:…"). The key is made
// and kept in the data directory when it is not there yet.
func (s *Server) SSHHostKey() (publicKey, fingerprint string, err error) {
	signer, err := s.ssh.HostKey()
	if err != nil {
		return "", "", err
	}
	pub := signer.PublicKey()
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub))), gossh.FingerprintSHA256(pub), nil
}
