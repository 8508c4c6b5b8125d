// Package storetest holds every implementation of hostd's records layer
// (the single-host bbolt store, the fleet's records on etcd) to the same
// behaviour.
package storetest

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/volume"
)

// Records is the records layer: what the Manager and the volume registry
// keep.
type Records interface {
	desktop.Store
	volume.Store
}

// Opener opens the records of one place (a database file, a cluster and a
// host); opened again after the first is closed, it sees what a restarted
// hostd would.
type Opener func(t *testing.T) Records

// Run runs the suite; fresh returns the opener of a new, empty place.
func Run(t *testing.T, fresh func(t *testing.T) Opener) {
	t.Run("EmptyLoadsNothing", func(t *testing.T) {
		r := fresh(t)(t)
		defer closeRecords(t, r)
		if ds, err := r.LoadDesktops(); err != nil || len(ds) != 0 {
			t.Fatalf("desktops %+v, %v; want none", ds, err)
		}
		if vs, err := r.LoadVolumes(); err != nil || len(vs) != 0 {
			t.Fatalf("volumes %+v, %v; want none", vs, err)
		}
	})
	t.Run("RoundTripSurvivesReopen", func(t *testing.T) {
		open := fresh(t)
		r := open(t)
		d := desktop.Desktop{ID: "d-1", Name: "one", State: desktop.StateRunning, Snapshot: "minimal", Machine: []byte(`{"pid":7}`), Uses: []string{"minimal"}}
		must(t, r.PutDesktop(d))
		must(t, r.PutDesktop(desktop.Desktop{ID: "d-2", State: desktop.StatePaused}))
		must(t, r.DeleteDesktop("d-2"))
		must(t, r.PutVolume(volume.Volume{Name: "ws", SizeMiB: 32, Layers: []string{"a.qcow2"}}))
		must(t, r.PutVolume(volume.Volume{Name: "gone", SizeMiB: 8}))
		must(t, r.DeleteVolume("gone"))
		closeRecords(t, r)

		r = open(t)
		defer closeRecords(t, r)
		got, err := r.LoadDesktops()
		must(t, err)
		if len(got) != 1 || got[0].ID != "d-1" || got[0].Name != "one" || got[0].State != desktop.StateRunning ||
			got[0].Snapshot != "minimal" || string(got[0].Machine) != `{"pid":7}` || !slices.Equal(got[0].Uses, d.Uses) {
			t.Fatalf("after reopen: %+v", got)
		}
		vs, err := r.LoadVolumes()
		must(t, err)
		if len(vs) != 1 || vs[0].Name != "ws" || vs[0].SizeMiB != 32 || !slices.Equal(vs[0].Layers, []string{"a.qcow2"}) {
			t.Fatalf("volumes after reopen: %+v", vs)
		}
	})
	t.Run("PutReplaces", func(t *testing.T) {
		r := fresh(t)(t)
		defer closeRecords(t, r)
		must(t, r.PutDesktop(desktop.Desktop{ID: "d-1", State: desktop.StateCreating}))
		must(t, r.PutDesktop(desktop.Desktop{ID: "d-1", State: desktop.StateHibernated, Reason: "r"}))
		got, err := r.LoadDesktops()
		must(t, err)
		if len(got) != 1 || got[0].State != desktop.StateHibernated || got[0].Reason != "r" {
			t.Fatalf("after two puts: %+v", got)
		}
	})
	t.Run("DeleteOfNothingIsNoError", func(t *testing.T) {
		r := fresh(t)(t)
		defer closeRecords(t, r)
		must(t, r.DeleteDesktop("d-none"))
		must(t, r.DeleteVolume("none"))
	})
	t.Run("ConcurrentWritersLoseNothing", func(t *testing.T) {
		r := fresh(t)(t)
		defer closeRecords(t, r)
		const writers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					id := fmt.Sprintf("d-%d-%d", w, i)
					if err := r.PutDesktop(desktop.Desktop{ID: id, State: desktop.StateCreating}); err != nil {
						errs <- err
					}
					if err := r.PutDesktop(desktop.Desktop{ID: id, State: desktop.StateRunning}); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, err := r.LoadDesktops()
		must(t, err)
		if len(got) != writers*each {
			t.Fatalf("%d records, want %d", len(got), writers*each)
		}
		for _, d := range got {
			if d.State != desktop.StateRunning {
				t.Fatalf("%s is %s, want its last write (running)", d.ID, d.State)
			}
		}
	})
}

func closeRecords(t *testing.T, r Records) {
	t.Helper()
	if c, ok := r.(io.Closer); ok {
		must(t, c.Close())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
