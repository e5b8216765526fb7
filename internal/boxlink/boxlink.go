// Package boxlink lets package ephemeral create boxes through package box
// without box exporting a way to do so itself: an ephemeral box is only
// ever reached through ephemeral.Box, whose type leaves out what such a
// box cannot do. Package box fills in the link when it is initialised,
// which happens before any package that imports it.
package boxlink

// NewEphemeral holds box's
//
//	func(ctx context.Context, c *box.Client, p *box.CreateParams, ttl int64, snapshotID string, opts []box.Option) (*box.Box, error)
//
// It creates an ephemeral box with the name, labels, size, runtime, env,
// attach headers and network policy of p (other fields are ignored), a
// lifetime of ttl seconds (0: the server's default), restored from
// snapshotID unless that is empty, with opts as the call's options. It is
// typed any because this package cannot import box, which imports it.
var NewEphemeral any
