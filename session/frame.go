package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Frame types, client to server.
const (
	TypeStart      = "start"
	TypeStdin      = "stdin"
	TypeStdinClose = "stdin_close"
	TypeResize     = "resize"
	TypeSignal     = "signal"
	TypeTerminate  = "terminate"
)

// Frame types, server to client.
const (
	TypeStarted = "started"
	TypeStdout  = "stdout"
	TypeStderr  = "stderr"
	TypeExit    = "exit"
	TypeError   = "error"
)

// Frame is one message of the exec-session wire: a WebSocket text frame
// holding a JSON object whose "type" says which of the other fields mean
// something. Data is base64 on the wire (encoding/json's []byte encoding).
//
// Both sides ignore frames of a type they do not know, so the protocol can
// grow without breaking older peers.
type Frame struct {
	Type string `json:"type"`

	// start
	Argv []string `json:"argv,omitempty"`
	Cmd  string   `json:"cmd,omitempty"`
	TTY  bool     `json:"tty,omitempty"`
	Cwd  string   `json:"cwd,omitempty"`
	Env  []string `json:"env,omitempty"`
	// start (initial size, with tty) and resize
	Rows int `json:"rows,omitempty"`
	Cols int `json:"cols,omitempty"`

	// stdin, stdout, stderr
	Data []byte `json:"data,omitempty"`

	// signal
	Signal string `json:"signal,omitempty"`
	// terminate: milliseconds between SIGTERM and SIGKILL; nil means
	// the server's default.
	GraceMs *int64 `json:"graceMs,omitempty"`

	// started
	PID    int    `json:"pid,omitempty"`
	ExecID string `json:"execId,omitempty"`

	// exit; a pointer so that exit code 0 is still sent.
	Code *int `json:"code,omitempty"`

	// error
	Message string `json:"message,omitempty"`
}

// signals are the signal names a session accepts, as they are sent.
var signals = []string{"TERM", "KILL", "INT", "HUP", "TSTP", "QUIT", "USR1", "USR2"}

// NormalizeSignal returns the wire name of sig: upper-cased, without a
// "SIG" prefix ("sigint" and "SIGINT" become "INT"). It fails for a signal
// other than TERM, KILL, INT, HUP, TSTP, QUIT, USR1 and USR2.
func NormalizeSignal(sig string) (string, error) {
	s := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(sig)), "SIG")
	for _, ok := range signals {
		if s == ok {
			return s, nil
		}
	}
	return "", fmt.Errorf("session: unsupported signal %q (want one of %s)", sig, strings.Join(signals, " "))
}

// Data frames carry nearly all of a session's bytes, so they are encoded
// and decoded without encoding/json when they have the exact shape this
// package writes: {"type":"<t>","data":"<base64>"}. Anything else goes
// through encoding/json, so other writers' spacing or field order is fine.
var dataPrefix = map[string]string{
	TypeStdin:  `{"type":"stdin","data":"`,
	TypeStdout: `{"type":"stdout","data":"`,
	TypeStderr: `{"type":"stderr","data":"`,
}

const dataSuffix = `"}`

// appendData appends the data frame of type typ (stdin, stdout or
// stderr) carrying p to dst.
func appendData(dst []byte, typ string, p []byte) []byte {
	dst = append(dst, dataPrefix[typ]...)
	dst = appendBase64(dst, p)
	return append(dst, dataSuffix...)
}

// encode returns the wire form of f.
func encode(f *Frame) ([]byte, error) {
	if _, ok := dataPrefix[f.Type]; ok && len(f.Data) > 0 {
		return appendData(nil, f.Type, f.Data), nil
	}
	return json.Marshal(f)
}

// errBadFrame marks a message that is not a frame.
var errBadFrame = errors.New("session: bad frame")

// decode parses a frame. A frame of an unknown type decodes without error
// (only Type is then meaningful); a message that is not a JSON object with
// a string "type" is an error.
func decode(msg []byte) (*Frame, error) { return decodeWith(msg, nil) }

// decodeWith is decode, taking the Data of stdin, stdout and stderr frames
// of the usual shape from alloc(type, size) when alloc is not nil and
// returns a slice.
func decodeWith(msg []byte, alloc func(typ string, n int) []byte) (*Frame, error) {
	if len(msg) > 0 && msg[0] == '{' && bytes.HasSuffix(msg, []byte(dataSuffix)) {
		for typ, prefix := range dataPrefix {
			if !bytes.HasPrefix(msg, []byte(prefix)) {
				continue
			}
			enc := msg[len(prefix) : len(msg)-len(dataSuffix)]
			var dst []byte
			if alloc != nil {
				dst = alloc(typ, base64.StdEncoding.DecodedLen(len(enc)))
			}
			data, err := decodeBase64(dst, enc)
			if err != nil {
				break // not plain base64 (escapes?): let encoding/json decide
			}
			return &Frame{Type: typ, Data: data}, nil
		}
	}
	var f Frame
	if err := json.Unmarshal(msg, &f); err != nil {
		// A known field of an unexpected type must not make an
		// unknown frame fatal: retry with the envelope alone.
		var env struct {
			Type *string `json:"type"`
		}
		if err2 := json.Unmarshal(msg, &env); err2 != nil || env.Type == nil {
			return nil, fmt.Errorf("%w: %w", errBadFrame, err)
		}
		if known(*env.Type) {
			return nil, fmt.Errorf("%w (%s): %w", errBadFrame, *env.Type, err)
		}
		return &Frame{Type: *env.Type}, nil
	}
	if f.Type == "" {
		return nil, fmt.Errorf("%w: no type", errBadFrame)
	}
	return &f, nil
}

func known(typ string) bool {
	switch typ {
	case TypeStart, TypeStdin, TypeStdinClose, TypeResize, TypeSignal, TypeTerminate,
		TypeStarted, TypeStdout, TypeStderr, TypeExit, TypeError:
		return true
	}
	return false
}
