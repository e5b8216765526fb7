package box

import (
	"context"

	"github.com/upstash/box-go/gen"
)

// Account-level environment variables are set in every box the account
// creates afterwards.

// SetEnv sets one account environment variable.
func (c *Client) SetEnv(ctx context.Context, key, value string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if key == "" {
		return invalidf("box: env key is required")
	}
	return none(c.api.SetEnv(withIdempotent(ctx), key, gen.SetEnvRequest{Value: value}))
}

// ListEnv returns the account's environment variables. Values are masked
// by the server: only the keys are meaningful.
func (c *Client) ListEnv(ctx context.Context, opts ...Option) (map[string]string, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.EnvVarsResponse](c.api.ListEnv(ctx))
	if err != nil {
		return nil, err
	}
	if r.EnvVars == nil {
		return map[string]string{}, nil
	}
	return r.EnvVars, nil
}

// SetAllEnv replaces all account environment variables with env: keys not
// in env are removed, and an empty env clears them all.
func (c *Client) SetAllEnv(ctx context.Context, env map[string]string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if env == nil {
		env = map[string]string{}
	}
	return none(c.api.SetAllEnv(withIdempotent(ctx), gen.SetAllEnvRequest{EnvVars: env}))
}

// DeleteEnv removes one account environment variable.
func (c *Client) DeleteEnv(ctx context.Context, key string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if key == "" {
		return invalidf("box: env key is required")
	}
	return none(c.api.DeleteEnv(ctx, key))
}
