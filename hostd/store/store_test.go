package store

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

func TestRoundTripAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d := desktop.Desktop{ID: "d-1", Name: "one", State: desktop.StateRunning, Machine: []byte(`{"pid":7}`)}
	if err := s.PutDesktop(d); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDesktop(desktop.Desktop{ID: "d-2", State: desktop.StatePaused}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDesktop("d-2"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.LoadDesktops()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "d-1" || got[0].State != desktop.StateRunning || string(got[0].Machine) != `{"pid":7}` {
		t.Fatalf("after reopen: %+v", got)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Open(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}
