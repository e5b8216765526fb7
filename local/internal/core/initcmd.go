package core

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/sandbox"
)

// Init commands. Any box may have one. It runs once, in the background,
// each time the box's sandbox starts: when the box is created or restored
// from a snapshot, and when a box that lost its processes (boxd
// restarted, its sandbox died) starts again. A pause freezes it with
// everything else and a resume thaws it, so it is not started again
// then. It is never restarted when it exits; a command that should come
// back says so itself (a loop in the shell).
//
// Changing the command (set or delete) on a running box applies at once:
// the old command is stopped if it still runs, and the new one started.
// On a paused box the change is stored and applied when the box resumes;
// on a box with no sandbox, when it next starts. Neither wakes the box.
const (
	// MaxInitCommand bounds an init command's text.
	MaxInitCommand = 64 << 10
	// initOutputMax bounds how much of an init command's output goes to
	// the box's log: the first bytes are kept, as they are written. A
	// command that serves for the box's whole life never ends, so its
	// last bytes would never be known; its first say whether it came up.
	initOutputMax = 64 << 10
)

// initShell runs an init command in a login shell (the box's profile,
// PATH included): bash where the image has it, sh otherwise.
const initShell = `command -v bash >/dev/null 2>&1 && exec bash -lc "$0"; exec sh -lc "$0"`

// inits runs the init commands of the boxes: each is started once in each
// sandbox of its box, and its output goes to the box's log.
type inits struct {
	c *Core

	mu     sync.Mutex
	runs   map[string]*initRun // by box id: its latest sandbox
	closed bool
	wg     sync.WaitGroup
}

// initRun is the init command of one sandbox of a box.
type initRun struct {
	sb *sandbox.Sandbox
	// stop ends the command started in sb; nil when none was.
	stop context.CancelFunc
	// pending is set when the command changed while sb was frozen.
	pending bool
}

func newInits(c *Core) *inits { return &inits{c: c, runs: map[string]*initRun{}} }

// started runs the init command of box id in its new sandbox sb. The
// command is read now, so a change made while sb started is not missed.
func (in *inits) started(id string, sb *sandbox.Sandbox) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return
	}
	if old := in.runs[id]; old != nil && old.stop != nil {
		old.stop()
	}
	run := &initRun{sb: sb}
	in.runs[id] = run
	in.launchLocked(id, run)
}

// changed applies a new init command of box id (stored already): see the
// top of this file.
func (in *inits) changed(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	run := in.runs[id]
	if in.closed || run == nil || exited(run.sb) {
		return // the next start reads the stored command
	}
	if run.sb.Paused() {
		run.pending = true
		return
	}
	in.replaceLocked(id, run)
}

// resumed applies, once box id's sandbox thaws, a change of its init
// command made while it was frozen.
func (in *inits) resumed(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	run := in.runs[id]
	if in.closed || run == nil || !run.pending || exited(run.sb) || run.sb.Paused() {
		return
	}
	in.replaceLocked(id, run)
}

func (in *inits) replaceLocked(id string, run *initRun) {
	run.pending = false
	if run.stop != nil {
		run.stop()
		run.stop = nil
	}
	in.launchLocked(id, run)
}

// launchLocked starts the stored init command of box id in run's sandbox,
// if it has one.
func (in *inits) launchLocked(id string, run *initRun) {
	b, err := in.c.db.Box(id)
	if err != nil || b.InitCommand == "" {
		return
	}
	ctx, cancel := context.WithCancel(in.c.ctx)
	run.stop = cancel
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer cancel()
		in.run(ctx, id, run.sb, b.InitCommand)
	}()
}

// stop forgets box id (deleted), stopping its init command.
func (in *inits) stop(id string) {
	in.mu.Lock()
	run := in.runs[id]
	delete(in.runs, id)
	in.mu.Unlock()
	if run != nil && run.stop != nil {
		run.stop()
	}
}

