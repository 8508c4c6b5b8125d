package qemu_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// TestConformanceOnQEMU runs the conformance suite on real QEMU (TCG here)
// with the minimal image.
func TestConformanceOnQEMU(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	runDir, dataDir := testenv.RunDir(t), testenv.DataDir(t)
	start := time.Now()
	desktoptest.Run(t, desktoptest.Harness{
		NewDriver: func(t *testing.T) desktop.Driver {
			d, err := qemu.New(context.Background(), qemu.Options{RunDir: runDir, DataDir: dataDir, Logger: testenv.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close) // the suite closes it too; a second Close does nothing
			return d
		},
		Catalog:  baked.Catalog,
		Snapshot: baked.Snapshot.Name,
		NewStore: func(*testing.T) desktop.Store { return desktoptest.NewMemStore() },
		Kill: func(t *testing.T, m desktop.Machine) {
			if err := syscall.Kill(m.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
		Gone: func(t *testing.T, raw []byte) bool {
			var rec struct {
				Pid     int    `json:"pid"`
				RunDir  string `json:"run_dir"`
				DataDir string `json:"data_dir"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil {
				t.Fatal(err)
			}
			for _, dir := range []string{rec.RunDir, rec.DataDir} {
				if _, err := os.Stat(dir); err == nil {
					t.Logf("%s remains", dir)
					return false
				}
			}
			return syscall.Kill(rec.Pid, 0) != nil
		},
		Running: func(t *testing.T) []string { return processesUnder(runDir) },
		GuestOS: true,
		Timeout: 3 * time.Minute,
		Logger:  testenv.Logger(t),
	})
	t.Logf("conformance suite on QEMU took %s", time.Since(start).Round(time.Second))
}

// processesUnder names the processes (by pid) whose command line holds a
// path under dir: the QEMU processes of a driver with that run directory,
// warm pool and templates included.
func processesUnder(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir+"/")) {
			out = append(out, "pid "+e.Name())
		}
	}
	return out
}
