package web

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/volume"
)

// Volumes are the host's business: only the daemon token reaches them.
func (s *Server) volumeRoutes(v1 *gin.RouterGroup) {
	v1.GET("/volumes", need(needDaemon), s.listVolumes)
	v1.POST("/volumes", need(needDaemon), s.createVolume)
	v1.GET("/volumes/:name", need(needDaemon), s.getVolume)
	v1.DELETE("/volumes/:name", need(needDaemon), s.deleteVolume)
	v1.POST("/volumes/:name/snapshot", need(needDaemon), s.freezeVolume)
	v1.GET("/volumes/:name/archive", need(needDaemon), s.exportVolume)
	v1.PUT("/volumes/:name/archive", need(needDaemon), s.importVolume)
	v1.POST("/desktops/:id/volumes", need(needDaemon), s.attachVolume)
	v1.DELETE("/desktops/:id/volumes/:name", need(needDaemon), s.detachVolume)
}

func mounts(in []api.VolumeMount) []volume.Mount {
	var out []volume.Mount
	for _, m := range in {
		out = append(out, volume.Mount{Name: m.Name, Mount: m.Mount, Mode: volume.Mode(m.Mode)})
	}
	return out
}

func (s *Server) volumeView(v volume.Volume) api.Volume {
	out := api.Volume{
		Name: v.Name, SizeMiB: v.SizeMiB, AllocatedBytes: volume.AllocatedBytes(v), CreatedAt: v.CreatedAt,
		Snapshot: v.Frozen, From: v.From, BranchOf: v.BranchOf, Layers: len(v.Layers), Damaged: v.Damaged, AttachedTo: []api.VolumeHolder{},
	}
	for _, h := range s.cfg.Manager.Volumes().Holders(v.Name) {
		out.AttachedTo = append(out.AttachedTo, api.VolumeHolder{Desktop: h.Desktop, Mode: string(h.Mode)})
	}
	return out
}

// registry is the volume registry, or an answer saying volumes are off.
func (s *Server) registry(c *gin.Context) (*volume.Registry, bool) {
	r := s.cfg.Manager.Volumes().Registry()
	if r == nil {
		abort(c, http.StatusNotFound, "not_found", "volumes are not enabled on this host", "")
		return nil, false
	}
	return r, true
}

func (s *Server) listVolumes(c *gin.Context) {
	r, ok := s.registry(c)
	if !ok {
		return
	}
	out := api.VolumeList{Volumes: []api.Volume{}}
	for _, v := range r.List() {
		out.Volumes = append(out.Volumes, s.volumeView(v))
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) createVolume(c *gin.Context) {
	r, ok := s.registry(c)
	if !ok {
		return
	}
	var req api.CreateVolume
	if !decodeJSON(c, &req) {
		return
	}
	v, err := r.Create(c.Request.Context(), volume.CreateRequest{Name: req.Name, SizeMiB: req.SizeMiB, From: req.From})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, s.volumeView(v))
}

func (s *Server) getVolume(c *gin.Context) {
	r, ok := s.registry(c)
	if !ok {
		return
	}
	v, err := r.Get(c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.volumeView(v))
}

func (s *Server) deleteVolume(c *gin.Context) {
	if err := s.cfg.Manager.Volumes().Remove(c.Param("name")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) freezeVolume(c *gin.Context) {
	var req api.FreezeVolume
	if !decodeJSON(c, &req) {
		return
	}
	v, err := s.cfg.Manager.Volumes().Freeze(c.Request.Context(), c.Param("name"), req.Name)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, s.volumeView(v))
}

// exportVolume streams the tar. Errors found before the first byte get a
// JSON answer; one mid-stream cuts the response short (the tar then lacks
// its end marker, which tar readers report).
func (s *Server) exportVolume(c *gin.Context) {
	w := &lazyHeader{c: c}
	if err := s.cfg.Manager.Volumes().Export(c.Request.Context(), c.Param("name"), w); err != nil {
		if !w.started {
			fail(c, err)
			return
		}
		s.log.Warn("volume archive cut short", "volume", c.Param("name"), "err", err)
		panic(http.ErrAbortHandler)
	}
	if !w.started {
		w.start()
	}
}

// lazyHeader sends the tar's headers with its first byte, so an error
// before it can still be a JSON answer.
type lazyHeader struct {
	c       *gin.Context
	started bool
}

func (l *lazyHeader) start() {
	l.started = true
	l.c.Header("Content-Type", "application/x-tar")
	l.c.Header("Content-Disposition", `attachment; filename="`+l.c.Param("name")+`.tar"`)
	l.c.Status(http.StatusOK)
}

func (l *lazyHeader) Write(p []byte) (int, error) {
	if !l.started {
		l.start()
	}
	return l.c.Writer.Write(p)
}

func (s *Server) importVolume(c *gin.Context) {
	if err := s.cfg.Manager.Volumes().Import(c.Request.Context(), c.Param("name"), c.Request.Body); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) attachVolume(c *gin.Context) {
	var req api.VolumeMount
	if !decodeJSON(c, &req) {
		return
	}
	d, err := s.cfg.Manager.Volumes().Attach(c.Request.Context(), c.Param("id"), volume.Mount{Name: req.Name, Mount: req.Mount, Mode: volume.Mode(req.Mode)})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.view(d))
}

func (s *Server) detachVolume(c *gin.Context) {
	d, err := s.cfg.Manager.Volumes().Detach(c.Request.Context(), c.Param("id"), c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.view(d))
}
