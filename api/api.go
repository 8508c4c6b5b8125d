// Package api holds the wire types of hostd's HTTP API (version 1), shared
// by the server (web/) and the Go client (client/).
package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Duration is a JSON duration: a Go duration string ("90s", "30m", "2h")
// or a number of seconds.
type Duration time.Duration

// UnmarshalJSON accepts "30m" or 1800.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: use a number of seconds or a string such as \"90s\" or \"30m\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration %s: use a number of seconds or a string such as \"30m\"", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// CreateDesktop is the body of POST /v1/desktops.
type CreateDesktop struct {
	Snapshot string   `json:"snapshot"`
	Name     string   `json:"name,omitempty"`
	TTL      Duration `json:"ttl,omitempty"`
	// Network is the egress policy; true and false are accepted for
	// open and none.
	Network   NetworkPolicy `json:"network"`
	CPUs      int           `json:"cpus,omitempty"`
	MemoryMiB int           `json:"memory_mib,omitempty"`
	DiskMiB   int           `json:"disk_mib,omitempty"`
	// Volumes are attached and mounted before the create returns.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Clock, when set, is the guest's wall-clock time (RFC 3339) when the
	// create returns; the guest's clock runs on from it.
	Clock *time.Time `json:"clock,omitempty"`
	// Labels are the caller's own key-value pairs, kept with the desktop
	// (E2B's metadata are these).
	Labels map[string]string `json:"labels,omitempty"`
}

// Reset asks for a desktop to go back to its snapshot.
type Reset struct {
	// Clock, when set, is the guest's wall-clock time when the reset
	// returns; unset, the one the create (or last reset) asked for.
	Clock *time.Time `json:"clock,omitempty"`
}

// Desktop is a desktop as the API shows it.
type Desktop struct {
	// Host is the fleet host that runs it (empty on a single host).
	Host       string            `json:"host,omitempty"`
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels,omitempty"`
	Snapshot   string            `json:"snapshot"`
	State      string            `json:"state"`
	Reason     string            `json:"reason,omitempty"`
	CPUs       int               `json:"cpus"`
	MemoryMiB  int               `json:"memory_mib"`
	DiskMiB    int               `json:"disk_mib,omitempty"`
	Network    NetworkPolicy     `json:"network"`
	CreatedAt  time.Time         `json:"created_at"`
	LastUsedAt time.Time         `json:"last_used_at"`
	ExpiresAt  *time.Time        `json:"expires_at,omitempty"`
	ForkOf     string            `json:"fork_of,omitempty"`
	Control    Control           `json:"control"`
	Screen     *Screen           `json:"screen,omitempty"`
	Driver     string            `json:"driver"`
	URLs       URLs              `json:"urls"`
	// Setup is how the snapshot's on_create commands went in this
	// desktop, when its snapshot has any.
	Setup *Setup `json:"setup,omitempty"`
	// Volumes are the volumes it holds, mounted in its guest.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Clock is the guest clock its create or last reset asked for;
	// ClockOffsetS the guest's clock minus the host's, in seconds.
	Clock        *time.Time `json:"clock,omitempty"`
	ClockOffsetS float64    `json:"clock_offset_s,omitempty"`
	// Resets counts its resets to its snapshot; ResetAt is the last.
	Resets  int        `json:"resets,omitempty"`
	ResetAt *time.Time `json:"reset_at,omitempty"`
	// Recording says a recording of its screen is running.
	Recording bool `json:"recording,omitempty"`
}

