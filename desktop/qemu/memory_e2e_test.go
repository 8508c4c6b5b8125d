package qemu_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// killedBake is what the bake process of TestNextDriverEndsAKilledBake
// (this test binary, run again) is told.
type killedBake struct {
	RunDir, DataDir, SnapshotsDir, MemoryDir string
	Image                                    desktop.BootImage
}

const killedBakeEnv = "WARMDESK_TEST_KILLED_BAKE"

// TestNextDriverEndsAKilledBake kills (SIGKILL) a process that is baking,
// its guest booting, and checks that the next driver start ends the bake's
// QEMU and removes its RAM file from tmpfs. QEMU runs in a session of its
// own and outlived the bake: only a restart of hostd ended it, and the
// file's pages stayed in memory after the sweep removed the file.
func TestNextDriverEndsAKilledBake(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	cat, err := desktop.NewCatalog(testenv.DataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := killedBake{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), SnapshotsDir: cat.Dir(), Image: baked.Image.Boot()}
	cfg.MemoryDir = filepath.Join(cfg.DataDir, "memory")
	data, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledBakeProcess$")
	child.Env = append(os.Environ(), killedBakeEnv+"="+string(data))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	sc := bufio.NewScanner(out)
	for pid == 0 && sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "booted "); ok {
			pid, _ = strconv.Atoi(rest)
		}
	}
	if pid == 0 {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("the bake process did not boot its guest: %v", sc.Err())
	}
	child.Process.Kill()
	child.Wait()
	// As the bake left it: its QEMU runs on, its RAM file is there.
	if !running(pid) {
		t.Fatal("the bake's QEMU ended with its process")
	}
	if files, _ := filepath.Glob(filepath.Join(cfg.MemoryDir, "*.memory")); len(files) != 1 {
		t.Fatalf("memory files before the next driver start: %v", files)
	}
	d, err := qemu.New(ctx, qemu.Options{RunDir: cfg.RunDir, DataDir: cfg.DataDir, SnapshotsDir: cfg.SnapshotsDir, MemoryDir: cfg.MemoryDir, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if running(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the killed bake's QEMU (pid %d) still runs after the next driver start", pid)
	}
	if files, _ := filepath.Glob(filepath.Join(cfg.MemoryDir, "*")); len(files) > 0 {
		t.Errorf("memory files after the next driver start: %v", files)
	}
	if dirs, _ := os.ReadDir(cfg.RunDir); len(dirs) > 0 {
		t.Errorf("the killed bake's run directory is still there: %v", dirs[0].Name())
	}
}

// running says whether a process runs: not gone, nor a zombie (the
// killed bake's QEMU is init's child now, which reaps it when it will).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which ends at the last ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestKilledBakeProcess is the bake process of TestNextDriverEndsAKilledBake:
// it boots the image for a snapshot draft, says so, and waits to be killed.
func TestKilledBakeProcess(t *testing.T) {
	raw := os.Getenv(killedBakeEnv)
	if raw == "" {
		t.Skip("run by TestNextDriverEndsAKilledBake")
	}
	var cfg killedBake
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := qemu.New(ctx, qemu.Options{RunDir: cfg.RunDir, DataDir: cfg.DataDir, SnapshotsDir: cfg.SnapshotsDir, MemoryDir: cfg.MemoryDir})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := desktop.NewCatalog(cfg.SnapshotsDir)
	if err != nil {
		t.Fatal(err)
	}
	draft, err := cat.Begin("killed")
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Boot(ctx, desktop.BootSpec{Name: "killed", Image: cfg.Image, CPUs: 1, MemoryMiB: 256, Dir: draft.Dir})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("booted %d\n", m.Pid())
	<-ctx.Done() // killed here
}
