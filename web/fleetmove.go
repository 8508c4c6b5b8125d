package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/movestream"
)

// A move of a running desktop between two hosts of a fleet: the public
// POST /v1/desktops/ID/move reaches the desktop's host (the proxy passes
// it there), which offers the desktop to the target on the target's peer
// port (POST /v1/fleet/moves, upgraded to the move's stream: mutual TLS
// between hosts, so QEMU's migration never crosses the network in the
// clear). The target checks its room, pulls the snapshots the desktop
// rests on, then takes the stream, loads it, runs the guest, takes the
// desktop's record and answers; only then does the source end its
// machine.

// moveProtocol is the Upgrade a move's stream is carried under.
const moveProtocol = "warmdesk-move/1"

// moveTimeout bounds a whole move, from either side.
const moveTimeout = 10 * time.Minute

// MoveTarget chooses the host a desktop of this host moves to (named, or
// the fleet's choice when to is empty) and gives its peer address.
type MoveTarget func(ctx context.Context, to string, memoryMiB int) (name, peer string, err error)

// moveOffer is what the source sends with its move request.
type moveOffer struct {
	Desktop desktop.Desktop `json:"desktop"`
	From    string          `json:"from"`
	// Tokens keep the desktop's tokens and viewer links good.
	Tokens movedTokens `json:"tokens"`
}

// moveAnswer is the target's answer after the stream: the desktop it
// runs, or why the move failed.
type moveAnswer struct {
	Desktop *api.Desktop   `json:"desktop,omitempty"`
	Status  int            `json:"status,omitempty"`
	Error   *api.ErrorBody `json:"error,omitempty"`
}

func (s *Server) moveDesktop(c *gin.Context) {
	if s.cfg.Moves == nil || s.cfg.MoveTarget == nil {
		abort(c, http.StatusConflict, "not_in_a_fleet", "a desktop moves only between the hosts of a fleet (hostd serve --cluster-name)", "")
		return
	}
	var req api.MoveDesktop
	if !decodeJSON(c, &req) {
		return
	}
	id := c.Param("id")
	d, err := s.cfg.Manager.Get(id)
	if err != nil {
		fail(c, err)
		return
	}
	// The move is the host's, not the request's: a client that goes away
	// does not cut it off half-way.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), moveTimeout)
	defer cancel()
	to, peer, err := s.cfg.MoveTarget(ctx, req.To, d.Resources.MemoryMiB)
	if err != nil {
		failMove(c, err)
		return
	}
	move, err := s.sendMove(ctx, id, to, peer)
	if err != nil {
		failMove(c, err)
		return
	}
	c.JSON(http.StatusOK, move)
}

// failMove answers a move that did not happen. No room on the target
// (its caps, or the fleet's) is 507: the desktop stays, and the caller
// needs room elsewhere, not a later try (a create's 429).
func failMove(c *gin.Context, err error) {
	if errors.Is(err, desktop.ErrCapacity) {
		abort(c, http.StatusInsufficientStorage, "no_room", err.Error(), "")
		return
	}
	fail(c, err)
}

// sendMove moves desktop id to host to, whose peer API is at peer.
func (s *Server) sendMove(ctx context.Context, id, to, peer string) (api.Move, error) {
	start := time.Now()
	move := api.Move{From: s.cfg.HostName, To: to}
	_, err := s.cfg.Moves.Send(ctx, id, to, func(ctx context.Context, mach desktop.LiveSender, d desktop.Desktop, hold func(context.Context) error) error {
		conn, err := s.openMove(ctx, peer, to, moveOffer{Desktop: d, From: s.cfg.HostName, Tokens: s.views.export(id)})
		if err != nil {
			return err
		}
		defer conn.Close()
		defer context.AfterFunc(ctx, func() { conn.Close() })()
		var heldAt time.Time
		st, err := mach.SendLive(ctx, conn, func(ctx context.Context) error {
			heldAt = time.Now()
			return hold(ctx)
		})
		if err != nil {
			return err
		}
		stopped := time.Now()
		w := movestream.NewWriter(conn)
		err = w.Write(movestream.Commit, 0, nil)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			return fmt.Errorf("%w: the move's commit to host %s: %w", desktop.ErrUnavailable, to, err)
		}
		var ans moveAnswer
		if err := json.NewDecoder(conn).Decode(&ans); err != nil {
			return fmt.Errorf("%w: host %s did not answer the move's commit: %w", desktop.ErrUnavailable, to, err)
		}
		if ans.Error != nil || ans.Desktop == nil {
			return refusal(ans.Status, ans.Error, to)
		}
		now := time.Now()
		move.Desktop = *ans.Desktop
		move.TotalMs = now.Sub(start).Milliseconds()
		move.DowntimeMs, move.SwitchMs = st.Downtime.Milliseconds(), now.Sub(stopped).Milliseconds()
		move.HeldMs = now.Sub(heldAt).Milliseconds()
		move.StateBytes, move.DiskBytes = st.StateBytes, st.DiskBytes
		return nil
	})
	if err == nil && move.Desktop.ID == "" {
		// The target took the desktop, but its answer was lost.
		move.Desktop = api.Desktop{ID: id, Host: to}
		move.TotalMs = time.Since(start).Milliseconds()
	}
	return move, err
}