// Setup is the outcome of a desktop's on_create commands: state is
// running, done or failed; a failure names the command (1-based), its exit
// code or error, and its last output.
type Setup struct {
	State    string  `json:"state"`
	Commands int     `json:"commands"`
	Failed   int     `json:"failed,omitempty"`
	Command  string  `json:"command,omitempty"`
	ExitCode int     `json:"exit_code,omitempty"`
	Error    string  `json:"error,omitempty"`
	Output   string  `json:"output,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
}

// Control says who drives the desktop's input.
type Control struct {
	Holder string    `json:"holder"` // "agent" or "person"
	By     string    `json:"by,omitempty"`
	Since  time.Time `json:"since"`
}

// Screen is the desktop's native screen size.
type Screen struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// URLs are where to reach a desktop, relative to the server.
type URLs struct {
	Self       string `json:"self"`
	Screenshot string `json:"screenshot"`
	Actions    string `json:"actions"`
	Control    string `json:"control"`
	VNC        string `json:"vnc"`
	Viewer     string `json:"viewer"`
}

// DesktopList is the body of GET /v1/desktops and of a fork's answer.
type DesktopList struct {
	Desktops []Desktop `json:"desktops"`
}

// Fork is the body of POST /v1/desktops/{id}/fork.
type Fork struct {
	Count int `json:"count"`
}

// TakeSnapshot is the body of POST /v1/desktops/{id}/snapshot.
type TakeSnapshot struct {
	Name string `json:"name"`
}

// Snapshot is a golden snapshot as the API shows it.
type Snapshot struct {
	Name      string          `json:"name"`
	CreatedAt time.Time       `json:"created_at"`
	Image     string          `json:"image"`
	Flavor    string          `json:"flavor"`
	CPUs      int             `json:"cpus"`
	MemoryMiB int             `json:"memory_mib"`
	Screen    Screen          `json:"screen"`
	Accel     string          `json:"accel"`
	QEMU      string          `json:"qemu"`
	Parent    string          `json:"parent,omitempty"`
	Source    string          `json:"source,omitempty"`
	Ephemeral bool            `json:"ephemeral,omitempty"`
	Pool      int             `json:"pool"`
	Users     []string        `json:"users"`
	Manifest  json.RawMessage `json:"manifest,omitempty"`
}

// GuestImage is a built guest image in the host's cache. Images are built by
// the host's administrator (hostd image build): a recipe runs commands as
// root on the host, so the API only lists them.
type GuestImage struct {
	Name   string `json:"name"`
	Flavor string `json:"flavor"`
	Hash   string `json:"hash"`
	Screen Screen `json:"screen"`
	// Source is the recipe file it was built from; "" for a flavor.
	Source       string    `json:"source,omitempty"`
	Packages     []string  `json:"packages,omitempty"` // what the recipe added to its flavor
	Apps         []string  `json:"apps,omitempty"`
	DiskBytes    int64     `json:"disk_bytes"`
	CreatedAt    time.Time `json:"created_at"`
	BuildSeconds float64   `json:"build_seconds"`
}

// ImageList is the answer to GET /v1/images, newest first.
type ImageList struct {
	Images []GuestImage `json:"images"`
}

// SnapshotList is the body of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// Error is the body of every error answer.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what was wrong; Field names the request field at fault,
// when one is.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	State   string `json:"state,omitempty"`
	// CPUPressure is the host's CPU pressure (0 to 1) that refused the
	// action (code cpu_busy; Retry-After says when to try again).
	CPUPressure float64 `json:"cpu_pressure,omitempty"`
}

// VolumeMount is a volume on a desktop: where the guest mounts it, and
// "rw" (the default; one desktop at a time) or "ro" (any number).
type VolumeMount struct {
	Name  string `json:"name"`
	Mount string `json:"mount"`
	Mode  string `json:"mode,omitempty"`
}

// CreateVolume asks for a blank volume of size_mib, or one that starts
// from the volume snapshot from.
type CreateVolume struct {
	Name    string `json:"name"`
	SizeMiB int    `json:"size_mib,omitempty"`
	From    string `json:"from,omitempty"`
}

// Volume is a volume as the API shows it.
type Volume struct {
	Name    string `json:"name"`
	SizeMiB int    `json:"size_mib"`
	// AllocatedBytes is what its own top layer takes on the host's disk.
	AllocatedBytes int64     `json:"allocated_bytes"`
	CreatedAt      time.Time `json:"created_at"`
	// Snapshot: a frozen volume, read-only, that volumes start from.
	Snapshot bool   `json:"snapshot,omitempty"`
	From     string `json:"from,omitempty"`
	// BranchOf is the volume whose fork branch it is.
	BranchOf string `json:"branch_of,omitempty"`
	Layers   int    `json:"layers"`
	Damaged  string `json:"damaged,omitempty"`
	// AttachedTo are the desktops holding it, each with its mode.
	AttachedTo []VolumeHolder `json:"attached_to"`
}

// VolumeHolder is a desktop holding a volume.
type VolumeHolder struct {
	Desktop string `json:"desktop"`
	Mode    string `json:"mode"`
}

// VolumeList is GET /v1/volumes.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}

// FreezeVolume names a volume snapshot.
type FreezeVolume struct {
	Name string `json:"name"`
}

// StartRecording asks for a recording of a desktop's screen.
type StartRecording struct {
	// Format is mp4 (H.264, the default) or webm (VP8).
	Format string `json:"format,omitempty"`
}

// Recording is a recording of a desktop's screen.
type Recording struct {
	ID        string     `json:"id"`
	Desktop   string     `json:"desktop"`
	State     string     `json:"state"` // recording, encoding, done, failed
	Format    string     `json:"format"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Reason says why it ended: stopped, the desktop was deleted, the disk
	// cap, a full disk; Error why its encoding failed.
	Reason     string  `json:"reason,omitempty"`
	Error      string  `json:"error,omitempty"`
	Frames     int     `json:"frames"`
	FrameBytes int64   `json:"frame_bytes"`
	MaxBytes   int64   `json:"max_bytes"`
	VideoBytes int64   `json:"video_bytes,omitempty"`
	Seconds    float64 `json:"seconds"`
	// EncodeCPUS is the CPU time ffmpeg took to encode it, in seconds.
	EncodeCPUS float64       `json:"encode_cpu_s,omitempty"`
	URLs       RecordingURLs `json:"urls"`
}

