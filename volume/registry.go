package volume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Store keeps volume records; hostd/store implements it over bbolt.
type Store interface {
	LoadVolumes() ([]Volume, error)
	PutVolume(v Volume) error
	DeleteVolume(name string) error
}

// Tools are the host programs volumes are made with.
type Tools struct {
	QemuImg string // qemu-img (qemu-utils)
	Mkfs    string // mkfs.ext4 (e2fsprogs)
	Debugfs string // debugfs (e2fsprogs), for archives
}

// FindTools looks the tools up on PATH.
func FindTools() (Tools, error) {
	var t Tools
	for _, x := range []struct {
		dst       *string
		name, pkg string
	}{{&t.QemuImg, "qemu-img", "qemu-utils"}, {&t.Mkfs, "mkfs.ext4", "e2fsprogs"}, {&t.Debugfs, "debugfs", "e2fsprogs"}} {
		p, err := exec.LookPath(x.name)
		if err != nil {
			return t, fmt.Errorf("%s not found: install the Debian package %s (apt-get install %s)", x.name, x.pkg, x.pkg)
		}
		*x.dst = p
	}
	return t, nil
}

// Config wires a Registry.
type Config struct {
	// Dir holds the layers (Dir/layers) and work files (Dir/tmp).
	Dir   string
	Store Store
	// Tools: found on PATH when left empty.
	Tools      Tools
	MaxSizeMiB int
	Logger     *slog.Logger
}

// Registry owns the volumes' records and files. It knows nothing of
// desktops: who holds a volume is the Manager's to say, and it calls
// Remove, Freeze and Import only for volumes no desktop writes.
type Registry struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	vols map[string]Volume
}

// Open loads the records and removes what a crash left half-made: work
// files, and layers no record names.
func Open(c Config) (*Registry, error) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxSizeMiB <= 0 {
		c.MaxSizeMiB = 64 << 10
	}
	if c.Tools == (Tools{}) {
		t, err := FindTools()
		if err != nil {
			return nil, fmt.Errorf("volumes: %w", err)
		}
		c.Tools = t
	}
	r := &Registry{cfg: c, log: c.Logger, vols: map[string]Volume{}}
	for _, d := range []string{r.layerDir(), r.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("volumes: %w", err)
		}
	}
	vs, err := c.Store.LoadVolumes()
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	for _, v := range vs {
		r.vols[v.Name] = v
	}
	os.RemoveAll(r.tmpDir())
	if err := os.MkdirAll(r.tmpDir(), 0o700); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	r.removePartials()
	return r, nil
}

func (r *Registry) layerDir() string { return filepath.Join(r.cfg.Dir, "layers") }
func (r *Registry) tmpDir() string   { return filepath.Join(r.cfg.Dir, "tmp") }

// MaxSizeMiB is the largest volume allowed.
func (r *Registry) MaxSizeMiB() int { return r.cfg.MaxSizeMiB }

// Get returns a volume's record.
func (r *Registry) Get(name string) (Volume, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.getLocked(name)
}

func (r *Registry) getLocked(name string) (Volume, error) {
	v, ok := r.vols[name]
	if !ok {
		return Volume{}, fmt.Errorf("%w: no volume %q (see GET /v1/volumes; make one with POST /v1/volumes)", ErrNotFound, name)
	}
	if v.making() {
		return Volume{}, fmt.Errorf("%w: volume %s is still being made; try again when its create returns", ErrConflict, name)
	}
	return v, nil
}

// making tells a name held while its volume is made.
func (v Volume) making() bool { return len(v.Layers) == 1 && v.Layers[0] == "" }

