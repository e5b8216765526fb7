// Package session implements live exec sessions of the Upstash Box API: a
// process in a box that a client talks to while it runs, over a WebSocket
// (github.com/coder/websocket) at GET /v2/box/{id}/exec-session.
//
// Most programs use it through the box package:
//
//	s, err := b.Exec.Session(ctx, &box.SessionParams{Cmd: "sort"})
//	if err != nil { ... }
//	defer s.Close()
//	io.WriteString(s.Stdin, "banana\napple\n")
//	s.Stdin.Close()                  // end of input
//	out, _ := io.ReadAll(s.Stdout)   // "apple\nbanana\n"
//	code, err := s.Wait(ctx)         // 0
//
// The package has three parts, shared by the SDK and boxd:
//
//   - the wire: [Frame], one JSON object per text message with a "type";
//     data is base64. Client to server: start (first, once), stdin,
//     stdin_close, resize, signal, terminate. Server to client: started,
//     stdout, stderr, exit, error. Unknown types are ignored by both
//     sides;
//   - the client: [Dial] returns a [Session], shaped like os/exec (Stdin,
//     Stdout, Stderr, Wait) with Resize, Signal, Terminate and Close;
//   - the server: [Handler] runs the frame loop for a [Process] that the
//     caller starts (boxd's in-box agent starts it inside the box, on a
//     PTY for TTY sessions).
//
// Semantics both sides agree on: signals go to the process group, and only
// TERM KILL INT HUP TSTP QUIT USR1 USR2 exist; terminate is SIGTERM then,
// after a grace period, SIGKILL, and only the first one counts; an exit
// code is 128+n for a process killed by signal n; an error frame ends the
// session (before started, Dial fails; after, Wait returns -1); closing
// the connection, for whatever reason, kills the process; a session cannot
// be re-attached.
package session
