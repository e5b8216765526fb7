// Package errdefs holds the kinds of error boxd's domain code returns: an
// invalid argument, a missing record, a conflict with the box's state and
// the like. The code that finds a problem says what kind it is; the API
// edge alone turns a kind into an HTTP status, so that no status is chosen
// deep inside a feature.
//
// An error of a kind is built with the kind's maker, whose message is the
// formatted text alone (the kind adds no words of its own), and is tested
// with errors.Is against the kind's sentinel. Of returns the outermost
// kind of an error.
package errdefs

import (
	"errors"
	"fmt"
)

// The kinds. Each is a sentinel that errors.Is finds in an error built by
// the maker of the same name.
var (
	// ErrInvalidArgument is a request that cannot be carried out as given:
	// a malformed or missing field, a value out of range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound is a record or resource that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnauthenticated is a request without the credentials it needs:
	// no API key, or a token that is wrong or has expired.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermission is a request the caller may not make.
	ErrPermission = errors.New("permission denied")
	// ErrConflict is a request that the resource's present state refuses:
	// a name already taken, a box that is not running.
	ErrConflict = errors.New("conflict")
	// ErrTooLarge is a request or a result above a size limit.
	ErrTooLarge = errors.New("too large")
	// ErrNotImplemented is an operation this boxd does not offer.
	ErrNotImplemented = errors.New("not implemented")
	// ErrMissingDependency is a request that needs something the box or
	// the host does not have: a CLI not installed, a key not given.
	ErrMissingDependency = errors.New("missing dependency")
	// ErrUpstream is a failure of a service boxd relies on: a registry,
	// a model provider, a page the browser loads.
	ErrUpstream = errors.New("upstream failure")
	// ErrUpstreamTimeout is a service boxd relies on that did not answer
	// in time.
	ErrUpstreamTimeout = errors.New("upstream timeout")
	// ErrUnavailable is a part of boxd that is not ready; the request may
	// succeed later.
	ErrUnavailable = errors.New("unavailable")
	// ErrNoSpace is a full data file system.
	ErrNoSpace = errors.New("no space left")
)

// kindError is an error of one kind. Its message is its cause's alone.
type kindError struct {
	kind  error
	cause error
}

func (e *kindError) Error() string   { return e.cause.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.cause} }

// New returns an error of kind whose message is fmt.Errorf(format, args...),
// which stays reachable through errors.Is and errors.As (a %w verb wraps
// as fmt.Errorf does). kind should be one of this package's sentinels.
func New(kind error, format string, args ...any) error {
	return &kindError{kind: kind, cause: fmt.Errorf(format, args...)}
}

// Of returns the kind of err: the sentinel of the outermost error of a kind
// in its tree, or nil when err is of no kind.
func Of(err error) error {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return nil
}

// Invalid returns an error of kind ErrInvalidArgument.
func Invalid(format string, args ...any) error { return New(ErrInvalidArgument, format, args...) }

// NotFound returns an error of kind ErrNotFound.
func NotFound(format string, args ...any) error { return New(ErrNotFound, format, args...) }

// Unauthenticated returns an error of kind ErrUnauthenticated.
func Unauthenticated(format string, args ...any) error {
	return New(ErrUnauthenticated, format, args...)
}

// Permission returns an error of kind ErrPermission.
func Permission(format string, args ...any) error { return New(ErrPermission, format, args...) }

// Conflict returns an error of kind ErrConflict.
func Conflict(format string, args ...any) error { return New(ErrConflict, format, args...) }

// TooLarge returns an error of kind ErrTooLarge.
func TooLarge(format string, args ...any) error { return New(ErrTooLarge, format, args...) }

// NotImplemented returns an error of kind ErrNotImplemented.
func NotImplemented(format string, args ...any) error {
	return New(ErrNotImplemented, format, args...)
}

// MissingDependency returns an error of kind ErrMissingDependency.
func MissingDependency(format string, args ...any) error {
	return New(ErrMissingDependency, format, args...)
}

// Upstream returns an error of kind ErrUpstream.
func Upstream(format string, args ...any) error { return New(ErrUpstream, format, args...) }

// UpstreamTimeout returns an error of kind ErrUpstreamTimeout.
func UpstreamTimeout(format string, args ...any) error {
	return New(ErrUpstreamTimeout, format, args...)
}

// Unavailable returns an error of kind ErrUnavailable.
func Unavailable(format string, args ...any) error { return New(ErrUnavailable, format, args...) }

// NoSpace returns an error of kind ErrNoSpace.
func NoSpace(format string, args ...any) error { return New(ErrNoSpace, format, args...) }
