package box

import (
	"context"
	"time"

	"github.com/upstash/box-go/gen"
)

// PublicURL is a port of a box exposed on a URL that needs no API key:
// https://{box-id}-{port}.preview.box.upstash.com in the cloud, and
// http://{box-id}-{port}.localhost:{port of boxd} on boxd.
// WebSockets work through it too. GetPublicURL returns it with its
// credentials, the only time they are told; ListPublicURLs reports a
// PublicURLInfo instead.
type PublicURL struct {
	URL  string
	Port int
	// Token is set when the URL was created with BearerToken: requests
	// may send `Authorization: Bearer <Token>`.
	Token string
	// Username and Password are set when the URL was created with
	// BasicAuth: requests may send them as HTTP basic auth.
	Username string
	Password string
}

// PublicURLInfo is a public URL as ListPublicURLs reports it: which kinds
// of auth it has, never its credentials (GetPublicURL returns those, once).
type PublicURLInfo struct {
	// ID is "{box-id}-{port}".
	ID        string
	Port      int
	URL       string
	CreatedAt time.Time
	// BasicAuth reports whether the URL has basic-auth credentials.
	BasicAuth bool
	// BearerToken reports whether the URL has a bearer token.
	BearerToken bool
}

// PublicURLParams protects a public URL. With neither field set, anyone
// who knows the URL reaches the port; with both, a request passes with
// either credential.
type PublicURLParams struct {
	// BearerToken makes the server generate a token (PublicURL.Token).
	BearerToken bool
	// BasicAuth makes the server generate a user name and password.
	BasicAuth bool
}

// ErrAuthConflict was returned when PublicURLParams asked for both kinds
// of auth.
//
// Deprecated: both kinds may be set, as on the cloud and on boxd, and no
// call returns this error any more. It is kept so that code that checks
// for it still compiles.
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

func publicURLInfoFrom(u *gen.PublicURLListItem) PublicURLInfo {
	return PublicURLInfo{ID: u.ID, Port: u.Port, URL: u.URL, CreatedAt: unixTime(u.CreatedAt), BasicAuth: u.BasicAuth, BearerToken: u.BearerToken}
}

// GetPublicURL exposes port on a public URL (POST /v2/box/{id}/preview)
// and returns it, with its credentials when params asks for auth. The
// port is checked (1–65535) before any request. A paused box is resumed.
//
// Asking again for a port that has a URL replaces its credentials: the
// old ones stop working (on boxd at once, open connections included). The
// call is retried like an idempotent one, since a repeat can at most
// replace credentials that were never returned.
func (b *Box) GetPublicURL(ctx context.Context, port int, params *PublicURLParams, opts ...Option) (*PublicURL, error) {
	ctx = withCallOptions(ctx, opts)
	if err := checkPort(port); err != nil {
		return nil, err
	}
	body := gen.PreviewRequest{Port: port}
	if params != nil {
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

// ListPublicURLs returns the box's public URLs (GET /v2/box/{id}/preview),
// with the kinds of auth each has but not their credentials.
func (b *Box) ListPublicURLs(ctx context.Context, opts ...Option) ([]PublicURLInfo, error) {
	ctx = withCallOptions(ctx, opts)
	r, err := call[gen.PreviewsResponse](b.c.api.ListPreviews(ctx, b.id))
	if err != nil {
		return nil, err
	}
	out := make([]PublicURLInfo, len(r.Previews))
	for i := range r.Previews {
		out[i] = publicURLInfoFrom(&r.Previews[i])
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