// List returns every volume, by name.
func (r *Registry) List() []Volume {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Volume, 0, len(r.vols))
	for _, v := range r.vols {
		if !v.making() {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// AllocatedBytes is what a volume's own top layer takes on the host's disk
// (layers below it may be shared with other volumes).
func AllocatedBytes(v Volume) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(v.Top(), &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}

// Create makes a volume: a blank ext4 disk of req.SizeMiB, formatted on the
// host without a loop mount, or a new top layer on the frozen volume
// req.From. Nothing of it stays if it fails.
func (r *Registry) Create(ctx context.Context, req CreateRequest) (Volume, error) {
	if err := req.Validate(r.cfg.MaxSizeMiB); err != nil {
		return Volume{}, err
	}
	r.mu.Lock()
	if _, ok := r.vols[req.Name]; ok {
		r.mu.Unlock()
		return Volume{}, fmt.Errorf("%w: volume %s exists; choose another name, or remove it first", ErrConflict, req.Name)
	}
	var base Volume
	if req.From != "" {
		var err error
		if base, err = r.getLocked(req.From); err != nil {
			r.mu.Unlock()
			return Volume{}, err
		}
		if !base.Frozen {
			r.mu.Unlock()
			return Volume{}, fmt.Errorf("%w: volume %s is not a snapshot: freeze it first (POST /v1/volumes/%s/snapshot {\"name\": ...})", ErrInvalid, req.From, req.From)
		}
	}
	// Hold the name while the disk is made.
	r.vols[req.Name] = Volume{Name: req.Name, Layers: []string{""}}
	r.mu.Unlock()
	v, err := r.make(ctx, req, base)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		delete(r.vols, req.Name)
		return Volume{}, err
	}
	if err := r.cfg.Store.PutVolume(v); err != nil {
		delete(r.vols, req.Name)
		os.Remove(v.Top())
		return Volume{}, fmt.Errorf("volume %s: record: %w", v.Name, err)
	}
	r.vols[v.Name] = v
	return v, nil
}

func (r *Registry) make(ctx context.Context, req CreateRequest, base Volume) (Volume, error) {
	v := Volume{Name: req.Name, SizeMiB: req.SizeMiB, CreatedAt: time.Now().UTC()}
	top := r.newLayerPath()
	if req.From != "" {
		if len(base.Layers) >= MaxLayers {
			return Volume{}, fmt.Errorf("%w: snapshot %s has %d layers, the most a volume may have; fill a fresh volume from its archive instead", ErrConflict, base.Name, len(base.Layers))
		}
		if err := r.overlay(ctx, top, base.Top()); err != nil {
			return Volume{}, err
		}
		v.SizeMiB, v.From = base.SizeMiB, base.Name
		v.Layers = append(slices.Clone(base.Layers), top)
		return v, nil
	}
	if err := r.format(ctx, top, req.SizeMiB, ""); err != nil {
		return Volume{}, err
	}
	v.Layers = []string{top}
	return v, nil
}

// NewLayerPath names a new layer file; nothing is made.
func (r *Registry) NewLayerPath() string { return r.newLayerPath() }

func (r *Registry) newLayerPath() string {
	b := make([]byte, 8)
	rand.Read(b)
	return filepath.Join(r.layerDir(), hex.EncodeToString(b)+".qcow2")
}

// overlay makes a qcow2 layer at path over backing.
func (r *Registry) overlay(ctx context.Context, path, backing string) error {
	if out, err := run(ctx, r.cfg.Tools.QemuImg, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", backing, path); err != nil {
		os.Remove(path)
		return fmt.Errorf("volume layer: %w: %s", err, out)
	}
	return nil
}

// format makes a qcow2 at path holding a new ext4 filesystem of sizeMiB,
// with the files of dir when it is not empty: mkfs.ext4 writes a sparse raw
// file (no loop mount, no root needed), and qemu-img converts it, skipping
// the holes.
func (r *Registry) format(ctx context.Context, path string, sizeMiB int, dir string) error {
	raw, err := os.CreateTemp(r.tmpDir(), "format-*.raw")
	if err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	raw.Close()
	defer os.Remove(raw.Name())
	if err := os.Truncate(raw.Name(), int64(sizeMiB)<<20); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	// No reserved blocks (the whole size is the user's); lazy init keeps
	// the blank disk sparse; the label says what it is in the guest.
	args := []string{"-q", "-F", "-m", "0", "-L", "warmdesk-vol", "-E", "lazy_itable_init=1,lazy_journal_init=1", "-O", "^metadata_csum_seed"}
	if dir != "" {
		args = append(args, "-d", dir)
	}
	if out, err := run(ctx, r.cfg.Tools.Mkfs, append(args, raw.Name())...); err != nil {
		return fmt.Errorf("volume: mkfs.ext4: %w: %s", err, out)
	}
	part := path + ".partial"
	if out, err := run(ctx, r.cfg.Tools.QemuImg, "convert", "-q", "-f", "raw", "-O", "qcow2", raw.Name(), part); err != nil {
		os.Remove(part)
		return fmt.Errorf("volume: qemu-img convert: %w: %s", err, out)
	}
	if err := os.Rename(part, path); err != nil {
		os.Remove(part)
		return fmt.Errorf("volume: %w", err)
	}
	return nil
}

// Remove deletes a volume's record and the layers no other record uses.
// The caller has checked that no desktop holds it.
func (r *Registry) Remove(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, err := r.getLocked(name)
	if err != nil {
		return err
	}
	for _, o := range r.vols {
		if o.Name != name && o.From == name {
			return fmt.Errorf("%w: volume snapshot %s is the base of volume %s; remove that first", ErrConflict, name, o.Name)
		}
	}
	if err := r.cfg.Store.DeleteVolume(v.Name); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	delete(r.vols, name)
	r.removeUnusedLocked(v.Layers)
	return nil
}

// Freeze makes volume snapshot snap of volume name: snap takes the
// volume's layers, read-only for ever, and the volume goes on on a new top
// layer over them. The caller has checked that no desktop writes the
// volume.
func (r *Registry) Freeze(ctx context.Context, name, snap string) (Volume, error) {
	if err := ValidName(snap); err != nil {
		return Volume{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v, err := r.getLocked(name)
	if err != nil {
		return Volume{}, err
	}
	if _, ok := r.vols[snap]; ok {
		return Volume{}, fmt.Errorf("%w: volume %s exists; name the snapshot otherwise", ErrConflict, snap)
	}
	if v.Frozen {
		return Volume{}, fmt.Errorf("%w: volume %s is already a snapshot; make a volume from it instead", ErrConflict, name)
	}
	if len(v.Layers) >= MaxLayers {
		return Volume{}, fmt.Errorf("%w: volume %s has %d layers, the most a volume may have; fill a fresh volume from its archive instead", ErrConflict, name, len(v.Layers))
	}
	top := r.newLayerPath()
	if err := r.overlay(ctx, top, v.Top()); err != nil {
		return Volume{}, err
	}
	os.Chmod(v.Top(), 0o400)
	s := Volume{Name: snap, SizeMiB: v.SizeMiB, Layers: slices.Clone(v.Layers), CreatedAt: time.Now().UTC(), Frozen: true, From: v.From, Filled: true}
	next := v
	next.Layers = append(slices.Clone(v.Layers), top)
	next.From = snap
	// The snapshot's record first: a crash between the two leaves the
	// volume on its old top, which the snapshot shares, and the new top
	// unnamed (collected at the next start).
	if err := r.cfg.Store.PutVolume(s); err != nil {
		os.Remove(top)
		return Volume{}, fmt.Errorf("volume %s: record snapshot: %w", name, err)
	}
	if err := r.cfg.Store.PutVolume(next); err != nil {
		r.cfg.Store.DeleteVolume(snap)
		os.Remove(top)
		return Volume{}, fmt.Errorf("volume %s: record: %w", name, err)
	}
	r.vols[snap], r.vols[name] = s, next
	return s, nil
}

// Advance records that a volume went on on new top layers (a fork froze
// its top under a running machine): layers must extend its chain.
func (r *Registry) Advance(name string, layers []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, err := r.getLocked(name)
	if err != nil {
		return err
	}
	if len(layers) <= len(v.Layers) || !slices.Equal(layers[:len(v.Layers)], v.Layers) {
		return fmt.Errorf("%w: volume %s: layers %v do not extend %v", ErrConflict, name, layers, v.Layers)
	}
	v.Layers = slices.Clone(layers)
	if err := r.cfg.Store.PutVolume(v); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	r.vols[name] = v
	return nil
}

// Branch makes volume name, a branch of src on its frozen layers (a
// fork's copy): a new top layer over them.
func (r *Registry) Branch(ctx context.Context, name string, src Volume, frozen []string) (Volume, error) {
	if err := ValidName(name); err != nil {
		return Volume{}, err
	}
	if len(frozen) == 0 || len(frozen) >= MaxLayers {
		return Volume{}, fmt.Errorf("%w: branch %s of %s: %d layers", ErrInvalid, name, src.Name, len(frozen))
	}
	r.mu.Lock()
	if _, ok := r.vols[name]; ok {
		r.mu.Unlock()
		return Volume{}, fmt.Errorf("%w: volume %s exists; a fork names its copies' branches VOLUME-COPY: rename or remove it", ErrConflict, name)
	}
	r.vols[name] = Volume{Name: name, Layers: []string{""}}
	r.mu.Unlock()
	top := r.newLayerPath()
	err := r.overlay(ctx, top, frozen[len(frozen)-1])
	v := Volume{Name: name, SizeMiB: src.SizeMiB, Layers: append(slices.Clone(frozen), top), CreatedAt: time.Now().UTC(), BranchOf: src.Name, Filled: true}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		err = r.cfg.Store.PutVolume(v)
	}
	if err != nil {
		delete(r.vols, name)
		os.Remove(top)
		return Volume{}, fmt.Errorf("volume %s: %w", name, err)
	}
	r.vols[name] = v
	return v, nil
}

// MarkFilled records that a volume has been written (attached read-write).
func (r *Registry) MarkFilled(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, err := r.getLocked(name)
	if err != nil || v.Filled {
		return err
	}
	v.Filled = true
	if err := r.cfg.Store.PutVolume(v); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	r.vols[name] = v
	return nil
}

// Check runs qemu-img check on a volume's top layer and marks it damaged
// when it fails. Call it only for volumes no machine has open.
func (r *Registry) Check(ctx context.Context, name string) error {
	v, err := r.Get(name)
	if err != nil {
		return err
	}
	if v.Damaged != "" {
		return nil
	}
	out, err := run(ctx, r.cfg.Tools.QemuImg, "check", "-q", "-f", "qcow2", v.Top())
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	reason := firstLine(out)
	if reason == "" {
		reason = err.Error()
	}
	r.log.Warn("volume damaged", "volume", name, "check", reason)
	r.mu.Lock()
	defer r.mu.Unlock()
	v.Damaged = "qemu-img check: " + reason
	if err := r.cfg.Store.PutVolume(v); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	r.vols[name] = v
	return nil
}

// removeUnusedLocked removes those of layers no record names. Only the
// layers of a removed volume are candidates: a layer no record names yet
// may be one being made (a create, a branch, a fork's new top), which
// must not go.
func (r *Registry) removeUnusedLocked(layers []string) {
	used := map[string]bool{}
	for _, v := range r.vols {
		for _, l := range v.Layers {
			used[l] = true
		}
	}
	for _, l := range layers {
		if l != "" && !used[l] {
			if err := os.Remove(l); err == nil {
				r.log.Info("volume layer removed: no volume uses it", "layer", filepath.Base(l))
			}
		}
	}
}

// removePartials removes what a crash left of a format: its .partial
// output. Whole layers no record names are kept: one may be the new top a
// running machine writes since a fork that a crash kept from being
// recorded (see docs/VOLUMES.md).
func (r *Registry) removePartials() {
	entries, err := os.ReadDir(r.layerDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".partial") {
			os.Remove(filepath.Join(r.layerDir(), e.Name()))
		}
	}
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 200 {
		line = line[:200]
	}
	return line
}

// ErrBusy is the error for a volume some desktops hold, naming them.
func ErrBusy(name string, holders []Holder) error {
	var ds []string
	for _, h := range holders {
		ds = append(ds, h.Desktop+" ("+string(h.Mode)+")")
	}
	return fmt.Errorf("%w: volume %s is attached to desktop %s; detach it there (DELETE /v1/desktops/ID/volumes/%s) or delete the desktop first", ErrConflict, name, strings.Join(ds, ", "), name)
}
