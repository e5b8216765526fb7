package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// testHookWatch, when set, runs first when the request's context ends,
// before the command's loop hears of it: a test holds it back, as a busy
// scheduler can.
var testHookWatch func()

// noPidfdTick is how often the loop looks for the command's exit on a
// kernel without pidfd_open (before 5.3).
const noPidfdTick = 5 * time.Millisecond

// pidfdOpen is pidfd_open(2); a test takes it away, as an old kernel does.
var pidfdOpen = unix.PidfdOpen

// runOutput runs cmd, copying what it writes to stdout to out as it is
// produced (and what it writes to stderr to errOut, or to out as well
// when errOut is nil, in the order written).
//
// The calling goroutine does all of it (see outputLoop): it waits at once
// on the command's pipes, on a pidfd that becomes readable when the
// command exits, and on an eventfd through which the end of ctx arrives.
// No other goroutine is started or woken on the way. The cancellation of
// ctx or the timeout kills the command's whole tree (killTree); a command
// that has ended on its own is left alone with the jobs it left running.
//
// After the exit, the output is read to the last byte the command wrote
// (what was in the pipes at that moment, however late this runs), then on
// until it has been quiet for drainQuiet, for at most drainMax: a
// background job that keeps the output open cannot hold the call open.
// With followJobs, the output is read on after the exit for as long as
// anything holds it open, until ctx ends, and only then drained so.
//
// A writer that fails (the client went away) is replaced by io.Discard,
// so that the command is not blocked on a full pipe. An output that
// could not be read to its end is an error, never a short success.
func (a *Agent) runOutput(ctx context.Context, cmd *exec.Cmd, out, errOut io.Writer, timeout time.Duration, followJobs bool) (result, error) {
	var pipes []*outPipe
	closeAll := func() {
		for _, p := range pipes {
			p.close()
		}
	}
	stdout, w, err := newOutPipe(out)
	if err != nil {
		return result{}, err
	}
	pipes = append(pipes, stdout)
	cmd.Stdout, cmd.Stderr = w, w
	var ew *os.File
	if errOut != nil {
		var stderr *outPipe
		if stderr, ew, err = newOutPipe(errOut); err != nil {
			w.Close()
			closeAll()
			return result{}, err
		}
		pipes = append(pipes, stderr)
		cmd.Stderr = ew
	}
	// The outputs are files, so Wait copies nothing out; an input that is
	// not a file is copied in, and a job the command left holding it, not
	// reading, would hold Wait (and the call) for as long as it lives.
	// What the command did not read in drainMax after its exit is dropped.
	cmd.WaitDelay = drainMax
	err = a.start(cmd)
	w.Close()
	if ew != nil {
		ew.Close()
	}
	if err != nil {
		closeAll()
		return result{}, errorf(http.StatusBadRequest, "cannot start %s: %v", cmd.Args[0], unwrapExec(err))
	}
	defer closeAll()

	l := &outputLoop{cmd: cmd, pipes: pipes, followJobs: followJobs, pidfd: -1, ctxfd: -1}
	if timeout > 0 {
		l.deadline = time.Now().Add(timeout)
	}
	fail := func(err error) (result, error) {
		killTree(cmd.Process.Pid)
		_ = cmd.Wait()
		return result{}, err
	}
	if err := l.openEpoll(); err != nil {
		return fail(err)
	}
	defer l.ep.Close()
	if fd, err := pidfdOpen(cmd.Process.Pid, 0); err == nil {
		l.pidfd = fd
		defer unix.Close(fd)
		if err := l.watch(fd); err != nil {
			return fail(err)
		}
	}
	if ctx.Done() != nil {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return fail(fmt.Errorf("eventfd: %w", err))
		}
		l.ctxfd = fd
		hook := testHookWatch
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(fired)
			if hook != nil {
				hook()
			}
			var one [8]byte
			binary.NativeEndian.PutUint64(one[:], 1)
			_, _ = unix.Write(fd, one[:])
		})
		defer func() {
			// The descriptor is closed only once nothing can write to it.
			if !stop() {
				<-fired
			}
			unix.Close(fd)
		}()
		if err := l.watch(fd); err != nil {
			return fail(err)
		}
	}
	for _, p := range pipes {
		if err := l.watch(p.fd); err != nil {
			return fail(err)
		}
	}
	bp := outputBufs.Get().(*[]byte)
	defer outputBufs.Put(bp)
	l.buf = *bp
	res, err := l.run()
	if l.cancelled {
		return res, ctx.Err()
	}
	return res, err
}