// RecordingURLs are a recording's own endpoints.
type RecordingURLs struct {
	Info    string `json:"info"`
	Video   string `json:"video"`
	Actions string `json:"actions"`
	Stop    string `json:"stop"`
}

// RecordingList is the body of GET /v1/desktops/{id}/recordings.
type RecordingList struct {
	Recordings []Recording `json:"recordings"`
}

// RecordingActions is a recording's action log.
type RecordingActions struct {
	Recording string           `json:"recording"`
	Actions   []RecordingEntry `json:"actions"`
}

// RecordingEntry is one thing done to the desktop during a recording.
type RecordingEntry struct {
	// AtMs is the time since the recording started: the video's timeline.
	AtMs    float64   `json:"at_ms"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // action, exec, control, devtools, state, reset
	Summary string    `json:"summary"`
}

// Host is what this host admits now (GET /v1/host, hostd status).
type Host struct {
	// Desktops hold resources (creating, running, paused) out of the cap;
	// MemoryMiB is their guest memory out of MaxMemoryMiB.
	Desktops     int     `json:"desktops"`
	MaxDesktops  int     `json:"max_desktops"`
	MemoryMiB    int     `json:"memory_mib"`
	MaxMemoryMiB int     `json:"max_memory_mib"`
	CPU          HostCPU `json:"cpu"`
}

// HostCPU is the host's CPU admission.
type HostCPU struct {
	// Pressure is the share of the last WindowS seconds in which runnable
	// work waited for a CPU (0 to 1); Source is how it is read: psi (the
	// kernel's pressure stall information) or loadavg.
	Pressure float64 `json:"pressure"`
	Source   string  `json:"source"`
	WindowS  float64 `json:"window_s"`
	// Bound is --max-cpu-pressure (0: no admission by CPU): at or above
	// it creates, forks and wakes wait in a queue, then answer 503.
	Bound    float64 `json:"bound"`
	Queued   int     `json:"queued"`
	Admitted uint64  `json:"admitted_after_waiting"`
	Refused  uint64  `json:"refused"`
}

// Fleet is the fleet this host belongs to (GET /v1/fleet): its hosts whose
// lease is alive.
type Fleet struct {
	Name  string      `json:"name"`
	Self  string      `json:"self"` // the host that answered
	Hosts []FleetHost `json:"hosts"`
	// Leader is the host whose etcd member leads the fleet's etcd now.
	Leader string `json:"leader,omitempty"`
}

// FleetMember is one member of a fleet's embedded etcd.
type FleetMember struct {
	Name      string `json:"name"`
	PeerURL   string `json:"peer_url"`
	ClientURL string `json:"client_url,omitempty"`
	// Started is false for a member added but not yet started.
	Started bool `json:"started"`
}

// AddFleetMember is POST /v1/fleet/members: a host to add to the fleet's
// etcd, by its name and the address its member listens on (the fleet's
// --cluster-peer-port).
type AddFleetMember struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// FleetHost is one host of a fleet, as it says of itself.
type FleetHost struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	// Peer is where the other hosts call its API, over mutual TLS with
	// the fleet's certificates (--cluster-api-port).
	Peer string `json:"peer,omitempty"`
	// Generation counts the host's starts in the fleet.
	Generation    uint64   `json:"generation,omitempty"`
	MemoryMiB     int      `json:"memory_mib"`
	MaxDesktops   int      `json:"max_desktops"`
	UsedMemoryMiB int      `json:"used_memory_mib"`
	Desktops      int      `json:"desktops"`
	QEMU          string   `json:"qemu"`
	Machine       string   `json:"machine"`
	Accel         string   `json:"accel"`
	Snapshots     []string `json:"snapshots,omitempty"`
	// Draining hosts take no new desktops (hostd fleet drain).
	Draining bool `json:"draining,omitempty"`
}

// MoveDesktop is POST /v1/desktops/ID/move: the host of the fleet to move
// the running desktop to; empty lets the source choose (the live host,
// not draining, with the most guest memory free).
type MoveDesktop struct {
	To string `json:"to,omitempty"`
}

// Move is how a move went: the desktop as its new host runs it, and the
// figures.
type Move struct {
	Desktop Desktop `json:"desktop"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	// TotalMs is from the move's start until the new host ran the guest.
	TotalMs int64 `json:"total_ms"`
	// DowntimeMs is QEMU's: the guest's CPUs stopped on the source until
	// its state was whole; SwitchMs from then until the new host ran it
	// (the disk's last changes, the record's hand-over, the guest's
	// start). The guest stood still for about their sum.
	DowntimeMs int64 `json:"downtime_ms"`
	SwitchMs   int64 `json:"switch_ms"`
	// HeldMs is how long requests for the desktop waited.
	HeldMs int64 `json:"held_ms"`
	// StateBytes is QEMU's migration stream; DiskBytes the disk overlay's
	// chunks sent.
	StateBytes int64 `json:"state_bytes"`
	DiskBytes  int64 `json:"disk_bytes"`
}
