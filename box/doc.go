// Package box is the Go SDK for Upstash Box, a hosted sandbox service with a
// REST API for creating boxes, running commands and agents in them, and
// moving files in and out.
//
// Everything starts with a [Client], built by [NewClient]. By default it reads
// the API key from UPSTASH_BOX_API_KEY and the endpoint from
// UPSTASH_BOX_BASE_URL; [Option] values passed to NewClient override both.
//
// The client retries requests that are safe to repeat (connection failures,
// 408, 429 and 5xx responses) with exponential backoff, honours Retry-After,
// and reports every non-2xx response as an [*Error], reached with
// [errors.As] or the [StatusCode] and [IsNotFound] helpers.
//
// The resource APIs (boxes, exec, files, agents, snapshots) are documented
// on their own types.
package box

// Note for maintainers: this overview so far covers only the transport
// core; extend it with a short tour of the resource APIs as they land.
