package fleet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// servedSnapshot writes a snapshot's files and manifest into a directory
// and serves them as a fleet host does; damage, when set, changes what is
// served.
type servedSnapshot struct {
	dir      string
	manifest *desktop.Manifest
	// cut ends the first answer for the memory file half-way.
	cut atomic.Bool
	// corrupt flips one byte of the memory file as it is served.
	corrupt atomic.Bool
}

func newServedSnapshot(t *testing.T, name string) (*servedSnapshot, *httptest.Server) {
	return newLayeredSnapshot(t, name, "", "")
}

// newLayeredSnapshot serves a snapshot whose manifest names parent and
// whose disk's header names backing.
func newLayeredSnapshot(t *testing.T, name, parent, backing string) (*servedSnapshot, *httptest.Server) {
	t.Helper()
	s := &servedSnapshot{dir: t.TempDir()}
	m := &desktop.Manifest{
		Format: desktop.ManifestFormat, Name: name, CreatedAt: time.Now().UTC(), BakedBy: "qemu",
		Machine: desktop.MachineShape{QEMUVersion: "7.2.22", QEMUSHA256: strings.Repeat("a", 64), Accel: "tcg", Type: "pc-q35-7.2",
			CPU: "max", CPUs: 2, MemoryMiB: 1024, Width: 1280, Height: 800, Devices: []string{"virtio-vga"}},
		Files: map[string]desktop.FileSum{}, Parent: parent,
	}
	for role, size := range map[string]int{desktop.FileMemory: 3 << 20, desktop.FileState: 64 << 10, desktop.FileDisk: 256 << 10} {
		b := make([]byte, size)
		rand.Read(b)
		if role == desktop.FileDisk {
			copy(b, header(backing)) // a qcow2 header, then anything
		}
		p := filepath.Join(s.dir, role)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		sum, err := desktop.SumFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m.Files[role] = sum
	}
	s.manifest = m
	raw, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(s.dir, ManifestFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fleet-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		file := filepath.Base(r.URL.Path)
		b, err := os.ReadFile(filepath.Join(s.dir, file))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if file == desktop.FileMemory && s.corrupt.Load() {
			b[len(b)/3] ^= 0x40
		}
		if file == desktop.FileMemory && r.Header.Get("Range") == "" && s.cut.Load() {
			// Half the file, then the connection goes.
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b[:len(b)/2])
			if hj, ok := w.(http.Hijacker); ok {
				c, _, _ := hj.Hijack()
				c.Close()
			}
			return
		}
		http.ServeContent(w, r, file, time.Time{}, strings.NewReader(string(b)))
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

func pullInto(t *testing.T, srv *httptest.Server, name string) (*desktop.Catalog, desktop.Snapshot, PullStats, error) {
	return pullWith(t, srv, name, nil, nil)
}

func pullWith(t *testing.T, srv *httptest.Server, name string, parent func(context.Context, string) error, progress func(PullProgress)) (*desktop.Catalog, desktop.Snapshot, PullStats, error) {
	t.Helper()
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := Puller{HTTP: srv.Client(), Token: "fleet-token", EnsureParent: parent, Progress: progress}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, stats, err := p.Pull(ctx, srv.URL, name, cat)
	return cat, s, stats, err
}

// A pulled snapshot is the served one, file for file, and verifies.
func TestPullCopiesAndChecksASnapshot(t *testing.T) {
	src, srv := newServedSnapshot(t, "golden")
	var told []PullProgress
	cat, s, stats, err := pullWith(t, srv, "golden", nil, func(p PullProgress) { told = append(told, p) })
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, told, stats.Bytes)
	if err := cat.Verify(s); err != nil {
		t.Fatalf("the pulled snapshot does not verify: %v", err)
	}
	for role, want := range src.manifest.Files {
		if got, _ := desktop.SumFile(s.Path(role)); got != want {
			t.Errorf("%s: %+v, want %+v", role, got, want)
		}
	}
	if stats.Bytes != (3<<20)+(64<<10)+(256<<10) || stats.Resumed != 0 {
		t.Errorf("stats %+v", stats)
	}
}

