package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/api"
)

// Following another host's events: its stream breaks when it restarts or
// the fleet loses it; it is followed again after a backoff.
const (
	peerRetryMin = time.Second
	peerRetryMax = 15 * time.Second
	// maxEventLine bounds one line of a peer's stream (a desktop's view
	// is a few KiB).
	maxEventLine = 1 << 20
	// peerSteady is how long a host's stream must have lasted for its
	// next break to be followed again at once (peerRetryMin): one that
	// opens and ends at once is retried ever more slowly.
	peerSteady = 30 * time.Second
)

// errPeerRefused is a host refusing the caller's token: when this host
// refuses it too (rotated since the stream opened), the whole stream
// ends, and the client, reconnecting, learns its token is gone; while
// this host still takes it (the rotation on its way here), the host is
// tried again later.
var errPeerRefused = errors.New("the host refused the token")

// peerRefresh is how often a fleet's event stream lists the hosts again:
// it follows those that joined and leaves those that left. A variable
// for tests.
var peerRefresh = 10 * time.Second

// followPeers passes the events of the fleet's other hosts, each a whole
// server-sent event, into the returned channel until ctx ends, with an
// api.EventFollowing as each host's stream opens (the events it sent
// while not followed are missed: a client reloads what it shows). It asks
// with the caller's own Authorization, so a host serves only what the
// caller may see, and lists the hosts again every peerRefresh. A host
// that refuses the token calls refused.
func (s *Server) followPeers(ctx context.Context, authorization string, refused func()) <-chan []byte {
	out := make(chan []byte, 64)
	go func() {
		following := map[string]context.CancelFunc{}
		refresh := func() {
			addrs, err := s.cfg.Peers(ctx)
			if err != nil {
				s.log.Warn("events: cannot list the fleet's hosts; following those known", "err", err)
				return
			}
			live := map[string]bool{}
			for _, addr := range addrs {
				live[addr] = true
				if following[addr] == nil {
					fctx, stop := context.WithCancel(ctx)
					following[addr] = stop
					go s.followPeer(fctx, addr, authorization, out, refused)
				}
			}
			for addr, stop := range following {
				if !live[addr] {
					stop()
					delete(following, addr)
				}
			}
		}
		refresh()
		t := time.NewTicker(peerRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				refresh()
			}
		}
	}()
	return out
}

func (s *Server) followPeer(ctx context.Context, addr, authorization string, out chan<- []byte, refused func()) {
	retry := peerRetryMin
	pass := func(block []byte) {
		select {
		case out <- block:
		case <-ctx.Done():
		}
	}
	for {
		opened := time.Now()
		err := s.readPeerEvents(ctx, addr, authorization, func() {
			b, _ := json.Marshal(api.Event{Type: api.EventFollowing, Time: time.Now().UTC(), Summary: addr})
			pass([]byte("event: " + api.EventFollowing + "\ndata: " + string(b) + "\n\n"))
		}, pass)
		if ctx.Err() != nil {
			return
		}
		if tok, _ := strings.CutPrefix(authorization, "Bearer "); errors.Is(err, errPeerRefused) && !s.validDaemonToken(strings.TrimSpace(tok)) {
			s.log.Warn("events: the stream's token was rotated away; ending the stream", "host", addr)
			refused()
			return
		}
		if time.Since(opened) >= peerSteady {
			retry = peerRetryMin
		}
		s.log.Debug("events: a fleet host's stream broke; following it again", "host", addr, "in", retry, "err", err)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retry = min(retry*2, peerRetryMax)
	}
}

// readPeerEvents reads one host's event stream, marked as passed on so
// that host sends its own events only, until it ends; opened is called
// once the host has answered.
func (s *Server) readPeerEvents(ctx context.Context, addr, authorization string, opened func(), each func([]byte)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.peers.scheme+"://"+addr+"/v1/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(proxiedBy, s.cfg.HostName)
	resp, err := (&http.Client{Transport: s.peers.transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("events from %s: %s: %w", addr, resp.Status, errPeerRefused)
	default:
		return fmt.Errorf("events from %s: %s", addr, resp.Status)
	}
	opened()
	return splitEvents(resp.Body, each)
}

// splitEvents reads server-sent events from r and hands each one that
// carries data to each, as the block to send on: its event and data lines
// and the blank line that ends it. Comments (keepalives) and other fields
// are dropped. A line longer than maxEventLine is an error.
func splitEvents(r io.Reader, each func([]byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var block bytes.Buffer
	hasData := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if hasData {
				block.WriteString("\n")
				each(bytes.Clone(block.Bytes()))
			}
			block.Reset()
			hasData = false
		case strings.HasPrefix(line, "data:"):
			hasData = true
			block.WriteString(line + "\n")
		case strings.HasPrefix(line, "event:"):
			block.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF // a stream ends only when its host goes
}
