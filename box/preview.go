package box

import (
	"context"

	"github.com/upstash/box-go/gen"
)

// PublicURL is a port of a box exposed on a URL that needs no API key:
// https://{box-id}-{port}.preview.box.upstash.com in the cloud, and
// http://{box-id}-{port}.preview.localhost:{port of boxd} on boxd.
// WebSockets work through it too.
type PublicURL struct {
	URL  string
	Port int
	// Token is set when the URL was created with BearerToken: requests
	// must send `Authorization: Bearer <Token>`.
	Token string
	// Username and Password are set when the URL was created with
	// BasicAuth: requests must send them as HTTP basic auth.
	Username string
	Password string
}

// PublicURLParams protects a public URL. Set at most one of the two; with
// neither, anyone who knows the URL reaches the port.
type PublicURLParams struct {
	// BearerToken makes the server generate a token (PublicURL.Token).
	BearerToken bool
	// BasicAuth makes the server generate a user name and password.
	BasicAuth bool
}

// ErrAuthConflict is returned, before any request, when PublicURLParams
// asks for both kinds of auth. (boxd refuses the combination too.) Like
// every error of a call's arguments it matches ErrInvalid too.
var ErrAuthConflict = invalidSentinel("box: a public URL takes BearerToken or BasicAuth, not both")

func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return invalidf("box: port must be between 1 and 65535, got %d", port)
	}
	return nil
}

func publicURLFrom(u *gen.PublicURL) PublicURL {
	return PublicURL{URL: u.URL, Port: u.Port, Token: deref(u.Token), Username: deref(u.Username), Password: deref(u.Password)}
}

// GetPublicURL exposes port on a public URL (POST /v2/box/{id}/preview)
// and returns it, with its credentials when params asks for auth. The
// port is checked (1–65535) before any request.
//
// On boxd, asking again for a port that has a URL with the same kind of
// auth returns the same URL and credentials, and asking with another kind
// replaces the credentials; the call is retried like an idempotent one,
// since a repeat can at most replace credentials that were never
// returned.
func (b *Box) GetPublicURL(ctx context.Context, port int, params *PublicURLParams, opts ...Option) (*PublicURL, error) {
	ctx = withCallOptions(ctx, opts)
	if err := checkPort(port); err != nil {
		return nil, err
	}
	body := gen.PreviewRequest{Port: port}
	if params != nil {
		if params.BearerToken && params.BasicAuth {
			return nil, ErrAuthConflict
		}
		if params.BearerToken {
			body.BearerToken = ptr(true)
		}
		if params.BasicAuth {
			body.BasicAuth = ptr(true)
		}
	}
	u, err := call[gen.PublicURL](b.c.api.CreatePreview(withIdempotent(ctx), b.id, body))
	if err != nil {
		return nil, err
	}
	out := publicURLFrom(u)
	return &out, nil
}

// ListPublicURLs returns the box's public URLs, with their credentials.
func (b *Box) ListPublicURLs(ctx context.Context, opts ...Option) ([]PublicURL, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.PreviewsResponse](b.c.api.ListPreviews(ctx, b.id))
	if err != nil {
		return nil, err
	}
	out := make([]PublicURL, len(r.Previews))
	for i := range r.Previews {
		out[i] = publicURLFrom(&r.Previews[i])
	}
	return out, nil
}

// DeletePublicURL removes the public URL of port. On boxd it stops
// working at once, open connections (WebSockets too) included. A port
// without a public URL is a 404 *Error.
func (b *Box) DeletePublicURL(ctx context.Context, port int, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkPort(port); err != nil {
		return err
	}
	return none(b.c.api.DeletePreview(ctx, b.id, port))
}
