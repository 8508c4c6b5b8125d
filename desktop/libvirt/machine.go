package libvirt

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// record is what a machine leaves in the Manager's store: enough to find
// its domain again, or to clean up after it.
type record struct {
	ID string `json:"id"`
	// Domain and UUID name the libvirt domain; the UUID is chosen by hostd
	// before the domain exists, so even a create that fails half-way can be
	// cleaned up.
	Domain string `json:"domain"`
	UUID   string `json:"uuid"`
	// Dirs hold the sockets (RunDir), the disk overlays, console log and
	// saved state (DataDir).
	qemuvm.Dirs
	Snapshot string               `json:"snapshot,omitempty"`
	Shape    desktop.MachineShape `json:"shape"`
	// Disk is the current top overlay; it changes when a snapshot of the
	// running machine freezes a layer.
	Disk string `json:"disk"`
	// Frozen is a layer frozen into a snapshot that is not committed yet;
	// the top overlay names it by this path until AdoptSnapshot.
	Frozen string `json:"frozen,omitempty"`
	// Template machines (from Boot) must never resume after their snapshot.
	Template bool `json:"template,omitempty"`
	// Hibernated machines have no domain; their full state is in
	// HibernateFile.
	Hibernated    bool   `json:"hibernated,omitempty"`
	HibernateFile string `json:"hibernate_file,omitempty"`
	// Volumes are the volumes hot-plugged into the domain; a wake puts
	// them back in the new domain's XML, where the saved state expects
	// them.
	Volumes []desktop.VolumeDisk `json:"volumes,omitempty"`
	// Cgroup is the directories of the QEMU's cgroup hostd made for it
	// (cgroup.go); none when it has none of its own.
	Cgroup []string `json:"cgroup,omitempty"`
	// DiskMiB bounds the desktop's own disk (its top overlay's file);
	// 0 leaves it unbounded (diskbound.go).
	DiskMiB int `json:"disk_mib,omitempty"`
	// UID is the user id its QEMU runs as; 0: libvirt's user (user.go).
	UID uint32 `json:"uid,omitempty"`
}

func parseRecord(raw json.RawMessage) (record, error) {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("%w: machine record: %w", desktop.ErrInvalid, err)
	}
	if rec.ID == "" || rec.UUID == "" || rec.Domain == "" {
		return rec, fmt.Errorf("%w: machine record lacks its id, domain or uuid (not a libvirt driver record?)", desktop.ErrInvalid)
	}
	return rec, nil
}

func parseUUID(s string) (golibvirt.UUID, error) {
	var u golibvirt.UUID
	h := strings.ReplaceAll(s, "-", "")
	if len(h) != 32 {
		return u, fmt.Errorf("%w: uuid %q", desktop.ErrInvalid, s)
	}
	for i := range u {
		var b byte
		for _, c := range h[2*i : 2*i+2] {
			var v byte
			switch {
			case c >= '0' && c <= '9':
				v = byte(c - '0')
			case c >= 'a' && c <= 'f':
				v = byte(c-'a') + 10
			case c >= 'A' && c <= 'F':
				v = byte(c-'A') + 10
			default:
				return u, fmt.Errorf("%w: uuid %q", desktop.ErrInvalid, s)
			}
			b = b<<4 | v
		}
		u[i] = b
	}
	return u, nil
}

// Machine is one libvirt domain and hostd's channels to it. It holds no
// connection of its own: every call goes through the driver's current one.
type Machine struct {
	drv  *Driver
	log  *slog.Logger
	uuid golibvirt.UUID

	mu  sync.Mutex // guards rec, dom, pid, wokeFrom
	rec record
	dom golibvirt.Domain
	pid int
	// wokeFrom is the hibernation state a woken machine was restored from,
	// kept (and its guest paused) until Committed.
	wokeFrom string

	exited   chan struct{}
	exitOnce sync.Once
	reason   string

	// keys holds each keyboard frame until the guest has read the last (qemuvm's keygate.go).
	keys qemuvm.KeyGate

	// lifeChanged is closed and replaced on every lifecycle event of the
	// domain (paused, resumed), for calls that wait for the guest to run.
	lifeMu      sync.Mutex
	lifeChanged chan struct{}

	agent *agent
	// user is the id its QEMU runs as; nil: libvirt's user.
	user *machineUser

	// removals are closed when libvirt reports the device of that alias
	// gone (a volume's unplug).
	removalMu sync.Mutex
	removals  map[string]chan struct{}

	// halted says why the machine paused itself (its disk bound);
	// boundWatched is whether a subscription watches for that.
	halted       chan string
	boundMu      sync.Mutex
	boundWatched bool
	// boundCrossings counts the disk bound's crossings seen, each counted
	// before the pause it causes: a resume that finds the domain paused
	// again by one was not refused.
	boundCrossings atomic.Uint64
}

