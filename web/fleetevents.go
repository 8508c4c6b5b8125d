package web

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Following another host's events: its stream breaks when it restarts or
// the fleet loses it; it is followed again after a backoff.
const (
	peerRetryMin = time.Second
	peerRetryMax = 15 * time.Second
	// maxEventLine bounds one line of a peer's stream (a desktop's view
	// is a few KiB).
	maxEventLine = 1 << 20
)

// followPeers passes the events of the fleet's other hosts, each a whole
// server-sent event, into the returned channel until ctx ends, after a
// comment ": following ADDRESS" as each host's stream opens. It asks
// with the caller's own Authorization, so a host serves only what the
// caller may see. Hosts that join after it starts are not followed: the
// dashboard reloads the list when its stream reconnects.
func (s *Server) followPeers(ctx context.Context, authorization string) <-chan []byte {
	out := make(chan []byte, 64)
	addrs, err := s.cfg.Peers(ctx)
	if err != nil {
		s.log.Warn("events: cannot list the fleet's hosts; this host's events only", "err", err)
		return out
	}
	for _, addr := range addrs {
		go s.followPeer(ctx, addr, authorization, out)
	}
	return out
}

func (s *Server) followPeer(ctx context.Context, addr, authorization string, out chan<- []byte) {
	retry := peerRetryMin
	pass := func(block []byte) {
		select {
		case out <- block:
		case <-ctx.Done():
		}
	}
	for {
		err := s.readPeerEvents(ctx, addr, authorization, func() {
			// A comment, for people and tests: from here on, that
			// host's events pass.
			retry = peerRetryMin
			pass([]byte(": following " + addr + "\n\n"))
		}, pass)
		if ctx.Err() != nil {
			return
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(proxiedBy, s.cfg.HostName)
	resp, err := (&http.Client{Transport: fleetTransport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
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
