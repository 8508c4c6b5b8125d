// Package store keeps hostd's records (desktops) in an embedded bbolt
// database, one JSON value per desktop and per volume, so that a restarted hostd finds
// every desktop again.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/volume"
)

var (
	desktopsBucket = []byte("desktops")
	volumesBucket  = []byte("volumes")
)

// Records is the records layer hostd runs on: this package's bbolt Store
// on a single host, the fleet's records on etcd (fleet.Records) in a
// fleet. Both are held to storetest's suite.
type Records interface {
	desktop.Store
	volume.Store
	Close() error
}

var _ Records = (*Store)(nil)

// Store is a bbolt database file.
type Store struct {
	db *bolt.DB
}

var (
	_ desktop.Store = (*Store)(nil)
	_ volume.Store  = (*Store)(nil)
)

// ErrLocked is returned when another hostd holds the database.
var ErrLocked = errors.New("the records store is in use by another hostd")

// Open opens (creating) the database. It fails with ErrLocked within a
// second when another process has it open.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w (%s): stop it, or talk to it through its API", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open records %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(desktopsBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(volumesBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open records %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// LoadDesktops returns every desktop record.
func (s *Store) LoadDesktops() ([]desktop.Desktop, error) {
	var out []desktop.Desktop
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(desktopsBucket).ForEach(func(k, v []byte) error {
			var d desktop.Desktop
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("desktop record %s: %w", k, err)
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}

// PutDesktop writes a desktop record (durably: bbolt syncs each commit).
func (s *Store) PutDesktop(d desktop.Desktop) error {
	v, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(desktopsBucket).Put([]byte(d.ID), v)
	})
}

// DeleteDesktop removes a desktop record.
func (s *Store) DeleteDesktop(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(desktopsBucket).Delete([]byte(id))
	})
}

// LoadVolumes returns every volume record.
func (s *Store) LoadVolumes() ([]volume.Volume, error) {
	var out []volume.Volume
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(volumesBucket).ForEach(func(k, v []byte) error {
			var vol volume.Volume
			if err := json.Unmarshal(v, &vol); err != nil {
				return fmt.Errorf("volume record %s: %w", k, err)
			}
			out = append(out, vol)
			return nil
		})
	})
	return out, err
}

// PutVolume writes a volume record.
func (s *Store) PutVolume(v volume.Volume) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(volumesBucket).Put([]byte(v.Name), b)
	})
}

// DeleteVolume removes a volume record.
func (s *Store) DeleteVolume(name string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(volumesBucket).Delete([]byte(name))
	})
}
