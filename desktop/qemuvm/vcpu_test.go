package qemuvm_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

func TestIsVCPUThread(t *testing.T) {
	for comm, want := range map[string]bool{
		"CPU 0/TCG\n":      true,
		"CPU 12/KVM":       true,
		"CPU 0/":           false,
		"CPU x/TCG":        false,
		"qemu-system-x86":  false,
		"vnc_worker":       false,
		"IO mon_iothread":  false,
		"CPU -1/TCG":       false,
		"XCPU 0/TCG":       false,
		"CPU 0 TCG":        false,
		"CPU 99999999999/": false,
	} {
		if got := qemuvm.IsVCPUThread(comm); got != want {
			t.Errorf("IsVCPUThread(%q) = %v, want %v", comm, got, want)
		}
	}
}

func TestParseSchedstat(t *testing.T) {
	got, err := qemuvm.ParseSchedstat("1234567890 55 12\n")
	if err != nil || got != 1234567945*time.Nanosecond {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "1 2", "a 2 3", "-5 2 3", "1 2 3 4", "9223372036854775807 1 1"} {
		if _, err := qemuvm.ParseSchedstat(bad); err == nil {
			t.Errorf("ParseSchedstat(%q) took a malformed line", bad)
		}
	}
}

func FuzzParseSchedstat(f *testing.F) {
	f.Add("1234 5 6")
	f.Add("")
	f.Add("99999999999999999999 1 1")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := qemuvm.ParseSchedstat(s)
		if err == nil && (d < 0 || len(strings.Fields(s)) != 3) {
			t.Fatalf("ParseSchedstat(%q) = %v without an error", s, d)
		}
	})
}

// A process without QEMU's thread names is refused, not read as idle.
func TestVCPUTimeNeedsQEMUThreads(t *testing.T) {
	if _, err := qemuvm.VCPUTime(os.Getpid()); err == nil || !strings.Contains(err.Error(), "debug-threads") {
		t.Fatalf("VCPUTime of the test process: %v, want an error naming debug-threads", err)
	}
	if _, err := qemuvm.VCPUTime(0); err == nil {
		t.Fatal("VCPUTime(0) did not fail")
	}
}
