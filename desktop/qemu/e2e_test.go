package qemu_test

import (
	"context"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// TestConformanceOnQEMU runs the lifecycle suite on real QEMU (TCG here)
// with the minimal image.
func TestConformanceOnQEMU(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	runDir, dataDir := testenv.RunDir(t), t.TempDir()
	var drivers []*qemu.Driver
	t.Cleanup(func() {
		for _, d := range drivers {
			d.Close()
		}
	})
	desktoptest.Run(t, desktoptest.Harness{
		NewDriver: func(t *testing.T) desktop.Driver {
			d, err := qemu.New(context.Background(), qemu.Options{RunDir: runDir, DataDir: dataDir, Logger: testenv.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			drivers = append(drivers, d)
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
		Timeout: 3 * time.Minute,
		Logger:  testenv.Logger(t),
	})
}
