package errdefs

import (
	"errors"
	"io/fs"
	"testing"
)

func TestKinds(t *testing.T) {
	t.Parallel()
	makers := map[error]func(string, ...any) error{
		ErrInvalidArgument:   Invalid,
		ErrNotFound:          NotFound,
		ErrUnauthenticated:   Unauthenticated,
		ErrPermission:        Permission,
		ErrConflict:          Conflict,
		ErrTooLarge:          TooLarge,
		ErrNotImplemented:    NotImplemented,
		ErrMissingDependency: MissingDependency,
		ErrUpstream:          Upstream,
		ErrUpstreamTimeout:   UpstreamTimeout,
		ErrUnavailable:       Unavailable,
		ErrNoSpace:           NoSpace,
	}
	for kind, mk := range makers {
		err := mk("box %s: %w", "b1", fs.ErrNotExist)
		if got, want := err.Error(), "box b1: "+fs.ErrNotExist.Error(); got != want {
			t.Errorf("%v: message %q, want %q (a kind adds no words)", kind, got, want)
		}
		if !errors.Is(err, kind) {
			t.Errorf("%v: errors.Is does not find its kind", kind)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v: the wrapped cause is lost", kind)
		}
		if Of(err) != kind {
			t.Errorf("Of(%v) = %v", kind, Of(err))
		}
		for other := range makers {
			if other != kind && errors.Is(err, other) {
				t.Errorf("%v is also %v", kind, other)
			}
		}
	}
}

func TestOfTakesTheOutermostKind(t *testing.T) {
	t.Parallel()
	inner := NotFound("no such branch")
	outer := Upstream("clone: %w", inner)
	if Of(outer) != ErrUpstream {
		t.Errorf("Of = %v, want the outer kind", Of(outer))
	}
	if !errors.Is(outer, ErrNotFound) {
		t.Error("the inner kind is not reachable")
	}
	if Of(errors.New("plain")) != nil || Of(nil) != nil {
		t.Error("an error of no kind has a kind")
	}
}
