// Package volume keeps workspaces: persistent ext4 disks that outlive
// desktops. A volume is a chain of qcow2 layers under hostd's state
// directory, base first; only the top layer is ever written. Freezing a
// volume (a volume snapshot) shares its layers read-only and gives the
// volume a new top, so new volumes start from it in milliseconds.
//
// This file is the pure part: names, sizes, mount paths and the rules of
// who may attach what. registry.go owns the files and records.
package volume

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Errors classify what went wrong; every error also says what to do.
var (
	ErrInvalid  = errors.New("invalid volume request")
	ErrNotFound = errors.New("volume not found")
	ErrConflict = errors.New("volume conflict")
	// ErrDamaged: the volume's disk failed its check; it is never attached.
	ErrDamaged = errors.New("volume damaged")
)

// Mode is how a desktop holds a volume.
type Mode string

const (
	ReadWrite Mode = "rw"
	ReadOnly  Mode = "ro"
)

// Limits on volumes.
const (
	MinSizeMiB = 16
	// MaxLayers bounds a volume's chain of frozen layers; each freeze adds
	// one, and every open of the volume opens them all.
	MaxLayers = 16
	// MaxPerDesktop is how many volumes one desktop holds at once: the
	// machine has that many hot-plug slots (desktop/qemuvm.VolumeSlots).
	MaxPerDesktop = 4
)

// Volume is one volume's record.
type Volume struct {
	Name    string `json:"name"`
	SizeMiB int    `json:"size_mib"`
	// Layers are its qcow2 files, base first; the last is written unless
	// the volume is Frozen.
	Layers    []string  `json:"layers"`
	CreatedAt time.Time `json:"created_at"`
	// Frozen: a volume snapshot, read-only for ever; volumes start from it.
	Frozen bool `json:"frozen,omitempty"`
	// From is the frozen volume it started from, BranchOf the volume whose
	// fork branch it is.
	From     string `json:"from,omitempty"`
	BranchOf string `json:"branch_of,omitempty"`
	// Filled is set once it has been attached read-write or filled from an
	// archive: an archive fills only a volume never written.
	Filled bool `json:"filled,omitempty"`
	// Damaged says why its disk failed its check.
	Damaged string `json:"damaged,omitempty"`
}

// Top is the layer a read-write attach writes.
func (v Volume) Top() string { return v.Layers[len(v.Layers)-1] }

// CreateRequest asks for a volume: a blank one of SizeMiB, or one that
// starts from the frozen volume From (its size).
type CreateRequest struct {
	Name    string `json:"name"`
	SizeMiB int    `json:"size_mib,omitempty"`
	From    string `json:"from,omitempty"`
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidName checks a volume name.
func ValidName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: volume name %q: use 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid, name)
	}
	return nil
}

// Validate checks a create request against the largest size allowed.
func (r CreateRequest) Validate(maxSizeMiB int) error {
	if err := ValidName(r.Name); err != nil {
		return err
	}
	if r.From != "" {
		if r.SizeMiB != 0 {
			return fmt.Errorf("%w: size_mib %d with from %q: a volume from a snapshot has the snapshot's size; leave size_mib out", ErrInvalid, r.SizeMiB, r.From)
		}
		return ValidName(r.From)
	}
	if r.SizeMiB < MinSizeMiB || r.SizeMiB > maxSizeMiB {
		return fmt.Errorf("%w: size_mib %d: use %d to %d", ErrInvalid, r.SizeMiB, MinSizeMiB, maxSizeMiB)
	}
	return nil
}

// systemDirs are guest directories a volume may not be mounted on or
// under: covering them would break the desktop.
var systemDirs = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr", "/var"}

// systemExact may hold a volume below them, not on them.
var systemExact = []string{"/", "/home", "/root", "/tmp", "/mnt", "/opt", "/srv", "/media"}

// ValidMount checks a guest mount path: absolute, clean, and not a system
// directory.
func ValidMount(p string) error {
	if p == "" || !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: mount %q: give an absolute path in the guest, such as /workspace", ErrInvalid, p)
	}
	if path.Clean(p) != p || strings.ContainsAny(p, "\x00\n\\'\"$`") || len(p) > 255 {
		return fmt.Errorf("%w: mount %q: give a clean path without quotes, '..', '.' or doubled and trailing slashes, such as /workspace", ErrInvalid, p)
	}
	for _, s := range systemExact {
		if p == s {
			return fmt.Errorf("%w: mount %q is a system directory: mount below it, such as %s/workspace", ErrInvalid, p, strings.TrimSuffix(s, "/"))
		}
	}
	for _, s := range systemDirs {
		if p == s || strings.HasPrefix(p, s+"/") {
			return fmt.Errorf("%w: mount %q is in the system directory %s: use a path such as /workspace", ErrInvalid, p, s)
		}
	}
	return nil
}

