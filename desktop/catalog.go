package desktop

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Snapshot is a golden snapshot in the catalog.
type Snapshot struct {
	Name     string    `json:"name"`
	Dir      string    `json:"dir"`
	Manifest *Manifest `json:"manifest"`
}

// Path is the path of one of the snapshot's files.
func (s Snapshot) Path(role string) string { return filepath.Join(s.Dir, role) }

// Catalog keeps snapshots as directories, one per name, each holding its
// files and manifest.json. A snapshot appears only when complete: it is
// written into a draft directory and renamed into place, so an interrupted
// bake leaves nothing that could be mistaken for a snapshot.
type Catalog struct {
	dir string

	mu       sync.Mutex
	verified map[string]fileStamp // name -> stamp of a manifest whose files were checked
}

type fileStamp struct {
	ino, size   uint64
	mtime       time.Time
	ctimeNsec   int64
	manifestSum string
}

const (
	manifestFile = "manifest.json"
	draftPrefix  = ".draft-"
	trashPrefix  = ".trash-"
)

// NewCatalog opens (creating) a catalog directory.
func NewCatalog(dir string) (*Catalog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot catalog: %w", err)
	}
	return &Catalog{dir: dir, verified: map[string]fileStamp{}}, nil
}

// Dir is the catalog's directory.
func (c *Catalog) Dir() string { return c.dir }

// Get returns the snapshot by name, or ErrNotFound.
func (c *Catalog) Get(name string) (Snapshot, error) {
	if err := ValidName("snapshot", name); err != nil {
		return Snapshot{}, err
	}
	dir := filepath.Join(c.dir, name)
	data, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return Snapshot{}, fmt.Errorf("%w: snapshot %q: bake one with `hostd snapshot bake --image IMAGE --name %s`", ErrNotFound, name, name)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("read snapshot %s: %w", name, err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if m.Name != name {
		return Snapshot{}, fmt.Errorf("%w: snapshot directory %s holds the manifest of %q", ErrInvalid, name, m.Name)
	}
	return Snapshot{Name: name, Dir: dir, Manifest: m}, nil
}

// List returns every complete snapshot, sorted by name, a directory or a
// link to one. Drafts and trash are skipped; a directory with a broken
// manifest is reported in bad.
func (c *Catalog) List() (snaps []Snapshot, bad map[string]error, err error) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list snapshots: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		// A snapshot may be a link to a directory elsewhere (tests link
		// one shared baked snapshot into catalogs of their own).
		if fi, err := os.Stat(filepath.Join(c.dir, e.Name())); err != nil || !fi.IsDir() {
			continue
		}
		s, err := c.Get(e.Name())
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[e.Name()] = err
			continue
		}
		snaps = append(snaps, s)
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Name < snaps[j].Name })
	return snaps, bad, nil
}

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

// Remove deletes a snapshot. Callers check first that nothing uses it.
func (c *Catalog) Remove(name string) error {
	if _, err := c.Get(name); err != nil && errors.Is(err, ErrNotFound) {
		return err
	}
	dir := filepath.Join(c.dir, name)
	// Rename first, so a half-removed snapshot is never listed.
	trash := filepath.Join(c.dir, trashPrefix+name+"-"+randomSuffix())
	if err := os.Rename(dir, trash); err != nil {
		return fmt.Errorf("remove snapshot %s: %w", name, err)
	}
	c.mu.Lock()
	delete(c.verified, name)
	c.mu.Unlock()
	removeMemoryTarget(trash)
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("remove snapshot %s: %w", name, err)
	}
	return nil
}

// removeMemoryTarget removes the file a snapshot's memory symlink points
// to: fork templates keep their RAM on tmpfs and link it from their
// directory.
func removeMemoryTarget(dir string) {
	link := filepath.Join(dir, FileMemory)
	if info, err := os.Lstat(link); err == nil && info.Mode()&os.ModeSymlink != 0 {
		if target, err := os.Readlink(link); err == nil {
			os.Remove(target)
		}
	}
}

// DraftInUse reports whether a draft directory belongs to a live process
// (its lock is held).
func DraftInUse(dir string) bool { return lockedByOther(filepath.Join(dir, ".lock")) }

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

func sizeOnly(path string) (FileSum, error) {
	info, err := os.Stat(path)
	if err != nil {
		return FileSum{}, fmt.Errorf("checksum: %w", err)
	}
	return FileSum{Size: info.Size()}, nil
}

// Verify checks a snapshot's files against its manifest's checksums. The
// result is remembered per file identity, so an unchanged snapshot is hashed
// once per process.
func (c *Catalog) Verify(s Snapshot) error {
	stamp, err := stampOf(s)
	if err != nil {
		return fmt.Errorf("verify snapshot %s: %w", s.Name, err)
	}
	c.mu.Lock()
	ok := c.verified[s.Name] == stamp
	c.mu.Unlock()
	if ok {
		return nil
	}
	for role, want := range s.Manifest.Files {
		if s.Manifest.Ephemeral {
			if info, err := os.Stat(s.Path(role)); err != nil || info.Size() != want.Size {
				return fmt.Errorf("%w: fork template %s: file %s is missing or changed size", ErrMismatch, s.Name, role)
			}
			continue
		}
		got, err := SumFile(s.Path(role))
		if err != nil {
			return fmt.Errorf("%w: snapshot %s: %w: re-bake it", ErrMismatch, s.Name, err)
		}
		if got != want {
			return fmt.Errorf("%w: snapshot %s: file %s has sha256 %s (%d bytes), its manifest says %s (%d bytes): the snapshot was changed or damaged; remove it and bake it again", ErrMismatch, s.Name, role, short(got.SHA256), got.Size, short(want.SHA256), want.Size)
		}
	}
	c.mu.Lock()
	c.verified[s.Name] = stamp
	c.mu.Unlock()
	return nil
}

func (c *Catalog) markVerified(name, dir string) {
	s, err := c.Get(name)
	if err != nil {
		return
	}
	if stamp, err := stampOf(s); err == nil {
		c.mu.Lock()
		c.verified[name] = stamp
		c.mu.Unlock()
	}
}

// stampOf identifies the current content of a snapshot's files cheaply: a
// change to any file changes its ctime.
func stampOf(s Snapshot) (fileStamp, error) {
	var st fileStamp
	data, err := os.ReadFile(filepath.Join(s.Dir, manifestFile))
	if err != nil {
		return st, err
	}
	st.manifestSum = string(data)
	for _, role := range []string{FileMemory, FileState, FileDisk} {
		info, err := os.Stat(s.Path(role))
		if err != nil {
			return st, err
		}
		sys, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return st, fmt.Errorf("stat %s: no inode", role)
		}
		st.ino ^= sys.Ino
		st.size += uint64(info.Size())
		st.ctimeNsec ^= sys.Ctim.Nano()
		if info.ModTime().After(st.mtime) {
			st.mtime = info.ModTime()
		}
	}
	return st, nil
}

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

// NewID returns a fresh random identifier with a readable prefix.
func NewID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
