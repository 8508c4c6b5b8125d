// Package desktop is warmdesk's domain: a Desktop and its states, the
// Manager that owns every desktop's lifetime, the Driver interface that real
// hypervisor drivers implement, snapshot manifests, and the errors callers can
// test for. It imports only the standard library and netpolicy (the egress
// policy a desktop records, itself standard library only).
package desktop

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/warmdesk/warmdesk/netpolicy"
	"github.com/warmdesk/warmdesk/volume"
)

// State is where a desktop is in its life.
type State string

// The states of a desktop. Transitions between them are checked by
// CanTransition, in one place.
const (
	StateCreating   State = "creating"
	StateRunning    State = "running"
	StatePaused     State = "paused"
	StateHibernated State = "hibernated"
	StateStopping   State = "stopping"
	StateFailed     State = "failed"
	StateDeleted    State = "deleted"
)

// transitions lists, for each state, the states it may move to.
var transitions = map[State][]State{
	StateCreating:   {StateRunning, StateFailed, StateStopping},
	StateRunning:    {StatePaused, StateHibernated, StateStopping, StateFailed},
	StatePaused:     {StateRunning, StateHibernated, StateStopping, StateFailed},
	StateHibernated: {StateRunning, StateStopping, StateFailed},
	StateFailed:     {StateStopping},
	StateStopping:   {StateDeleted, StateFailed},
	StateDeleted:    nil,
}

// CanTransition reports whether a desktop in state from may move to state to.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Live reports whether a desktop in this state has a hypervisor process.
func (s State) Live() bool { return s == StateRunning || s == StatePaused }

// Holds reports whether a desktop in this state still holds resources
// (memory reservation, files) that count against the host's caps.
func (s State) Holds() bool {
	return s == StateCreating || s == StateRunning || s == StatePaused
}

// Resources are what one desktop may use. CPUs and memory are fixed by the
// snapshot it restores from (a memory image restores only into a machine of
// the same shape); DiskMiB caps how far its copy-on-write disk may grow.
type Resources struct {
	CPUs      int `json:"cpus"`
	MemoryMiB int `json:"memory_mib"`
	DiskMiB   int `json:"disk_mib"`
}

// Controller says who may drive a desktop's input.
type Controller string

// Either an agent (through the API) or a person (through the viewer) is in
// control of a desktop at any moment.
const (
	ControlAgent  Controller = "agent"
	ControlPerson Controller = "person"
)

// Control is the current holder of a desktop's input.
type Control struct {
	Holder Controller `json:"holder"`
	// By names the person holding control, when Holder is ControlPerson.
	By    string    `json:"by,omitempty"`
	Since time.Time `json:"since"`
}

// Desktop is one desktop as the Manager records it.
type Desktop struct {
	ID         string           `json:"id"`
	Name       string           `json:"name"`
	Snapshot   string           `json:"snapshot"`
	State      State            `json:"state"`
	Reason     string           `json:"reason,omitempty"` // why it failed, or paused itself (disk_full)
	Resources  Resources        `json:"resources"`
	Network    netpolicy.Policy `json:"network"`
	CreatedAt  time.Time        `json:"created_at"`
	LastUsedAt time.Time        `json:"last_used_at"`
	ExpiresAt  *time.Time       `json:"expires_at,omitempty"`
	// TTL is how long the desktop lives without use: every use moves
	// ExpiresAt to TTL after it, and a request still running keeps it.
	// Zero with an ExpiresAt (a record from before TTLs followed use) is
	// an end that does not move.
	TTL     time.Duration `json:"ttl,omitempty"`
	ForkOf  string        `json:"fork_of,omitempty"`
	Control Control       `json:"control"`
	// Driver names the driver that runs it; Machine is that driver's record
	// of the running machine, opaque to the Manager, enough to reattach
	// after a restart or to clean up.
	Driver  string          `json:"driver"`
	Machine json.RawMessage `json:"machine,omitempty"`
	// Uses lists the snapshots this desktop's disk and memory depend on, so
	// none of them is removed while it lives.
	Uses []string `json:"uses,omitempty"`
	// Setup is how its snapshot's on_create commands went, when it has
	// any.
	Setup *Setup `json:"setup,omitempty"`
	// Volumes are the volumes it holds, mounted in its guest.
	Volumes []volume.Mount `json:"volumes,omitempty"`
	// Clock is the guest wall-clock time its create (or last reset) asked
	// for; a reset without its own goes back to it. ClockOffset is the
	// guest's clock minus the host's, kept across wakes and forks.
	Clock       *time.Time    `json:"clock,omitempty"`
	ClockOffset time.Duration `json:"clock_offset,omitempty"`
	// Resets counts the resets to its snapshot begun (a failed one too);
	// ResetAt is when the last began.
	Resets  int        `json:"resets,omitempty"`
	ResetAt *time.Time `json:"reset_at,omitempty"`
	// Labels and Env are the create's (see CreateRequest).
	Labels map[string]string `json:"labels,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// GuestPending says the guest's clock and identity are yet to be set:
	// a restored machine starts with its template's, and they are set in
	// the background once it runs. When a restart of hostd (or a pause
	// that outlasted the setting) cut that short, a running desktop's are
	// set at recovery and a paused one's when it resumes.
	GuestPending bool `json:"guest_pending,omitempty"`
}

// Setup states.
const (
	SetupRunning = "running"
	SetupDone    = "done"
	SetupFailed  = "failed"
)

// Setup is the outcome of a desktop's on_create commands.
type Setup struct {
	State string `json:"state"`
	// Commands is how many there are; Failed the 1-based number of the one
	// that failed, with its command, exit code and last output.
	Commands int     `json:"commands"`
	Failed   int     `json:"failed,omitempty"`
	Command  string  `json:"command,omitempty"`
	ExitCode int     `json:"exit_code,omitempty"`
	Error    string  `json:"error,omitempty"`
	Output   string  `json:"output,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
}

// InputAllowed says why the desktop may not take an agent's input, or nil:
// it must be running (not paused, hibernated or failed) and no person may be
// in control. The drive service applies it to every frame it sends, so a
// person taking over stops an agent's batch at its next frame.
func (d Desktop) InputAllowed() error {
	if d.State != StateRunning {
		return &TransitionError{ID: d.ID, From: d.State, Action: "send input to"}
	}
	if d.Control.Holder == ControlPerson {
		by := d.Control.By
		if by == "" {
			by = "someone"
		}
		return fmt.Errorf("%w: %s took control of desktop %s at %s; agent input is refused until they hand it back (POST /v1/desktops/%s/control {\"holder\":\"agent\"})",
			ErrControlled, by, d.ID, d.Control.Since.Format(time.RFC3339), d.ID)
	}
	return nil
}

// GuestReachable says why the desktop's guest agent cannot answer, or nil:
// a paused guest's agent cannot, and a hibernated or failed one has none.
func (d Desktop) GuestReachable() error {
	if d.State != StateRunning {
		return &TransitionError{ID: d.ID, From: d.State, Action: "reach the guest agent of"}
	}
	return nil
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidName checks a snapshot or desktop name: lowercase letters, digits,
// '.', '_' and '-', starting with a letter or digit, at most 63 characters.
func ValidName(kind, name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: %s name %q: use 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid, kind, name)
	}
	return nil
}
