package web

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

func (s *Server) snapshotView(snap desktop.Snapshot, withManifest bool) api.Snapshot {
	m := snap.Manifest
	v := api.Snapshot{
		Name: snap.Name, CreatedAt: m.CreatedAt, Image: m.Image.Name, Flavor: m.Image.Flavor,
		CPUs: m.Machine.CPUs, MemoryMiB: m.Machine.MemoryMiB, Screen: api.Screen{Width: m.Machine.Width, Height: m.Machine.Height},
		Accel: m.Machine.Accel, QEMU: m.Machine.QEMUVersion, Parent: m.Parent, Source: m.Source, Ephemeral: m.Ephemeral,
		Users: s.cfg.Manager.Lineage().UsersOf(snap.Name),
	}
	if v.Users == nil {
		v.Users = []string{}
	}
	v.Pool, _ = s.cfg.Manager.Lineage().PoolSize(snap.Name)
	if withManifest {
		v.Manifest, _ = json.Marshal(m)
	}
	return v
}

func (s *Server) listSnapshots(c *gin.Context) {
	snaps, _, err := s.cfg.Manager.Lineage().Catalog().List()
	if err != nil {
		fail(c, err)
		return
	}
	out := api.SnapshotList{Snapshots: []api.Snapshot{}}
	for _, sn := range snaps {
		out.Snapshots = append(out.Snapshots, s.snapshotView(sn, c.Query("manifest") == "1"))
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) getSnapshot(c *gin.Context) {
	sn, err := s.cfg.Manager.Lineage().Catalog().Get(c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.snapshotView(sn, true))
}

func (s *Server) deleteSnapshot(c *gin.Context) {
	if err := s.cfg.Manager.Lineage().RemoveSnapshot(c.Param("name")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) listImages(c *gin.Context) {
	out := api.ImageList{Images: []api.GuestImage{}}
	if s.cfg.Images != nil {
		ims, err := s.cfg.Images()
		if err != nil {
			fail(c, err)
			return
		}
		out.Images = append(out.Images, ims...)
	}
	c.JSON(http.StatusOK, out)
}
