package web

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/recording"
)

// recordingRoutes serve recordings of a desktop's screen: watching what
// happened is a viewer's right; starting, stopping and deleting one uses
// the host's disk and CPU, so it takes the right to drive.
func (s *Server) recordingRoutes(g *gin.RouterGroup) {
	g.POST("/desktops/:id/recordings", need(needControl), s.startRecording)
	g.GET("/desktops/:id/recordings", need(needView), s.listRecordings)
	g.GET("/desktops/:id/recordings/:rid", need(needView), s.recordingVideo) // the video; its record is in the list
	g.GET("/desktops/:id/recordings/:rid/info", need(needView), s.getRecording)
	g.GET("/desktops/:id/recordings/:rid/actions", need(needView), s.recordingActions)
	g.POST("/desktops/:id/recordings/:rid/stop", need(needControl), s.stopRecording)
	g.DELETE("/desktops/:id/recordings/:rid", need(needControl), s.deleteRecording)
}

// recordings is the registry, or a 503 saying recordings are off.
func (s *Server) recordings(c *gin.Context) (*recording.Registry, bool) {
	if s.cfg.Recordings == nil {
		abort(c, http.StatusServiceUnavailable, "unavailable", "this hostd records no desktops (it was started without a recordings directory)", "")
		return nil, false
	}
	return s.cfg.Recordings, true
}

func (s *Server) startRecording(c *gin.Context) {
	reg, ok := s.recordings(c)
	if !ok {
		return
	}
	var req api.StartRecording
	if !decodeJSON(c, &req) {
		return
	}
	if err := recording.CheckFormat(req.Format); err != nil {
		badRequest(c, "format", err.Error())
		return
	}
	id := c.Param("id")
	d, err := s.cfg.Manager.Get(id)
	if err != nil {
		fail(c, err)
		return
	}
	scr, ok := s.cfg.Drive.Screen(id)
	if !ok || !d.State.Live() {
		fail(c, &desktop.TransitionError{ID: id, From: d.State, Action: "record"})
		return
	}
	in, err := reg.Start(context.WithoutCancel(c.Request.Context()), id, scr.Source(), req.Format)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, recordingView(in))
}

func (s *Server) listRecordings(c *gin.Context) {
	reg, ok := s.recordings(c)
	if !ok {
		return
	}
	id := c.Param("id")
	if _, err := s.cfg.Manager.Get(id); err != nil {
		fail(c, err)
		return
	}
	out := api.RecordingList{Recordings: []api.Recording{}}
	for _, in := range reg.List(id) {
		out.Recordings = append(out.Recordings, recordingView(in))
	}
	c.JSON(http.StatusOK, out)
}

// recorder finds the recording a request names.
func (s *Server) recorder(c *gin.Context) (*recording.Registry, *recording.Recorder, bool) {
	reg, ok := s.recordings(c)
	if !ok {
		return nil, nil, false
	}
	r, err := reg.Get(c.Param("id"), c.Param("rid"))
	if err != nil {
		fail(c, err)
		return nil, nil, false
	}
	return reg, r, true
}

func (s *Server) getRecording(c *gin.Context) {
	if _, r, ok := s.recorder(c); ok {
		c.JSON(http.StatusOK, recordingView(r.Info()))
	}
}

func (s *Server) recordingVideo(c *gin.Context) {
	_, r, ok := s.recorder(c)
	if !ok {
		return
	}
	path, done := r.Video()
	if !done {
		in := r.Info()
		msg := fmt.Sprintf("recording %s is %s: its video exists once it is stopped and encoded (POST .../recordings/%s/stop)", in.ID, in.State, in.ID)
		if in.State == recording.StateFailed {
			msg = fmt.Sprintf("recording %s has no video: %s", in.ID, in.Error)
		}
		abort(c, http.StatusConflict, "illegal_state", msg, "")
		return
	}
	c.Header("Content-Disposition", fmt.Sprintf("attachment; filename=%q", c.Param("id")+"-"+filepath.Base(c.Param("rid"))+filepath.Ext(path)))
	c.File(path)
}

func (s *Server) recordingActions(c *gin.Context) {
	if _, r, ok := s.recorder(c); ok {
		out := api.RecordingActions{Recording: r.Info().ID, Actions: []api.RecordingEntry{}}
		for _, e := range r.Actions() {
			out.Actions = append(out.Actions, api.RecordingEntry{AtMs: e.AtMs, Time: e.Time, Kind: e.Kind, Summary: e.Summary})
		}
		c.JSON(http.StatusOK, out)
	}
}

func (s *Server) stopRecording(c *gin.Context) {
	_, r, ok := s.recorder(c)
	if !ok {
		return
	}
	// The encoding belongs to hostd: a client that goes away does not cut it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 10*time.Minute)
	defer cancel()
	in, err := r.Stop(ctx, "stopped")
	if err != nil && in.State != recording.StateFailed {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, recordingView(in))
}

func (s *Server) deleteRecording(c *gin.Context) {
	reg, ok := s.recordings(c)
	if !ok {
		return
	}
	if err := reg.Remove(c.Request.Context(), c.Param("id"), c.Param("rid")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func recordingView(in recording.Info) api.Recording {
	base := "/v1/desktops/" + in.Desktop + "/recordings/" + in.ID
	return api.Recording{
		ID: in.ID, Desktop: in.Desktop, State: in.State, Format: in.Format, StartedAt: in.StartedAt, EndedAt: in.EndedAt,
		Reason: in.Reason, Error: in.Error, Frames: in.Frames, FrameBytes: in.FrameBytes, MaxBytes: in.MaxBytes,
		VideoBytes: in.VideoBytes, Seconds: in.Seconds, EncodeCPUS: in.EncodeCPUSeconds,
		URLs: api.RecordingURLs{Info: base + "/info", Video: base, Actions: base + "/actions", Stop: base + "/stop"},
	}
}
