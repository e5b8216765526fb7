package sandbox

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/upstash/box-go/local/internal/proc"
)

// HealthPath is the agent's internal route that boxd's liveness check
// asks; the agent answers it at once, touching nothing of the box.
const HealthPath = "/internal/health"

// Bounds on the agent. A box's processes run as the agent's user, so
// they can stop it (SIGSTOP) however untraceable it is; an agent that
// does not answer and does not run makes its sandbox be replaced, as one
// that dies does: the sandbox is killed, which ends every call in flight
// to it, and the next call starts a new one. A call to a hung agent
// therefore ends within LivenessInterval + LivenessTimeout.
//
// An agent that does not answer in time but runs, or has had processor
// time meanwhile, is busy, not hung: a box whose own processes take its
// processors (a thousand execs at once, a parallel build) starves its
// agent, and is slow; killing it would lose its work.
const (
	// LivenessInterval is how often boxd asks a running, unpaused box's
	// agent whether it answers.
	LivenessInterval = 5 * time.Second
	// LivenessTimeout is how long the agent has to answer.
	LivenessTimeout = 10 * time.Second
	// dialTimeout bounds a connection to the agent.
	dialTimeout = 5 * time.Second
)

// Hung reports whether the sandbox was killed because its agent stopped
// answering.
func (s *Sandbox) Hung() bool { return s.hung.Load() }

// watchLiveness asks the agent every LivenessInterval, while the sandbox
// runs and is not paused, whether it answers, and kills the sandbox once
// it has not answered within LivenessTimeout. The check keeps a
// connection of its own, so an agent too busy to accept new ones (out of
// descriptors) still counts as alive while it serves.
func (s *Sandbox) watchLiveness() {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return s.Dial(ctx) },
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	tick := time.NewTicker(LivenessInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		paused, pauses := s.paused, s.pauses
		s.mu.Unlock()
		if paused {
			continue
		}
		before, beforeErr := proc.ActivityOf(s.agentPID)
		if s.answers(tr, LivenessTimeout) {
			continue
		}
		s.mu.Lock()
		// Frozen meanwhile (an idle pause, a snapshot): no verdict.
		moved := s.paused || s.pauses != pauses
		s.mu.Unlock()
		if moved {
			continue
		}
		if beforeErr == nil && busy(before, s.agentPID) {
			continue
		}
		select {
		case <-s.done:
			return
		default:
		}
		s.hung.Store(true)
		s.agentGone.Store(true)
		s.Kill()
		return
	}
}

// answers reports whether the agent answers a health request within
// timeout.
func (s *Sandbox) answers(tr http.RoundTripper, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://box"+HealthPath, nil)
	if err != nil {
		return false
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return true
}

// busy reports whether the agent, whose activity was before when it was
// asked, is still the same process and is running or has had processor
// time since. A stopped agent is not busy, whatever it had before the
// stop.
func busy(before proc.Activity, pid int) bool {
	now, err := proc.ActivityOf(pid)
	if err != nil || now.Start != before.Start || now.Stopped {
		return false
	}
	return now.Running || now.CPU > before.CPU
}
