package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"github.com/creack/pty"

	"github.com/upstash/box-go/local/internal/proc"
	"github.com/upstash/box-go/session"
)

// SessionPath is the route of live exec sessions; boxd proxies the public
// route to the agent unchanged.
const SessionPath = "GET /v2/box/{id}/exec-session"

// sessionHandler serves exec sessions: the frame loop is the session
// package's, the processes are started here, with exec's environment,
// PATH and folder rules.
func (a *Agent) sessionHandler() http.Handler {
	return &session.Handler{Start: a.startSession, Logger: a.log}
}

// startSession starts the process of a session: argv as given, or cmd
// through `bash -lc` (sh where there is no bash); in a new process group (with a TTY, a new session
// whose controlling terminal is the PTY).
func (a *Agent) startSession(_ context.Context, req *session.Start) (session.Process, error) {
	argv := req.Argv
	if len(argv) == 0 {
		argv = []string{loginShell(), "-lc", req.Cmd}
	}
	dir, err := boxPath(req.Cwd)
	if err != nil {
		return nil, err
	}
	cmd, err := a.command(argv, dir)
	if err != nil {
		return nil, err
	}
	cmd.WaitDelay = 0 // the outputs are files: Wait copies nothing
	if req.TTY && !hasEnv(cmd.Env, "TERM") && !hasEnv(req.Env, "TERM") {
		cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	}
	cmd.Env = append(cmd.Env, req.Env...) // os/exec keeps the last value of a key
	var p *sessionProc
	if req.TTY {
		p, err = a.startPTY(cmd, req.Rows, req.Cols)
	} else {
		p, err = a.startPipes(cmd)
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return nil, err
		}
		return nil, errorf(http.StatusBadRequest, "cannot start %s: %v", argv[0], unwrapExec(err))
	}
	return p, nil
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// sessionProc is a started session process; it implements
// session.Process.
type sessionProc struct {
	cmd    *exec.Cmd
	tty    *os.File // the PTY's master side, or nil
	stdin  io.WriteCloser
	stdout *drainReader
	stderr *drainReader // nil with a TTY
	exited chan struct{}
	files  []*os.File // closed by Close
}

// startPipes starts cmd with three pipes.
func (a *Agent) startPipes(cmd *exec.Cmd) (*sessionProc, error) {
	var files []*os.File // every end, for cleanup on failure
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := a.start(cmd); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its ends; ours must go so that EOF can happen.
	inR.Close()
	outW.Close()
	errW.Close()
	p := &sessionProc{cmd: cmd, stdin: inW, exited: make(chan struct{}), files: []*os.File{inW, outR, errR}}
	p.stdout = newDrainReader(outR, p.exited)
	p.stderr = newDrainReader(errR, p.exited)
	return p, nil
}

// startPTY starts cmd on a new PTY of rows×cols, as the leader of a new
// session whose controlling terminal it is.
func (a *Agent) startPTY(cmd *exec.Cmd, rows, cols int) (*sessionProc, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer slave.Close()
	// pty.Open leaves the master in blocking mode (it reaches the
	// descriptor through Fd), where read deadlines do not work: take a
	// non-blocking duplicate that the runtime poller manages.
	m, err := pollable(master)
	if err != nil {
		return nil, err
	}
	if err := pty.Setsize(slave, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)}); err != nil {
		m.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	attr := &syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		c := *cmd.SysProcAttr
		attr = &c
	}
	// A session leader cannot also be moved to a process group; its
	// session id is its pid, and so is its process group.
	sessionLeader(attr)
	cmd.SysProcAttr = attr
	if err := a.start(cmd); err != nil {
		m.Close()
		return nil, err
	}
	p := &sessionProc{cmd: cmd, tty: m, stdin: &ptyInput{f: m}, exited: make(chan struct{}), files: []*os.File{m}}
	p.stdout = newDrainReader(m, p.exited)
	return p, nil
}

func (p *sessionProc) PID() int              { return p.cmd.Process.Pid }
func (p *sessionProc) Stdin() io.WriteCloser { return p.stdin }
func (p *sessionProc) Stdout() io.Reader     { return p.stdout }

func (p *sessionProc) Stderr() io.Reader {
	if p.stderr == nil {
		return nil // an untyped nil: the session has one output
	}
	return p.stderr
}

// Resize sets the PTY's size; the kernel sends SIGWINCH to the terminal's
// foreground process group.
func (p *sessionProc) Resize(rows, cols int) error {
	if p.tty == nil {
		return nil
	}
	ws := pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)}
	rc, err := p.tty.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	// Through SyscallConn, not Fd, so the master stays non-blocking.
	if err := rc.Control(func(fd uintptr) {
		errno = setWinsize(fd, &ws)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// Signal sends sig to the process group (the process is its leader).
func (p *sessionProc) Signal(sig string) error {
	s, ok := sessionSignals[sig]
	if !ok {
		return errorf(http.StatusBadRequest, "unsupported signal: %s", sig)
	}
	return kill(-p.cmd.Process.Pid, s)
}

// Kill ends the process group and, with a TTY, every process of the
// terminal's session (jobs of an interactive shell have groups of their
// own).
func (p *sessionProc) Kill() error {
	pid := p.cmd.Process.Pid
	err := kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		err = nil
	}
	if p.tty != nil {
		killSession(pid)
	}
	return err
}

// killSession sends SIGKILL to every process whose session id is sid.
func killSession(sid int) {
	for _, pid := range proc.InSession(sid) {
		_ = kill(pid, syscall.SIGKILL)
	}
}

// Wait reaps the process, then wakes the output readers so that they
// drain what is left and end.
func (p *sessionProc) Wait() int {
	_ = p.cmd.Wait()
	code := -1
	if ps := p.cmd.ProcessState; ps != nil {
		code = exitCode(ps)
	}
	close(p.exited)
	for _, r := range []*drainReader{p.stdout, p.stderr} {
		if r != nil {
			r.wake()
		}
	}
	return code
}

// Close releases the descriptors.
func (p *sessionProc) Close() error {
	for _, f := range p.files {
		f.Close()
	}
	return nil
}

// ptyInput is a session's standard input on a PTY. Close cannot close
// half of a terminal: it types the EOF character (Ctrl-D), twice when the
// current line is not empty, since the first one only ends the line.
type ptyInput struct {
	f    *os.File
	mu   sync.Mutex
	last byte
}

func (w *ptyInput) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.f.Write(b)
	if n > 0 {
		w.last = b[n-1]
	}
	return n, err
}

func (w *ptyInput) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	eof := []byte{4}
	if w.last != 0 && w.last != '\n' && w.last != '\r' && w.last != 4 {
		eof = []byte{4, 4}
	}
	_, err := w.f.Write(eof)
	w.last = 4
	return err
}
