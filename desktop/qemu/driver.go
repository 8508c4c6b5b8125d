// Package qemu is the desktop.Driver that runs QEMU processes directly and
// talks to them over QMP: copy-on-write restores from golden snapshots (with
// a warm pool of machines restored ahead), hibernation, snapshots of running
// machines, and supervision that survives restarts of hostd.
package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/desktop/qemu/qmp"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// Options configure the driver.
type Options struct {
	// Binary is the emulator; default qemu-system-x86_64 from PATH.
	Binary string
	// QemuImg is qemu-img; default from PATH.
	QemuImg string
	// RunDir holds each machine's sockets; DataDir its disks and logs.
	RunDir, DataDir string
	// Accel is "auto" (default), "kvm" or "tcg".
	Accel string
	// ProbeKernel, when set, is a guest kernel that auto-detection boots
	// under KVM for a few seconds to prove KVM really runs a guest.
	ProbeKernel string
	// MemoryDir is where a template's RAM lives while QEMU writes it: a
	// tmpfs (default a directory of the catalog's own under
	// /dev/shm/warmdesk), because a shared mapping of a
	// file on a disk filesystem costs a block allocation per page (a fork
	// took 4 s instead of 1.5 s here). Golden snapshots' memory is then
	// moved to disk; fork templates' stays.
	MemoryDir string
	// SnapshotsDir is the snapshot catalog, for sweeping template memory
	// files that no snapshot or live draft refers to any more.
	SnapshotsDir string
	// NoSandbox turns QEMU's seccomp sandbox off (for debugging only).
	NoSandbox bool
	// Unconfined runs every QEMU as hostd's own user, in hostd's cgroup.
	// Otherwise (hostd running as root) each machine's QEMU drops to a
	// user id of its own from UIDs and sits in a cgroup of its own.
	Unconfined bool
	// UIDs are the machines' user ids (default confine.DefaultIDRange).
	// Two hostd on one host need ranges of their own.
	UIDs confine.IDRange
	// NoCgroups keeps machines in hostd's cgroup (their own user ids
	// stay).
	NoCgroups bool
	// CgroupParent names the cgroup below hostd's own that machines'
	// cgroups are made in (default "warmdesk-" and 12 hex digits of the
	// run directory's path).
	CgroupParent string
	// UIDLeaseDir holds a lock file per user id in use, shared by every
	// process on the host that starts machines (default
	// confine.DefaultLeaseDir).
	UIDLeaseDir string
	// RefillGate, when set, blocks until the desktop just restored from the
	// warm pool shows its first frame, or ctx ends; the pool's refill waits
	// for it (see refillAfter). nil: refill at once.
	RefillGate func(ctx context.Context, desktopID string)
	// RefillWait, when set, holds each pool refill until the host's CPUs
	// have room (desktop.CPUAdmission.WaitIdle): a refill yields to the
	// desktops in use and to every create.
	RefillWait func(ctx context.Context) error
	// Warmup, when set, readies a pool machine once restored (drive's
	// WarmPooled); its failure only goes to the log.
	Warmup func(ctx context.Context, m desktop.Machine, s desktop.Snapshot) error
	Logger *slog.Logger
}

// Driver runs desktops as QEMU processes.
type Driver struct {
	opts  Options
	log   *slog.Logger
	shape desktop.MachineShape
	pool  *pool
	jails *confinement // nil: machines are not confined

	mu   sync.Mutex
	live map[*Machine]struct{} // machines whose connections Close releases

	// beforeRestore, when set (by tests), sees each clone just before its
	// state loads: a test makes QEMU crash there.
	beforeRestore func(*Machine)
}

var _ desktop.Driver = (*Driver)(nil)
var _ desktop.Warmer = (*Driver)(nil)

// Name is "qemu".
func (d *Driver) Name() string { return "qemu" }

