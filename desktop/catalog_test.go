package desktop_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

func goodShape() desktop.MachineShape {
	return desktop.MachineShape{QEMUVersion: "7.2.22", QEMUSHA256: strings.Repeat("a", 64), Accel: "tcg", Type: "pc-q35-7.2",
		CPU: "max", CPUs: 2, MemoryMiB: 1024, Width: 1280, Height: 800, Devices: []string{"VGA"}}
}

func draftWithFiles(t *testing.T, c *desktop.Catalog, name string) *desktop.Draft {
	t.Helper()
	d, err := c.Begin(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{desktop.FileMemory, desktop.FileState, desktop.FileDisk} {
		if err := os.WriteFile(d.Path(role), []byte(role), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestCatalogCommitVerifyRemove(t *testing.T) {
	c, _ := desktop.NewCatalog(t.TempDir())
	s, err := draftWithFiles(t, c, "golden").Commit(&desktop.Manifest{Machine: goodShape()})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get("golden"); err != nil || got.Manifest.Files[desktop.FileState].Size != int64(len("state")) {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if err := c.Verify(s); err != nil {
		t.Fatalf("verify a fresh snapshot: %v", err)
	}
	// A changed file is caught, and says which.
	if err := os.WriteFile(s.Path(desktop.FileMemory), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = c.Verify(s)
	if !errors.Is(err, desktop.ErrMismatch) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("verify a changed snapshot: %v", err)
	}
	// A second snapshot under the same name is refused; the first stays.
	if _, err := c.Begin("golden"); !errors.Is(err, desktop.ErrConflict) {
		t.Fatalf("begin over an existing snapshot: %v", err)
	}
	if err := c.Remove("golden"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("golden"); !errors.Is(err, desktop.ErrNotFound) {
		t.Fatalf("after remove: %v", err)
	}
}

func TestCatalogDraftsAreInvisibleAndCleaned(t *testing.T) {
	dir := t.TempDir()
	c, _ := desktop.NewCatalog(dir)
	live := draftWithFiles(t, c, "in-progress")
	// A draft an interrupted process left: no lock held.
	os.MkdirAll(filepath.Join(dir, ".draft-dead-123"), 0o700)
	snaps, bad, err := c.List()
	if err != nil || len(snaps) != 0 || len(bad) != 0 {
		t.Fatalf("drafts listed: %v %v %v", snaps, bad, err)
	}
	if err := c.CleanDrafts(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".draft-dead-123")); !os.IsNotExist(err) {
		t.Error("a dead draft survived CleanDrafts")
	}
	if _, err := os.Stat(live.Dir); err != nil {
		t.Error("a live draft was cleaned")
	}
	live.Abort()
	if _, err := os.Stat(live.Dir); !os.IsNotExist(err) {
		t.Error("Abort left the draft")
	}
}

func TestCommitFailsWithoutFilesAndLeavesNothing(t *testing.T) {
	c, _ := desktop.NewCatalog(t.TempDir())
	d, _ := c.Begin("half")
	os.WriteFile(d.Path(desktop.FileMemory), []byte("m"), 0o600)
	if _, err := d.Commit(&desktop.Manifest{Machine: goodShape()}); err == nil {
		t.Fatal("committed a snapshot without its state and disk")
	}
	if _, err := c.Get("half"); !errors.Is(err, desktop.ErrNotFound) {
		t.Fatalf("half snapshot listed: %v", err)
	}
}

func TestManifestValidate(t *testing.T) {
	base := func() desktop.Manifest {
		sum := desktop.FileSum{Size: 1, SHA256: strings.Repeat("b", 64)}
		return desktop.Manifest{Format: desktop.ManifestFormat, Name: "ok", Machine: goodShape(),
			Files: map[string]desktop.FileSum{desktop.FileMemory: sum, desktop.FileState: sum, desktop.FileDisk: sum}}
	}
	m := base()
	if err := m.Validate(); err != nil {
		t.Fatalf("valid manifest: %v", err)
	}
	for name, breakIt := range map[string]func(*desktop.Manifest){
		"format":  func(m *desktop.Manifest) { m.Format = 99 },
		"name":    func(m *desktop.Manifest) { m.Name = "Bad Name" },
		"accel":   func(m *desktop.Manifest) { m.Machine.Accel = "hvf" },
		"qemu":    func(m *desktop.Manifest) { m.Machine.QEMUSHA256 = "" },
		"cpus":    func(m *desktop.Manifest) { m.Machine.CPUs = 0 },
		"screen":  func(m *desktop.Manifest) { m.Machine.Width = 10 },
		"devices": func(m *desktop.Manifest) { m.Machine.Devices = nil },
		"file":    func(m *desktop.Manifest) { delete(m.Files, desktop.FileDisk) },
		"sum":     func(m *desktop.Manifest) { m.Files[desktop.FileState] = desktop.FileSum{SHA256: "x"} },
	} {
		m := base()
		breakIt(&m)
		if err := m.Validate(); err == nil {
			t.Errorf("manifest with a bad %s validated", name)
		}
	}
	// A fork template may go without checksums; a golden one may not.
	m = base()
	m.Files[desktop.FileMemory] = desktop.FileSum{Size: 5}
	if err := m.Validate(); err == nil {
		t.Error("golden manifest without a checksum validated")
	}
	m.Ephemeral = true
	if err := m.Validate(); err != nil {
		t.Errorf("fork template without checksums: %v", err)
	}
}

func TestShapeMismatch(t *testing.T) {
	baked := goodShape()
	if d := baked.Mismatch(goodShape()); len(d) != 0 {
		t.Fatalf("equal shapes differ: %v", d)
	}
	host := goodShape()
	host.QEMUVersion, host.QEMUSHA256, host.Accel = "8.2.0", strings.Repeat("c", 64), "kvm"
	diffs := baked.Mismatch(host)
	if len(diffs) != 3 {
		t.Fatalf("diffs %v, want version, build and accelerator", diffs)
	}
	joined := strings.Join(diffs, "; ")
	for _, want := range []string{"7.2.22", "8.2.0", "tcg", "kvm"} {
		if !strings.Contains(joined, want) {
			t.Errorf("%q does not say %s", joined, want)
		}
	}
	host = goodShape()
	host.Devices = []string{"VGA", "extra"}
	if d := baked.Mismatch(host); len(d) != 1 {
		t.Errorf("device list difference not reported: %v", d)
	}
	host.Devices = nil // a driver that takes the manifest's devices
	if d := baked.Mismatch(host); len(d) != 0 {
		t.Errorf("nil host devices compared: %v", d)
	}
}

// A snapshot linked into a catalog from elsewhere is listed like one of its
// own, and removing it removes the link, not what it points to.
func TestCatalogListsLinkedSnapshots(t *testing.T) {
	shared, _ := desktop.NewCatalog(t.TempDir())
	s, err := draftWithFiles(t, shared, "golden").Commit(&desktop.Manifest{Machine: goodShape()})
	if err != nil {
		t.Fatal(err)
	}
	own, _ := desktop.NewCatalog(t.TempDir())
	if err := os.Symlink(s.Dir, filepath.Join(own.Dir(), "golden")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own.Dir(), "stray-file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	snaps, bad, err := own.List()
	if err != nil || len(bad) != 0 || len(snaps) != 1 || snaps[0].Name != "golden" {
		t.Fatalf("List = %+v, %v, %v; want the linked snapshot alone", snaps, bad, err)
	}
	if err := own.Remove("golden"); err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Get("golden"); err != nil {
		t.Fatalf("removing the link removed the snapshot: %v", err)
	}
}
