package volume

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// memStore keeps records in memory, for the registry's own tests.
type memStore struct {
	mu   sync.Mutex
	vols map[string]Volume
}

func (s *memStore) LoadVolumes() ([]Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Volume
	for _, v := range s.vols {
		out = append(out, v)
	}
	return out, nil
}

func (s *memStore) PutVolume(v Volume) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vols[v.Name] = v
	return nil
}

func (s *memStore) DeleteVolume(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.vols, name)
	return nil
}

func openRegistry(t *testing.T, st *memStore, dir string) *Registry {
	t.Helper()
	tools, err := FindTools()
	if err != nil {
		t.Skip(err)
	}
	r, err := Open(Config{Dir: dir, Store: st, Tools: tools, MaxSizeMiB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tarOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, files[n])
	}
	tw.Close()
	return buf.Bytes()
}

func filesOf(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

// A volume made, filled from a tar, frozen, and a second volume started
// from the snapshot: each reads back what it should, on the host, through
// the archive path; removal collects the layers nothing else uses.
func TestRegistryLifecycle(t *testing.T) {
	ctx := context.Background()
	st := &memStore{vols: map[string]Volume{}}
	dir := t.TempDir()
	r := openRegistry(t, st, dir)

	v, err := r.Create(ctx, CreateRequest{Name: "ws", SizeMiB: 64})
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: a blank 64 MiB volume takes a few MiB at most.
	if a := AllocatedBytes(v); a <= 0 || a > 8<<20 {
		t.Errorf("a blank 64 MiB volume allocates %d bytes", a)
	}
	if _, err := r.Create(ctx, CreateRequest{Name: "ws", SizeMiB: 64}); !errors.Is(err, ErrConflict) {
		t.Errorf("second create of ws: %v, want ErrConflict", err)
	}
	want := map[string]string{"notes.txt": "hello", "dir/deep.txt": strings.Repeat("x", 5000)}
	if err := r.Import(ctx, "ws", bytes.NewReader(tarOf(t, want))); err != nil {
		t.Fatal(err)
	}
	if err := r.Import(ctx, "ws", bytes.NewReader(tarOf(t, want))); !errors.Is(err, ErrConflict) {
		t.Errorf("a second fill: %v, want ErrConflict (only a blank volume is filled)", err)
	}
	var out bytes.Buffer
	if err := r.Export(ctx, "ws", &out); err != nil {
		t.Fatal(err)
	}
	if got := filesOf(t, out.Bytes()); got["notes.txt"] != "hello" || got["dir/deep.txt"] != want["dir/deep.txt"] || len(got) != 2 {
		t.Errorf("exported %v", got)
	}

	snap, err := r.Freeze(ctx, "ws", "ws-v1")
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Frozen || len(snap.Layers) != 1 {
		t.Errorf("snapshot %+v", snap)
	}
	ws, _ := r.Get("ws")
	if len(ws.Layers) != 2 || ws.Layers[0] != snap.Layers[0] || ws.From != "ws-v1" {
		t.Errorf("after freeze ws is %+v", ws)
	}
	if _, err := r.Create(ctx, CreateRequest{Name: "ws2", From: "ws"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a volume from a volume that is not a snapshot: %v, want ErrInvalid", err)
	}
	ws2, err := r.Create(ctx, CreateRequest{Name: "ws2", From: "ws-v1"})
	if err != nil {
		t.Fatal(err)
	}
	if ws2.SizeMiB != 64 || len(ws2.Layers) != 2 {
		t.Errorf("ws2 %+v", ws2)
	}
	out.Reset()
	if err := r.Export(ctx, "ws2", &out); err != nil {
		t.Fatal(err)
	}
	if got := filesOf(t, out.Bytes()); got["notes.txt"] != "hello" {
		t.Errorf("ws2 exported %v", got)
	}
	if err := r.Remove("ws-v1"); !errors.Is(err, ErrConflict) {
		t.Errorf("remove a snapshot volumes start from: %v, want ErrConflict", err)
	}
	for _, n := range []string{"ws", "ws2"} {
		if err := r.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(ws.Top()); !os.IsNotExist(err) {
		t.Errorf("ws's own layer stays after its removal: %v", err)
	}
	if _, err := os.Stat(snap.Layers[0]); err != nil {
		t.Errorf("the snapshot's layer went with the volumes: %v", err)
	}
	if err := r.Remove("ws-v1"); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "layers")); len(left) != 0 {
		t.Errorf("layers left: %v", left)
	}
}

// Bad archives are refused and leave the volume blank; a reopened
// registry collects what no record names and finds a damaged disk.
func TestRegistryRefusesAndRecovers(t *testing.T) {
	ctx := context.Background()
	st := &memStore{vols: map[string]Volume{}}
	dir := t.TempDir()
	r := openRegistry(t, st, dir)
	if _, err := r.Create(ctx, CreateRequest{Name: "small", SizeMiB: 16}); err != nil {
		t.Fatal(err)
	}
	big := tarOf(t, map[string]string{"big": strings.Repeat("y", 17<<20)})
	if err := r.Import(ctx, "small", bytes.NewReader(big)); !errors.Is(err, ErrInvalid) {
		t.Errorf("an archive larger than the volume: %v, want ErrInvalid", err)
	}
	for _, name := range []string{"../escape", "a/../../b", "lost+found/x"} {
		bad := tarOf(t, map[string]string{name: "x"})
		if err := r.Import(ctx, "small", bytes.NewReader(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("entry %q: %v, want ErrInvalid", name, err)
		}
	}
	if err := r.Import(ctx, "small", strings.NewReader("not a tar at all, just text that goes on")); !errors.Is(err, ErrInvalid) {
		t.Errorf("not a tar: %v, want ErrInvalid", err)
	}
	if v, _ := r.Get("small"); v.Filled {
		t.Error("a refused archive marked the volume filled")
	}

	// A whole layer no record names may be a running machine's (a fork's
	// new top a crash kept from its record): it stays. A format's partial
	// output goes.
	stray := filepath.Join(dir, "layers", "stray.qcow2")
	os.WriteFile(stray, []byte("x"), 0o600)
	partial := filepath.Join(dir, "layers", "half.qcow2.partial")
	os.WriteFile(partial, []byte("x"), 0o600)
	v, _ := r.Get("small")
	os.WriteFile(v.Top(), []byte("QFI\xfbnot really a qcow2 any more"), 0o600)
	r2 := openRegistry(t, st, dir)
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("a whole layer no record names went at a reopen: %v", err)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Error("a format's partial output survived a reopen")
	}
	if err := r2.Check(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	v, _ = r2.Get("small")
	if v.Damaged == "" {
		t.Fatal("a broken disk was not marked damaged")
	}
	if err := CheckAttach(v, nil, "d-a", ReadWrite); !errors.Is(err, ErrDamaged) {
		t.Errorf("attach a damaged volume: %v", err)
	}
}

// A fork's bookkeeping: the volume advances onto a new top over its old
// one, and a branch starts from the old one; each keeps its own content.
func TestRegistryAdvanceAndBranch(t *testing.T) {
	ctx := context.Background()
	st := &memStore{vols: map[string]Volume{}}
	r := openRegistry(t, st, t.TempDir())
	v, err := r.Create(ctx, CreateRequest{Name: "ws", SizeMiB: 32})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Import(ctx, "ws", bytes.NewReader(tarOf(t, map[string]string{"f": "base"}))); err != nil {
		t.Fatal(err)
	}
	v, _ = r.Get("ws")
	next := r.NewLayerPath()
	if err := r.overlay(ctx, next, v.Top()); err != nil {
		t.Fatal(err)
	}
	if err := r.Advance("ws", []string{"/elsewhere.qcow2", next}); !errors.Is(err, ErrConflict) {
		t.Errorf("an advance that does not extend the chain: %v", err)
	}
	if err := r.Advance("ws", append(slices.Clone(v.Layers), next)); err != nil {
		t.Fatal(err)
	}
	b, err := r.Branch(ctx, BranchName("ws", "d-1"), v, v.Layers)
	if err != nil {
		t.Fatal(err)
	}
	if b.BranchOf != "ws" || len(b.Layers) != 2 || b.Layers[0] != v.Layers[0] || b.SizeMiB != 32 {
		t.Errorf("branch %+v", b)
	}
	if _, err := r.Branch(ctx, b.Name, v, v.Layers); !errors.Is(err, ErrConflict) {
		t.Errorf("a second branch of that name: %v", err)
	}
	var out bytes.Buffer
	if err := r.Export(ctx, b.Name, &out); err != nil {
		t.Fatal(err)
	}
	if got := filesOf(t, out.Bytes()); got["f"] != "base" {
		t.Errorf("the branch holds %v", got)
	}
	// Removing the volume keeps the layer its branch stands on.
	if err := r.Remove("ws"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.Layers[0]); err != nil {
		t.Errorf("the branch's base went with the volume: %v", err)
	}
}
