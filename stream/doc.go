// Package stream holds the transport codecs shared by the Box SDK client and
// the boxd server: the wire formats of the Box API's streaming endpoints and
// a generic pull iterator over them.
//
//   - [Decoder] and [Encoder] read and write server-sent events
//     (text/event-stream), the format of POST /v2/box/{id}/run/stream. The
//     decoder follows the WHATWG "event stream interpretation" rules, bounds
//     its memory, and does not allocate per event in the common case.
//   - [ExecDecoder], [WriteExit] and [WriteExecError] handle the framing of
//     POST /v2/box/{id}/exec-stream and /code-stream: raw program output
//     followed by one "event: exit" or "event: error" frame. Unlike the
//     official JavaScript client, the decoder is not fooled by a program
//     that prints a frame of its own.
//   - [Stream] turns a "read the next value" function into a
//     Next/Current/Err/Close iterator (and an [iter.Seq2] through
//     [Stream.All]) that can be aborted from another goroutine.
//
// The package uses only the standard library.
package stream
