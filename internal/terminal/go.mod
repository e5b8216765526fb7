module github.com/upstash/box-go/internal/terminal

go 1.26.0

require (
	github.com/upstash/box-go v0.0.0-00010101000000-000000000000
	golang.org/x/term v0.48.0
)

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/oapi-codegen/runtime v1.9.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
