package desktop_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/volume"
)

type volStore struct {
	mu   sync.Mutex
	vols map[string]volume.Volume
}

func (s *volStore) LoadVolumes() ([]volume.Volume, error) { return nil, nil }
func (s *volStore) PutVolume(v volume.Volume) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vols[v.Name] = v
	return nil
}
func (s *volStore) DeleteVolume(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.vols, name)
	return nil
}

func TestVolumesRefusedWithoutARegistry(t *testing.T) {
	f, cat := fakeSetup(t)
	m := desktop.NewManager(context.Background(), desktop.Config{Driver: f, Store: desktoptest.NewMemStore(), Catalog: cat})
	_, err := m.Create(context.Background(), desktop.CreateRequest{Snapshot: "golden", Volumes: []volume.Mount{{Name: "ws", Mount: "/w"}}})
	if !errors.Is(err, desktop.ErrInvalid) || !strings.Contains(err.Error(), "not enabled") {
		t.Fatalf("create with a volume and no registry: %v", err)
	}
	if len(m.List()) != 0 {
		t.Errorf("a refused create left %v", m.List())
	}
}

// A create whose volume cannot be attached (the fake driver has no
// hot-plug) fails whole: no desktop stays, and the volume is free again.
func TestCreateWithAVolumeIsAllOrNothing(t *testing.T) {
	tools, err := volume.FindTools()
	if err != nil {
		t.Skip(err)
	}
	reg, err := volume.Open(volume.Config{Dir: t.TempDir(), Store: &volStore{vols: map[string]volume.Volume{}}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := reg.Create(ctx, volume.CreateRequest{Name: "ws", SizeMiB: 16}); err != nil {
		t.Fatal(err)
	}
	f, cat := fakeSetup(t)
	store := desktoptest.NewMemStore()
	m := desktop.NewManager(ctx, desktop.Config{Driver: f, Store: store, Catalog: cat, Volumes: reg})
	for name, vols := range map[string][]volume.Mount{
		"unknown volume": {{Name: "nope", Mount: "/w"}},
		"system mount":   {{Name: "ws", Mount: "/etc"}},
		"no hot-plug":    {{Name: "ws", Mount: "/w"}},
	} {
		if _, err := m.Create(ctx, desktop.CreateRequest{Snapshot: "golden", Volumes: vols}); err == nil {
			t.Errorf("%s: the create succeeded", name)
		}
		if ds := m.List(); len(ds) != 0 {
			t.Errorf("%s: a failed create left %+v", name, ds)
		}
		if recs, _ := store.LoadDesktops(); len(recs) != 0 {
			t.Errorf("%s: a failed create left records %+v", name, recs)
		}
		if h := m.Volumes().Holders("ws"); len(h) != 0 {
			t.Errorf("%s: ws is still held by %v", name, h)
		}
	}
	if err := m.Volumes().Remove("ws"); err != nil {
		t.Errorf("remove a volume nothing holds: %v", err)
	}
}
