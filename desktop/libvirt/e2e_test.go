package libvirt_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/desktop/libvirt"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// newDriver starts the libvirt driver on the local libvirtd, skipping the
// test (failing it under CI=true) when libvirtd is not installed or not
// running: scripts/libvirtd --test starts one.
func newDriver(t *testing.T, runDir, dataDir string) *libvirt.Driver {
	t.Helper()
	testenv.UsesLibvirtd(t)
	d, err := libvirt.New(context.Background(), libvirt.Options{RunDir: runDir, DataDir: dataDir, Logger: testenv.Logger(t)})
	if errors.Is(err, desktop.ErrUnavailable) && !testenv.InCI() {
		t.Skipf("%v (scripts/libvirtd --test installs and starts one)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// virt is the test's own connection to libvirtd, to look behind the
// driver's back.
func virt(t *testing.T) *golibvirt.Libvirt {
	t.Helper()
	testenv.UsesLibvirtd(t)
	l := golibvirt.NewWithDialer(dialers.NewLocal())
	if err := l.ConnectToURI(golibvirt.QEMUSystem); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Disconnect() })
	return l
}

type machineRecord struct {
	ID      string `json:"id"`
	Domain  string `json:"domain"`
	UUID    string `json:"uuid"`
	RunDir  string `json:"run_dir"`
	DataDir string `json:"data_dir"`
	Disk    string `json:"disk"`
}

func parseRecord(t *testing.T, raw []byte) machineRecord {
	t.Helper()
	var rec machineRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// domainExists asks libvirtd whether a domain of that name is defined.
func domainExists(t *testing.T, l *golibvirt.Libvirt, name string) bool {
	t.Helper()
	_, err := l.DomainLookupByName(name)
	if err != nil && !golibvirt.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestConformanceOnLibvirt runs the conformance suite on a real libvirtd
// (TCG domains) with the minimal snapshot the QEMU driver baked: every
// create here is a cross-driver restore.
func TestConformanceOnLibvirt(t *testing.T) {
	baked := testenv.Snapshot(t, "minimal")
	runDir, dataDir := testenv.RunDir(t), testenv.DataDir(t)
	l := virt(t)
	start := time.Now()
	desktoptest.Run(t, desktoptest.Harness{
		NewDriver: func(t *testing.T) desktop.Driver {
			d := newDriver(t, runDir, dataDir)
			t.Cleanup(d.Close) // the suite closes it too; a second Close does nothing
			return d
		},
		Catalog:  baked.Catalog,
		Snapshot: baked.Snapshot.Name,
		NewStore: func(*testing.T) desktop.Store { return desktoptest.NewMemStore() },
		Kill: func(t *testing.T, m desktop.Machine) {
			if m.Pid() == 0 {
				t.Fatal("the machine has no pid")
			}
			if err := syscall.Kill(m.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
		Gone: func(t *testing.T, raw []byte) bool {
			rec := parseRecord(t, raw)
			for _, dir := range []string{rec.RunDir, rec.DataDir} {
				if _, err := os.Stat(dir); err == nil {
					t.Logf("%s remains", dir)
					return false
				}
			}
			if domainExists(t, l, rec.Domain) {
				t.Logf("domain %s remains", rec.Domain)
				return false
			}
			return true
		},
		Running:  func(t *testing.T) []string { return domainsUnder(t, l, runDir) },
		SmallDir: smallDirForLibvirtd,
		GuestOS:  true,
		Timeout:  3 * time.Minute,
		Logger:   testenv.Logger(t),
	})
	t.Logf("conformance suite on libvirt took %s", time.Since(start).Round(time.Second))
	if left := domainsUnder(t, l, runDir); len(left) > 0 {
		t.Errorf("domains remain after the suite: %v", left)
	}
}

// domainsUnder lists the active domains whose definition names a path
// under dir (the run directory of a test's driver): what it left running.
func domainsUnder(t *testing.T, l *golibvirt.Libvirt, dir string) []string {
	t.Helper()
	doms, _, err := l.ConnectListAllDomains(1, golibvirt.ConnectListDomainsActive)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range doms {
		x, err := l.DomainGetXMLDesc(d, 0)
		if err == nil && strings.Contains(x, "'"+dir+"/") {
			out = append(out, d.Name)
		}
	}
	return out
}

// smallDirForLibvirtd mounts a 64 MiB tmpfs where both this test and
// libvirtd's QEMU processes see it by the same path. scripts/libvirtd
// --test runs libvirtd in a mount namespace of its own, which mounts made
// here after it started never reach; so the tmpfs is mounted in libvirtd's
// namespace and reached from here through /proc/PID/root, a path that
// resolves to the same place in both.
func smallDirForLibvirtd(t *testing.T) string {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	pid := libvirtdPid(t)
	dir := testenv.DataDir(t) // on the root filesystem, which both namespaces share
	ours, _ := os.Readlink("/proc/self/ns/mnt")
	theirs, _ := os.Readlink("/proc/" + pid + "/ns/mnt")
	mount := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dir)
	umount := exec.Command("umount", "-l", dir)
	if ours != theirs {
		mount = exec.Command("nsenter", append([]string{"--target", pid, "--mount", "--"}, mount.Args...)...)
		umount = exec.Command("nsenter", append([]string{"--target", pid, "--mount", "--"}, umount.Args...)...)
		dir = filepath.Join("/proc", pid, "root", dir)
	}
	if out, err := mount.CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs for libvirtd: %v: %s", err, out)
	}
	t.Cleanup(func() { umount.Run() })
	return dir
}

// libvirtdPid finds the running libvirtd.
func libvirtdPid(t *testing.T) string {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == "libvirtd" {
			return e.Name()
		}
	}
	t.Fatal("no libvirtd process")
	return ""
}
