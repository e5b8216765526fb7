package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// The API of the SSH feature: boxd's own operations (the cloud has
// none of them), where its SSH server listens and the account's keys.

// GetSSHInfo answers where boxd serves SSH and with which host key.
func (s *SSH) GetSSHInfo(ctx context.Context, _ gen.GetSSHInfoRequestObject) (gen.GetSSHInfoResponseObject, error) {
	s.mu.Lock()
	var addr net.Addr
	if len(s.addrs) > 0 {
		addr = s.addrs[0]
	}
	s.mu.Unlock()
	if addr == nil {
		return nil, errdefs.NotFound("boxd serves no SSH (start it with -ssh-addr)")
	}
	signer, err := s.HostKey()
	if err != nil {
		return nil, err
	}
	pub := signer.PublicKey()
	info := gen.GetSSHInfo200JSONResponse{
		Address:     addr.String(),
		HostKey:     strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub))),
		Fingerprint: gossh.FingerprintSHA256(pub),
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		info.Port = ta.Port
	}
	return info, nil
}

// ListSSHKeys answers the account's SSH keys.
func (s *SSH) ListSSHKeys(ctx context.Context, _ gen.ListSSHKeysRequestObject) (gen.ListSSHKeysResponseObject, error) {
	keys, err := s.cfg.Keys.SSHKeys()
	if err != nil {
		return nil, err
	}
	out := make(gen.ListSSHKeys200JSONResponse, 0, len(keys))
	for _, k := range keys {
		w, err := wireKey(k)
		if err != nil {
			continue // a record no key parses from logs in nobody either
		}
		out = append(out, w)
	}
	return out, nil
}

// AddSSHKey adds a key to the account.
func (s *SSH) AddSSHKey(ctx context.Context, req gen.AddSSHKeyRequestObject) (gen.AddSSHKeyResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("public_key is required")
	}
	key, comment, err := ParsePublicKey(req.Body.PublicKey)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	rec := &store.SSHKey{
		ID:        "sshkey_" + hex.EncodeToString(id[:]),
		Wire:      key.Marshal(),
		Comment:   comment,
		CreatedAt: time.Now().Unix(),
	}
	existing, err := s.cfg.Keys.AddSSHKey(rec, MaxAccountKeys)
	switch {
	case errors.Is(err, store.ErrSSHKeyExists):
		return nil, errdefs.New(errdefs.ErrConflict, "the account has this key already, as %s", existing)
	case errors.Is(err, store.ErrTooManySSHKeys):
		return nil, errdefs.Invalid("the account has %d SSH keys, the most it may have; remove one first", MaxAccountKeys)
	case err != nil:
		return nil, err
	}
	s.host.Logger().Info("SSH: key added", "id", rec.ID, "fingerprint", gossh.FingerprintSHA256(key))
	w, err := wireKey(rec)
	if err != nil {
		return nil, err
	}
	return gen.AddSSHKey200JSONResponse(w), nil
}

// DeleteSSHKey removes a key from the account.
func (s *SSH) DeleteSSHKey(ctx context.Context, req gen.DeleteSSHKeyRequestObject) (gen.DeleteSSHKeyResponseObject, error) {
	if err := s.cfg.Keys.DeleteSSHKey(req.KeyID); errors.Is(err, store.ErrNotFound) {
		return nil, errdefs.NotFound("the account has no SSH key %s", req.KeyID)
	} else if err != nil {
		return nil, err
	}
	s.host.Logger().Info("SSH: key removed", "id", req.KeyID)
	return gen.DeleteSSHKey200JSONResponse(wire.Message("SSH key removed")), nil
}

// wireKey is k as the API shows it.
func wireKey(k *store.SSHKey) (gen.SSHKey, error) {
	pub, err := gossh.ParsePublicKey(k.Wire)
	if err != nil {
		return gen.SSHKey{}, err
	}
	w := gen.SSHKey{
		ID:          k.ID,
		PublicKey:   strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub))),
		Type:        pub.Type(),
		Fingerprint: gossh.FingerprintSHA256(pub),
		CreatedAt:   k.CreatedAt,
	}
	if k.Comment != "" {
		w.Comment = &k.Comment
	}
	return w, nil
}
