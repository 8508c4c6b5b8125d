package store

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/warmdesk/warmdesk/hostd/store/storetest"
)

// The bbolt store is held to the records layer's suite, as the fleet's
// records on etcd are.
func TestRecordsSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), "records.db")
		return func(t *testing.T) storetest.Records {
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
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
