package ssh

import (
	"bytes"
	"crypto/rsa"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/upstash/box-go/local/internal/errdefs"
)

// Public keys log in to boxes as the API key does as a password: those
// of the account, which boxd keeps in its store (package store, managed
// over the API), and those of an OpenSSH authorized_keys file that the
// operator names (Config.AuthorizedKeysFile). A key is compared with the
// offered one by its wire form.

// maxAuthorizedKeysFile bounds what boxd reads of the authorized_keys
// file; a larger file gives no keys, and boxd says so.
const maxAuthorizedKeysFile = 1 << 20

// MaxAccountKeys bounds the account's SSH keys.
const MaxAccountKeys = 1000

// minRSABits is the smallest RSA key the account may add.
const minRSABits = 2048

// ParsePublicKey reads one line of an authorized_keys file without
// options, as the account's keys are added: the key, and its comment. It
// refuses, with an error of kind invalid argument, anything else: a
// private key, options, a certificate, more than one key, an RSA key of
// fewer than 2048 bits.
func ParsePublicKey(line string) (gossh.PublicKey, string, error) {
	line = strings.TrimSpace(line)
	switch {
	case line == "":
		return nil, "", errdefs.Invalid("public_key is required: one line of an authorized_keys file, e.g. the contents of ~/.ssh/id_ed25519.pub")
	case strings.Contains(line, "PRIVATE KEY"):
		return nil, "", errdefs.Invalid("this is a private key; give its public key (the .pub file), and keep the private key to yourself")
	}
	key, comment, options, rest, err := gossh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, "", errdefs.Invalid("public_key is not an OpenSSH public key (want a line such as \"ssh-ed25519 AAAA… you@host\"): %v", err)
	}
	if len(options) > 0 {
		return nil, "", errdefs.Invalid("public_key has authorized_keys options (%s); boxd honours none, so give the key alone", strings.Join(options, ","))
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, "", errdefs.Invalid("public_key holds more than one key; add them one at a time")
	}
	if _, ok := key.(*gossh.Certificate); ok {
		return nil, "", errdefs.Invalid("public_key is a certificate; give the key itself")
	}
	if ck, ok := key.(gossh.CryptoPublicKey); ok {
		if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
			return nil, "", errdefs.Invalid("public_key is an RSA key of %d bits; boxd takes RSA keys of %d bits or more", rk.N.BitLen(), minRSABits)
		}
	}
	if strings.ContainsFunc(comment, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, "", errdefs.Invalid("public_key's comment has control characters")
	}
	return key, comment, nil
}

// authorizedKeys is the operator's authorized_keys file, read again when
// it changes (its size, time or inode), at most once a second.
type authorizedKeys struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   fileStamp
	keys    [][]byte // wire forms
}

// fileStamp tells a file's versions apart.
type fileStamp struct {
	size    int64
	modTime time.Time
	inode   uint64
	ok      bool
}

// newAuthorizedKeys reads the file at path for the first time: an error
// when it cannot be read, so that boxd does not start without keys its
// operator meant to give it.
func newAuthorizedKeys(path string, log *slog.Logger) (*authorizedKeys, error) {
	a := &authorizedKeys{path: path, log: log}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("the SSH authorized keys file: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("the SSH authorized keys file %s is a directory", path)
	}
	if err := a.load(stampOf(fi)); err != nil {
		return nil, fmt.Errorf("the SSH authorized keys file: %w", err)
	}
	return a, nil
}

// has reports whether wire is one of the file's keys, reading the file
// again first when it has changed.
func (a *authorizedKeys) has(wire []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := time.Now(); now.Sub(a.checked) >= time.Second {
		a.checked = now
		var st fileStamp
		if fi, err := os.Stat(a.path); err == nil {
			st = stampOf(fi)
		}
		if st != a.stamp {
			if err := a.load(st); err != nil {
				a.log.Warn("SSH: the authorized keys file cannot be read; its keys log in no more", "file", a.path, "err", err)
				a.keys, a.stamp = nil, st
			}
		}
	}
	found := 0
	for _, k := range a.keys {
		found |= subtle.ConstantTimeCompare(k, wire)
	}
	return found == 1
}

// load reads the file, whose stamp is st; a.mu is held (or a is new).
func (a *authorizedKeys) load(st fileStamp) error {
	if !st.ok {
		return errors.New("it is gone")
	}
	f, err := os.Open(a.path)
	if err != nil {
		return err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxAuthorizedKeysFile+1))
	if err != nil {
		return err
	}
	if len(raw) > maxAuthorizedKeysFile {
		return fmt.Errorf("it is larger than %d bytes", maxAuthorizedKeysFile)
	}
	var keys [][]byte
	for n, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, _, options, _, err := gossh.ParseAuthorizedKey([]byte(line))
		switch {
		case err != nil:
			a.log.Warn("SSH: a line of the authorized keys file is not a key; it is skipped", "file", a.path, "line", n+1)
			continue
		case len(options) > 0:
			// A key its owner restricted must not log in unrestricted.
			a.log.Warn("SSH: a key of the authorized keys file has options, which boxd does not honour; it is skipped", "file", a.path, "line", n+1)
			continue
		}
		if _, ok := key.(*gossh.Certificate); ok {
			a.log.Warn("SSH: a line of the authorized keys file is a certificate; it is skipped", "file", a.path, "line", n+1)
			continue
		}
		keys = append(keys, key.Marshal())
	}
	a.keys, a.stamp = keys, st
	a.log.Info("SSH: authorized keys read", "file", a.path, "keys", len(keys))
	return nil
}
