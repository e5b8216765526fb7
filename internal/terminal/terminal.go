// Package terminal connects this process's terminal, or its standard
// streams, to a process in a box over a live exec session: what `box
// shell`, `box exec` and examples/shell do.
package terminal

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/session"
)

// Params describes the process to run and how to connect it.
type Params struct {
	// Argv is the process; Cmd, when Argv is empty, a command line run
	// with bash -lc.
	Argv []string
	Cmd  string
	// Cwd is the process's working directory, relative to the box's
	// (the default).
	Cwd string
	// Env is added to the process's environment, as KEY=VALUE.
	Env []string
	// Stdin feeds the process's standard input; nil gives it none (it
	// reads end of file at once).
	Stdin *os.File
	// Stdout and Stderr receive the process's output. With TTY, Stdout
	// gets both.
	Stdout, Stderr io.Writer
	// TTY gives the process a terminal. Stdin must then be one: it is put
	// in raw mode for the session, so that keys go to the box as typed
	// (Ctrl-C interrupts the program in the box, not this one), and the
	// box's terminal follows its size.
	TTY bool
}

// ErrHungUp is returned by Run when the session ended before the process
// did (the connection dropped, or this process was told to stop).
var ErrHungUp = errors.New("terminal: hung up")

// Run runs the process and returns its exit code. Without a TTY an
// interrupt of this process (Ctrl-C, SIGINT) is passed on to the box's
// process as SIGINT; SIGTERM and SIGHUP hang up.
func Run(ctx context.Context, b *box.Box, p Params) (int, error) {
	params := &box.SessionParams{Argv: p.Argv, Cmd: p.Cmd, Cwd: p.Cwd, Env: p.Env, TTY: p.TTY}
	var fd int
	if p.TTY {
		if p.Stdin == nil || !term.IsTerminal(int(p.Stdin.Fd())) {
			return 1, errors.New("terminal: a TTY session needs a terminal on standard input")
		}
		fd = int(p.Stdin.Fd())
		params.Rows, params.Cols = Size(p.Stdin)
		if t := os.Getenv("TERM"); t != "" {
			params.Env = append([]string{"TERM=" + t}, params.Env...)
		}
	}
	s, err := b.Exec.Session(ctx, params)
	if err != nil {
		return 1, err
	}
	defer s.Close()

	if p.TTY {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return 1, err
		}
		defer term.Restore(fd, old)
		stop := onResize(func() {
			rows, cols := Size(p.Stdin)
			_ = s.Resize(ctx, rows, cols)
		})
		defer stop()
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	stopSigs := make(chan struct{})
	defer close(stopSigs)
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == os.Interrupt {
					_ = s.Signal(ctx, "INT")
					continue
				}
				s.Close()
				return
			case <-stopSigs:
				return
			}
		}
	}()

	// Input goes to the box, and its end as end of input. The copy may
	// stay blocked reading a terminal after the process has exited; the
	// program exits anyway.
	if p.Stdin != nil {
		go func() {
			_, _ = io.Copy(s.Stdin, p.Stdin)
			_ = s.Stdin.Close()
		}()
	} else {
		_ = s.Stdin.Close()
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(orDiscard(p.Stderr), s.Stderr)
		close(done)
	}()
	_, _ = io.Copy(orDiscard(p.Stdout), s.Stdout)
	<-done

	code, err := s.Wait(ctx)
	if errors.Is(err, session.ErrClosed) {
		return 129, ErrHungUp
	}
	return code, err
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Size returns the size of the terminal f (or of standard output when f
// is not one), or 0×0 for the server's default.
func Size(f *os.File) (rows, cols int) {
	for _, t := range []*os.File{f, os.Stdout} {
		if t == nil {
			continue
		}
		if w, h, err := term.GetSize(int(t.Fd())); err == nil {
			return h, w
		}
	}
	return 0, 0
}
