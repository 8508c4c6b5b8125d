// A snapshot being written: a draft directory, committed by a rename so an
// interrupted bake leaves nothing that could be taken for a snapshot.

package desktop

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Draft is a snapshot being written. Commit publishes it; Abort removes it.
type Draft struct {
	Name string
	Dir  string
	c    *Catalog
	lock *os.File
}

// Begin starts a draft for a new snapshot. It fails with ErrConflict when a
// snapshot of that name exists (a good snapshot is never overwritten).
func (c *Catalog) Begin(name string) (*Draft, error) {
	if err := ValidName("snapshot", name); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.dir, name)); err == nil {
		return nil, fmt.Errorf("%w: snapshot %q exists: remove it first (`hostd snapshot rm %s`) or choose another name", ErrConflict, name, name)
	}
	dir := filepath.Join(c.dir, draftPrefix+name+"-"+randomSuffix())
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("begin snapshot %s: %w", name, err)
	}
	// The lock tells CleanDrafts this draft is live.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("begin snapshot %s: lock draft: %w", name, err)
	}
	return &Draft{Name: name, Dir: dir, c: c, lock: lock}, nil
}

// Path is the path of one of the draft's files.
func (d *Draft) Path(role string) string { return filepath.Join(d.Dir, role) }

// Commit checksums the draft's files into m, writes the manifest and renames
// the draft into place. The draft is gone afterwards either way.
func (d *Draft) Commit(m *Manifest) (Snapshot, error) {
	defer d.Abort()
	m.Name = d.Name
	m.Format = ManifestFormat
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}
	m.Files = map[string]FileSum{}
	for _, role := range []string{FileMemory, FileState, FileDisk} {
		var sum FileSum
		var err error
		if m.Ephemeral {
			// A fork template lives for its forks only, inside this
			// hostd, and hashing its RAM would cost a second or more of
			// the fork: record sizes, not checksums.
			sum, err = sizeOnly(d.Path(role))
		} else {
			sum, err = SumFile(d.Path(role))
		}
		if err != nil {
			return Snapshot{}, fmt.Errorf("commit snapshot %s: %w", d.Name, err)
		}
		m.Files[role] = sum
	}
	return d.publish(m)
}

// CommitAs publishes the draft under m as it is, its files' sums included:
// for files the caller checked against m as it wrote them (a snapshot
// pulled from another host of a fleet). The draft is gone afterwards
// either way.
func (d *Draft) CommitAs(m *Manifest) (Snapshot, error) {
	defer d.Abort()
	if m.Name != d.Name {
		return Snapshot{}, fmt.Errorf("%w: commit snapshot %s under the manifest of %q", ErrInvalid, d.Name, m.Name)
	}
	for _, role := range []string{FileMemory, FileState, FileDisk} {
		info, err := os.Stat(d.Path(role))
		if err != nil || info.Size() != m.Files[role].Size {
			return Snapshot{}, fmt.Errorf("%w: commit snapshot %s: file %s is missing or not the manifest's size", ErrMismatch, d.Name, role)
		}
	}
	return d.publish(m)
}

// publish writes m into the draft and renames the draft into place.
func (d *Draft) publish(m *Manifest) (Snapshot, error) {
	if err := m.Validate(); err != nil {
		return Snapshot{}, fmt.Errorf("commit snapshot %s: %w", d.Name, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Snapshot{}, fmt.Errorf("commit snapshot %s: %w", d.Name, err)
	}
	if err := writeFileSync(filepath.Join(d.Dir, manifestFile), data); err != nil {
		return Snapshot{}, fmt.Errorf("commit snapshot %s: %w", d.Name, err)
	}
	os.Remove(filepath.Join(d.Dir, ".lock"))
	final := filepath.Join(d.c.dir, d.Name)
	// rename(2) refuses a non-empty target, so a snapshot that appeared
	// meanwhile is not replaced.
	if err := os.Rename(d.Dir, final); err != nil {
		return Snapshot{}, fmt.Errorf("%w: commit snapshot %s: %w", ErrConflict, d.Name, err)
	}
	d.Dir = final
	d.c.markVerified(d.Name, final)
	return Snapshot{Name: d.Name, Dir: final, Manifest: m}, nil
}

// Abort removes an uncommitted draft. Safe to call after Commit.
func (d *Draft) Abort() {
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
	if strings.HasPrefix(filepath.Base(d.Dir), draftPrefix) {
		removeMemoryTarget(d.Dir)
		os.RemoveAll(d.Dir)
	}
}

// CleanDrafts removes drafts and trash left by interrupted runs. A draft a
// live process holds (its lock is taken) is left alone.
func (c *Catalog) CleanDrafts() error {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("clean snapshot drafts: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(c.dir, name)
		switch {
		case strings.HasPrefix(name, trashPrefix):
			removeMemoryTarget(path)
			os.RemoveAll(path)
		case strings.HasPrefix(name, draftPrefix):
			if lockedByOther(filepath.Join(path, ".lock")) {
				continue
			}
			removeMemoryTarget(path)
			os.RemoveAll(path)
		}
	}
	return nil
}

// DraftInUse reports whether a draft directory belongs to a live process
// (its lock is held).
func DraftInUse(dir string) bool { return lockedByOther(filepath.Join(dir, ".lock")) }

func lockedByOther(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
