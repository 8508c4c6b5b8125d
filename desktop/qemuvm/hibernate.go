package qemuvm

import (
	"os"
	"path/filepath"
)

// HibernateState is the file, in a machine's data directory, of its whole
// saved state while it hibernates.
const HibernateState = "hibernate.state"

// SaveWhole has save write a state under path's partial name, then
// renames it to path and syncs the directory: a file under path is whole,
// which is what recovery trusts when a crash ends hostd between the
// machine's end and its record. save must sync the file it writes. On
// failure nothing is left under either name.
func SaveWhole(path string, save func(partial string) error) error {
	partial := path + ".partial"
	err := save(partial)
	if err == nil {
		err = renameSynced(partial, path)
	}
	if err != nil {
		os.Remove(partial)
	}
	return err
}

// Hibernation says whether dirs hold a whole hibernation state.
func (d Dirs) Hibernation() bool {
	_, err := os.Stat(d.Path(HibernateState))
	return err == nil
}

// RemoveHibernation removes a hibernation state, whole or partial, and
// syncs the directory so the removal survives a crash: a state beside a
// machine still running is stale, its guest has moved on, and must never
// be woken from.
func (d Dirs) RemoveHibernation() error {
	os.Remove(d.Path(HibernateState))
	os.Remove(d.Path(HibernateState + ".partial"))
	return syncDir(d.DataDir)
}

// RemoveWokenState removes the state a woken machine was restored from,
// syncing its directory, before its guest first runs.
func RemoveWokenState(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// renameSynced renames a synced file into place and syncs its directory,
// so the new name survives a crash.
func renameSynced(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}
