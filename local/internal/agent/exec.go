package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	esbuild "github.com/evanw/esbuild/pkg/api"
)

// maxCapture bounds how much of each of stdout and stderr a non-streaming
// exec keeps; past it the output is cut and a note is appended.
const maxCapture = 32 << 20

// outputBufs holds the buffers in which runOutput reads a command's
// output, so that an exec does not allocate (and clear) two of them.
var outputBufs = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

// result is what one finished process produced.
type result struct {
	ExitCode int
	Stdout   string
	Stderr   string
	CPU      time.Duration
	TimedOut bool
}

// command prepares argv to run in dir (a box path) with the box's
// environment. The process gets its own process group so that cancelling the
// call can end everything it started, while background jobs of a call that
// finished normally keep running.
func (a *Agent) command(argv []string, dir string) (*exec.Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errorf(http.StatusBadRequest, "command is required")
	}
	real := a.fs.real(dir)
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return nil, errorf(http.StatusBadRequest, "folder %s does not exist", dir)
	}
	// The agent's own PATH is the box's, so the lookup matches the shell's.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = real
	cmd.Env = a.env()
	cmd.SysProcAttr = groupAttr()
	return cmd, nil
}

// run runs cmd to completion, capturing its output (see runStreaming for
// how it is read). ctx cancellation or the timeout kills the command's
// whole process group and every process below it (killTree).
func (a *Agent) run(ctx context.Context, cmd *exec.Cmd, timeout time.Duration) (result, error) {
	var stdout, stderr capBuffer
	res, err := a.runStreaming(ctx, cmd, &stdout, &stderr, timeout)
	res.Stdout = stdout.String()
	res.Stderr = stderr.String()
	return res, err
}

// testHookWatch, when set, runs first in wait's watcher: a test holds the
// watcher back with it, as a busy scheduler can.
var testHookWatch func()