// openMove offers the desktop to the target and returns the upgraded
// connection its stream goes on; a refusal (no room, a snapshot it could
// not pull) comes back as the error the target answered.
func (s *Server) openMove(ctx context.Context, peer, to string, offer moveOffer) (io.ReadWriteCloser, error) {
	body, err := json.Marshal(offer)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.peers.scheme+"://"+peer+"/v1/fleet/moves", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.daemonToken())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", moveProtocol)
	req.Header.Set(proxiedBy, s.cfg.HostName)
	resp, err := (&http.Client{Transport: s.peers.transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: host %s (%s) did not take the move: %w", desktop.ErrUnavailable, to, peer, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		var e api.Error
		json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		return nil, refusal(resp.StatusCode, &e.Error, to)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: host %s upgraded the move without a stream", desktop.ErrUnavailable, to)
	}
	return conn, nil
}

// refusal is a target's refusal as the domain error of its status, so
// the caller gets the status the target gave (507 for no room).
func refusal(status int, body *api.ErrorBody, to string) error {
	msg := "no reason given"
	if body != nil && body.Message != "" {
		msg = body.Message
	}
	kind := desktop.ErrUnavailable
	switch status {
	case http.StatusTooManyRequests:
		kind = desktop.ErrCapacity
	case http.StatusInsufficientStorage:
		kind = desktop.ErrNoSpace
	case http.StatusConflict:
		kind = desktop.ErrConflict
	case http.StatusNotFound:
		kind = desktop.ErrNotFound
	case http.StatusBadRequest:
		kind = desktop.ErrInvalid
	}
	return fmt.Errorf("%w: host %s refused the move: %s", kind, to, msg)
}

// takeMove is the target's side: the offer, the checks, then the stream.
func (s *Server) takeMove(c *gin.Context) {
	switch {
	case s.cfg.Moves == nil:
		abort(c, http.StatusConflict, "not_in_a_fleet", "this host is not in a fleet", "")
		return
	case s.cfg.PeerTLS != nil && c.Request.Context().Value(fromPeer{}) == nil:
		abort(c, http.StatusForbidden, "peer_port_only", "a move is taken on the peer port only, over TLS with the fleet's certificates", "")
		return
	case !strings.EqualFold(c.GetHeader("Upgrade"), moveProtocol):
		badRequest(c, "", "a move's request upgrades to "+moveProtocol)
		return
	}
	var offer moveOffer
	if !decodeJSON(c, &offer) {
		return
	}
	if offer.From == "" || offer.From == s.cfg.HostName {
		badRequest(c, "from", "a move names the host it comes from, another than this one")
		return
	}
	// Room first: a host that cannot take the desktop pulls nothing.
	if err := s.cfg.Moves.CanTake(offer.Desktop); err != nil {
		fail(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), moveTimeout)
	defer cancel()
	if s.cfg.EnsureSnapshot != nil {
		for _, name := range snapshotsUnder(offer.Desktop) {
			if err := s.cfg.EnsureSnapshot(ctx, name); err != nil {
				fail(c, err)
				return
			}
		}
	}
	conn, rw, err := c.Writer.Hijack()
	if err != nil {
		fail(c, fmt.Errorf("%w: take the move's stream: %w", desktop.ErrUnavailable, err))
		return
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + moveProtocol + "\r\n\r\n")
	if err := rw.Flush(); err != nil {
		return
	}
	// Before the record turns: a request the fleet passes here once it
	// has carries a token the source issued.
	s.views.adopt(offer.Desktop.ID, offer.Tokens)
	d, err := s.cfg.Moves.Receive(ctx, offer.Desktop, offer.From, rw.Reader)
	var ans moveAnswer
	if err != nil {
		s.log.Warn("a move in failed", "desktop", offer.Desktop.ID, "from", offer.From, "err", err)
		status, body := answerOf(err)
		ans.Status, ans.Error = status, &body
	} else {
		v := s.view(d)
		ans.Desktop = &v
	}
	json.NewEncoder(conn).Encode(ans)
}

// snapshotsUnder are the snapshots a desktop's disk and memory rest on,
// its own last.
func snapshotsUnder(d desktop.Desktop) []string {
	out := append([]string(nil), d.Uses...)
	for _, u := range out {
		if u == d.Snapshot {
			return out
		}
	}
	return append(out, d.Snapshot)
}
