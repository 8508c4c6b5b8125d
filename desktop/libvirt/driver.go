// Package libvirt is the desktop.Driver that runs desktops as libvirt
// domains through libvirtd (github.com/digitalocean/go-libvirt), so they
// show up in virsh list and follow libvirt's lifecycle, with the same
// machine and the same copy-on-write restores as the QEMU driver: a
// snapshot made by either driver restores on both when their shapes match.
//
// libvirt's own save and restore cannot fan one image out to many domains
// (a save image restores as one domain only) and share no memory, so the
// restore is the QEMU driver's copy-on-write recipe: the domain XML
// maps the snapshot's memory file copy-on-write through <qemu:commandline>,
// the domain is created paused with -incoming defer, the device state is
// loaded through QMP passthrough, and the domain is resumed. libvirt marks
// such domains tainted (custom-argv, custom-monitor).
package libvirt

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/confine"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// Options configure the driver.
type Options struct {
	// URI is libvirtd's; default qemu:///system. It must be a local unix
	// socket: QEMU opens hostd's files and sockets.
	URI string
	// QemuImg is qemu-img, for disk overlays; default from PATH.
	QemuImg string
	// RunDir holds each machine's sockets; DataDir its disks and logs.
	RunDir, DataDir string
	// Accel is "auto" (default), "kvm" or "tcg", chosen as the QEMU driver
	// chooses it; TCG domains are <domain type='qemu'>.
	Accel string
	// LogDir is where libvirtd keeps each domain's QEMU log, read for exit
	// reasons; default libvirt's system location.
	LogDir string
	// NoCgroups leaves desktops' QEMU processes in the cgroup libvirtd
	// starts them in, instead of one each with its limits.
	NoCgroups bool
	// UIDs are the desktops' user ids, one each (default DefaultUIDs);
	// UIDLeaseDir holds their leases (default confine.DefaultLeaseDir).
	// Unconfined leaves QEMU as libvirt's qemu.conf user (user.go).
	UIDs        confine.IDRange
	UIDLeaseDir string
	Unconfined  bool
	Logger      *slog.Logger
}

// Driver runs desktops as libvirt domains.
type Driver struct {
	opts     Options
	log      *slog.Logger
	emulator string
	shape    desktop.MachineShape
	conn     *conn
	// cgroups makes desktops' cgroups; nil: none (cgroup.go).
	cgroups *confine.Cgroups
	// ids hands out desktops' user ids; nil: QEMU runs as libvirt's user.
	ids *confine.IDs

	mu       sync.Mutex
	machines map[golibvirt.UUID]*Machine // live machines, by domain UUID, for events
	// stranded are the users of desktops found again whose domain could
	// not be looked at (libvirtd failing, not the domain gone): their ids
	// stay held until Cleanup has ended the domain, by machine id.
	stranded map[string]*machineUser
}

var _ desktop.Driver = (*Driver)(nil)

// Name is "libvirt".
func (d *Driver) Name() string { return "libvirt" }

// Shape is the QEMU build libvirtd runs, the accelerator, machine type and
// CPU model: the same shape the QEMU driver reports for the same binary.
func (d *Driver) Shape() desktop.MachineShape { return d.shape }

// New connects to libvirtd, finds the emulator it runs and identifies that
// build. It fails at once, saying what to install or start, when libvirtd
// is absent or not running.
func New(ctx context.Context, opts Options) (*Driver, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.URI == "" {
		opts.URI = DefaultURI
	}
	if opts.LogDir == "" {
		opts.LogDir = "/var/log/libvirt/qemu"
	}
	if opts.RunDir == "" || opts.DataDir == "" {
		return nil, errors.New("libvirt driver: RunDir and DataDir are required")
	}
	var err error
	if opts.QemuImg, err = qemuvm.FindTool(opts.QemuImg, "qemu-img", "qemu-utils"); err != nil {
		return nil, err
	}
	for _, dir := range []string{opts.RunDir, opts.DataDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("libvirt driver: %w", err)
		}
	}
	d := &Driver{opts: opts, log: opts.Logger.With("driver", "libvirt"), machines: map[golibvirt.UUID]*Machine{}}
	d.cgroups = d.newCgroups()
	d.conn, err = connect(ctx, opts.URI, d.log, d.connected)
	if err != nil {
		return nil, err
	}
	if err := d.identify(ctx); err != nil {
		d.conn.close()
		return nil, err
	}
	if d.ids, err = d.newIDs(); err != nil {
		d.conn.close()
		return nil, err
	}
	d.log.Info("libvirt driver ready", "uri", opts.URI, "emulator", d.emulator, "qemu", d.shape.QEMUVersion, "accel", d.shape.Accel, "machine", d.shape.Type)
	d.removeLeftoverTemplates(ctx)
	return d, nil
}

