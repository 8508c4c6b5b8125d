package drive

import (
	"strings"
	"testing"
)

func TestParseEntries(t *testing.T) {
	out := "f\x0011\x00644\x00-rw-r--r--\x00user\x00user\x001700000000.5\x00\x00/tmp/a b\nc\x00" +
		"l\x007\x00777\x00lrwxrwxrwx\x00root\x00root\x001700000001.0\x00/etc/x\x00/tmp/link\x00" +
		"d\x004096\x00755\x00drwxr-xr-x\x00root\x00root\x001700000002.0\x00\x00/tmp/d\x00"
	got, err := parseEntries([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d entries, want 3", len(got))
	}
	a := got[0]
	if a.Name != "a b\nc" || a.Type != FileRegular || a.Size != 11 || a.Mode != 0o644 || a.Owner != "user" || a.Modified.UnixMilli() != 1700000000500 {
		t.Errorf("file: %+v", a)
	}
	if got[1].Type != FileSymlink || got[1].SymlinkTarget != "/etc/x" {
		t.Errorf("link: %+v", got[1])
	}
	if got[2].Type != FileDir || got[2].Path != "/tmp/d" {
		t.Errorf("dir: %+v", got[2])
	}
	for _, bad := range []string{"f\x001\x00", "f\x00x\x00644\x00-\x00u\x00g\x001\x00\x00/a\x00", "f\x001\x00999\x00-\x00u\x00g\x001\x00\x00/a\x00", "f\x001\x00644\x00-\x00u\x00g\x001\x00\x00rel\x00"} {
		if _, err := parseEntries([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseEntries(f *testing.F) {
	f.Add([]byte("f\x0011\x00644\x00-rw-r--r--\x00user\x00user\x001700000000.5\x00\x00/tmp/a\x00"))
	f.Add([]byte("d\x000\x00755\x00d\x00r\x00r\x00NaN\x00\x00/\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		entries, err := parseEntries(in)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Path, "/") || e.Type == "" {
				t.Fatalf("entry %+v from %q", e, in)
			}
		}
	})
}
