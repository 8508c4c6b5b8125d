package store

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
)

// A state directory whose single-host records hold desktops does not
// become a fleet host; an empty one does.
func TestSingleHostRecordsStayOutOfAFleet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.db")
	if err := RefuseFleet(path); err != nil {
		t.Fatalf("no records file: %v", err)
	}
	st, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutDesktop(desktop.Desktop{ID: "d-1", State: desktop.StateRunning}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := RefuseFleet(path); err == nil || !strings.Contains(err.Error(), "1 desktops and 0 volumes") {
		t.Fatalf("records with a desktop: %v, want refused", err)
	}
}