// New finds QEMU, identifies its build, chooses the accelerator and starts
// the warm pool (stopped by Close).
func New(ctx context.Context, opts Options) (*Driver, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if opts.Binary, err = qemuvm.FindTool(opts.Binary, "qemu-system-x86_64", "qemu-system-x86"); err != nil {
		return nil, err
	}
	if opts.QemuImg, err = qemuvm.FindTool(opts.QemuImg, "qemu-img", "qemu-utils"); err != nil {
		return nil, err
	}
	if opts.RunDir == "" || opts.DataDir == "" {
		return nil, errors.New("qemu driver: RunDir and DataDir are required")
	}
	if opts.MemoryDir == "" {
		opts.MemoryDir = defaultMemoryDir(opts.SnapshotsDir)
	}
	for _, dir := range []string{opts.RunDir, opts.DataDir, opts.MemoryDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("qemu driver: %w", err)
		}
	}
	d := &Driver{opts: opts, log: opts.Logger, live: map[*Machine]struct{}{}}
	if d.jails, err = newConfinement(opts, opts.Logger); err != nil {
		return nil, err
	}
	probe := qemuvm.Probe{Binary: opts.Binary, Accel: opts.Accel, ProbeKernel: opts.ProbeKernel, Logger: opts.Logger}
	if d.shape, err = qemuvm.ProbeShape(ctx, probe); err != nil {
		return nil, err
	}
	d.log.Info("qemu driver ready", "qemu", d.shape.QEMUVersion, "accel", d.shape.Accel, "machine", d.shape.Type)
	d.pool = newPool(d)
	d.cleanPoolLeftovers(ctx)
	d.sweepMemory(ctx)
	return d, nil
}

// Close stops the warm pool and ends its processes, and lets go of every
// other machine's monitor and agent connections. Desktops keep running,
// for the next hostd to find.
func (d *Driver) Close() {
	d.pool.close()
	d.mu.Lock()
	ms := make([]*Machine, 0, len(d.live))
	for m := range d.live {
		ms = append(ms, m)
	}
	d.live = map[*Machine]struct{}{}
	d.mu.Unlock()
	for _, m := range ms {
		m.agent.close()
		m.qmp.Close()
	}
}

func (d *Driver) forgetMachine(m *Machine) {
	d.mu.Lock()
	delete(d.live, m)
	d.mu.Unlock()
}

// Shape is this host's QEMU build, accelerator, machine type and CPU model.
func (d *Driver) Shape() desktop.MachineShape { return d.shape }

// Binary is the emulator path.
func (d *Driver) Binary() string { return d.opts.Binary }

// checkSnapshot refuses a snapshot this host cannot restore.
func (d *Driver) checkSnapshot(s desktop.Snapshot) error {
	return qemuvm.RefuseSnapshot(s, d.shape)
}

// machineDirs makes the per-machine directories, 0700.
func (d *Driver) machineDirs(id string) (qemuvm.Dirs, error) {
	return qemuvm.MakeDirs(d.opts.RunDir, d.opts.DataDir, id)
}

// start spawns QEMU for rec and connects its monitor. cfg customises the
// command line (memory, boot, incoming). On failure nothing is left behind
// but rec's directories, which the caller removes.
func (d *Driver) start(ctx context.Context, rec record, custom func(*Config)) (*Machine, error) {
	qmpPath := rec.Path("qmp.sock")
	listener, err := listenUnix(qmpPath)
	if err != nil {
		return nil, err
	}
	cfg := Config{
		Binary:    d.opts.Binary,
		Name:      rec.ID,
		Shape:     rec.Shape,
		Disk:      rec.Disk,
		MonitorFD: 3, // the first of ExtraFiles
		VNC:       rec.Path("vnc.sock"),
		Agent:     rec.Path("qga.sock"),
		DevTools:  rec.Path(qemuvm.DevToolsSocket),
		Console:   rec.Path("console.sock"),
		NIC:       rec.Path(qemuvm.NICSocket),
		Sandbox:   !d.opts.NoSandbox,
	}
	custom(&cfg)
	j, err := d.jails.jail(rec)
	if err != nil {
		listener.Close()
		return nil, err
	}
	j.stamp(&rec)
	cfg.RunAs = j.owner
	extra := append([]*os.File{listener}, j.inherited()...)
	volFiles, err := volumeFiles(rec.Volumes, &cfg, &extra)
	if err != nil {
		listener.Close()
		j.exit()
		return nil, err
	}
	proc, err := spawnProcess(d.opts.Binary, Argv(cfg), extra, rec.Path("qemu.log"), j.exit)
	listener.Close()
	closeAll(volFiles)
	if err != nil {
		j.exit()
		return nil, err
	}
	kill := func() {
		killCtx, cancel := deadline(context.WithoutCancel(ctx), 5*time.Second)
		proc.kill(killCtx)
		cancel()
	}
	// Into its cgroup before it has a guest to run: it is still starting
	// up, and has touched little memory.
	if err := j.enter(proc.pid); err != nil {
		kill()
		return nil, err
	}
	rec.Pid, rec.StartTime = proc.pid, proc.startTime
	m, err := d.connect(ctx, rec, proc)
	if err == nil {
		m.jail = j
		err = j.verify(proc.pid)
	}
	if err == nil && cfg.Boot == nil {
		// A Boot machine's console is watched by Boot, for its readiness.
		err = m.watchConsole(context.WithoutCancel(ctx), nil)
	}
	if err != nil {
		kill()
		return nil, err
	}
	return m, nil
}

