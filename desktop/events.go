package desktop

import (
	"context"
	"time"
)

// EventType says what happened to a desktop.
type EventType string

// Events the Manager emits.
const (
	EventCreated EventType = "desktop.created"
	EventState   EventType = "desktop.state"   // any state change, failures included
	EventControl EventType = "desktop.control" // control passed between agent and person
	EventDeleted EventType = "desktop.deleted"
	// EventAction: an agent's batch ran on the desktop (Summary says what).
	EventAction EventType = "desktop.action"
	// EventNetwork: the egress policy changed, or the guest made a
	// connection (Summary says where, allowed or refused and why).
	EventNetwork EventType = "desktop.network"
	// EventSetup: the snapshot's on_create commands finished or failed
	// (Summary says which).
	EventSetup EventType = "desktop.setup"
	// EventVolumes: a volume was attached or detached.
	EventVolumes EventType = "desktop.volumes"
	// EventReset: the desktop went back to its snapshot on a new machine.
	EventReset EventType = "desktop.reset"
	// EventExec: a command ran in the guest through the API (Summary says
	// which and how it ended).
	EventExec EventType = "desktop.exec"
	// EventDevTools: a DevTools client connected to the desktop's
	// Chromium (Summary says to what).
	EventDevTools EventType = "desktop.devtools"
	// EventRecording: a recording of the screen started or ended.
	EventRecording EventType = "desktop.recording"
)

// Event is one change to a desktop, with the desktop as it is after it.
type Event struct {
	Type    EventType `json:"type"`
	Desktop Desktop   `json:"desktop"`
	Time    time.Time `json:"time"`
	// Summary is a line for people, for events that carry one.
	Summary string `json:"summary,omitempty"`
}

// Follow calls handle with every event until ctx ends, in order, from one
// goroutine. A handler that falls behind loses its subscription (see
// fanout.Buffer): Follow subscribes again, and the events in between
// are lost.
func (m *Manager) Follow(ctx context.Context, handle func(Event)) {
	for ctx.Err() == nil {
		events, stop := m.Subscribe()
		for open := true; open; {
			select {
			case <-ctx.Done():
				open = false
			case ev, ok := <-events:
				if !ok {
					open = false
					break
				}
				handle(ev)
			}
		}
		stop()
	}
}

// Announce publishes an event about a desktop that is not a state change,
// such as an agent's batch of actions, for viewers to show.
func (m *Manager) Announce(id string, t EventType, summary string) {
	d, err := m.Get(id)
	if err != nil {
		return
	}
	m.events.Publish(Event{Type: t, Desktop: d, Time: m.now().UTC(), Summary: summary})
}

// Subscribe returns a channel of events and a function that ends the
// subscription. The channel closes if the subscriber falls too far behind.
func (m *Manager) Subscribe() (<-chan Event, func()) {
	return m.events.Subscribe()
}
