package qemu

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu/qmp"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// record is what a machine leaves in the Manager's store: enough to find
// its process again, or to clean up after it.
type record struct {
	ID        string `json:"id"`
	Pid       int    `json:"pid,omitempty"`
	StartTime uint64 `json:"start_time,omitempty"`
	// Dirs hold the sockets (RunDir), the disk overlays, logs and saved
	// state (DataDir).
	qemuvm.Dirs
	Snapshot string               `json:"snapshot,omitempty"`
	Shape    desktop.MachineShape `json:"shape"`
	// Disk is the current top overlay and DiskNode its QEMU node name:
	// both change when a snapshot of the running machine freezes a layer.
	Disk     string `json:"disk"`
	DiskNode string `json:"disk_node"`
	// Frozen is a layer frozen into a snapshot that is not committed yet;
	// the top overlay names it by this path until AdoptSnapshot.
	Frozen string `json:"frozen,omitempty"`
	// Template machines (from Boot) must never resume after their snapshot.
	Template bool `json:"template,omitempty"`
	// Memory is a template's RAM file (on tmpfs) until its snapshot is saved.
	Memory string `json:"memory,omitempty"`
	// Hibernated machines have no process; their full state is in
	// HibernateFile.
	Hibernated    bool   `json:"hibernated,omitempty"`
	HibernateFile string `json:"hibernate_file,omitempty"`
	// DiskMiB bounds the desktop's own disk (its top overlay's file);
	// 0: unbounded.
	DiskMiB int `json:"disk_mib,omitempty"`
	// UID is the user (and group) id QEMU runs as; 0 when unconfined.
	UID uint32 `json:"uid,omitempty"`
	// Volumes are the volumes hot-plugged into the machine; a wake puts
	// them back on its command line, where the saved state expects them.
	Volumes []desktop.VolumeDisk `json:"volumes,omitempty"`
	// Cgroup are the directories of the machine's cgroup (one per v1
	// hierarchy, or one v2 group); empty when it has none.
	Cgroup []string `json:"cgroup,omitempty"`
}

// owner is the user QEMU runs as and owns the machine's files as: the
// machine's own id, or root when unconfined.
func (r record) owner() qemuvm.Owner {
	return qemuvm.Owner{UID: r.UID, GID: r.UID}
}

// Machine is one QEMU process and the channels to it.
type Machine struct {
	drv  *Driver
	log  *slog.Logger
	proc *process

	mu  sync.Mutex // guards rec
	rec record

	qmp   *qmp.Client
	agent *agentConn

	// poolKey identifies the bake a pooled machine was spawned for.
	poolKey string
	// restored says the pool already restored the guest (it runs).
	restored bool

	// halted says why the machine paused itself (its disk bound).
	halted    chan string
	boundOnce sync.Once

	// wokeFrom is the hibernation state a woken machine came from, kept
	// until Committed; movedIn says a desktop moved into it, its guest
	// held until Committed.
	wokeFrom string
	movedIn  bool

	// jail is the machine's user id, cgroup and owned disk.
	jail *jail

	// keys holds each keyboard frame until the guest has read the last (keygate.go).
	keys qemuvm.KeyGate
}

var _ desktop.Machine = (*Machine)(nil)

// Record returns the machine's current record.
func (m *Machine) Record() json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _ := json.Marshal(m.rec)
	return b
}

func (m *Machine) record() record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec
}

// Pid is QEMU's process id.
func (m *Machine) Pid() int { return m.proc.pid }

// VCPUTime is how long the guest's virtual CPUs have run.
func (m *Machine) VCPUTime() (time.Duration, error) { return qemuvm.VCPUTime(m.proc.pid) }

// Exited is closed when QEMU ends.
func (m *Machine) Exited() <-chan struct{} { return m.proc.done }

// ExitReason says why QEMU ended.
func (m *Machine) ExitReason() string { return m.proc.Reason() }

// Agent is the guest agent channel.
func (m *Machine) Agent() desktop.GuestAgent { return m.agent }

var _ desktop.DevToolsDialer = (*Machine)(nil)

