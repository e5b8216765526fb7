//go:build linux

package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// heldAgent serves a real agent and returns a client of it whose dials
// are counted.
func heldAgent(t *testing.T) (*Client, *atomic.Int32) {
	t.Helper()
	h, _ := agentHandler(t)
	return countingClient(t, serveUnix(t, h))
}

// countingClient returns a client of the agent at sock whose dials are
// counted.
func countingClient(t *testing.T, sock string) (*Client, *atomic.Int32) {
	var dials atomic.Int32
	dial := UnixDialer(sock)
	c := NewClient(ClientConfig{BoxID: "box-test", Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx)
	}})
	t.Cleanup(c.CloseIdleConnections)
	return c, &dials
}

// execRequest is a request for route (exec or exec-stream) of box-test
// that runs script.
func execRequest(ctx context.Context, t *testing.T, route, script string) *http.Request {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"command": []string{"sh", "-c", script}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://box/v2/box/box-test/"+route, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// TestExecTransportKeepsItsConnection: calls one after another go over
// one connection, each answer whole.
func TestExecTransportKeepsItsConnection(t *testing.T) {
	c, dials := heldAgent(t)
	tr := c.ExecTransport()
	for i := range 5 {
		resp, err := tr.RoundTrip(execRequest(t.Context(), t, "exec", "echo "+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		var res struct {
			Output   string `json:"output"`
			ExitCode int    `json:"exit_code"`
		}
		if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &res) != nil || res.Output != strconv.Itoa(i)+"\n" {
			t.Fatalf("call %d: %d %q, %v", i, resp.StatusCode, raw, err)
		}
		if resp.Header.Get("X-Box-Exit-Code") != "0" {
			t.Errorf("call %d: exit code header %q", i, resp.Header.Get("X-Box-Exit-Code"))
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for 5 calls one after another, want 1", n)
	}
}

// TestExecTransportLetsGo: a stream's body closed before its end returns
// at once, though its command runs on, and its connection is not used
// again; a cancelled call ends its command.
func TestExecTransportLetsGo(t *testing.T) {
	c, dials := heldAgent(t)
	tr := c.ExecTransport()

	pidOf := func(body io.Reader) int {
		t.Helper()
		line, err := bufio.NewReader(body).ReadString('\n')
		pid, perr := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || perr != nil {
			t.Fatalf("first line %q: %v", line, err)
		}
		return pid
	}
	ended := func(pid int) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if !running(pid) {
				return true
			}
		}
		return false
	}

	resp, err := tr.RoundTrip(execRequest(t.Context(), t, "exec-stream", "echo $$; exec sleep 60"))
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(resp.Body)
	start := time.Now()
	resp.Body.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("closing a running stream's body took %s", d)
	}
	// The connection is closed: the agent hears of it and ends the
	// command, as it does when boxd's client goes away.
	if !ended(pid) {
		t.Errorf("the command of an abandoned stream still runs")
	}

	ctx, cancel := context.WithCancel(t.Context())
	resp, err = tr.RoundTrip(execRequest(ctx, t, "exec-stream", "echo $$; exec sleep 60"))
	if err != nil {
		t.Fatal(err)
	}
	pid = pidOf(resp.Body)
	cancel()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the body of a cancelled call read to its end")
	}
	resp.Body.Close()
	if !ended(pid) {
		t.Errorf("the command of a cancelled call still runs")
	}

	if _, err := tr.RoundTrip(execRequest(t.Context(), t, "exec", "true")); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 3 {
		t.Errorf("%d connections, want 3: none of an abandoned call's is used again", n)
	}
}

// TestExecTransportDropsAClosedConnection: a kept connection the agent
// has closed since (its sandbox ended) is not used: the next call dials.
func TestExecTransportDropsAClosedConnection(t *testing.T) {
	h, _ := agentHandler(t)
	closed := make(chan struct{}, 1)
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}}
	c, dials := countingClient(t, serveUnixWith(t, srv))
	call := func() {
		t.Helper()
		resp, err := c.ExecTransport().RoundTrip(execRequest(t.Context(), t, "exec", "true"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("exec: %d, %v", resp.StatusCode, err)
		}
	}
	call()
	srv.SetKeepAlivesEnabled(false) // closes the idle connection
	<-closed
	call()
	if n := dials.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}