// connect opens the monitor of a running QEMU. The monitor socket was bound
// before QEMU started, so the connection is queued at once and the greeting
// arrives when QEMU is ready: no polling for the socket.
func (d *Driver) connect(ctx context.Context, rec record, proc *process) (*Machine, error) {
	ctx, cancel := deadline(ctx, 30*time.Second)
	defer cancel()
	type result struct {
		c   *qmp.Client
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, err := qmp.Dial(ctx, rec.Path("qmp.sock"))
		res <- result{c, err}
	}()
	var r result
	select {
	case r = <-res:
	case <-proc.done:
		cancel()
		<-res
		return nil, fmt.Errorf("qemu exited at start: %s", proc.Reason())
	}
	if r.err != nil {
		select {
		case <-proc.done:
			return nil, fmt.Errorf("qemu exited at start: %s", proc.Reason())
		default:
		}
		return nil, fmt.Errorf("qemu monitor: %w", r.err)
	}
	log := d.log.With("machine", rec.ID)
	m := &Machine{
		drv:    d,
		log:    log,
		proc:   proc,
		rec:    rec,
		qmp:    r.c,
		agent:  &agentConn{path: rec.Path("qga.sock")},
		halted: make(chan string, 1),
		keys:   qemuvm.KeyGate{Log: log},
	}
	d.mu.Lock()
	d.live[m] = struct{}{}
	d.mu.Unlock()
	go func() {
		<-proc.done
		d.forgetMachine(m)
	}()
	return m, nil
}

