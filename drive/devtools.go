package drive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/devtools"
)

// ChromiumFlavor is the image flavor whose desktops have Chromium with
// DevTools behind the bridge (recipes built from it too).
const ChromiumFlavor = "browser"

// bridgeAnswer bounds the wait for the guest's bridge to answer a new
// session. The bridge runs from boot, so in a restored desktop it answers
// as soon as the guest is scheduled; under TCG on a loaded host that can
// take a few seconds.
const bridgeAnswer = 15 * time.Second

// devtoolsLink is one desktop's session with its guest's bridge, for the
// machine it was opened on (a wake brings a new machine, and a new
// session).
type devtoolsLink struct {
	mu      sync.Mutex // one opening at a time
	machine desktop.Machine
	session *devtools.Session
}

// DialDevTools connects to the DevTools port of the Chromium in a running
// desktop's guest, through the bridge: it works whatever the desktop's
// network policy. A desktop whose image has no Chromium is a conflict that
// names the flavor to use instead.
func (s *Service) DialDevTools(ctx context.Context, id string) (net.Conn, error) {
	defer s.mgr.Use(id)() // a use, and the TTL held while it runs
	mach, err := s.chromiumMachine(ctx, id)
	if err != nil {
		return nil, err
	}
	dialer, ok := mach.(desktop.DevToolsDialer)
	if !ok {
		return nil, fmt.Errorf("%w: desktop %s: its driver has no DevTools bridge", desktop.ErrUnavailable, id)
	}
	link := s.devtoolsLink(id)
	sess, err := link.open(ctx, mach, dialer)
	if err != nil {
		return nil, fmt.Errorf("%w: desktop %s: %w", desktop.ErrUnavailable, id, err)
	}
	conn, err := sess.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: desktop %s: %w", desktop.ErrUnavailable, id, err)
	}
	return conn, nil
}

// chromiumMachine is a running desktop's machine, or a conflict that names
// the flavor to use when its image has no Chromium.
func (s *Service) chromiumMachine(ctx context.Context, id string) (desktop.Machine, error) {
	mach, d, err := s.runningMachine(ctx, id, desktop.WaitNone, "reach the DevTools of")
	if err != nil {
		return nil, err
	}
	if snap, err := s.mgr.Lineage().Catalog().Get(d.Snapshot); err == nil && snap.Manifest.Image.Flavor != ChromiumFlavor {
		return nil, fmt.Errorf("%w: desktop %s runs image %q (flavor %s), which has no Chromium: create it from a snapshot of the %s image or of a recipe built from it",
			desktop.ErrConflict, id, snap.Manifest.Image.Name, snap.Manifest.Image.Flavor, ChromiumFlavor)
	}
	return mach, nil
}

func (s *Service) devtoolsLink(id string) *devtoolsLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.links == nil {
		s.links = map[string]*devtoolsLink{}
	}
	l, ok := s.links[id]
	if !ok {
		l = &devtoolsLink{}
		s.links[id] = l
	}
	return l
}

// dropDevTools ends a desktop's session: whichever it has when keep is
// nil (the desktop is gone), else only one opened on a machine other than
// keep. A reset's event arrives after the reset has returned, so a client
// may already have opened a session on the new machine: that one stays.
func (s *Service) dropDevTools(id string, keep desktop.Machine) {
	s.mu.Lock()
	l := s.links[id]
	if keep == nil {
		delete(s.links, id)
	}
	s.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.session != nil && (keep == nil || l.machine != keep) {
		l.session.Close()
		l.session, l.machine = nil, nil
	}
	l.mu.Unlock()
}

// open returns the link's session on mach, opening one if there is none,
// it ended, or it was opened on another machine.
func (l *devtoolsLink) open(ctx context.Context, mach desktop.Machine, dialer desktop.DevToolsDialer) (*devtools.Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session != nil {
		select {
		case <-l.session.Done():
		default:
			if l.machine == mach {
				return l.session, nil
			}
		}
		l.session.Close()
		l.session = nil
	}
	conn, err := dialer.DialDevTools(ctx)
	if err != nil {
		return nil, fmt.Errorf("the DevTools bridge's port: %w", err)
	}
	octx, cancel := context.WithTimeout(ctx, bridgeAnswer)
	defer cancel()
	sess, err := devtools.Open(octx, conn)
	if err != nil {
		if errors.Is(err, devtools.ErrNoBridge) && ctx.Err() == nil {
			return nil, fmt.Errorf("%w within %s: Chromium's bridge is not running in the guest (was the snapshot baked before the bridge existed? bake it again)", err, bridgeAnswer)
		}
		return nil, err
	}
	l.machine, l.session = mach, sess
	return sess, nil
}
