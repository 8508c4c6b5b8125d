package recording

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/screenshot"
)

// MaxPerDesktop bounds the recordings a desktop keeps (running or done):
// each holds up to its disk cap.
const MaxPerDesktop = 8

// ErrNotFound: no such recording.
var ErrNotFound = errors.New("recording not found")

// Registry keeps every desktop's recordings under one directory
// (DIR/DESKTOP/RECORDING/). Recordings end with their desktop, and are
// removed with it.
type Registry struct {
	root string
	opts Options
	log  *slog.Logger
	// changed hears of a recording starting and its capture ending.
	changed func(desktopID string, in Info)

	mu   sync.Mutex
	recs map[string][]*Recorder // by desktop, oldest first
}

// NewRegistry keeps recordings under root with default options opts;
// changed, if set, hears of each recording starting and its capture
// ending (for the desktop's events: the viewer's REC mark).
func NewRegistry(root string, opts Options, log *slog.Logger, changed func(desktopID string, in Info)) *Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if changed == nil {
		changed = func(string, Info) {}
	}
	return &Registry{root: root, opts: opts, log: log, changed: changed, recs: map[string][]*Recorder{}}
}

// Start begins a recording of a desktop's screen.
func (g *Registry) Start(ctx context.Context, desktopID string, src screenshot.Source, format string) (Info, error) {
	if err := CheckFormat(format); err != nil {
		return Info{}, fmt.Errorf("%w: %w", desktop.ErrInvalid, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.recs[desktopID]); n >= MaxPerDesktop {
		return Info{}, fmt.Errorf("%w: desktop %s keeps %d recordings, the most it may: delete some (DELETE /v1/desktops/%s/recordings/ID)", desktop.ErrCapacity, desktopID, n, desktopID)
	}
	for _, r := range g.recs[desktopID] {
		if r.Info().State == StateRecording {
			return Info{}, fmt.Errorf("%w: desktop %s is already being recorded (%s): stop that one first", desktop.ErrConflict, desktopID, r.Info().ID)
		}
	}
	id := newID()
	opts := g.opts
	opts.Format = format
	r, err := Start(ctx, filepath.Join(g.root, desktopID, id), id, desktopID, src, opts, g.log.With("desktop", desktopID),
		func(in Info) { g.changed(desktopID, in) })
	if err != nil {
		if errors.Is(err, ErrNoFFmpeg) {
			return Info{}, fmt.Errorf("%w: %w", desktop.ErrUnavailable, err)
		}
		return Info{}, err
	}
	g.recs[desktopID] = append(g.recs[desktopID], r)
	in := r.Info()
	g.changed(desktopID, in)
	return in, nil
}

func newID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "rec-" + hex.EncodeToString(b)
}

// Get finds a recording.
func (g *Registry) Get(desktopID, id string) (*Recorder, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.recs[desktopID] {
		if r.id == id {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w: %w: desktop %s has no recording %q", desktop.ErrNotFound, ErrNotFound, desktopID, id)
}

// List returns a desktop's recordings, oldest first.
func (g *Registry) List(desktopID string) []Info {
	g.mu.Lock()
	recs := append([]*Recorder(nil), g.recs[desktopID]...)
	g.mu.Unlock()
	out := make([]Info, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Info())
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out
}

// Recording says whether a desktop is being recorded now.
func (g *Registry) Recording(desktopID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.recs[desktopID] {
		if r.Info().State == StateRecording {
			return true
		}
	}
	return false
}

// Remove deletes a recording, ending it first if it runs.
func (g *Registry) Remove(ctx context.Context, desktopID, id string) error {
	r, err := g.Get(desktopID, id)
	if err != nil {
		return err
	}
	r.Discard()
	if err := r.Remove(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	list := g.recs[desktopID]
	for i, x := range list {
		if x == r {
			g.recs[desktopID] = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(g.recs[desktopID]) == 0 {
		delete(g.recs, desktopID)
	}
	return nil
}

// Note adds a line to the action log of the desktop's running recording.
func (g *Registry) Note(desktopID string, at time.Time, kind, summary string) {
	g.mu.Lock()
	recs := append([]*Recorder(nil), g.recs[desktopID]...)
	g.mu.Unlock()
	for _, r := range recs {
		r.Note(at, kind, summary)
	}
}

// Follow keeps the action logs and ends recordings with their desktops,
// from the Manager's events, until ctx ends.
func (g *Registry) Follow(ctx context.Context, events *desktop.Events) {
	events.Follow(ctx, func(ev desktop.Event) { g.handle(ctx, ev) })
}

func (g *Registry) handle(ctx context.Context, ev desktop.Event) {
	id := ev.Desktop.ID
	if kind, summary, ok := LogLine(ev); ok {
		g.Note(id, ev.Time, kind, summary)
	}
	if ev.Type == desktop.EventDeleted {
		g.mu.Lock()
		recs := g.recs[id]
		delete(g.recs, id)
		g.mu.Unlock()
		for _, r := range recs {
			r.Discard()
			go func() {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				if err := r.Remove(rctx); err != nil {
					g.log.Warn("remove a deleted desktop's recording", "desktop", id, "err", err)
				}
			}()
		}
	}
}

// LogLine is the action log's line for a desktop event, if it has one.
func LogLine(ev desktop.Event) (kind, summary string, ok bool) {
	d := ev.Desktop
	switch ev.Type {
	case desktop.EventAction:
		return "action", ev.Summary, true
	case desktop.EventExec:
		return "exec", ev.Summary, true
	case desktop.EventDevTools:
		return "devtools", ev.Summary, true
	case desktop.EventControl:
		if d.Control.Holder == desktop.ControlPerson {
			by := d.Control.By
			if by == "" {
				by = "someone"
			}
			return "control", by + " took control", true
		}
		return "control", "control went back to the agent", true
	case desktop.EventState:
		s := "the desktop is " + string(d.State)
		if d.Reason != "" {
			s += ": " + d.Reason
		}
		return "state", s, true
	case desktop.EventReset:
		return "reset", "the desktop was reset to " + d.Snapshot, true
	}
	return "", "", false
}
