package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/internal/qcow2"
)

// SnapshotFileURL is where the fleet host whose API is at base
// (https://HOST:PORT between hosts) serves one file of a snapshot: its
// manifest ("manifest.json") or one of its files by role.
func SnapshotFileURL(base, name, file string) string {
	return base + "/v1/fleet/snapshots/" + url.PathEscape(name) + "/" + url.PathEscape(file)
}

// ManifestFile is the name a snapshot's manifest is served under.
const ManifestFile = "manifest.json"

// PullStats says what a pull moved.
type PullStats struct {
	Bytes    int64
	Duration time.Duration
	Resumed  int // range requests that continued a file cut short
}

// PullProgress is how far a pull has come: Done of Total bytes, over all
// the snapshot's files (File is the one arriving).
type PullProgress struct {
	Snapshot    string
	File        string
	Done, Total int64
}

// pullAttempts bounds the requests for one file: a transfer cut short is
// continued from where it stopped (a range request) this many times.
const pullAttempts = 4

// Puller copies snapshots from other hosts of the fleet.
type Puller struct {
	HTTP  *http.Client
	Token string // the fleet's daemon token
	// Accept checks a manifest before any file moves (the machine shape
	// this host restores into); nil accepts all.
	Accept func(*desktop.Manifest) error
	// Progress hears how far the pull has come: once before the first
	// byte, then as each file's bytes arrive; nil for none.
	Progress func(PullProgress)
	// EnsureParent makes sure the snapshot a layered one is layered on is
	// here first (pulling it too); nil: layered snapshots are refused.
	EnsureParent func(ctx context.Context, name string) error
}

// Pull copies snapshot name from the host whose API is at base
// (SnapshotFileURL) into cat: the
// manifest first, then each file, checked against the manifest's SHA-256
// as it arrives and committed only when all match. A fork's template
// (ephemeral) does not move. A snapshot layered on another has its parent
// made sure of first (EnsureParent); its disk then names the file it
// layers on by the path that file has on its own host, so it moves only
// when that path holds the file here too (hosts that keep their snapshots
// at the same path, the same --state-dir).
func (p Puller) Pull(ctx context.Context, base, name string, cat *desktop.Catalog) (desktop.Snapshot, PullStats, error) {
	start := time.Now()
	var stats PullStats
	raw, err := p.get(ctx, SnapshotFileURL(base, name, ManifestFile))
	if err != nil {
		return desktop.Snapshot{}, stats, fmt.Errorf("pull snapshot %s from %s: %w", name, base, err)
	}
	m, err := desktop.ParseManifest(raw)
	if err != nil {
		return desktop.Snapshot{}, stats, fmt.Errorf("pull snapshot %s from %s: %w", name, base, err)
	}
	switch {
	case m.Name != name:
		return desktop.Snapshot{}, stats, fmt.Errorf("%w: pull snapshot %s: %s served the manifest of %q", desktop.ErrMismatch, name, base, m.Name)
	case m.Ephemeral:
		return desktop.Snapshot{}, stats, fmt.Errorf("%w: snapshot %s is a fork's template: it lives on its host only", desktop.ErrInvalid, name)
	case m.Parent != "" && p.EnsureParent == nil:
		return desktop.Snapshot{}, stats, fmt.Errorf("%w: snapshot %s is layered on %s, and this pull takes no parents: create its desktops on %s", desktop.ErrInvalid, name, m.Parent, base)
	}
	if m.Parent != "" {
		if err := p.EnsureParent(ctx, m.Parent); err != nil {
			return desktop.Snapshot{}, stats, fmt.Errorf("pull snapshot %s: its parent %s: %w", name, m.Parent, err)
		}
	}
	if p.Accept != nil {
		if err := p.Accept(m); err != nil {
			return desktop.Snapshot{}, stats, fmt.Errorf("pull snapshot %s: %w", name, err)
		}
	}
	draft, err := cat.Begin(name)
	if err != nil {
		return desktop.Snapshot{}, stats, err
	}
	defer draft.Abort()
	roles := []string{desktop.FileState, desktop.FileDisk, desktop.FileMemory}
	var total int64
	for _, role := range roles {
		want, ok := m.Files[role]
		if !ok {
			return desktop.Snapshot{}, stats, fmt.Errorf("%w: snapshot %s's manifest lists no %s", desktop.ErrInvalid, name, role)
		}
		total += want.Size
	}
	for _, role := range roles {
		before := stats.Bytes
		tell := func(done int64) {
			if p.Progress != nil {
				p.Progress(PullProgress{Snapshot: name, File: role, Done: before + done, Total: total})
			}
		}
		tell(0)
		n, resumed, err := p.pullFile(ctx, SnapshotFileURL(base, name, role), draft.Path(role), role, m.Files[role], tell)
		stats.Bytes += n
		stats.Resumed += resumed
		if err != nil {
			return desktop.Snapshot{}, stats, fmt.Errorf("pull snapshot %s from %s: %w", name, base, err)
		}
	}
	if err := backingHere(draft.Path(desktop.FileDisk), filepath.Join(cat.Dir(), name)); err != nil {
		return desktop.Snapshot{}, stats, fmt.Errorf("pull snapshot %s: %w", name, err)
	}
	s, err := draft.CommitAs(m)
	stats.Duration = time.Since(start)
	return s, stats, err
}

