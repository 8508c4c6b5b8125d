package qemu

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

var update = flag.Bool("update", false, "rewrite golden files")

func testShape() desktop.MachineShape {
	return desktop.MachineShape{
		QEMUVersion: "7.2.22", QEMUSHA256: strings.Repeat("a", 64), Accel: "tcg", Type: "pc-q35-7.2", CPU: "max",
		CPUs: 2, MemoryMiB: 1024, Width: 1280, Height: 800, Devices: qemuvm.DeviceArgs(1280, 800),
	}
}

func golden(t *testing.T, name string, argv []string) {
	t.Helper()
	got := strings.Join(argv, "\n") + "\n"
	path := filepath.Join("testdata", name)
	if *update {
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("argv differs from %s (run go test -update after checking):\n%s", path, got)
	}
}

func TestArgvGoldenBake(t *testing.T) {
	golden(t, "argv-bake.golden", Argv(Config{
		Binary: "qemu-system-x86_64", Name: "bake-1", Shape: testShape(),
		Memory: qemuvm.Memory{Path: "/snap/.draft-minimal/memory", Share: true},
		Boot:   &qemuvm.Boot{Kernel: "/img/vmlinuz", Initrd: "/img/initrd.img", Cmdline: "console=ttyS0 root=/dev/vda"},
		Disk:   "/snap/.draft-minimal/disk.qcow2", MonitorFD: 3,
		VNC: "/run/w/bake-1/vnc.sock", Agent: "/run/w/bake-1/qga.sock", DevTools: "/run/w/bake-1/cdp.sock", Console: "/run/w/bake-1/console.sock",
		Sandbox: true,
	}))
}

func TestArgvGoldenClone(t *testing.T) {
	golden(t, "argv-clone.golden", Argv(Config{
		Binary: "qemu-system-x86_64", Name: "d-1", Shape: testShape(),
		Memory: qemuvm.Memory{Path: "/snap/minimal/memory", Share: false},
		Disk:   "/var/w/d-1/disk-0.qcow2", MonitorFD: 3,
		VNC: "/run/w/d-1/vnc.sock", Agent: "/run/w/d-1/qga.sock", DevTools: "/run/w/d-1/cdp.sock", Console: "/run/w/d-1/console.sock",
		NIC: "/run/w/d-1/nic.sock", Sandbox: true, Incoming: true,
		RunAs: &qemuvm.Owner{UID: 900000007, GID: 900000007},
	}))
}

// Without -runas QEMU never needs set*id calls, so the sandbox denies
// them; with it, they must pass (QEMU's setuid comes after the sandbox).
func TestArgvSandboxAllowsSetuidOnlyForRunAs(t *testing.T) {
	plain := strings.Join(Argv(Config{Shape: testShape(), Sandbox: true}), " ")
	if !strings.Contains(plain, "elevateprivileges=deny") || strings.Contains(plain, "-runas") {
		t.Errorf("without RunAs: %s", plain)
	}
	runas := strings.Join(Argv(Config{Shape: testShape(), Sandbox: true, RunAs: &qemuvm.Owner{UID: 5, GID: 6}}), " ")
	if !strings.Contains(runas, "-runas 5:6") || !strings.Contains(runas, "elevateprivileges=allow,spawn=deny") {
		t.Errorf("with RunAs: %s", runas)
	}
}

func TestArgvFullRestoreUsesAnonymousRAM(t *testing.T) {
	argv := strings.Join(Argv(Config{Shape: testShape(), Incoming: true}), " ")
	if !strings.Contains(argv, "memory-backend-ram,id=mem0,size=1024M") || strings.Contains(argv, "mem-path") {
		t.Errorf("full restore argv: %s", argv)
	}
}

// The devices of a clone must be exactly the bake's: the same list, in
// the same order, whatever else changes.
func TestCloneDevicesEqualBakeDevices(t *testing.T) {
	devices := func(argv []string) []string {
		var out []string
		for i, a := range argv {
			if a == "-device" {
				out = append(out, argv[i+1])
			}
		}
		return out
	}
	bake := Argv(Config{Shape: testShape(), Boot: &qemuvm.Boot{}, Memory: qemuvm.Memory{Path: "/a", Share: true}})
	clone := Argv(Config{Shape: testShape(), Memory: qemuvm.Memory{Path: "/b"}, Incoming: true, NIC: "/run/x/nic.sock"})
	if strings.Join(devices(bake), "|") != strings.Join(devices(clone), "|") {
		t.Errorf("devices differ:\n%v\n%v", devices(bake), devices(clone))
	}
}

func TestArgvNeverServesVNCOnTCP(t *testing.T) {
	argv := Argv(Config{Shape: testShape(), VNC: "/x/vnc.sock"})
	for i, a := range argv {
		if a == "-vnc" && !strings.HasPrefix(argv[i+1], "unix:") {
			t.Errorf("-vnc %s is not a unix socket", argv[i+1])
		}
	}
}

func TestEscapeCommas(t *testing.T) {
	argv := strings.Join(Argv(Config{Shape: testShape(), Disk: "/a,b/disk.qcow2"}), " ")
	if !strings.Contains(argv, "file.filename=/a,,b/disk.qcow2") {
		t.Errorf("comma not doubled: %s", argv)
	}
}

// A wake of a machine holding volumes puts each back where the saved
// state has it: its descriptors in fd sets, its layers as nodes, its
// virtio-blk device in its root port.
func TestArgvGoldenWakeWithVolumes(t *testing.T) {
	golden(t, "argv-wake-volumes.golden", Argv(Config{
		Binary: "qemu-system-x86_64", Name: "d-1", Shape: testShape(),
		Disk: "/var/w/d-1/disk-0.qcow2", MonitorFD: 3,
		VNC: "/run/w/d-1/vnc.sock", Agent: "/run/w/d-1/qga.sock", DevTools: "/run/w/d-1/cdp.sock", Console: "/run/w/d-1/console.sock",
		NIC: "/run/w/d-1/nic.sock", Sandbox: true, Incoming: true,
		Volumes: []VolumeFDs{
			{Disk: desktop.VolumeDisk{Slot: 0, Serial: "wdvol0", Layers: []string{"/v/base.qcow2", "/v/top.qcow2"}}, FDs: [][]int{{4}, {5, 6}}},
			{Disk: desktop.VolumeDisk{Slot: 2, Serial: "wdvol2", Layers: []string{"/v/ro.qcow2"}, ReadOnly: true}, FDs: [][]int{{7}}},
		},
	}))
}