// outPipe is the reading end of one of a command's outputs.
type outPipe struct {
	fd   int // -1 once closed
	dst  io.Writer
	owed int // bytes in the pipe when the command exited, not yet read
}

// newOutPipe makes a pipe whose writing end w is handed to a command and
// whose reading end copies into dst. The reading end does not block: the
// loop reads what its epoll set reports there.
func newOutPipe(dst io.Writer) (*outPipe, *os.File, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	return &outPipe{fd: fds[0], dst: dst}, os.NewFile(uintptr(fds[1]), "|1"), nil
}

func (p *outPipe) close() {
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}

// outputLoop is the state of one runOutput.
//
// It waits on an epoll set of its own (the pipes, the pidfd, the
// eventfd), itself waited on through the runtime's poller: while the
// command runs, the goroutine is parked and the agent's threads sleep.
// A blocking poll(2) or waitid(2) would hold a processor in a system call
// instead, and the runtime's monitor would wake every 20µs to look at it,
// tens of times in each exec.
type outputLoop struct {
	cmd        *exec.Cmd
	pipes      []*outPipe
	followJobs bool
	pidfd      int       // readable once the command exits; -1: none
	ctxfd      int       // readable once the request's context ends; -1: none
	deadline   time.Time // the timeout's; zero: none
	buf        []byte

	epfd   int
	ep     *os.File // epfd, registered with the runtime's poller
	rc     syscall.RawConn
	events [8]unix.EpollEvent
	wakeAt time.Time // the read deadline set on ep

	exited    bool // the command has been reaped
	ctxDone   bool
	cancelled bool // the command was killed because ctx ended
	timedOut  bool
	draining  bool
	drainEnd  time.Time // drainMax after the drain began
	lastInput time.Time
	res       result
	readErr   error
}

// openEpoll makes the loop's epoll set.
func (l *outputLoop) openEpoll() error {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("epoll: %w", err)
	}
	l.epfd = fd
	l.ep = os.NewFile(uintptr(fd), "epoll")
	if l.rc, err = l.ep.SyscallConn(); err != nil {
		l.ep.Close()
		return fmt.Errorf("epoll: %w", err)
	}
	return nil
}

// watch adds fd to the loop's epoll set, for reading.
func (l *outputLoop) watch(fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	return nil
}

// unwatch removes fd from the loop's epoll set.
func (l *outputLoop) unwatch(fd int) {
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

func (l *outputLoop) run() (result, error) {
	var waitErr error
	for {
		now := time.Now()
		if !l.exited && !l.timedOut && !l.deadline.IsZero() && !now.Before(l.deadline) {
			l.timedOut = true
			killTree(l.cmd.Process.Pid)
		}
		if l.draining && l.owed() == 0 {
			quietEnd := l.lastInput.Add(drainQuiet)
			if !now.Before(l.drainEnd) || !now.Before(quietEnd) {
				break
			}
		}
		if l.exited && l.open() == 0 {
			break
		}
		n, err := l.wait(l.nextWake(now))
		if err != nil {
			if !l.exited {
				killTree(l.cmd.Process.Pid)
				_ = l.cmd.Wait()
			}
			return l.res, err
		}
		var exited, ctxDone bool
		for _, ev := range l.events[:n] {
			switch fd := int(ev.Fd); fd {
			case l.pidfd:
				exited = true
			case l.ctxfd:
				ctxDone = true
			default:
				for _, p := range l.pipes {
					if p.fd == fd {
						l.read(p)
					}
				}
			}
		}
		if !l.exited && l.pidfd < 0 {
			exited = exitedNoWait(l.cmd.Process.Pid)
		}
		// The exit is seen before the end of ctx: a command that ended on
		// its own is not killed.
		if exited && !l.exited {
			l.unwatch(l.pidfd)
			waitErr = l.reap()
		}
		if ctxDone && !l.ctxDone {
			l.ctxDone = true
			l.unwatch(l.ctxfd)
			if !l.exited && !l.timedOut {
				l.cancelled = true
				killTree(l.cmd.Process.Pid)
			}
			if l.exited && !l.draining {
				l.drain()
			}
		}
	}
	l.res.TimedOut = l.timedOut
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return l.res, waitErr
	}
	return l.res, l.readErr
}

