package volume

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzUntar: whatever the archive, nothing is written outside the
// directory it unpacks into, and the content limit holds.
func FuzzUntar(f *testing.F) {
	f.Add(tarOf(f, map[string]string{"a": "x", "d/b": "y"}))
	f.Add(tarOf(f, map[string]string{"../a": "x"}))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		top := t.TempDir()
		dst := filepath.Join(top, "tree")
		untar(bytes.NewReader(data), dst, 1<<20)
		entries, err := os.ReadDir(top)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "tree" {
				t.Fatalf("untar wrote %s outside its directory", e.Name())
			}
		}
		var total int64
		filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				total += fi.Size()
			}
			return nil
		})
		if total > 1<<20 {
			t.Fatalf("unpacked %d bytes past the limit", total)
		}
	})
}

// FuzzArchivePath: an accepted name is relative, clean and inside.
func FuzzArchivePath(f *testing.F) {
	for _, s := range []string{"a", "./a/b", "../x", "/abs", "a/../b", "lost+found", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, err := archivePath(name)
		if err != nil {
			return
		}
		if strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") || filepath.Clean("/"+p) != "/"+p && p != "" {
			t.Fatalf("%q accepted as %q", name, p)
		}
	})
}

// A symbolic link the archive makes cannot carry a later entry outside.
func TestUntarKeepsEntriesBelowLinksInside(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	outside := t.TempDir()
	tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside})
	tw.WriteHeader(&tar.Header{Name: "l/x", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	if err := untar(&buf, filepath.Join(t.TempDir(), "tree"), 1<<20); err == nil {
		t.Error("an entry below a link out of the tree was unpacked")
	}
	if left, _ := os.ReadDir(outside); len(left) != 0 {
		t.Errorf("written outside: %v", left)
	}
}
