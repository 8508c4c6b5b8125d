package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
)

// maxJSONBody bounds request bodies of the JSON API (files have their own).
const maxJSONBody = 1 << 20

// decodeJSON reads a strict JSON body (readBody's limits): unknown fields
// and trailing data are errors naming what was wrong.
func decodeJSON(c *gin.Context, v any) bool {
	body, ok := readBody(c)
	if !ok {
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		badRequest(c, field, "malformed JSON body: "+err.Error())
		return false
	}
	if dec.More() {
		badRequest(c, "", "malformed JSON body: data after the object")
		return false
	}
	return true
}

// view turns a desktop into its API form.
func (s *Server) view(d desktop.Desktop) api.Desktop {
	base := "/v1/desktops/" + d.ID
	v := api.Desktop{
		Host: s.cfg.HostName, ID: d.ID, Name: d.Name, Labels: d.Labels, Snapshot: d.Snapshot, State: string(d.State), Reason: d.Reason,
		CPUs: d.Resources.CPUs, MemoryMiB: d.Resources.MemoryMiB, DiskMiB: d.Resources.DiskMiB,
		Network: wirePolicy(d.Network), CreatedAt: d.CreatedAt, LastUsedAt: d.LastUsedAt, ExpiresAt: d.ExpiresAt,
		ForkOf: d.ForkOf, Driver: d.Driver,
		Clock: d.Clock, ClockOffsetS: d.ClockOffset.Seconds(), Resets: d.Resets, ResetAt: d.ResetAt,
		Recording: s.cfg.Recordings != nil && s.cfg.Recordings.Recording(d.ID),
		Control:   api.Control{Holder: string(d.Control.Holder), By: d.Control.By, Since: d.Control.Since},
		URLs: api.URLs{
			Self: base, Screenshot: base + "/screenshot", Actions: base + "/actions",
			Control: base + "/control", VNC: base + "/vnc", Viewer: "/desktops/" + d.ID,
		},
	}
	if st := d.Setup; st != nil {
		v.Setup = &api.Setup{State: st.State, Commands: st.Commands, Failed: st.Failed, Command: st.Command,
			ExitCode: st.ExitCode, Error: st.Error, Output: st.Output, Seconds: st.Seconds}
	}
	for _, m := range d.Volumes {
		v.Volumes = append(v.Volumes, api.VolumeMount{Name: m.Name, Mount: m.Mount, Mode: string(m.Mode)})
	}
	if snap, err := s.cfg.Manager.Lineage().Catalog().Get(d.Snapshot); err == nil {
		v.Screen = &api.Screen{Width: snap.Manifest.Machine.Width, Height: snap.Manifest.Machine.Height}
	}
	return v
}

func (s *Server) listDesktops(c *gin.Context) {
	list := api.DesktopList{Desktops: []api.Desktop{}}
	for _, d := range s.cfg.Manager.List() {
		if grant, ok := grantOf(c); ok && grant.desktop != d.ID {
			continue
		}
		list.Desktops = append(list.Desktops, s.view(d))
	}
	// In a fleet, the list is the fleet's: the others' desktops follow.
	others, err := s.remoteViews(c)
	if err != nil {
		fail(c, err)
		return
	}
	list.Desktops = append(list.Desktops, others...)
	c.JSON(http.StatusOK, list)
}

func (s *Server) createDesktop(c *gin.Context) {
	if s.cfg.Place != nil && c.Request.Header.Get(proxiedBy) == "" {
		done, release := s.place(c)
		if done {
			return
		}
		defer release()
	}
	var req api.CreateDesktop
	if !decodeJSON(c, &req) {
		return
	}
	start := time.Now()
	if s.cfg.EnsureSnapshot != nil && req.Snapshot != "" {
		if err := s.cfg.EnsureSnapshot(c.Request.Context(), req.Snapshot); err != nil {
			fail(c, err)
			return
		}
	}
	d, err := s.cfg.Manager.Create(c.Request.Context(), desktop.CreateRequest{
		Snapshot: req.Snapshot, Name: req.Name, TTL: time.Duration(req.TTL), Network: domainPolicy(req.Network),
		CPUs: req.CPUs, MemoryMiB: req.MemoryMiB, DiskMiB: req.DiskMiB, Volumes: mounts(req.Volumes),
		Clock: req.Clock, Labels: req.Labels,
	})
	if err != nil {
		fail(c, err)
		return
	}
	s.cfg.Metrics.ObserveCreate(time.Since(start))
	c.JSON(http.StatusCreated, s.view(d))
}

// resetDesktop returns a desktop to its snapshot, keeping its id, URLs and
// tokens. An agent's control token may: it is how a test harness starts
// each case clean, and a person in control still stops it.
func (s *Server) resetDesktop(c *gin.Context) {
	var req api.Reset
	if !decodeJSON(c, &req) {
		return
	}
	start := time.Now()
	d, err := s.cfg.Manager.Lineage().Reset(c.Request.Context(), c.Param("id"), desktop.ResetRequest{Clock: req.Clock})
	if err != nil {
		fail(c, err)
		return
	}
	s.cfg.Metrics.ObserveReset(time.Since(start))
	c.JSON(http.StatusOK, s.view(d))
}

func (s *Server) getDesktop(c *gin.Context) {
	d, err := s.cfg.Manager.Get(c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.view(d))
}

func (s *Server) deleteDesktop(c *gin.Context) {
	if err := s.cfg.Manager.Delete(c.Request.Context(), c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// desktopOp returns the handler of a lifecycle operation: pause, resume,
// hibernate, wake, fork or snapshot.
func (s *Server) desktopOp(op string) gin.HandlerFunc {
	return func(c *gin.Context) { s.runOp(c, op) }
}

func (s *Server) runOp(c *gin.Context, op string) {
	id := c.Param("id")
	ctx := c.Request.Context()
	m := s.cfg.Manager
	var (
		d   desktop.Desktop
		err error
	)
	switch op {
	case "pause":
		d, err = m.Pause(ctx, id)
	case "resume":
		d, err = m.Resume(ctx, id)
	case "hibernate":
		d, err = m.Hibernate(ctx, id)
	case "wake":
		d, err = m.Wake(ctx, id)
	case "fork":
		req := api.Fork{Count: 1}
		if !decodeJSON(c, &req) {
			return
		}
		copies, err := m.Lineage().Fork(ctx, id, req.Count)
		if err != nil {
			fail(c, err)
			return
		}
		out := api.DesktopList{Desktops: []api.Desktop{}}
		for _, cp := range copies {
			out.Desktops = append(out.Desktops, s.view(cp))
		}
		c.JSON(http.StatusCreated, out)
		return
	case "snapshot":
		var req api.TakeSnapshot
		if !decodeJSON(c, &req) {
			return
		}
		if req.Name == "" {
			badRequest(c, "name", "name: required, the new snapshot's name")
			return
		}
		snap, err := m.Lineage().Snapshot(ctx, id, req.Name)
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusCreated, s.snapshotView(snap, false))
		return
	default:
		abort(c, http.StatusNotFound, "not_found", fmt.Sprintf("no operation %q on desktops", op), "")
		return
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.view(d))
}
