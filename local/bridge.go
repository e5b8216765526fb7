package local

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/egress"
)

// bridgeError is the agent's refusal to bridge to a port in the box, with
// the status it answered.
type bridgeError struct {
	status int
	msg    string
}

func (e *bridgeError) Error() string { return e.msg }

// dialBox connects to port inside box id: it asks the box's agent, over
// its unix socket, to upgrade the connection into a relay to that port.
// The handshake is bounded by ctx and by 30 seconds; the connection it
// returns is not.
func (s *Server) dialBox(ctx context.Context, id string, port int) (net.Conn, error) {
	rt := s.boxes.existing(id)
	if rt == nil {
		return nil, errBoxNotFound // callers start the box first
	}
	c, err := s.boxes.dialAgent(ctx, rt)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintf(c, "GET %s?port=%d HTTP/1.1\r\nHost: box\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", agent.BridgePath, port, agent.BridgeProtocol); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(c, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		var e gen.ErrorResponse
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		c.Close()
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("the box's agent answered %s", resp.Status)
		}
		return nil, &bridgeError{status: resp.StatusCode, msg: e.Error}
	}
	if !stop() {
		c.Close()
		return nil, ctx.Err()
	}
	_ = c.SetDeadline(time.Time{})
	return egress.WithBuffered(c, br), nil
}