// wait waits for a started command, killing its tree (killTree) when ctx ends
// or timeout (if positive) passes.
func wait(ctx context.Context, cmd *exec.Cmd, timeout time.Duration) (result, error) {
	done := make(chan struct{})
	var timedOut, finished bool
	var mu sync.Mutex
	hook := testHookWatch
	go func() {
		if hook != nil {
			hook()
		}
		var timer <-chan time.Time
		if timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			timer = t.C
		}
		var timeUp bool
		select {
		case <-done:
			return
		case <-ctx.Done():
		case <-timer:
			timeUp = true
		}
		// A command that has ended on its own is left alone with what it
		// left running: the request's context also ends once the answer
		// is written, and this may run only then.
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		timedOut = timeUp
		killTree(cmd.Process.Pid)
	}()
	err := cmd.Wait()
	mu.Lock()
	finished = true
	mu.Unlock()
	close(done)
	var res result
	if ps := cmd.ProcessState; ps != nil {
		res.ExitCode = exitCode(ps)
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	mu.Lock()
	res.TimedOut = timedOut
	mu.Unlock()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return res, err
	}
	if ctx.Err() != nil && !res.TimedOut {
		return res, ctx.Err()
	}
	return res, nil
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func unwrapExec(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// codeCommand writes a snippet to a temporary file inside the box and
// returns the command that runs it. TypeScript is turned into JavaScript
// with esbuild first, so only node is needed in the box.
func (a *Agent) codeCommand(code, lang, dir string) (*exec.Cmd, func(), error) {
	var ext, prog string
	src := []byte(code)
	switch lang {
	case "python":
		ext, prog = ".py", "python3"
	case "js":
		ext, prog = ".js", "node"
	case "ts":
		out := esbuild.Transform(code, esbuild.TransformOptions{Loader: esbuild.LoaderTS, Format: esbuild.FormatCommonJS, Target: esbuild.ESNext})
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			msg := e.Text
			if e.Location != nil {
				msg = fmt.Sprintf("%d:%d: %s", e.Location.Line, e.Location.Column, e.Text)
			}
			return nil, nil, &compileError{msg: "TypeScript: " + msg}
		}
		ext, prog, src = ".js", "node", out.Code
	default:
		return nil, nil, errorf(http.StatusBadRequest, "language must be js, ts or python, not %q", lang)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	file := "/tmp/boxd-code-" + hex.EncodeToString(rnd[:]) + ext
	if err := os.WriteFile(a.fs.real(file), src, 0o600); err != nil {
		if diskFull(err) {
			return nil, nil, errorf(http.StatusInsufficientStorage, "write snippet: %v", unwrapPath(err))
		}
		return nil, nil, fmt.Errorf("write snippet: %w", err)
	}
	cleanup := func() { _ = os.Remove(a.fs.real(file)) }
	cmd, err := a.command([]string{prog, a.fs.real(file)}, dir)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return cmd, cleanup, nil
}

// compileError is a snippet that could not be prepared; it is reported like
// a failed run (exit code 1 with the message on stderr), as the interpreter
// would.
type compileError struct{ msg string }

func (e *compileError) Error() string { return e.msg }

// capBuffer keeps at most maxCapture bytes and notes what it dropped.
type capBuffer struct {
	buf     bytes.Buffer
	dropped int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	room := maxCapture - c.buf.Len()
	if room >= len(p) {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

func (c *capBuffer) String() string {
	if c.dropped == 0 {
		return c.buf.String()
	}
	return c.buf.String() + fmt.Sprintf("\n[boxd: %d more bytes of output were dropped]\n", c.dropped)
}

var _ io.Writer = (*capBuffer)(nil)

// runStreaming runs cmd, copying what it writes to stdout to out as it is
// produced (and what it writes to stderr to errOut, or to out as well when
// errOut is nil, in the order written). The pipes are read directly, by a
// drainReader each: everything the command wrote is read, however loaded
// the machine, and a background job still holding them cannot keep the
// call open. A writer that fails (the client went away) is replaced by
// io.Discard, so that the command is not blocked on a full pipe. An
// output that could not be read to its end is an error, never a short
// success.
func (a *Agent) runStreaming(ctx context.Context, cmd *exec.Cmd, out, errOut io.Writer, timeout time.Duration) (result, error) {
	return a.runOutput(ctx, cmd, out, errOut, timeout, false)
}

// runOutput is runStreaming; with followJobs, the output is read on after
// the command exits for as long as anything still holds it open (its
// background jobs), until ctx ends, instead of for a moment only: the
// output of a job the command left running is not cut off.
func (a *Agent) runOutput(ctx context.Context, cmd *exec.Cmd, out, errOut io.Writer, timeout time.Duration, followJobs bool) (result, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return result{}, err
	}
	cmd.Stdout = w
	var er, ew *os.File
	if errOut == nil {
		cmd.Stderr = w
	} else {
		if er, ew, err = os.Pipe(); err != nil {
			r.Close()
			w.Close()
			return result{}, err
		}
		cmd.Stderr = ew
	}
	cmd.WaitDelay = 0
	err = a.start(cmd)
	w.Close()
	if ew != nil {
		ew.Close()
	}
	if err != nil {
		r.Close()
		if er != nil {
			er.Close()
		}
		return result{}, errorf(http.StatusBadRequest, "cannot start %s: %v", cmd.Args[0], unwrapExec(err))
	}
	exited := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	var mu sync.Mutex
	var readers []*drainReader
	copyPipe := func(dst io.Writer, src *os.File) {
		dr := newDrainReader(src, exited)
		readers = append(readers, dr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer src.Close()
			bp := outputBufs.Get().(*[]byte)
			defer outputBufs.Put(bp)
			buf := *bp
			for {
				n, err := dr.Read(buf)
				if n > 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						dst = io.Discard
					}
				}
				if err != nil {
					if !errors.Is(err, io.EOF) {
						mu.Lock()
						readErr = fmt.Errorf("reading the command's output: %w", err)
						mu.Unlock()
					}
					return
				}
			}
		}()
	}
	copyPipe(out, r)
	if er != nil {
		copyPipe(errOut, er)
	}
	res, werr := wait(ctx, cmd, timeout)
	if followJobs {
		copied := make(chan struct{})
		go func() { wg.Wait(); close(copied) }()
		select {
		case <-copied:
		case <-ctx.Done():
		}
	}
	close(exited)
	for _, dr := range readers {
		dr.wake()
	}
	wg.Wait()
	if werr == nil && readErr != nil {
		werr = readErr
	}
	return res, werr
}
