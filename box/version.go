package box

// Version is the version of this SDK. It is sent in the
// Upstash-Telemetry-Sdk header as "box-go@<Version>" unless telemetry is
// disabled.
const Version = "0.1.0"