// DialDevTools connects to the DevTools bridge's port.
func (m *Machine) DialDevTools(ctx context.Context) (net.Conn, error) {
	return dialUnix(ctx, m.record().Path(qemuvm.DevToolsSocket))
}

// DialVNC connects to QEMU's VNC server.
func (m *Machine) DialVNC(ctx context.Context) (net.Conn, error) {
	return dialUnix(ctx, m.rec.Path("vnc.sock"))
}

// DialNIC connects to the NIC's stream: the guest's Ethernet frames.
func (m *Machine) DialNIC(ctx context.Context) (net.Conn, error) {
	return dialUnix(ctx, m.rec.Path(qemuvm.NICSocket))
}

// drivenCPUFactor is how many times its default CPU share a desktop gets
// while it is driven (desktop.Prioritizer).
const drivenCPUFactor = 4

// SetDriven gives the machine drivenCPUFactor times its default share of
// contended CPU time while driven, its default share otherwise.
func (m *Machine) SetDriven(driven bool) error {
	m.mu.Lock()
	w := qemuvm.CPUWeight(m.rec.Shape.CPUs)
	m.mu.Unlock()
	if driven {
		w *= drivenCPUFactor
	}
	return m.jail.setCPUWeight(w)
}

// Pause stops the guest's CPUs; its RAM stays.
func (m *Machine) Pause(ctx context.Context) error {
	if err := m.qmp.Execute(ctx, "stop", nil, nil); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return nil
}

// Resume continues the guest.
func (m *Machine) Resume(ctx context.Context) error {
	if m.record().Template {
		return fmt.Errorf("%w: a template machine never resumes: its writes would land in every clone's memory", desktop.ErrConflict)
	}
	// The disk bound's threshold fires once: armed again before the guest
	// runs, it catches the next write past the bound.
	if err := m.armDiskBound(ctx); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := m.qmp.Execute(ctx, "cont", nil, nil); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

// SendInput delivers one synchronised frame of input events.
func (m *Machine) SendInput(ctx context.Context, events []desktop.InputEvent) error {
	shape := m.rec.Shape
	return m.keys.Send(ctx, m.qmp, events, func(ctx context.Context) error {
		return qemuvm.SendInput(ctx, m.qmp, events, shape.Width, shape.Height)
	})
}

// Screendump asks QEMU for a picture of the screen (PPM, uncompressed).
func (m *Machine) Screendump(ctx context.Context) (image.Image, error) {
	return qemuvm.Screendump(ctx, m.qmp, m.rec.RunDir, m.record().owner())
}

// Stopped says whether the guest's CPUs are stopped: paused, or stopped
// by a migration (a fork's or a snapshot's) that completed.
func (m *Machine) Stopped(ctx context.Context) (bool, error) {
	st, err := m.Status(ctx)
	return st == "paused" || st == "postmigrate", err
}

// Status is QEMU's run state ("running", "paused", "inmigrate", ...).
func (m *Machine) Status(ctx context.Context) (string, error) {
	return qemuvm.Status(ctx, m.qmp)
}

// Destroy ends QEMU and removes every file the machine owned.
func (m *Machine) Destroy(ctx context.Context) error {
	m.agent.close()
	// quit lets QEMU close its files cleanly, which only volumes need (the
	// rest is removed below, or read-only), so a machine without them is
	// killed at once: a reset waited about 60 ms for the quit. SIGKILL too
	// if quit does not end it.
	if len(m.record().Volumes) > 0 {
		quitCtx, cancel := deadline(ctx, 2*time.Second)
		if err := m.qmp.Execute(quitCtx, "quit", nil, nil); err == nil {
			m.proc.waitExit(quitCtx)
		}
		cancel()
	}
	if err := m.proc.kill(ctx); err != nil {
		return err
	}
	m.qmp.Close()
	m.record().dropMemory()
	return m.record().Remove()
}

// watchConsole reads the serial console socket line by line into the
// machine's capped console log, and hands each line to fn (may be nil; a
// Boot machine reports its readiness there).
func (m *Machine) watchConsole(ctx context.Context, fn func(string)) error {
	return qemuvm.WatchConsole(ctx, m.rec.Path("console.sock"), m.rec.Path("console.log"), m.proc.done, fn)
}
