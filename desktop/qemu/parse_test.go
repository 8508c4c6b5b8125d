package qemu

import (
	"bytes"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

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

func TestParseStartTime(t *testing.T) {
	stat := "4242 (qemu-system-x86) (weird) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 3 0 987654 1000 10 18446744073709551615"
	st, err := parseStartTime(stat)
	if err != nil || st != 987654 {
		t.Fatalf("got %d, %v", st, err)
	}
	if _, err := parseStartTime("1 (x) S 1"); err == nil {
		t.Error("accepted a short stat line")
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
	if absAxis(0, 1280) == 0 && absAxis(1279, 1280) == absMax {
		t.Log("edges map to the axis ends")
	}
}

func TestInputEvents(t *testing.T) {
	evs, err := inputEvents([]desktop.InputEvent{
		{Kind: desktop.InputMove, X: 0, Y: 799},
		{Kind: desktop.InputButton, Button: "left", Down: true},
		{Kind: desktop.InputKey, Key: "shift", Down: false},
	}, 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[0]["type"] != "abs" || evs[2]["type"] != "btn" || evs[3]["type"] != "key" {
		t.Fatalf("events %v", evs)
	}
	for _, bad := range []desktop.InputEvent{
		{Kind: desktop.InputMove, X: 1280, Y: 0},
		{Kind: desktop.InputMove, X: -1, Y: 0},
		{Kind: desktop.InputKey},
		{Kind: desktop.InputButton},
		{Kind: 99},
	} {
		if _, err := inputEvents([]desktop.InputEvent{bad}, 1280, 800); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

func TestDecodePPM(t *testing.T) {
	data := []byte("P6\n# screendump\n2 1\n255\n\xff\x00\x00\x00\x00\xff")
	img, err := decodePPM(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if img.At(0, 0) != (color.RGBA{255, 0, 0, 255}) || img.At(1, 0) != (color.RGBA{0, 0, 255, 255}) {
		t.Errorf("pixels %v %v", img.At(0, 0), img.At(1, 0))
	}
	for _, bad := range []string{"P5\n1 1\n255\n\x00", "P6\n1 1\n65535\n", "P6\n100000 1\n255\n", "P6\n2 2\n255\n\x00", "P6 99999999999999999999 1 255\n"} {
		if _, err := decodePPM(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzDecodePPM(f *testing.F) {
	f.Add([]byte("P6\n2 1\n255\n\xff\x00\x00\x00\x00\xff"))
	f.Add([]byte("P6\n#c\n1 1 255\n\x01\x02\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := decodePPM(bytes.NewReader(data))
		if err == nil && img.Bounds().Dx()*img.Bounds().Dy() > maxScreendumpPixels {
			t.Fatal("oversized picture accepted")
		}
	})
}

func TestOverlayNames(t *testing.T) {
	if got := nextOverlayPath("/d/disk-0.qcow2"); got != "/d/disk-1.qcow2" {
		t.Errorf("next of disk-0: %s", got)
	}
	if got := nextOverlayPath("/d/disk.qcow2"); got != "/d/disk-0.qcow2" {
		t.Errorf("next of disk: %s", got)
	}
	if got := nextNodeName("disk0"); got != "disk1" {
		t.Errorf("next node of disk0: %s", got)
	}
	if got := nextNodeName("disk9"); got != "disk10" {
		t.Errorf("next node of disk9: %s", got)
	}
}

func TestSparsifyPunchesZeroPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mem")
	data := make([]byte, 64*4096)
	for _, p := range []int{0, 5, 6, 63} { // non-zero pages; the rest are zeros
		data[p*4096+100] = byte(p + 1)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	freed, err := sparsify(path)
	if err != nil {
		t.Fatal(err)
	}
	if freed != 60*4096 {
		t.Errorf("freed %d bytes, want %d", freed, 60*4096)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, data) {
		t.Fatal("sparsify changed the file's content")
	}
	var st syscall.Stat_t
	syscall.Stat(path, &st)
	if st.Blocks*512 > 16*4096 {
		t.Errorf("file still uses %d bytes", st.Blocks*512)
	}
}