// identify asks libvirtd which emulator it runs for q35 and identifies that
// binary as every driver does (qemuvm.ProbeShape), so manifests agree
// across drivers.
func (d *Driver) identify(ctx context.Context) error {
	caps, err := d.domainCaps(ctx, "qemu")
	if err != nil {
		return err
	}
	shape, err := qemuvm.ProbeShape(ctx, qemuvm.Probe{Binary: caps.Path, Accel: d.opts.Accel, Logger: d.log})
	if err != nil {
		return fmt.Errorf("libvirt driver: emulator %s: %w", caps.Path, err)
	}
	if shape.Accel == "kvm" {
		if caps, err = d.domainCaps(ctx, "kvm"); err != nil {
			return err
		}
	}
	if caps.Machine != shape.Type {
		return fmt.Errorf("libvirtd resolves q35 to %s but %s says %s", caps.Machine, caps.Path, shape.Type)
	}
	d.emulator, d.shape = caps.Path, shape
	return nil
}

// domainCaps asks libvirtd what it runs for x86_64 q35 domains of a type
// (qemu for TCG, kvm).
func (d *Driver) domainCaps(ctx context.Context, virtType string) (domainCaps, error) {
	raw, err := call(ctx, d.conn, func(l *golibvirt.Libvirt) (string, error) {
		return l.ConnectGetDomainCapabilities(nil, golibvirt.OptString{"x86_64"}, golibvirt.OptString{"q35"}, golibvirt.OptString{virtType}, 0)
	})
	if err != nil {
		return domainCaps{}, fmt.Errorf("libvirtd cannot run x86_64 q35 %s domains (is qemu-system-x86 installed?): %w", virtType, err)
	}
	return parseDomainCaps(raw)
}

// Close lets go of libvirtd. Domains keep running, for the next hostd,
// which takes their ids' leases again (as after hostd's own end, when its
// descriptors close).
func (d *Driver) Close() {
	d.conn.close()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.machines {
		m.user.letGo()
	}
	for _, u := range d.stranded {
		u.letGo()
	}
}

// checkSnapshot refuses a snapshot this host cannot restore, or whose
// devices the domain XML cannot reproduce.
func (d *Driver) checkSnapshot(s desktop.Snapshot) error {
	var extra []string
	if err := CheckDevices(s.Manifest.Machine); err != nil {
		extra = append(extra, err.Error())
	}
	return qemuvm.RefuseSnapshot(s, d.shape, extra...)
}

// createOverlay makes a qcow2 overlay on a backing qcow2.
func (d *Driver) createOverlay(ctx context.Context, path, backing string) error {
	return qemuvm.CreateOverlay(ctx, d.opts.QemuImg, path, backing)
}

// newRecord starts a machine's record: its names and directories (0700).
func (d *Driver) newRecord(id string) (record, error) {
	dirs, err := qemuvm.MakeDirs(d.opts.RunDir, d.opts.DataDir, id)
	if err != nil {
		return record{}, err
	}
	return record{ID: id, Domain: domainName(id), UUID: newUUID(), Dirs: dirs}, nil
}

// domainName is the libvirt name of a machine: prefixed, so virsh list
// shows which domains are hostd's.
func domainName(id string) string { return "warmdesk-" + id }

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// startSpec says how to start a domain beyond its record.
type startSpec struct {
	role     string
	memory   qemuvm.Memory
	boot     *qemuvm.Boot
	incoming bool
}

