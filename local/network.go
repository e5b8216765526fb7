package local

import (
	"context"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/egress"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// validateNetworkPolicy checks a policy from a request (see
// egress.Compile for the rules).
func validateNetworkPolicy(np *gen.NetworkPolicy) error {
	if _, err := compilePolicy(np); err != nil {
		return errdefs.Invalid("network_policy: %v", err)
	}
	return nil
}

// validateAttachHeaders checks attach_headers from a request. The error
// never quotes a header value.
func validateAttachHeaders(h map[string]map[string]string) error {
	if _, err := egress.CompileHeaders(h); err != nil {
		return errdefs.Invalid("attach_headers: %v", err)
	}
	return nil
}

// UpdateNetworkPolicy replaces a box's policy. It applies at once: new
// connections are checked against it, and open ones it no longer allows
// are closed.
func (c *controlPlane) UpdateNetworkPolicy(ctx context.Context, req gen.UpdateNetworkPolicyRequestObject) (gen.UpdateNetworkPolicyResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	np := *req.Body
	if err := validateNetworkPolicy(&np); err != nil {
		return nil, err
	}
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := c.s.core.UpdateBox(b.ID, func(x *store.Box) error {
		x.NetworkPolicy = wire.Raw(np)
		return nil
	}); err != nil {
		return nil, err
	}
	c.s.net.policyChanged(b.ID)
	c.s.core.Logf(b.ID, "info", "system", "network policy set to "+string(np.Mode))
	return gen.UpdateNetworkPolicy200JSONResponse(wire.Message("Network policy updated")), nil
}
