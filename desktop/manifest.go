package desktop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// ManifestFormat is the version of the manifest layout this code writes and
// reads.
const ManifestFormat = 1

// The files of a snapshot, by role. Every driver uses the same layout, so a
// snapshot made by one driver restores on another when the machine matches.
const (
	FileMemory = "memory"     // guest RAM, restored as a private copy-on-write mapping
	FileState  = "state"      // device state (QEMU migration stream without the shared RAM)
	FileDisk   = "disk.qcow2" // the frozen disk overlay clones layer on
)

// Manifest describes a golden snapshot: what machine it restores into and
// the checksum of every file. A restore needs the same QEMU build, machine
// type, device list and accelerator as the bake.
type Manifest struct {
	Format    int       `json:"format"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// BakedBy names the driver that wrote it.
	BakedBy string `json:"baked_by"`
	// Ephemeral snapshots are fork templates: removed with their last desktop.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// Parent is the snapshot whose disk this one's disk is layered on.
	Parent string `json:"parent,omitempty"`
	// Source is the desktop this snapshot was taken of, if any.
	Source string `json:"source,omitempty"`
	// OnCreate are shell commands each desktop created from this snapshot
	// runs after its restore (a recipe's on_create); a snapshot of a live
	// desktop keeps its parent's.
	OnCreate []string `json:"on_create,omitempty"`
	// VolumeSlots are the hot-plug slots whose volume devices its state
	// holds (a fork's template): only the fork's copies, which bring their
	// volumes, restore from it.
	VolumeSlots []int `json:"volume_slots,omitempty"`

	Machine MachineShape       `json:"machine"`
	Image   ImageRef           `json:"image"`
	Files   map[string]FileSum `json:"files"`
}

// MachineShape is everything about the virtual machine that its saved state
// depends on. Two shapes must be Equal for a restore.
type MachineShape struct {
	QEMUVersion string   `json:"qemu_version"`
	QEMUSHA256  string   `json:"qemu_sha256"` // of the emulator binary: "the same build"
	Accel       string   `json:"accel"`       // "kvm" or "tcg"
	Type        string   `json:"type"`        // resolved machine type, e.g. pc-q35-7.2
	CPU         string   `json:"cpu"`
	CPUs        int      `json:"cpus"`
	MemoryMiB   int      `json:"memory_mib"`
	Width       int      `json:"width"`
	Height      int      `json:"height"`
	Devices     []string `json:"devices"` // the exact -device arguments, in order
	// Netdev is the NIC's backend kind ("stream"); its state migrates with
	// the machine, so a snapshot restores only with its own.
	Netdev string `json:"netdev,omitempty"`
}

// ImageRef names the guest image a snapshot was booted from.
type ImageRef struct {
	Name   string `json:"name"`
	Flavor string `json:"flavor"`
	Hash   string `json:"hash"`
}

// FileSum is the size and SHA-256 of one snapshot file.
type FileSum struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Mismatch compares the shape a snapshot was baked with (m) against the
// shape this host would restore it into (host), and returns a readable
// description of every difference, or nil when they match. Devices are
// compared exactly; the host shape's Devices may be nil to skip that check
// (a driver that derives devices from the manifest).
func (m MachineShape) Mismatch(host MachineShape) []string {
	var diffs []string
	add := func(what, baked, here string) {
		if baked != here {
			diffs = append(diffs, fmt.Sprintf("%s: baked with %s, this host has %s", what, baked, here))
		}
	}
	add("QEMU version", m.QEMUVersion, host.QEMUVersion)
	add("QEMU build (sha256 of the emulator)", short(m.QEMUSHA256), short(host.QEMUSHA256))
	add("accelerator", m.Accel, host.Accel)
	if host.Type != "" {
		add("machine type", m.Type, host.Type)
	}
	if host.Netdev != "" && m.Netdev != host.Netdev {
		baked := m.Netdev
		if baked == "" {
			baked = "user (QEMU's built-in NAT)"
		}
		diffs = append(diffs, fmt.Sprintf("NIC backend: baked with %s, this host uses %s: re-bake the snapshot", baked, host.Netdev))
	}
	if host.Devices != nil && !slices.Equal(m.Devices, host.Devices) {
		diffs = append(diffs, fmt.Sprintf("device list: baked with %q, this host would use %q", m.Devices, host.Devices))
	}
	return diffs
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	if sum == "" {
		return "(none)"
	}
	return sum
}

// Validate checks that a manifest is complete and self-consistent (not that
// its files match: see VerifyFiles).
func (m *Manifest) Validate() error {
	if m.Format != ManifestFormat {
		return fmt.Errorf("%w: manifest format %d, this hostd reads format %d: re-bake the snapshot", ErrMismatch, m.Format, ManifestFormat)
	}
	if err := ValidName("snapshot", m.Name); err != nil {
		return err
	}
	s := m.Machine
	switch {
	case s.QEMUVersion == "" || s.QEMUSHA256 == "":
		return fmt.Errorf("%w: manifest of %s lacks the QEMU build", ErrInvalid, m.Name)
	case s.Accel != "kvm" && s.Accel != "tcg":
		return fmt.Errorf("%w: manifest of %s has accelerator %q, want kvm or tcg", ErrInvalid, m.Name, s.Accel)
	case s.Type == "" || s.CPU == "":
		return fmt.Errorf("%w: manifest of %s lacks the machine type or CPU model", ErrInvalid, m.Name)
	case s.CPUs < 1 || s.MemoryMiB < 64:
		return fmt.Errorf("%w: manifest of %s has %d CPUs and %d MiB", ErrInvalid, m.Name, s.CPUs, s.MemoryMiB)
	case s.Width < 320 || s.Height < 200:
		return fmt.Errorf("%w: manifest of %s has a %dx%d screen", ErrInvalid, m.Name, s.Width, s.Height)
	case len(s.Devices) == 0:
		return fmt.Errorf("%w: manifest of %s lists no devices", ErrInvalid, m.Name)
	}
	for _, role := range []string{FileMemory, FileState, FileDisk} {
		sum, ok := m.Files[role]
		if !ok {
			return fmt.Errorf("%w: manifest of %s lacks file %q", ErrInvalid, m.Name, role)
		}
		if len(sum.SHA256) != 64 && !(m.Ephemeral && sum.SHA256 == "") {
			return fmt.Errorf("%w: manifest of %s has a malformed sha256 for %q", ErrInvalid, m.Name, role)
		}
	}
	return nil
}

// ParseManifest decodes and validates a manifest.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: decode manifest: %w", ErrInvalid, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// SumFile computes the size and SHA-256 of a file.
func SumFile(path string) (FileSum, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileSum{}, fmt.Errorf("checksum: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return FileSum{}, fmt.Errorf("checksum %s: %w", path, err)
	}
	return FileSum{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
