// Package conformance runs official Upstash Box SDKs against boxd.
package conformance
