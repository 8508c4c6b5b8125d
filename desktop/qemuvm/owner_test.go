package qemuvm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStatusIDs(t *testing.T) {
	status := "Name:\tqemu-system-x86\nUid:\t900000007\t900000007\t900000007\t900000007\nGid:\t5\t5\t5\t6\n"
	uids, err := parseStatusIDs(status, "Uid:")
	if err != nil || len(uids) != 4 || uids[0] != 900000007 || uids[3] != 900000007 {
		t.Fatalf("Uid = %v, %v", uids, err)
	}
	gids, err := parseStatusIDs(status, "Gid:")
	if err != nil || gids[3] != 6 {
		t.Fatalf("Gid = %v, %v", gids, err)
	}
	for _, bad := range []string{"Name:\tx\n", "Uid:\t1\t2\n", "Uid:\t1\t2\tx\t4\n"} {
		if _, err := parseStatusIDs(bad, "Uid:"); err == nil {
			t.Errorf("parseStatusIDs(%q) accepted", bad)
		}
	}
}

func TestOwnerRunAs(t *testing.T) {
	if got := (Owner{UID: 900000001, GID: 900000002}).RunAs(); got != "900000001:900000002" {
		t.Fatalf("RunAs = %q", got)
	}
}

func TestTraversable(t *testing.T) {
	top, err := os.MkdirTemp("", "trav")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(top)
	inner := filepath.Join(top, "a", "b")
	if err := os.MkdirAll(inner, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(top, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := Traversable(inner); err != nil {
		t.Fatalf("a 0711 chain: %v", err)
	}
	blocked := filepath.Join(top, "a")
	if err := os.Chmod(blocked, 0o700); err != nil {
		t.Fatal(err)
	}
	err = Traversable(inner)
	if err == nil || !strings.Contains(err.Error(), "chmod o+x "+blocked) {
		t.Fatalf("a 0700 directory on the way: %v, want the fix for %s", err, blocked)
	}
}

func FuzzParseStatusIDs(f *testing.F) {
	f.Add("Uid:\t1\t2\t3\t4\n")
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := parseStatusIDs(s, "Uid:")
		if err == nil && len(ids) != 4 {
			t.Fatalf("%q: %v", s, ids)
		}
	})
}
