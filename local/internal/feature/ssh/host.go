// Package ssh is the SSH feature: `ssh <box-id>@<host>` with the API key
// as the password or a public key, a shell, a command, a terminal,
// signals and the sftp subsystem, each run through the box's exec
// sessions, and local forwards to ports on the box's loopback. It owns
// the SSH servers, their host key in the data directory, the account's
// keys (GET/POST/DELETE /v2/ssh-keys, boxd's own routes) and the
// admission of their clients (through an sshguard.Guard). It reaches
// boxes only through its Host.
package ssh

import (
	"context"
	"log/slog"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/sandbox"
	"github.com/upstash/box-go/local/internal/sshguard"
	"github.com/upstash/box-go/local/internal/store"
)

// Host is what SSH needs of boxd's core.
type Host interface {
	// Box returns the record of a box, or an error of kind not found.
	Box(idOrName string) (*store.Box, error)
	// EnsureRunning starts box b if it is not running and returns the
	// client of its agent (whose DialPort reaches a port in the box).
	EnsureRunning(ctx context.Context, b *store.Box) (*agent.Client, error)
	// Busy marks a box in use until done is called.
	Busy(id string) (done func())
	Logger() *slog.Logger
}

// Keys is the store of the account's SSH keys, the records the feature
// owns (boxd's *store.Store).
type Keys interface {
	SSHKeys() ([]*store.SSHKey, error)
	SSHKeyByWire(wire []byte) (*store.SSHKey, error)
	AddSSHKey(k *store.SSHKey, max int) (existing string, err error)
	DeleteSSHKey(id string) error
}

// Config configures the feature.
type Config struct {
	Host Host
	// Keys keeps the account's SSH keys.
	Keys Keys
	// DataDir keeps the host key.
	DataDir string
	// APIKey is the password.
	APIKey string
	// AuthorizedKeysFile is an OpenSSH authorized_keys file whose keys
	// log in as the account's do; empty for none.
	AuthorizedKeysFile string
	Isolation          sandbox.Mode
	AgentBinary        string
	// Guard bounds the clients before they authenticate.
	Guard *sshguard.Guard
}