// wait waits until something in the epoll set is ready, or until at (if
// not zero), and returns how many of l.events it filled: none when at
// came first.
func (l *outputLoop) wait(at time.Time) (int, error) {
	if !at.Equal(l.wakeAt) {
		if err := l.ep.SetReadDeadline(at); err != nil {
			return 0, fmt.Errorf("epoll: %w", err)
		}
		l.wakeAt = at
	}
	var n int
	var werr error
	err := l.rc.Read(func(uintptr) bool {
		for {
			n, werr = unix.EpollWait(l.epfd, l.events[:], 0)
			if !errors.Is(werr, unix.EINTR) {
				return n != 0 || werr != nil
			}
		}
	})
	switch {
	case werr != nil:
		return 0, fmt.Errorf("epoll: %w", werr)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("epoll: %w", err)
	}
	return n, nil
}

// reap collects the exited command and starts the drain, or, with
// followJobs, the following of its jobs.
func (l *outputLoop) reap() error {
	err := l.cmd.Wait()
	l.exited = true
	if ps := l.cmd.ProcessState; ps != nil {
		l.res.ExitCode = exitCode(ps)
		l.res.CPU = ps.UserTime() + ps.SystemTime()
	}
	if !l.followJobs || l.ctxDone {
		l.drain()
	}
	return err
}

// drain starts the reading after the exit: the bytes in the pipes now are
// owed, and the drain's clocks start.
func (l *outputLoop) drain() {
	l.draining = true
	now := time.Now()
	l.drainEnd, l.lastInput = now.Add(drainMax), now
	for _, p := range l.pipes {
		if p.fd >= 0 {
			if n, err := unix.IoctlGetInt(p.fd, unix.TIOCINQ); err == nil {
				p.owed = n
			}
		}
	}
}

// read reads what p holds, once.
func (l *outputLoop) read(p *outPipe) {
	b := l.buf
	if p.owed > 0 && p.owed < len(b) {
		b = b[:p.owed]
	}
	n, err := unix.Read(p.fd, b)
	switch {
	case n > 0:
		if _, werr := p.dst.Write(b[:n]); werr != nil {
			p.dst = io.Discard
		}
		if l.draining {
			p.owed = max(p.owed-n, 0)
			l.lastInput = time.Now()
		}
	case err == nil: // end of file: every writer has gone
		p.owed = 0
		p.close()
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
	default:
		if l.readErr == nil {
			l.readErr = fmt.Errorf("reading the command's output: %w", err)
		}
		p.owed = 0
		p.close()
	}
}

// owed is how many bytes the command wrote before its exit that have not
// been read yet.
func (l *outputLoop) owed() int {
	n := 0
	for _, p := range l.pipes {
		n += p.owed
	}
	return n
}

// open is how many outputs are still open.
func (l *outputLoop) open() int {
	n := 0
	for _, p := range l.pipes {
		if p.fd >= 0 {
			n++
		}
	}
	return n
}

// nextWake is when the loop must look again if nothing is ready before:
// the zero time for never.
func (l *outputLoop) nextWake(now time.Time) time.Time {
	var at time.Time
	switch {
	case l.draining:
		if l.owed() > 0 {
			return time.Time{} // what is owed is there to read
		}
		at = l.lastInput.Add(drainQuiet)
		if l.drainEnd.Before(at) {
			at = l.drainEnd
		}
	case !l.exited && l.pidfd < 0:
		at = now.Add(noPidfdTick)
	}
	if !l.exited && !l.timedOut && !l.deadline.IsZero() && (at.IsZero() || l.deadline.Before(at)) {
		at = l.deadline
	}
	return at
}

// exitedNoWait reports whether process pid has exited, leaving it to be
// reaped.
func exitedNoWait(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo != 0
}
