package local

import (
	"context"
	"net"
)

// dialBox connects to port inside box id, through its agent (see
// agent.Client.DialPort).
func (s *Server) dialBox(ctx context.Context, id string, port int) (net.Conn, error) {
	rt := s.boxes.existing(id)
	if rt == nil {
		return nil, errBoxNotFound // callers start the box first
	}
	return rt.agent.DialPort(ctx, port)
}