func (in *inits) closeAll() {
	in.mu.Lock()
	in.closed = true
	for id, run := range in.runs {
		if run.stop != nil {
			run.stop()
		}
		delete(in.runs, id)
	}
	in.mu.Unlock()
	// A command ends as soon as its request does; a frozen box answers
	// only once boxd kills it, which comes after this.
	done := make(chan struct{})
	go func() { in.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		in.c.log.Warn("init commands did not stop within 10s")
	}
}

func exited(sb *sandbox.Sandbox) bool {
	select {
	case <-sb.Done():
		return true
	default:
		return false
	}
}

// run runs command in sandbox sb of box id until it and the background
// jobs that keep its output open end, or ctx does, logging its output.
// It talks to sb alone: a sandbox that has gone is not started again for
// it, and a frozen one is not woken.
func (in *inits) run(ctx context.Context, id string, sb *sandbox.Sandbox, command string) {
	c := agent.NewClient(agent.ClientConfig{BoxID: id, Dial: sb.Dial, NoKeepAlive: true})
	defer c.CloseIdleConnections()
	p, err := c.Process(ctx, agent.ProcessRequest{Argv: []string{"sh", "-c", initShell, command}, MergeStderr: true, FollowJobs: true})
	if err != nil {
		if ctx.Err() == nil {
			in.c.Logf(id, "error", "system", "init command did not start: "+err.Error())
		}
		return
	}
	defer p.Close()
	in.c.Logf(id, "info", "system", "init command started")
	err = logLines(p.Output, initOutputMax, func(lines []string) {
		in.c.LogLines(id, "user", lines)
	}, func() {
		in.c.Logf(id, "warn", "system", fmt.Sprintf("init command output reached %d KiB; the rest is not logged", initOutputMax>>10))
	})
	st, waitErr := p.Wait()
	var ae *agent.Error
	switch {
	case ctx.Err() != nil:
		// Replaced, deleted, or boxd is closing: said where that happens.
	case err != nil:
		in.c.Logf(id, "error", "system", "init command: "+err.Error())
	case errors.As(waitErr, &ae):
		in.c.Logf(id, "error", "system", "init command failed: "+ae.Message)
	case errors.Is(waitErr, agent.ErrExitUnknown):
		in.c.Logf(id, "warn", "system", "init command ended; its exit status was not reported")
	case waitErr != nil:
		in.c.Logf(id, "error", "system", "init command: "+waitErr.Error())
	case st.ExitCode == 0:
		in.c.Logf(id, "info", "system", "init command exited with status 0")
	default:
		in.c.Logf(id, "warn", "system", fmt.Sprintf("init command exited with status %d", st.ExitCode))
	}
}

// logLines reads r to its end and hands the lines of its first max bytes
// to emit (without their line ends, in batches: whatever has arrived when
// r would block, so that a burst of output is not written line by line);
// a line cut by max goes as far as it reaches, and cut is called once,
// after it. The rest is read and dropped, so that the writer is never
// blocked.
func logLines(r io.Reader, max int, emit func(lines []string), cut func()) error {
	const batchMax = 512
	br := bufio.NewReaderSize(r, 4096)
	left := max
	var cur []byte
	var batch []string
	var wasCut bool
	endLine := func() {
		if len(cur) > 0 {
			batch = append(batch, string(bytes.TrimRight(cur, "\r")))
		}
		cur = cur[:0]
	}
	send := func() {
		if len(batch) > 0 {
			emit(batch)
			batch = nil
		}
	}
	for {
		if br.Buffered() == 0 || len(batch) >= batchMax {
			send()
		}
		chunk, err := br.ReadSlice('\n')
		take := min(len(chunk), left)
		if take > 0 {
			left -= take
			cur = append(cur, chunk[:take]...)
			if cur[len(cur)-1] == '\n' {
				cur = cur[:len(cur)-1]
				endLine()
			}
		}
		if take < len(chunk) && !wasCut {
			wasCut = true
			endLine()
			send()
			cut()
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		default:
			endLine()
			send()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
