package box

import (
	"context"
	"errors"

	"github.com/upstash/box-go/gen"
)

// ErrNotKeepAlive was returned by the init-command calls on a box that is
// not keep-alive.
//
// Deprecated: init commands work on every box, and no call returns this
// error any more. It stays for code that compares against it.
var ErrNotKeepAlive = errors.New("box: init commands are only available for keep-alive boxes")

// InitCommand returns the box's init command ("" for none). It works on a
// paused box and does not wake it.
func (b *Box) InitCommand(ctx context.Context, opts ...Option) (string, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.InitCommand](b.c.api.GetInitCommand(ctx, b.id))
	if err != nil {
		return "", err
	}
	return r.InitCommand, nil
}

// SetInitCommand sets the command the box runs, once and in the background,
// each time its sandbox starts: at create, after a restore from a
// snapshot, and when it starts again after losing its processes. Its
// output goes to the box's log. It is not started again when it exits.
//
// On a running box the new command starts at once (the previous one is
// stopped if it still runs). On a paused box the change is stored without
// waking the box and applies when it resumes. command must not be empty;
// boxd refuses one longer than 64 KiB.
func (b *Box) SetInitCommand(ctx context.Context, command string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if command == "" {
		return invalidf("box: init command is required")
	}
	return none(b.c.api.SetInitCommand(withIdempotent(ctx), b.id, gen.InitCommand{InitCommand: command}))
}

// DeleteInitCommand removes the box's init command, so that it no longer
// runs when the box starts; on a running box it is stopped if it still
// runs. Like SetInitCommand, it does not wake a paused box.
func (b *Box) DeleteInitCommand(ctx context.Context, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	return none(b.c.api.DeleteInitCommand(ctx, b.id))
}
