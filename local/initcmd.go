package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/store"
)

// Backoff between restarts of an init command that exited.
const (
	initBackoffMin = time.Second
	initBackoffMax = 30 * time.Second
	// initHealthy is how long an init command must run for its backoff to
	// start over.
	initHealthy = 30 * time.Second
)

// inits supervises the init commands of keep-alive boxes: each runs in its
// box from when the box starts, its output goes to the box's log, and it
// is started again, with backoff, whenever it exits.
type inits struct {
	s *Server

	mu      sync.Mutex
	running map[string]*supervisor
	closed  bool
	wg      sync.WaitGroup
}

// supervisor is one running supervision of a box's init command.
type supervisor struct{ cancel context.CancelFunc }

func newInits(s *Server) *inits { return &inits{s: s, running: map[string]*supervisor{}} }

// ensure starts the supervisor of box b's init command, unless it is
// running, the box is not keep-alive or has no init command.
func (in *inits) ensure(b *store.Box) {
	if !b.KeepAlive || b.InitCommand == "" {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed || in.running[b.ID] != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sup := &supervisor{cancel: cancel}
	in.running[b.ID] = sup
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		in.supervise(ctx, b.ID)
		in.mu.Lock()
		// A restart may have put a new supervisor in this slot already.
		if in.running[b.ID] == sup {
			delete(in.running, b.ID)
		}
		in.mu.Unlock()
		cancel()
	}()
}

// stop ends the supervisor of a box and its init command.
func (in *inits) stop(id string) {
	in.mu.Lock()
	sup := in.running[id]
	delete(in.running, id)
	in.mu.Unlock()
	if sup != nil {
		sup.cancel()
	}
}

// restart runs the box's current init command in place of the old one.
func (in *inits) restart(id string) {
	in.stop(id)
	if b, err := in.s.db.Box(id); err == nil {
		in.ensure(b)
	}
}

func (in *inits) closeAll() {
	in.mu.Lock()
	in.closed = true
	for id, sup := range in.running {
		sup.cancel()
		delete(in.running, id)
	}
	in.mu.Unlock()
	// Supervisors end as soon as their context does; a box whose sandbox
	// is still starting can hold one for a while, but not shutdown.
	done := make(chan struct{})
	go func() { in.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		in.s.log.Warn("init command supervisors did not stop within 10s")
	}
}

func (in *inits) supervise(ctx context.Context, id string) {
	backoff := initBackoffMin
	for ctx.Err() == nil {
		b, err := in.s.db.Box(id)
		if err != nil || !b.KeepAlive || b.InitCommand == "" {
			return
		}
		start := time.Now()
		code, err := in.runOnce(ctx, b)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > initHealthy {
			backoff = initBackoffMin
		}
		msg := fmt.Sprintf("init command exited with status %d; starting it again in %s", code, backoff)
		if err != nil {
			msg = fmt.Sprintf("init command failed: %v; starting it again in %s", err, backoff)
		}
		in.s.logf(id, "warn", "system", msg)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, initBackoffMax)
	}
}

// runOnce runs the init command until it exits, logging each line of its
// output, and returns its exit code.
func (in *inits) runOnce(ctx context.Context, b *store.Box) (int, error) {
	rt, err := in.s.boxes.ensureRunning(ctx, b)
	if err != nil {
		return -1, err
	}
	body, _ := json.Marshal(agent.ProcessRequest{Argv: []string{"bash", "-lc", b.InitCommand}, MergeStderr: true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://box"+agent.ProcessPath, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	resp, err := rt.transport.RoundTrip(req)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1, fmt.Errorf("box agent answered %s", resp.Status)
	}
	in.s.logf(b.ID, "info", "system", "init command started")
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		in.s.logf(b.ID, "info", "user", sc.Text())
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return -1, err
	}
	if msg := resp.Trailer.Get(agent.TrailerError); msg != "" {
		return -1, errors.New(msg)
	}
	code, err := strconv.Atoi(resp.Trailer.Get(agent.TrailerExitCode))
	if err != nil {
		return -1, errors.New("the init command's outcome was not reported")
	}
	return code, nil
}
