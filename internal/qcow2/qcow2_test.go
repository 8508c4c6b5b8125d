package qcow2

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// header builds a qcow2 header naming backing at offset 72 (none when "").
func header(backing string) []byte {
	b := make([]byte, 72+len(backing))
	binary.BigEndian.PutUint32(b[20:24], 16)
	copy(b, qcow2Magic)
	binary.BigEndian.PutUint32(b[4:8], 3)
	if backing != "" {
		binary.BigEndian.PutUint64(b[8:16], 72)
		binary.BigEndian.PutUint32(b[16:20], uint32(len(backing)))
		copy(b[72:], backing)
	}
	return b
}

func TestBackingFromHeader(t *testing.T) {
	for _, tt := range []struct {
		data []byte
		want string
		bad  bool
	}{
		{header("/state/snapshots/base/disk.qcow2"), "/state/snapshots/base/disk.qcow2", false},
		{header(""), "", false},
		{[]byte("not an image at all......"), "", true},
		{header("x")[:12], "", true},
	} {
		got, err := backingFromHeader(bytes.NewReader(tt.data))
		if got != tt.want || (err != nil) != tt.bad {
			t.Errorf("%q: %q, %v; want %q (error: %v)", tt.data[:min(8, len(tt.data))], got, err, tt.want, tt.bad)
		}
	}
}

// The reader agrees with qemu-img on an image it made.
func TestBackingFileOfARealImage(t *testing.T) {
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img is not installed")
	}
	dir := t.TempDir()
	base, top := filepath.Join(dir, "base.qcow2"), filepath.Join(dir, "top.qcow2")
	for _, args := range [][]string{{"create", "-f", "qcow2", base, "64M"}, {"create", "-f", "qcow2", "-b", base, "-F", "qcow2", top}} {
		if out, err := exec.Command(qemuImg, args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v: %s", args, err, out)
		}
	}
	if got, err := BackingFile(top); err != nil || got != base {
		t.Fatalf("BackingFile(top) = %q, %v; want %q", got, err, base)
	}
	if got, err := BackingFile(base); err != nil || got != "" {
		t.Fatalf("BackingFile(base) = %q, %v; want none", got, err)
	}
	if _, err := BackingFile(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("a missing image: %v", err)
	}
}

// Whatever a header says, reading it does not panic or allocate more than
// a backing name's limit.
func FuzzBackingFromHeader(f *testing.F) {
	f.Add(header("/a/b"))
	f.Add(header(""))
	f.Add([]byte("QFI\xfb"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name, err := backingFromHeader(bytes.NewReader(data))
		if err == nil && len(name) > maxBackingLength {
			t.Fatalf("a name of %d bytes", len(name))
		}
	})
}

// A renamed backing file is what qemu-img then reads, and the image stays
// whole; an image without one, or a name past the header's cluster, is
// refused untouched.
func TestSetBackingFileOfARealImage(t *testing.T) {
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img is not installed")
	}
	dir := t.TempDir()
	base, top := filepath.Join(dir, "base.qcow2"), filepath.Join(dir, "top.qcow2")
	for _, args := range [][]string{{"create", "-q", "-f", "qcow2", base, "64M"}, {"create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2", top}} {
		if out, err := exec.Command(qemuImg, args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v: %s", args, err, out)
		}
	}
	moved := filepath.Join(dir, "elsewhere", "a-longer-directory-name", "base.qcow2")
	os.MkdirAll(filepath.Dir(moved), 0o755)
	if err := os.Rename(base, moved); err != nil {
		t.Fatal(err)
	}
	if err := SetBackingFile(top, moved); err != nil {
		t.Fatal(err)
	}
	if got, err := BackingFile(top); err != nil || got != moved {
		t.Fatalf("BackingFile after the rename = %q, %v; want %q", got, err, moved)
	}
	out, err := exec.Command(qemuImg, "info", "--output=json", top).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`"backing-filename": "`+moved+`"`)) {
		t.Fatalf("qemu-img info after the rename: %v: %s", err, out)
	}
	if out, err := exec.Command(qemuImg, "check", top).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img check after the rename: %v: %s", err, out)
	}
	if err := SetBackingFile(moved, top); err == nil {
		t.Fatal("an image without a backing file was given one")
	}
	before, _ := os.ReadFile(top)
	if err := SetBackingFile(top, "/"+string(bytes.Repeat([]byte("x"), maxBackingLength))); err == nil {
		t.Fatal("a name past the limit was written")
	}
	if after, _ := os.ReadFile(top); !bytes.Equal(before, after) {
		t.Fatal("a refused rename changed the image")
	}
}