// pullFile fetches one file into path, hashing it as it is written, and
// checks it against want; a transfer cut short is continued with a range
// request.
func (p Puller) pullFile(ctx context.Context, u, path, role string, want desktop.FileSum, tell func(done int64)) (int64, int, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := sha256.New()
	var got int64
	resumed := 0
	var last error
	for attempt := 0; attempt < pullAttempts && got < want.Size; attempt++ {
		if attempt > 0 {
			resumed++
		}
		var n int64
		n, last = p.fetchFrom(ctx, u, got, f, h, role, want.Size, tell)
		got += n
		if ctx.Err() != nil {
			return got, resumed, ctx.Err()
		}
		if last != nil && !errors.Is(last, io.ErrUnexpectedEOF) {
			return got, resumed, last
		}
	}
	if got != want.Size {
		return got, resumed, fmt.Errorf("%s: %d of %d bytes arrived: %w", role, got, want.Size, last)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != want.SHA256 {
		return got, resumed, fmt.Errorf("%w: %s arrived with sha256 %s, the manifest says %s: refused", desktop.ErrMismatch, role, sum[:12], want.SHA256[:min(12, len(want.SHA256))])
	}
	if err := f.Sync(); err != nil {
		return got, resumed, err
	}
	return got, resumed, f.Close()
}

// fetchFrom copies the file from offset on into w and h. A body that ends
// before the file does is io.ErrUnexpectedEOF, to be continued.
func (p Puller) fetchFrom(ctx context.Context, u string, offset int64, w io.Writer, h hash.Hash, role string, size int64, tell func(done int64)) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+p.Token)
	if offset > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
	}
	resp, err := p.HTTP.Do(req)
	if err != nil {
		// The host may answer the next request.
		return 0, fmt.Errorf("%w (%v)", io.ErrUnexpectedEOF, err)
	}
	defer resp.Body.Close()
	switch {
	case offset == 0 && resp.StatusCode == http.StatusOK:
	case offset > 0 && resp.StatusCode == http.StatusPartialContent:
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return 0, fmt.Errorf("%s: %s: %s", role, resp.Status, b)
	}
	sink := &progressWriter{w: io.MultiWriter(w, h), tell: func(done int64) { tell(offset + done) }}
	n, err := io.Copy(sink, io.LimitReader(resp.Body, size-offset))
	if err == nil && offset+n < size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && ctx.Err() == nil {
		err = fmt.Errorf("%w (%v)", io.ErrUnexpectedEOF, err)
	}
	return n, err
}

// get fetches a small resource (the manifest).
func (p Puller) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.Token)
	resp, err := p.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", desktop.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	return b, nil
}

// progressWriter tells how many bytes went through it so far.
type progressWriter struct {
	w    io.Writer
	done int64
	tell func(done int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if n > 0 {
		p.done += int64(n)
		p.tell(p.done)
	}
	return n, err
}

// backingHere checks that the file a pulled disk layers on is on this
// host: the disk names it by the path it has on the host it came from (a
// relative name is taken from dir, where the disk will be).
func backingHere(disk, dir string) error {
	backing, err := qcow2.BackingFile(disk)
	if err != nil {
		return err
	}
	if backing == "" {
		return nil
	}
	if !filepath.IsAbs(backing) {
		backing = filepath.Join(dir, backing)
	}
	if _, err := os.Stat(backing); err != nil {
		return fmt.Errorf("%w: its disk layers on %s, which this host lacks: a snapshot's disk names the layer under it by its path on the host that made it, so the hosts of a fleet must keep snapshots and images at the same paths (the same --state-dir and --cache-dir)", desktop.ErrMismatch, backing)
	}
	return nil
}
