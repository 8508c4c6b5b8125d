package qemuvm

import "testing"

func TestParseVersion(t *testing.T) {
	v, err := parseVersion("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright (c) 2003-2022 Fabrice Bellard\n")
	if err != nil || v != "7.2.22" {
		t.Fatalf("got %q, %v", v, err)
	}
	if _, err := parseVersion("something else"); err == nil {
		t.Error("accepted garbage")
	}
}

func TestResolveMachineAlias(t *testing.T) {
	help := "Supported machines are:\nmicrovm              microvm (i386)\npc                   Standard PC (i440FX + PIIX, 1996) (alias of pc-i440fx-7.2)\nq35                  Standard PC (Q35 + ICH9, 2009) (alias of pc-q35-7.2)\npc-q35-7.2           Standard PC (Q35 + ICH9, 2009)\n"
	got, err := resolveMachineAlias(help, "q35")
	if err != nil || got != "pc-q35-7.2" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := resolveMachineAlias(help, "virt"); err == nil {
		t.Error("found a machine that is not there")
	}
}

func TestHasVirtFlags(t *testing.T) {
	if hasVirtFlags("flags\t\t: fpu vme sse2 avx2\n") {
		t.Error("no vmx/svm, yet true")
	}
	if !hasVirtFlags("processor : 0\nflags\t\t: fpu vmx sse2\n") {
		t.Error("vmx present, yet false")
	}
}

func TestDetectAccelForcedAndRefused(t *testing.T) {
	if a, why, err := detectAccel(t.Context(), Probe{Accel: "tcg"}); a != "tcg" || why != "forced" || err != nil {
		t.Errorf("tcg: %s %s %v", a, why, err)
	}
	if _, _, err := detectAccel(t.Context(), Probe{Accel: "hvf"}); err == nil {
		t.Error("accepted accelerator hvf")
	}
}

// Every pixel maps to an axis value that the guest scales back to the
// same pixel, whether it rounds down (Linux evdev/libinput) or to nearest.
func TestAbsAxisRoundTrips(t *testing.T) {
	for _, size := range []int{640, 800, 1280, 1920, 4096} {
		for px := 0; px < size; px++ {
			v := absAxis(px, size)
			if v < 0 || v > absMax {
				t.Fatalf("size %d px %d: axis %d out of range", size, px, v)
			}
			if down := v * size / (absMax + 1); down != px {
				t.Fatalf("size %d px %d: axis %d scales back to %d (floor)", size, px, v, down)
			}
		}
	}
}