// Mount is a volume as a desktop holds it.
type Mount struct {
	Name  string `json:"name"`
	Mount string `json:"mount"`
	Mode  Mode   `json:"mode"`
	// Slot is the machine's hot-plug slot it occupies (0 to
	// MaxPerDesktop-1); set by the Manager.
	Slot int `json:"slot"`
}

// Normalize fills the default mode (read-write).
func (m Mount) Normalize() Mount {
	if m.Mode == "" {
		m.Mode = ReadWrite
	}
	return m
}

// Validate checks one mount request.
func (m Mount) Validate() error {
	if err := ValidName(m.Name); err != nil {
		return err
	}
	if err := ValidMount(m.Mount); err != nil {
		return err
	}
	if m.Mode != ReadWrite && m.Mode != ReadOnly {
		return fmt.Errorf("%w: volume %s: mode %q: use \"rw\" or \"ro\"", ErrInvalid, m.Name, m.Mode)
	}
	return nil
}

// ValidateSet checks the volumes one desktop asks for together (at
// create): each valid, no name or mount path twice, no more than
// MaxPerDesktop, none mounted inside another.
func ValidateSet(ms []Mount) error {
	if len(ms) > MaxPerDesktop {
		return fmt.Errorf("%w: %d volumes: a desktop holds at most %d", ErrInvalid, len(ms), MaxPerDesktop)
	}
	for i, m := range ms {
		if err := m.Validate(); err != nil {
			return err
		}
		for _, o := range ms[:i] {
			if o.Name == m.Name {
				return fmt.Errorf("%w: volume %s is asked for twice", ErrInvalid, m.Name)
			}
			if nested(o.Mount, m.Mount) {
				return fmt.Errorf("%w: mounts %s and %s overlap: give each volume its own directory", ErrInvalid, o.Mount, m.Mount)
			}
		}
	}
	return nil
}

func nested(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// Holder is a desktop holding a volume.
type Holder struct {
	Desktop string `json:"desktop"`
	Mode    Mode   `json:"mode"`
}

// CheckAttach applies the attachment rules: read-write by at most one
// desktop and then by no other, read-only by any number. holders are the
// volume's current holders; v is the volume.
func CheckAttach(v Volume, holders []Holder, desktop string, mode Mode) error {
	if v.Damaged != "" {
		return fmt.Errorf("%w: volume %s failed its check (%s): it is never attached; fill a new volume from its archive, or remove it", ErrDamaged, v.Name, v.Damaged)
	}
	if v.Frozen && mode == ReadWrite {
		return fmt.Errorf("%w: volume %s is a snapshot, read-only for ever: attach it with mode \"ro\", or make a volume from it (POST /v1/volumes {\"name\": ..., \"from\": %q})", ErrConflict, v.Name, v.Name)
	}
	var writers, all []string
	for _, h := range holders {
		if h.Desktop == desktop {
			return fmt.Errorf("%w: volume %s is already attached to desktop %s", ErrConflict, v.Name, desktop)
		}
		all = append(all, h.Desktop)
		if h.Mode == ReadWrite {
			writers = append(writers, h.Desktop)
		}
	}
	sort.Strings(all)
	switch {
	case len(writers) > 0:
		return fmt.Errorf("%w: volume %s is attached read-write to desktop %s; detach it there first (a volume has one writer, or any number of readers)", ErrConflict, v.Name, writers[0])
	case mode == ReadWrite && len(all) > 0:
		return fmt.Errorf("%w: volume %s is attached read-only to desktops %s; detach it there first, or attach it read-only too", ErrConflict, v.Name, strings.Join(all, ", "))
	}
	return nil
}

// FreeSlot is the lowest hot-plug slot none of taken uses, or -1.
func FreeSlot(taken []Mount) int {
	for s := range MaxPerDesktop {
		used := false
		for _, m := range taken {
			used = used || m.Slot == s
		}
		if !used {
			return s
		}
	}
	return -1
}

// Serial is the disk serial the guest sees for a slot: how the guest finds
// the disk (/sys/block/vd*/serial).
func Serial(slot int) string { return fmt.Sprintf("wdvol%d", slot) }

// BranchName names the branch of volume v a fork's copy gets: v, a dash
// and the copy's name, cut to a valid name with a hash of the whole kept,
// so two long names do not collide.
func BranchName(v, copyName string) string {
	n := v + "-" + copyName
	if len(n) <= 63 {
		return n
	}
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(n); i++ {
		h ^= uint32(n[i])
		h *= 16777619
	}
	return fmt.Sprintf("%s-%08x", strings.TrimRight(n[:54], "-._"), h)
}