var _ desktop.Machine = (*Machine)(nil)

func (d *Driver) newMachine(rec record, uuid golibvirt.UUID) *Machine {
	log := d.log.With("machine", rec.ID)
	m := &Machine{drv: d, log: log, uuid: uuid, rec: rec, exited: make(chan struct{}), lifeChanged: make(chan struct{}), halted: make(chan string, 1), keys: qemuvm.KeyGate{Log: log}}
	m.agent = newAgent(m)
	return m
}

// register makes a machine receive its domain's events.
func (d *Driver) register(m *Machine) {
	d.mu.Lock()
	d.machines[m.uuid] = m
	d.mu.Unlock()
}

func (d *Driver) unregister(m *Machine) {
	d.mu.Lock()
	if d.machines[m.uuid] == m {
		delete(d.machines, m.uuid)
	}
	d.mu.Unlock()
}

func (d *Driver) machine(uuid golibvirt.UUID) *Machine {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.machines[uuid]
}

// lifeEvent tells waiters that the domain's state changed.
func (m *Machine) lifeEvent() {
	m.lifeMu.Lock()
	close(m.lifeChanged)
	m.lifeChanged = make(chan struct{})
	m.lifeMu.Unlock()
}

// nextLifeEvent is closed at the domain's next lifecycle event.
func (m *Machine) nextLifeEvent() <-chan struct{} {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	return m.lifeChanged
}

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

func (m *Machine) domain() golibvirt.Domain {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dom
}

// Pid is the QEMU process id libvirtd started, for memory accounting (0
// when it cannot be found).
func (m *Machine) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pid
}

// VCPUTime is how long the guest's virtual CPUs have run (libvirt starts
// QEMU with debug-threads=on, so its vCPU threads carry their names).
func (m *Machine) VCPUTime() (time.Duration, error) { return qemuvm.VCPUTime(m.Pid()) }

// Exited is closed when the domain ends for any reason.
func (m *Machine) Exited() <-chan struct{} { return m.exited }

// ExitReason says why the domain ended.
func (m *Machine) ExitReason() string {
	select {
	case <-m.exited:
		return m.reason
	default:
		return ""
	}
}

// exit marks the machine ended, once, with the tail of libvirt's log of
// its QEMU.
func (m *Machine) exit(reason string) {
	m.exitOnce.Do(func() {
		if note := m.drv.cgroupExit(m.record().Cgroup); note != "" {
			reason = note + "; " + reason
		}
		m.user.release()
		if tail := qemuvm.LogTail(m.logPath(), 8); tail != "" {
			reason += "; last lines of its log:\n" + tail
		}
		m.reason = reason
		m.log.Info("domain ended", "reason", reason)
		close(m.exited)
		m.drv.unregister(m)
	})
}

// logPath is where libvirtd writes the domain's QEMU output.
func (m *Machine) logPath() string {
	return filepath.Join(m.drv.opts.LogDir, m.record().Domain+".log")
}

// Agent is the guest agent, through libvirt.
func (m *Machine) Agent() desktop.GuestAgent { return m.agent }

// DialVNC connects to the VNC server QEMU serves on the machine's socket.
func (m *Machine) DialVNC(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	rec := m.record()
	return d.DialContext(ctx, "unix", rec.Path("vnc.sock"))
}

var _ desktop.DevToolsDialer = (*Machine)(nil)

// DialDevTools connects to the DevTools bridge's port, whose socket the
// domain binds in the machine's run directory.
func (m *Machine) DialDevTools(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", m.record().Path(qemuvm.DevToolsSocket))
}

// DialNIC connects to the NIC's stream: the guest's Ethernet frames.
func (m *Machine) DialNIC(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	rec := m.record()
	return d.DialContext(ctx, "unix", rec.Path(qemuvm.NICSocket))
}

