package box

import (
	"context"
	"time"

	"github.com/upstash/box-go/gen"
)

// These calls are boxd's own (the local backend's): the Upstash cloud
// answers them 404. boxd serves `ssh <box-id>@host -p port`, with the API
// key as the password or with a public key of the account's.

// SSHInfo is where boxd serves SSH, and the host key it presents.
type SSHInfo struct {
	// Address is where the server listens, host:port; a host of 0.0.0.0
	// or :: means every address of boxd's machine.
	Address string
	// Port is Address's port.
	Port int
	// HostKey is the host's public key as a known_hosts line has it
	// after the host name ("ssh-ed25519 AAAA…").
	HostKey string
	// Fingerprint is HostKey's SHA-256 fingerprint, as ssh-keygen -l
	// shows it ("SHA256:…").
	Fingerprint string
}

// SSHKey is a public key that logs in to boxd's SSH server.
type SSHKey struct {
	ID string
	// PublicKey is the key's type and base64 ("ssh-ed25519 AAAA…").
	PublicKey string
	// Type is the key's type, e.g. "ssh-ed25519".
	Type string
	// Fingerprint is the key's SHA-256 fingerprint ("SHA256:…").
	Fingerprint string
	// Comment is what followed the key when it was added.
	Comment   string
	CreatedAt time.Time
}

// SSHInfo returns where boxd serves SSH and its host key (GET /v2/ssh).
// It fails with a 404 *Error when the server serves no SSH (boxd without
// -ssh-addr, or the cloud).
func (c *Client) SSHInfo(ctx context.Context, opts ...Option) (*SSHInfo, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.SSHInfo](c.api.GetSSHInfo(ctx))
	if err != nil {
		return nil, err
	}
	return &SSHInfo{Address: r.Address, Port: r.Port, HostKey: r.HostKey, Fingerprint: r.Fingerprint}, nil
}

// ListSSHKeys returns the account's SSH keys, oldest first (GET
// /v2/ssh-keys, boxd only).
func (c *Client) ListSSHKeys(ctx context.Context, opts ...Option) ([]SSHKey, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[[]gen.SSHKey](c.api.ListSSHKeys(ctx))
	if err != nil {
		return nil, err
	}
	out := make([]SSHKey, 0, len(*r))
	for _, k := range *r {
		out = append(out, sshKeyFrom(k))
	}
	return out, nil
}

// AddSSHKey adds a public key to the account (POST /v2/ssh-keys, boxd
// only): publicKey is one line of an OpenSSH authorized_keys file
// without options, such as the contents of ~/.ssh/id_ed25519.pub. The
// server refuses anything else with a 400 *Error, and a key the account
// has already with a 409.
func (c *Client) AddSSHKey(ctx context.Context, publicKey string, opts ...Option) (*SSHKey, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.SSHKey](c.api.AddSSHKey(ctx, gen.AddSSHKeyRequest{PublicKey: publicKey}))
	if err != nil {
		return nil, err
	}
	k := sshKeyFrom(*r)
	return &k, nil
}

// DeleteSSHKey removes a key from the account (DELETE
// /v2/ssh-keys/{id}, boxd only).
func (c *Client) DeleteSSHKey(ctx context.Context, id string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkID("SSH key id", id); err != nil {
		return err
	}
	return none(c.api.DeleteSSHKey(ctx, id))
}

func sshKeyFrom(k gen.SSHKey) SSHKey {
	return SSHKey{
		ID:          k.ID,
		PublicKey:   k.PublicKey,
		Type:        k.Type,
		Fingerprint: k.Fingerprint,
		Comment:     deref(k.Comment),
		CreatedAt:   unixTime(k.CreatedAt),
	}
}
