// Package api holds the OpenAPI 3.0.3 description of the Upstash Box REST API.
//
// openapi.yaml is the single source of truth for the wire: every path, field name,
// casing, required field and error body that the Go SDK sends and that the local
// backend (boxd) serves. Package gen is generated from it (run `make generate`); wire
// designed by this project rather than observed in published clients is marked there
// with the extension `x-box-origin: designed`.
package api

import _ "embed"

// Spec is the raw YAML of openapi.yaml, for serving the document or validating
// requests against it at run time.
//
//go:embed openapi.yaml
var Spec []byte