// state is the domain's libvirt state.
func (m *Machine) state(ctx context.Context) (golibvirt.DomainState, error) {
	dom := m.domain()
	st, err := call(ctx, m.drv.conn, func(l *golibvirt.Libvirt) (int32, error) {
		s, _, err := l.DomainGetState(dom, 0)
		return s, err
	})
	return golibvirt.DomainState(st), err
}

// Stopped says whether libvirt has the domain paused (by a pause, or by
// a migration that ended).
func (m *Machine) Stopped(ctx context.Context) (bool, error) {
	st, err := m.state(ctx)
	return st == golibvirt.DomainPaused, err
}

// Pause suspends the domain; its RAM stays.
func (m *Machine) Pause(ctx context.Context) error {
	if err := m.awaitDrain(ctx); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	dom := m.domain()
	if err := do(ctx, m.drv.conn, func(l *golibvirt.Libvirt) error { return l.DomainSuspend(dom) }); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return nil
}

// Resume continues the domain and checks that libvirt reports it running.
func (m *Machine) Resume(ctx context.Context) error {
	if m.record().Template {
		return fmt.Errorf("%w: a template machine never resumes: its writes would land in every clone's memory", desktop.ErrConflict)
	}
	// The disk bound's threshold fires once: armed again before the guest
	// runs, it catches the next write past the bound.
	if err := m.armDiskBound(ctx); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := m.resume(ctx); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

// resume sends DomainResume and then checks libvirt's state: a resume that
// QEMU accepted while it was not ready to run (still inmigrate) returns
// OK and leaves the domain paused.
func (m *Machine) resume(ctx context.Context) error {
	dom := m.domain()
	crossings := m.boundCrossings.Load()
	if err := do(ctx, m.drv.conn, func(l *golibvirt.Libvirt) error { return l.DomainResume(dom) }); err != nil {
		return err
	}
	st, err := m.state(ctx)
	if err != nil {
		return err
	}
	if st == golibvirt.DomainPaused && m.boundCrossings.Load() != crossings {
		// The guest ran, and wrote past its disk bound again at once:
		// paused by the bound (Halted says so), not a refused resume.
		return nil
	}
	if st != golibvirt.DomainRunning {
		status, _ := qemuvm.Status(ctx, m.monitor())
		return fmt.Errorf("libvirt reports the domain %s after the resume (QEMU says %q)", stateName(int32(st)), status)
	}
	return nil
}

// SendInput delivers one synchronised frame of input events through QMP
// passthrough.
func (m *Machine) SendInput(ctx context.Context, events []desktop.InputEvent) error {
	shape := m.record().Shape
	return m.keys.Send(ctx, m.monitor(), events, func(ctx context.Context) error {
		return qemuvm.SendInput(ctx, m.monitor(), events, shape.Width, shape.Height)
	})
}

// Screendump asks QEMU, through QMP passthrough, for a picture of the
// screen, written into the machine's run directory.
func (m *Machine) Screendump(ctx context.Context) (image.Image, error) {
	return qemuvm.Screendump(ctx, m.monitor(), m.record().RunDir, m.user.ownerOf())
}

// Destroy ends the domain and removes every file the machine owned.
func (m *Machine) Destroy(ctx context.Context) error {
	rec := m.record()
	if err := m.drv.destroyDomain(ctx, rec); err != nil {
		return err
	}
	m.exit("was destroyed by hostd")
	return rec.Remove()
}

// abandon ends a domain that did not finish starting and leaves its files
// to the caller: a failed wake keeps its saved state and disk for a later
// try, a failed restore removes its own.
// If the domain cannot be destroyed, the machine stays registered and
// its user held until libvirt reports the domain's end.
func (m *Machine) abandon(ctx context.Context, reason string) {
	if err := m.drv.destroyDomain(ctx, m.record()); err != nil {
		m.log.Error("a domain that did not finish starting is left running until it ends", "err", err)
		return
	}
	m.exit(reason)
}

// stateName names a libvirt domain state for messages.
func stateName(s int32) string {
	switch golibvirt.DomainState(s) {
	case golibvirt.DomainRunning:
		return "running"
	case golibvirt.DomainBlocked:
		return "blocked"
	case golibvirt.DomainPaused:
		return "paused"
	case golibvirt.DomainShutdown:
		return "shutting down"
	case golibvirt.DomainShutoff:
		return "shut off"
	case golibvirt.DomainCrashed:
		return "crashed"
	case golibvirt.DomainPmsuspended:
		return "suspended by the guest"
	}
	return fmt.Sprintf("in state %d", s)
}