// start defines and starts a domain for rec. A domain waiting for an
// incoming migration is created paused: libvirt would otherwise send cont
// to a QEMU that is still inmigrate, which QEMU takes as "start once
// loaded" while libvirt goes on reporting the domain as paused.
func (d *Driver) start(ctx context.Context, rec record, s startSpec) (*Machine, error) {
	uuid, err := parseUUID(rec.UUID)
	if err != nil {
		return nil, err
	}
	cfg := DomainConfig{
		Name: rec.Domain, UUID: rec.UUID, Meta: Meta{ID: rec.ID, Role: s.role},
		Emulator: d.emulator, Shape: rec.Shape, Memory: s.memory, Boot: s.boot, Disk: rec.Disk,
		VNC: rec.Path("vnc.sock"), Console: rec.Path("console.sock"), ConsoleLog: rec.Path("console.log"),
		DevTools: rec.Path(qemuvm.DevToolsSocket),
		NIC:      rec.Path(qemuvm.NICSocket), Incoming: s.incoming, Volumes: rec.Volumes,
	}
	// Desktops run as ids of their own; bakes and templates (transient,
	// fed only by hostd) stay libvirt's user.
	var user *machineUser
	if s.role == RoleDesktop && d.ids != nil {
		if user, err = d.newUser(rec); err != nil {
			return nil, err
		}
		rec.UID = user.owner.UID
		cfg.RunAs = &user.owner
		if s.incoming {
			// QEMU as its id could not bind it later, in a directory of
			// root's.
			cfg.IncomingSocket = rec.Path(incomingSocket)
		}
	}
	xml, err := DomainXML(cfg)
	if err != nil {
		user.release()
		return nil, err
	}
	m := d.newMachine(rec, uuid)
	m.user = user
	// Registered before the domain exists, so no lifecycle event of it
	// can be missed.
	d.register(m)
	var flags golibvirt.DomainCreateFlags
	if s.incoming {
		flags |= golibvirt.DomainStartPaused
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dom, err := call(ctx, d.conn, func(l *golibvirt.Libvirt) (golibvirt.Domain, error) {
		return l.DomainCreateXML(string(xml), flags)
	})
	if err != nil {
		d.unregister(m)
		// An abandoned call may still create the domain: remove it if so.
		d.destroyDomain(context.WithoutCancel(ctx), rec)
		user.release()
		return nil, fmt.Errorf("create domain %s: %w%s", rec.Domain, err, d.sandboxHint(user, m.logPath()))
	}
	pid := findPid(rec.UUID)
	if err := user.verify(pid); err != nil {
		m.abandon(context.WithoutCancel(ctx), "did not run as its own user")
		return nil, err
	}
	var group []string
	if s.role == RoleDesktop {
		if group, err = d.confineDesktop(rec, pid); err != nil {
			m.abandon(context.WithoutCancel(ctx), "could not be confined")
			return nil, err
		}
	}
	m.mu.Lock()
	m.dom, m.pid = dom, pid
	m.rec.Cgroup = group
	m.mu.Unlock()
	return m, nil
}

// Boot cold-boots an image into a template domain whose RAM is a shared
// file in spec.Dir, for baking.
func (d *Driver) Boot(ctx context.Context, spec desktop.BootSpec) (desktop.Machine, error) {
	rec, err := d.newRecord(desktop.NewID("bake-"))
	if err != nil {
		return nil, err
	}
	rec.Disk = filepath.Join(spec.Dir, desktop.FileDisk)
	if err := d.createOverlay(ctx, rec.Disk, spec.Image.Disk); err != nil {
		rec.Remove()
		return nil, err
	}
	rec.Shape, rec.Template = qemuvm.BakeShape(d.shape, spec), true
	m, err := d.start(ctx, rec, startSpec{
		role:   RoleBake,
		memory: qemuvm.Memory{Path: filepath.Join(spec.Dir, desktop.FileMemory), Share: true},
		boot:   qemuvm.KernelBoot(spec.Image),
	})
	if err != nil {
		rec.Remove()
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

// Restore starts a copy-on-write clone of a snapshot, or wakes a hibernated
// machine.
func (d *Driver) Restore(ctx context.Context, spec desktop.RestoreSpec) (desktop.Machine, error) {
	if spec.Hibernated != nil {
		return d.wake(ctx, spec)
	}
	if len(spec.Volumes) > 0 {
		return nil, fmt.Errorf("%w: the libvirt driver does not restore a fork's volumes yet", desktop.ErrInvalid)
	}
	if err := d.checkSnapshot(spec.Snapshot); err != nil {
		return nil, err
	}
	s := spec.Snapshot
	t0 := time.Now()
	rec, err := d.newRecord(spec.ID)
	if err != nil {
		return nil, err
	}
	rec.Snapshot, rec.Shape = s.Name, s.Manifest.Machine
	rec.Disk = rec.Path("disk-0.qcow2")
	rec.DiskMiB = spec.DiskMiB
	if err := d.createOverlay(ctx, rec.Disk, s.Path(desktop.FileDisk)); err != nil {
		rec.Remove()
		return nil, err
	}
	t1 := time.Now()
	m, err := d.start(ctx, rec, startSpec{role: RoleDesktop, memory: qemuvm.Memory{Path: s.Path(desktop.FileMemory)}, incoming: true})
	if err != nil {
		rec.Remove()
		return nil, err
	}
	t2 := time.Now()
	if err := m.restore(ctx, s.Path(desktop.FileState), true); err != nil {
		m.Destroy(context.WithoutCancel(ctx))
		return nil, err
	}
	// The phases, for comparing with the QEMU driver: DomainCreateXML
	// dominates (about 0.5 s of a create).
	d.log.Debug("restored", "machine", rec.ID, "overlay", t1.Sub(t0), "create_domain", t2.Sub(t1), "restore", time.Since(t2))
	return m, nil
}

// Attach finds a machine again after hostd restarted: its domain, by UUID,
// if it is still active and still marked as this desktop's.
func (d *Driver) Attach(ctx context.Context, raw json.RawMessage) (desktop.Machine, error) {
	rec, err := parseRecord(raw)
	if err != nil {
		return nil, err
	}
	if rec.Hibernated {
		return nil, fmt.Errorf("%w: machine %s is hibernated", desktop.ErrConflict, rec.ID)
	}
	uuid, err := parseUUID(rec.UUID)
	if err != nil {
		return nil, err
	}
	m := d.newMachine(rec, uuid)
	m.user = d.userAgain(rec)
	d.register(m)
	dom, err := d.ownDomain(ctx, rec)
	if err == nil {
		m.mu.Lock()
		m.dom = dom
		m.mu.Unlock()
		var st golibvirt.DomainState
		st, err = m.state(ctx)
		if err == nil && st != golibvirt.DomainRunning && st != golibvirt.DomainPaused {
			err = fmt.Errorf("%w: domain %s is %s", desktop.ErrNotFound, rec.Domain, stateName(int32(st)))
		}
	}
	if err != nil {
		d.unregister(m)
		if !errors.Is(err, desktop.ErrNotFound) {
			// It may still run as its id: held until Cleanup ends it.
			d.strand(rec.ID, m.user)
			return nil, fmt.Errorf("machine %s: %w", rec.ID, err)
		}
		// Ended while hostd was down: its disk goes back to root.
		m.user.release()
		if rec.Hibernation() {
			// Ended after saving its whole state: a hibernation whose
			// record a crash kept from being written.
			d.cgroupExit(rec.Cgroup)
			raw, _ := json.Marshal(hibernatedRecord(rec))
			return nil, &desktop.HibernatedError{Record: raw}
		}
		return nil, fmt.Errorf("machine %s: %w", rec.ID, err)
	}
	m.mu.Lock()
	m.pid = findPid(rec.UUID)
	m.mu.Unlock()
	if rec.Hibernation() {
		if status, err := qemuvm.Status(ctx, m.monitor()); err == nil && status == "postmigrate" {
			// Its state saved whole and nothing run since: a crash came
			// between the save and the domain's end. Finish the
			// hibernation.
			if err := d.destroyDomain(ctx, rec); err != nil {
				d.unregister(m)
				d.strand(rec.ID, m.user)
				return nil, fmt.Errorf("machine %s: finish its hibernation: %w", rec.ID, err)
			}
			m.exit("was hibernated")
			raw, _ := json.Marshal(hibernatedRecord(rec))
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
	if err := m.findDiskAgain(ctx); err != nil {
		d.unregister(m)
		d.strand(rec.ID, m.user)
		return nil, fmt.Errorf("machine %s: %w", rec.ID, err)
	}
	if err := m.armDiskBound(ctx); err != nil {
		m.log.Warn("disk bound not armed again", "err", err)
	}
	return m, nil
}

// findDiskAgain records the overlay the domain writes to when a snapshot
// a crash cut short switched it to the next one (one freeze at a time)
// before the record said so.
func (m *Machine) findDiskAgain(ctx context.Context) error {
	rec := m.record()
	next := qemuvm.NextOverlayPath(rec.Disk)
	moved, err := qemuvm.FileOpen(ctx, m.monitor(), next)
	if err != nil {
		return fmt.Errorf("find its disk: %w", err)
	}
	if !moved {
		return nil
	}
	m.log.Info("disk overlay found moved on since the record", "recorded", rec.Disk, "active", next)
	m.mu.Lock()
	m.rec.Disk = next
	m.mu.Unlock()
	if err := m.user.own(next); err != nil {
		return fmt.Errorf("give its moved disk to its user: %w", err)
	}
	return nil
}

// ownDomain looks a record's domain up by UUID and checks that its
// metadata names this very machine: a domain hostd did not create, or
// another desktop's, is reported as not found and never touched.
func (d *Driver) ownDomain(ctx context.Context, rec record) (golibvirt.Domain, error) {
	uuid, err := parseUUID(rec.UUID)
	if err != nil {
		return golibvirt.Domain{}, err
	}
	dom, err := call(ctx, d.conn, func(l *golibvirt.Libvirt) (golibvirt.Domain, error) {
		return l.DomainLookupByUUID(uuid)
	})
	if err != nil {
		return golibvirt.Domain{}, err
	}
	meta, err := d.domainMeta(ctx, dom)
	if err != nil {
		return golibvirt.Domain{}, fmt.Errorf("%w: domain %s is not hostd's: %w", desktop.ErrNotFound, dom.Name, err)
	}
	if meta.ID != rec.ID {
		return golibvirt.Domain{}, fmt.Errorf("%w: domain %s belongs to machine %s, not %s", desktop.ErrNotFound, dom.Name, meta.ID, rec.ID)
	}
	return dom, nil
}

// domainMeta reads hostd's metadata element of a domain.
func (d *Driver) domainMeta(ctx context.Context, dom golibvirt.Domain) (Meta, error) {
	raw, err := call(ctx, d.conn, func(l *golibvirt.Libvirt) (string, error) {
		return l.DomainGetMetadata(dom, int32(golibvirt.DomainMetadataElement), golibvirt.OptString{MetadataURI}, golibvirt.DomainAffectLive)
	})
	if err != nil {
		return Meta{}, err
	}
	return ParseMeta(raw)
}

// Cleanup removes what a gone machine left: its domain, if libvirt still
// has one that is marked as this machine's, and its files.
func (d *Driver) Cleanup(ctx context.Context, raw json.RawMessage) error {
	rec, err := parseRecord(raw)
	if err != nil {
		return err
	}
	if !rec.Hibernated {
		if err := d.destroyDomain(ctx, rec); err != nil {
			return err
		}
	}
	d.unstrand(rec.ID).release()
	return rec.Remove()
}

// strand keeps the user of a machine whose domain's end is not known.
func (d *Driver) strand(id string, u *machineUser) {
	if u == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stranded == nil {
		d.stranded = map[string]*machineUser{}
	}
	d.stranded[id] = u
}

// unstrand takes a stranded user back, nil if there is none.
func (d *Driver) unstrand(id string) *machineUser {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.stranded[id]
	delete(d.stranded, id)
	return u
}

// destroyDomain ends a record's domain when it exists and is this
// machine's; a domain that is gone already is not an error.
func (d *Driver) destroyDomain(ctx context.Context, rec record) error {
	dom, err := d.ownDomain(ctx, rec)
	if errors.Is(err, desktop.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroy domain %s: %w", rec.Domain, err)
	}
	err = do(ctx, d.conn, func(l *golibvirt.Libvirt) error { return l.DomainDestroyFlags(dom, golibvirt.DomainDestroyDefault) })
	if err != nil && !errors.Is(err, desktop.ErrNotFound) && !errors.Is(err, desktop.ErrConflict) {
		return fmt.Errorf("destroy domain %s: %w", rec.Domain, err)
	}
	return nil
}

// removeLeftoverTemplates destroys template domains that a snapshot in
// progress left when its hostd ended, if they used this driver's run
// directory: no desktop owns them.
func (d *Driver) removeLeftoverTemplates(ctx context.Context) {
	doms, err := call(ctx, d.conn, func(l *golibvirt.Libvirt) ([]golibvirt.Domain, error) {
		ds, _, err := l.ConnectListAllDomains(1, golibvirt.ConnectListDomainsActive|golibvirt.ConnectListDomainsTransient)
		return ds, err
	})
	if err != nil {
		d.log.Warn("list domains", "err", err)
		return
	}
	for _, dom := range doms {
		meta, err := d.domainMeta(ctx, dom)
		if err != nil || meta.Role != RoleTemplate {
			continue // not hostd's, or a desktop the Manager owns
		}
		dir := filepath.Join(d.opts.RunDir, meta.ID)
		if _, err := os.Stat(filepath.Join(dir, templateMarker)); err != nil {
			continue // another driver's run directory
		}
		d.log.Warn("removing a template domain a snapshot left behind", "domain", dom.Name)
		do(ctx, d.conn, func(l *golibvirt.Libvirt) error { return l.DomainDestroyFlags(dom, golibvirt.DomainDestroyDefault) })
		qemuvm.Dirs{RunDir: dir, DataDir: filepath.Join(d.opts.DataDir, meta.ID)}.Remove()
	}
}

// templateMarker marks a run directory as a template's.
const templateMarker = "template"
