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
// errOut is nil, in the order written), as runOutput describes, without
// following the jobs it leaves running.
func (a *Agent) runStreaming(ctx context.Context, cmd *exec.Cmd, out, errOut io.Writer, timeout time.Duration) (result, error) {
	return a.runOutput(ctx, cmd, out, errOut, timeout, false)
}
