package box

import (
	"context"
	"errors"

	"github.com/upstash/box-go/gen"
)

// ErrNotKeepAlive is returned, before any request, by the init-command
// calls on a box that is not keep-alive.
var ErrNotKeepAlive = errors.New("box: init commands are only available for keep-alive boxes")

// InitCommand returns the command a keep-alive box runs when it starts
// ("" for none).
func (b *Box) InitCommand(ctx context.Context, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	if !b.Info().KeepAlive {
		return "", ErrNotKeepAlive
	}
	r, err := call[gen.InitCommand](b.c.api.GetInitCommand(ctx, b.id))
	if err != nil {
		return "", err
	}
	return r.InitCommand, nil
}

// SetInitCommand sets the command a keep-alive box runs when it starts and
// after it resumes; it is started again if it exits, and its output goes
// to the box's log.
func (b *Box) SetInitCommand(ctx context.Context, command string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if !b.Info().KeepAlive {
		return ErrNotKeepAlive
	}
	if command == "" {
		return invalidf("box: init command is required")
	}
	return none(b.c.api.SetInitCommand(withIdempotent(ctx), b.id, gen.InitCommand{InitCommand: command}))
}

// DeleteInitCommand removes the box's init command and stops it.
func (b *Box) DeleteInitCommand(ctx context.Context, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if !b.Info().KeepAlive {
		return ErrNotKeepAlive
	}
	return none(b.c.api.DeleteInitCommand(ctx, b.id))
}
