package qemu

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// kvmProbeTimeout bounds the test boot that proves KVM runs a guest.
const kvmProbeTimeout = 15 * time.Second

// detectAccel chooses between KVM and TCG. /dev/kvm alone is not trusted:
// on some hosts it opens, yet a guest under it hangs at kernel entry (seen on
// nested VMs whose CPU lacks vmx/svm). So KVM is chosen only when /dev/kvm
// opens, the CPU has virtualisation extensions, and (when a kernel is given)
// a short test boot under KVM prints the kernel's banner.
func detectAccel(ctx context.Context, opts Options) (accel, why string, err error) {
	switch opts.Accel {
	case "tcg":
		return "tcg", "forced", nil
	case "kvm":
		if err := openKVM(); err != nil {
			return "", "", fmt.Errorf("accelerator kvm requested: %w", err)
		}
		return "kvm", "forced", nil
	case "", "auto":
	default:
		return "", "", fmt.Errorf("accelerator %q: use auto, kvm or tcg", opts.Accel)
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
	if opts.ProbeKernel == "" {
		return "kvm", "/dev/kvm opens and the CPU has vmx/svm", nil
	}
	if err := probeKVM(ctx, opts.Binary, opts.ProbeKernel); err != nil {
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