// checkProgress checks that a pull told its progress from nothing to all
// of total, never going back, even across a cut transfer.
func checkProgress(t *testing.T, told []PullProgress, total int64) {
	t.Helper()
	if len(told) < 2 {
		t.Fatalf("the pull told its progress %d times", len(told))
	}
	if first := told[0]; first.Done != 0 || first.Total != total || first.Snapshot != "golden" {
		t.Errorf("first progress %+v: want 0 of %d bytes of golden", first, total)
	}
	for i := 1; i < len(told); i++ {
		if told[i].Done < told[i-1].Done || told[i].Total != total {
			t.Fatalf("progress went from %+v to %+v", told[i-1], told[i])
		}
	}
	if last := told[len(told)-1]; last.Done != total {
		t.Errorf("last progress %+v: want all %d bytes", last, total)
	}
}

// A transfer cut short continues where it stopped, with a range request.
func TestPullResumesACutTransfer(t *testing.T) {
	src, srv := newServedSnapshot(t, "golden")
	src.cut.Store(true)
	var told []PullProgress
	cat, s, stats, err := pullWith(t, srv, "golden", nil, func(p PullProgress) { told = append(told, p) })
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, told, stats.Bytes)
	if stats.Resumed == 0 {
		t.Errorf("no range request continued the cut transfer: %+v", stats)
	}
	if err := cat.Verify(s); err != nil {
		t.Fatal(err)
	}
}

// One byte changed on the way: the pull is refused, and the catalog holds
// no snapshot and no draft.
func TestPullRefusesACorruptedByte(t *testing.T) {
	src, srv := newServedSnapshot(t, "golden")
	src.corrupt.Store(true)
	cat, _, _, err := pullInto(t, srv, "golden")
	if !errors.Is(err, desktop.ErrMismatch) {
		t.Fatalf("pull of a corrupted file: %v, want a mismatch", err)
	}
	if snaps, _, _ := cat.List(); len(snaps) != 0 {
		t.Fatalf("the catalog lists %v after a refused pull", snaps)
	}
	if entries, _ := os.ReadDir(cat.Dir()); len(entries) != 0 {
		t.Fatalf("the refused pull left %v in the catalog's directory", entries)
	}
}

// A layered snapshot moves once its parent is here and the file its disk
// layers on is at the path it names; otherwise it is refused, leaving
// nothing.
func TestPullOfALayeredSnapshot(t *testing.T) {
	under := filepath.Join(t.TempDir(), "disk.qcow2")
	if err := os.WriteFile(under, header(""), 0o600); err != nil {
		t.Fatal(err)
	}
	_, srv := newLayeredSnapshot(t, "tmpl", "golden", under)
	var asked []string
	parent := func(_ context.Context, name string) error {
		asked = append(asked, name)
		return nil
	}
	if _, _, _, err := pullInto(t, srv, "tmpl"); !errors.Is(err, desktop.ErrInvalid) {
		t.Fatalf("a layered pull without parents: %v, want refused", err)
	}
	cat, s, _, err := pullWith(t, srv, "tmpl", parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != "golden" {
		t.Fatalf("parents made sure of: %v, want golden", asked)
	}
	if err := cat.Verify(s); err != nil {
		t.Fatal(err)
	}

	_, srv = newLayeredSnapshot(t, "tmpl", "golden", filepath.Join(t.TempDir(), "elsewhere", "disk.qcow2"))
	cat, _, _, err = pullWith(t, srv, "tmpl", parent, nil)
	if !errors.Is(err, desktop.ErrMismatch) || !strings.Contains(err.Error(), "same paths") {
		t.Fatalf("a layered pull whose layer is not here: %v, want a mismatch saying why", err)
	}
	if entries, _ := os.ReadDir(cat.Dir()); len(entries) != 0 {
		t.Fatalf("the refused pull left %v", entries)
	}
}

// header builds a qcow2 header naming backing at offset 72 (none when ""):
// the magic, version 3, the name's offset and length, 64 KiB clusters.
func header(backing string) []byte {
	b := make([]byte, 72+len(backing))
	copy(b, "QFI\xfb")
	binary.BigEndian.PutUint32(b[4:8], 3)
	binary.BigEndian.PutUint32(b[20:24], 16)
	if backing != "" {
		binary.BigEndian.PutUint64(b[8:16], 72)
		binary.BigEndian.PutUint32(b[16:20], uint32(len(backing)))
		copy(b[72:], backing)
	}
	return b
}
