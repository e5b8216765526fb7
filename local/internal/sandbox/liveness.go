package sandbox

import (
	"context"
	"net"
	"time"

	"github.com/upstash/box-go/local/internal/proc"
)

// HealthFunc makes the question of a sandbox's liveness watch: given dial,
// which reaches the sandbox's agent, it returns ask, which returns nil once
// the agent has answered and an error when it did not answer before ctx
// ended, and done, which closes the connection ask keeps. boxd's asks the
// agent's client (agent.Client.Health); the sandbox layer speaks no
// protocol to its agent.
type HealthFunc func(dial func(context.Context) (net.Conn, error)) (ask func(context.Context) error, done func())

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
// runs and is not paused, whether it answers (Spec.Health), and kills the
// sandbox once it has not answered within LivenessTimeout. The question
// keeps a connection of its own, so an agent too busy to accept new ones
// (out of descriptors) still counts as alive while it serves.
func (s *Sandbox) watchLiveness(health HealthFunc) {
	ask, done := health(s.Dial)
	defer done()
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
		if s.answers(ask, LivenessTimeout) {
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

// answers reports whether the agent answers ask within timeout.
func (s *Sandbox) answers(ask func(context.Context) error, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return ask(ctx) == nil
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
