package web

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
)

// FleetMembers grows and shrinks a fleet's embedded etcd (fleet.Node).
type FleetMembers interface {
	Members(ctx context.Context) ([]api.FleetMember, error)
	AddMember(ctx context.Context, name, address string) ([]api.FleetMember, error)
	RemoveMember(ctx context.Context, name string) error
}

// members is the fleet's, or an answer that this host is in none.
func (s *Server) members(c *gin.Context) (FleetMembers, bool) {
	if s.cfg.Members == nil {
		abort(c, http.StatusConflict, "not_a_fleet", "this hostd is a single host: it has no etcd members", "")
		return nil, false
	}
	return s.cfg.Members, true
}

func (s *Server) listMembers(c *gin.Context) {
	m, ok := s.members(c)
	if !ok {
		return
	}
	list, err := m.Members(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, list)
}

// addMember tells the fleet's etcd of a host about to start with
// --cluster-join; the answer is every member, its --cluster-peers.
func (s *Server) addMember(c *gin.Context) {
	m, ok := s.members(c)
	if !ok {
		return
	}
	var req api.AddFleetMember
	if !decodeJSON(c, &req) {
		return
	}
	list, err := m.AddMember(c.Request.Context(), req.Name, req.Address)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, list)
}

func (s *Server) removeMember(c *gin.Context) {
	m, ok := s.members(c)
	if !ok {
		return
	}
	if err := m.RemoveMember(c.Request.Context(), c.Param("name")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
