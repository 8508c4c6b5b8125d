package qemu

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

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

func TestNodeNames(t *testing.T) {
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
