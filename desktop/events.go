package desktop

import (
	"context"
	"time"

	"github.com/warmdesk/warmdesk/internal/fanout"
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

// Events is the Manager's stream of events: every change to a desktop,
// and what the other parts announce (an agent's batch, a guest's
// connection), in order.
type Events struct {
	b fanout.Broker[Event]
	// get reads a desktop for an announcement.
	get func(id string) (Desktop, error)
	now func() time.Time
}

// Follow calls handle with every event until ctx ends, in order, from one
// goroutine. A handler that falls behind loses its subscription (see
// fanout.Buffer): Follow subscribes again, and the events in between
// are lost.
func (ev *Events) Follow(ctx context.Context, handle func(Event)) {
	for ctx.Err() == nil {
		events, stop := ev.Subscribe()
		for open := true; open; {
			select {
			case <-ctx.Done():
				open = false
			case e, ok := <-events:
				if !ok {
					open = false
					break
				}
				handle(e)
			}
		}
		stop()
	}
}

// Announce publishes an event about a desktop that is not a state change,
// such as an agent's batch of actions, for viewers to show.
func (ev *Events) Announce(id string, t EventType, summary string) {
	d, err := ev.get(id)
	if err != nil {
		return
	}
	ev.publish(t, d, summary)
}

// Subscribe returns a channel of events and a function that ends the
// subscription. The channel closes if the subscriber falls too far behind.
func (ev *Events) Subscribe() (<-chan Event, func()) {
	return ev.b.Subscribe()
}

// publish tells every subscriber of an event about d, as it is now.
func (ev *Events) publish(t EventType, d Desktop, summary string) {
	ev.b.Publish(Event{Type: t, Desktop: d, Time: ev.now().UTC(), Summary: summary})
}
