// Package api is boxd's API edge: where the kinds of domain errors
// (package errdefs) become HTTP statuses, and how an error is written on
// the wire. Domain code (the core, the features) returns errors of a
// kind and never chooses a status; the route table and the handlers that
// serve raw HTTP (the data-plane proxy, public URLs, the browser's
// WebSockets) answer through Error and Status.
package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
)

// statuses is where the kinds of domain errors (errdefs) become HTTP
// statuses: the one place in boxd that chooses a status for an error.
var statuses = map[error]int{
	errdefs.ErrInvalidArgument:   http.StatusBadRequest,
	errdefs.ErrNotFound:          http.StatusNotFound,
	errdefs.ErrUnauthenticated:   http.StatusUnauthorized,
	errdefs.ErrPermission:        http.StatusForbidden,
	errdefs.ErrConflict:          http.StatusConflict,
	errdefs.ErrTooLarge:          http.StatusRequestEntityTooLarge,
	errdefs.ErrNotImplemented:    http.StatusNotImplemented,
	errdefs.ErrMissingDependency: http.StatusFailedDependency,
	errdefs.ErrUpstream:          http.StatusBadGateway,
	errdefs.ErrUpstreamTimeout:   http.StatusGatewayTimeout,
	errdefs.ErrUnavailable:       http.StatusServiceUnavailable,
	errdefs.ErrNoSpace:           http.StatusInsufficientStorage,
}

// Status is the HTTP status an operation's error is answered with.
func Status(err error) int {
	if kind := errdefs.Of(err); kind != nil {
		if status, ok := statuses[kind]; ok {
			return status
		}
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrNameTaken):
		return http.StatusConflict
	case core.DiskFull(err):
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// Error writes err as the API's error body, with its status.
func Error(w http.ResponseWriter, err error) {
	WriteError(w, Status(err), err.Error())
}

// StoreError answers a failed lookup of a box's record: not found, or an
// internal error whose cause goes to log alone.
func StoreError(log *slog.Logger, w http.ResponseWriter, err error) {
	if errors.Is(err, store.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "box not found")
		return
	}
	log.Error("store", "err", err)
	WriteError(w, http.StatusInternalServerError, "internal error")
}

// WriteError writes the API's error body, {"error": msg}, with status.
func WriteError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
