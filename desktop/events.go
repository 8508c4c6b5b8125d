package desktop

import (
	"sync"
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
)

// Event is one change to a desktop, with the desktop as it is after it.
type Event struct {
	Type    EventType `json:"type"`
	Desktop Desktop   `json:"desktop"`
	Time    time.Time `json:"time"`
}

// subscriberBuffer bounds how far a subscriber may fall behind; a slower one
// loses its subscription (its channel closes) rather than slowing the
// Manager.
const subscriberBuffer = 256

type broker struct {
	mu   sync.Mutex
	subs map[chan Event]struct{}
}

func newBroker() *broker { return &broker{subs: map[chan Event]struct{}{}} }

func (b *broker) publish(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
			delete(b.subs, ch)
			close(ch)
		}
	}
}

// Subscribe returns a channel of events and a function that ends the
// subscription. The channel closes if the subscriber falls too far behind.
func (m *Manager) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, subscriberBuffer)
	m.events.mu.Lock()
	m.events.subs[ch] = struct{}{}
	m.events.mu.Unlock()
	return ch, func() {
		m.events.mu.Lock()
		if _, ok := m.events.subs[ch]; ok {
			delete(m.events.subs, ch)
			close(ch)
		}
		m.events.mu.Unlock()
	}
}
