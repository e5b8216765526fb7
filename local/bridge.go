package local

import (
	"context"
	"net"
)

// dialBox connects to port inside box id, through its agent (see
// agent.Client.DialPort).
func (s *Server) dialBox(ctx context.Context, id string, port int) (net.Conn, error) {
	ac, err := s.core.Agent(id) // callers start the box first
	if err != nil {
		return nil, err
	}
	return ac.DialPort(ctx, port)
}