// Boot cold-boots an image as a template whose RAM is a shared file in
// spec.Dir, for baking.
func (d *Driver) Boot(ctx context.Context, spec desktop.BootSpec) (desktop.Machine, error) {
	id := desktop.NewID("bake-")
	dirs, err := d.machineDirs(id)
	if err != nil {
		return nil, err
	}
	disk := filepath.Join(spec.Dir, desktop.FileDisk)
	if err := d.createOverlay(ctx, disk, spec.Image.Disk); err != nil {
		dirs.Remove()
		return nil, err
	}
	shape := qemuvm.BakeShape(d.shape, spec)
	mem := d.templateMemory(spec.Dir)
	if err := qemuvm.SnapshotRoom(d.opts.MemoryDir, spec.MemoryMiB); err != nil {
		dirs.Remove()
		return nil, err
	}
	rec := record{ID: id, Dirs: dirs, Shape: shape, Disk: disk, DiskNode: qemuvm.DiskNodeID, Template: true, Memory: mem}
	if err := markDraft(dirs.RunDir, spec.Dir); err != nil {
		rec.Remove()
		return nil, err
	}
	m, err := d.start(ctx, rec, func(c *Config) {
		c.Memory = qemuvm.Memory{Path: mem, Share: true}
		c.Boot = qemuvm.KernelBoot(spec.Image)
	})
	if err != nil {
		rec.Remove()
		os.Remove(mem)
		return nil, err
	}
	if spec.ConsoleLine != nil {
		if err := m.watchConsole(context.WithoutCancel(ctx), spec.ConsoleLine); err != nil {
			m.Destroy(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return m, nil
}

// createOverlay makes a qcow2 overlay on a backing qcow2.
func (d *Driver) createOverlay(ctx context.Context, path, backing string) error {
	return qemuvm.CreateOverlay(ctx, d.opts.QemuImg, path, backing)
}

// Restore starts a copy-on-write clone of a snapshot, from the warm pool
// when one is ready; or wakes a hibernated machine.
func (d *Driver) Restore(ctx context.Context, spec desktop.RestoreSpec) (desktop.Machine, error) {
	if spec.Hibernated != nil {
		return d.wake(ctx, spec)
	}
	if err := d.checkSnapshot(spec.Snapshot); err != nil {
		return nil, err
	}
	m, crashed, err := d.restoreClone(ctx, spec, true)
	if crashed && ctx.Err() == nil {
		// Debian's QEMU 7.2 segfaults now and then as a restored guest
		// starts (in object_get_class on a null object; twice in a day
		// of test runs here, once failing CI). A new process restores
		// the same files fine, so one more try turns a failed create
		// into a slower one.
		d.log.Warn("QEMU crashed while restoring; trying once more in a new process", "desktop", spec.ID, "snapshot", spec.Snapshot.Name, "err", err)
		if m, _, err = d.restoreClone(ctx, spec, false); err != nil {
			err = fmt.Errorf("second try after QEMU crashed: %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	go d.refillAfter(spec.ID)
	return m, nil
}

// restoreClone restores a clone of spec's snapshot, on a pool machine when
// fromPool and one is ready. On failure the machine is gone and crashed
// says whether its QEMU died of a fault of its own meanwhile.
func (d *Driver) restoreClone(ctx context.Context, spec desktop.RestoreSpec, fromPool bool) (m *Machine, crashed bool, err error) {
	// Pooled machines have no volumes: a restore whose state holds some
	// (a fork's copy) spawns its own.
	if fromPool && len(spec.Volumes) == 0 {
		if m = d.pool.take(spec.Snapshot); m != nil {
			desktop.MarkPhase(ctx, "pool_take")
		}
	}
	if m == nil {
		if m, err = d.spawnClone(ctx, spec.ID, spec.Snapshot, spec.Volumes); err != nil {
			return nil, false, err
		}
		desktop.MarkPhase(ctx, "spawn")
	}
	m.mu.Lock()
	m.rec.DiskMiB = spec.DiskMiB
	m.mu.Unlock()
	if !m.restored {
		if d.beforeRestore != nil {
			d.beforeRestore(m)
		}
		err = m.restore(ctx, spec.Snapshot.Path(desktop.FileState), true, false)
	}
	if err == nil {
		if err = m.armDiskBound(ctx); err == nil {
			desktop.MarkPhase(ctx, "disk_bound")
		}
	}
	if err != nil {
		d.pool.signal()
		// Destroy waits for the process's end, after which its exit
		// status is known.
		m.Destroy(context.WithoutCancel(ctx))
		if m.proc.Crashed() {
			return nil, true, fmt.Errorf("%w (QEMU %s)", err, m.ExitReason())
		}
		return nil, false, err
	}
	return m, false, nil
}

// refillGateTimeout bounds how long a refill waits for the restored
// desktop's first frame.
const refillGateTimeout = 2 * time.Second

// refillAfter refills the pool once the desktop just restored shows its
// first frame (or refillGateTimeout passed). A QEMU spawning meanwhile
// competes with that guest and its screen for the CPU: on 2 cores, with
// creates alternating between gated and not in one run, the ungated ones'
// p50 was 114 ms against 98 ms (and 118 against 68 in a quieter hour).
func (d *Driver) refillAfter(id string) {
	if d.opts.RefillGate != nil {
		ctx, cancel := context.WithTimeout(d.pool.ctx, refillGateTimeout)
		d.opts.RefillGate(ctx, id)
		cancel()
	}
	d.pool.signal()
}

// spawnClone starts QEMU for a clone of s, waiting for migrate-incoming.
func (d *Driver) spawnClone(ctx context.Context, id string, s desktop.Snapshot, vols []desktop.VolumeDisk) (*Machine, error) {
	dirs, err := d.machineDirs(id)
	if err != nil {
		return nil, err
	}
	rec := record{
		ID: id, Dirs: dirs, Snapshot: s.Name,
		Shape: s.Manifest.Machine, Disk: dirs.Path("disk-0.qcow2"), DiskNode: qemuvm.DiskNodeID,
		Volumes: vols,
	}
	if err := d.createOverlay(ctx, rec.Disk, s.Path(desktop.FileDisk)); err != nil {
		rec.Remove()
		return nil, err
	}
	m, err := d.start(ctx, rec, func(c *Config) {
		c.Memory = qemuvm.Memory{Path: s.Path(desktop.FileMemory), Share: false}
		c.Incoming = true
	})
	if err != nil {
		rec.Remove()
		return nil, err
	}
	return m, nil
}

// Attach finds a machine again after hostd restarted.
func (d *Driver) Attach(ctx context.Context, raw json.RawMessage) (desktop.Machine, error) {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("%w: machine record: %w", desktop.ErrInvalid, err)
	}
	if rec.Hibernated {
		return nil, fmt.Errorf("%w: machine %s is hibernated", desktop.ErrConflict, rec.ID)
	}
	j := d.jails.rejail(rec)
	proc, err := attachProcess(rec.Pid, rec.StartTime, rec.RunDir, rec.Path("qemu.log"), j.exit)
	if err != nil {
		j.exit()
		if rec.Hibernation() {
			// Ended after saving its whole state: a hibernation whose
			// record a crash kept from being written.
			raw, _ := json.Marshal(hibernatedRecord(rec, d.log))
			return nil, &desktop.HibernatedError{Record: raw}
		}
		return nil, fmt.Errorf("%w: machine %s: %w", desktop.ErrNotFound, rec.ID, err)
	}
	m, err := d.connect(ctx, rec, proc)
	if err != nil {
		return nil, err
	}
	m.jail = j
	if rec.Hibernation() {
		if status, err := m.Status(ctx); err == nil && status == "postmigrate" {
			// Its state saved whole and nothing run since: a crash came
			// between the save and QEMU's end. Finish the hibernation.
			if err := m.quit(ctx); err != nil {
				return nil, fmt.Errorf("machine %s: finish its hibernation: %w", rec.ID, err)
			}
			raw, _ := json.Marshal(hibernatedRecord(rec, d.log))
			return nil, &desktop.HibernatedError{Record: raw}
		}
	}
	// Still running: a hibernation state beside it is one a crash cut
	// short, and the running guest has moved on from it. A migration the
	// crash left writing it (or a snapshot's) ends first, so the resume
	// that recovery gives a stopped guest is not undone by its completion.
	if st, err := qemuvm.EndInterruptedMigration(ctx, m.monitor()); err != nil {
		m.log.Warn("a migration a crash left under way did not end", "err", err)
	} else if st == "cancelled" {
		m.log.Info("cancelled a migration a crash left under way")
	}
	rec.RemoveHibernation()
	// A snapshot a crash cut short may have switched the disk to its next
	// overlay (one freeze at a time) before the record said so.
	if disk, err := qemuvm.ActiveDisk(ctx, m.qmp); err == nil && disk.NodeName != rec.DiskNode {
		if disk.NodeName != nextNodeName(rec.DiskNode) {
			return nil, fmt.Errorf("machine %s: its disk is node %s, its record says %s", rec.ID, disk.NodeName, rec.DiskNode)
		}
		next := qemuvm.NextOverlayPath(rec.Disk)
		m.log.Info("disk overlay found moved on since the record", "recorded", rec.Disk, "active", next)
		m.mu.Lock()
		m.rec.Disk, m.rec.DiskNode = next, disk.NodeName
		m.mu.Unlock()
		j.setDisk(next)
	}
	if err := m.watchConsole(context.WithoutCancel(ctx), nil); err != nil {
		m.log.Warn("console not logged", "err", err)
	}
	if err := m.armDiskBound(ctx); err != nil {
		m.log.Warn("disk bound not armed again", "err", err)
	}
	return m, nil
}

// Cleanup ends a machine's process if it still runs and removes its files.
func (d *Driver) Cleanup(ctx context.Context, raw json.RawMessage) error {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return fmt.Errorf("%w: machine record: %w", desktop.ErrInvalid, err)
	}
	if rec.Pid > 0 {
		if proc, err := attachProcess(rec.Pid, rec.StartTime, rec.RunDir, rec.Path("qemu.log"), nil); err == nil {
			if err := proc.kill(ctx); err != nil {
				return err
			}
		}
	}
	if len(rec.Cgroup) > 0 {
		if err := confine.GroupAt(rec.Cgroup).Remove(); err != nil {
			d.log.Warn("a machine's cgroup stays", "machine", rec.ID, "err", err)
		}
	}
	return rec.Remove()
}
