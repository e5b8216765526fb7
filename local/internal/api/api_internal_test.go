package api

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
)

// TestStatusOf checks the API edge's one mapping of errors to statuses:
// every kind has its status, a wrapped kind keeps it, the outermost kind
// wins, and errors of no kind fall back to what they are.
func TestStatusOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{errdefs.Invalid("bad"), http.StatusBadRequest},
		{errdefs.NotFound("none"), http.StatusNotFound},
		{errdefs.Unauthenticated("no key"), http.StatusUnauthorized},
		{errdefs.Permission("no"), http.StatusForbidden},
		{errdefs.Conflict("taken"), http.StatusConflict},
		{errdefs.TooLarge("big"), http.StatusRequestEntityTooLarge},
		{errdefs.NotImplemented("later"), http.StatusNotImplemented},
		{errdefs.MissingDependency("install it"), http.StatusFailedDependency},
		{errdefs.Upstream("registry"), http.StatusBadGateway},
		{errdefs.UpstreamTimeout("slow"), http.StatusGatewayTimeout},
		{errdefs.Unavailable("stopped"), http.StatusServiceUnavailable},
		{errdefs.NoSpace("full"), http.StatusInsufficientStorage},
		{fmt.Errorf("create: %w", errdefs.Conflict("taken")), http.StatusConflict},
		{errdefs.Upstream("clone: %w", errdefs.NotFound("no branch")), http.StatusBadGateway},
		{fmt.Errorf("get: %w", store.ErrNotFound), http.StatusNotFound},
		{store.ErrNameTaken, http.StatusConflict},
		{errors.New("disk on fire"), http.StatusInternalServerError},
	} {
		if got := Status(tc.err); got != tc.want {
			t.Errorf("Status(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestEveryKindHasAStatus keeps the table whole: a kind added to errdefs
// without a status here would be answered 500.
func TestEveryKindHasAStatus(t *testing.T) {
	t.Parallel()
	for _, kind := range []error{
		errdefs.ErrInvalidArgument, errdefs.ErrNotFound, errdefs.ErrUnauthenticated, errdefs.ErrPermission, errdefs.ErrConflict,
		errdefs.ErrTooLarge, errdefs.ErrNotImplemented, errdefs.ErrMissingDependency, errdefs.ErrUpstream,
		errdefs.ErrUpstreamTimeout, errdefs.ErrUnavailable, errdefs.ErrNoSpace,
	} {
		if _, ok := statuses[kind]; !ok {
			t.Errorf("kind %v has no status", kind)
		}
	}
}
