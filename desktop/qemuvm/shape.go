package qemuvm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// Probe says which QEMU build to identify and how to choose its accelerator.
type Probe struct {
	// Binary is the emulator's path.
	Binary string
	// Accel is "auto" (or empty), "kvm" or "tcg".
	Accel string
	// ProbeKernel, when set, is a guest kernel that auto-detection boots
	// under KVM for a few seconds to prove KVM really runs a guest.
	ProbeKernel string
	// Logger is told which accelerator was chosen and why; may be nil.
	Logger *slog.Logger
}

// ProbeShape identifies a QEMU build (version, the emulator's sha256, the
// q35 machine type it resolves to) and chooses the accelerator, so that
// manifests name exact versions and every driver describes the same build
// the same way. CPUs, memory, resolution and devices are left to the bake.
func ProbeShape(ctx context.Context, p Probe) (desktop.MachineShape, error) {
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := desktop.MachineShape{Netdev: NetdevKind}
	out, err := exec.CommandContext(ctx, p.Binary, "-version").Output()
	if err != nil {
		return s, fmt.Errorf("qemu -version: %w", err)
	}
	if s.QEMUVersion, err = parseVersion(string(out)); err != nil {
		return s, err
	}
	if s.QEMUSHA256, err = sha256File(p.Binary); err != nil {
		return s, err
	}
	out, err = exec.CommandContext(ctx, p.Binary, "-machine", "help").Output()
	if err != nil {
		return s, fmt.Errorf("qemu -machine help: %w", err)
	}
	if s.Type, err = resolveMachineAlias(string(out), "q35"); err != nil {
		return s, err
	}
	accel, why, err := detectAccel(ctx, p)
	if err != nil {
		return s, err
	}
	log.Info("accelerator chosen", "accel", accel, "why", why)
	s.Accel = accel
	s.CPU = "max"
	if accel == "kvm" {
		s.CPU = "host"
	}
	return s, nil
}

// RefuseSnapshot checks that a snapshot restores on a host of shape here;
// extra are further differences a driver found. The error says how to
// bake the snapshot again on this host.
func RefuseSnapshot(s desktop.Snapshot, here desktop.MachineShape, extra ...string) error {
	diffs := append(s.Manifest.Machine.Mismatch(here), extra...)
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: snapshot %s cannot be restored here: %s; re-bake it on this host (hostd snapshot rm %s && hostd snapshot bake --image %s --name %s)",
		desktop.ErrMismatch, s.Name, strings.Join(diffs, "; "), s.Name, s.Manifest.Image.Name, s.Name)
}

// parseVersion takes "7.2.22" out of `qemu-system-x86_64 -version`.
func parseVersion(out string) (string, error) {
	const marker = "QEMU emulator version "
	i := strings.Index(out, marker)
	if i < 0 {
		return "", fmt.Errorf("qemu -version: unexpected output %.80q", out)
	}
	f := strings.Fields(out[i+len(marker):])
	if len(f) == 0 {
		return "", fmt.Errorf("qemu -version: unexpected output %.80q", out)
	}
	return f[0], nil
}

// resolveMachineAlias finds what an alias such as q35 stands for in
// `-machine help` ("q35  Standard PC (Q35 + ICH9, 2009) (alias of pc-q35-7.2)").
func resolveMachineAlias(help, alias string) (string, error) {
	for _, line := range strings.Split(help, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != alias {
			continue
		}
		const marker = "(alias of "
		if i := strings.Index(line, marker); i >= 0 {
			rest := line[i+len(marker):]
			if j := strings.IndexByte(rest, ')'); j > 0 {
				return rest[:j], nil
			}
		}
		return alias, nil
	}
	return "", fmt.Errorf("qemu has no %s machine type", alias)
}

func sha256File(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(real)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// kvmProbeTimeout bounds the test boot that proves KVM runs a guest.
const kvmProbeTimeout = 15 * time.Second

// detectAccel chooses between KVM and TCG. /dev/kvm alone is not trusted:
// on some hosts it opens, yet a guest under it hangs at kernel entry (seen on
// nested VMs whose CPU lacks vmx/svm). So KVM is chosen only when /dev/kvm
// opens, the CPU has virtualisation extensions, and (when a kernel is given)
// a short test boot under KVM prints the kernel's banner.
func detectAccel(ctx context.Context, p Probe) (accel, why string, err error) {
	switch p.Accel {
	case "tcg":
		return "tcg", "forced", nil
	case "kvm":
		if err := openKVM(); err != nil {
			return "", "", fmt.Errorf("accelerator kvm requested: %w", err)
		}
		return "kvm", "forced", nil
	case "", "auto":
	default:
		return "", "", fmt.Errorf("accelerator %q: use auto, kvm or tcg", p.Accel)
	}
	if err := openKVM(); err != nil {
		return "tcg", err.Error(), nil
	}
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "tcg", "cannot read /proc/cpuinfo", nil
	}
	if !hasVirtFlags(string(cpuinfo)) {
		return "tcg", "/dev/kvm opens but the CPU has no vmx or svm flag (a guest would hang)", nil
	}
	if p.ProbeKernel == "" {
		return "kvm", "/dev/kvm opens and the CPU has vmx/svm", nil
	}
	if err := probeKVM(ctx, p.Binary, p.ProbeKernel); err != nil {
		return "tcg", "a test boot under KVM failed: " + err.Error(), nil
	}
	return "kvm", "a test boot under KVM reached the kernel", nil
}

func openKVM() error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("/dev/kvm: %w", err)
	}
	return f.Close()
}

// hasVirtFlags reports whether /proc/cpuinfo lists vmx or svm.
func hasVirtFlags(cpuinfo string) bool {
	for _, line := range strings.Split(cpuinfo, "\n") {
		if !strings.HasPrefix(line, "flags") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if f == "vmx" || f == "svm" {
				return true
			}
		}
	}
	return false
}

// probeKVM boots kernel under KVM with its console on stdout and waits for
// the banner ("Linux version") within kvmProbeTimeout.
func probeKVM(ctx context.Context, binary, kernel string) error {
	ctx, cancel := context.WithTimeout(ctx, kvmProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "-nodefaults", "-no-user-config", "-accel", "kvm",
		"-machine", "q35", "-cpu", "host", "-m", "256M", "-display", "none", "-no-reboot",
		"-serial", "stdio", "-kernel", kernel, "-append", "console=ttyS0 panic=-1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Linux version") {
			return nil
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("no kernel banner within %s", kvmProbeTimeout)
	}
	return fmt.Errorf("qemu ended before the kernel banner")
}
