package desktop

import (
	"crypto/rand"
	"encoding/hex"
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

// NewID returns a fresh random identifier with a readable prefix.
func NewID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
