package desktop

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// The warm pools follow the catalog: every golden snapshot this host can
// restore gets one, whoever put it there. A bake from the CLI, a fleet's
// pull or a snapshot removed by hand all change the catalog's directory
// while hostd serves; the Manager watches that directory (inotify) and
// starts or stops pools as snapshots appear and go, instead of only at
// start.

// pools are the warm pools of a driver that keeps them (a Warmer).
type pools struct {
	drv Driver
	// w is drv as a Warmer; nil: the driver keeps no pools.
	w       Warmer
	size    int // machines per pool (Limits.PoolSize)
	catalog *Catalog
	log     *slog.Logger
	// closed ends the catalog's watch (the Manager closes).
	closed <-chan struct{}

	// mu guards pooled, the snapshots whose warm pools run.
	mu     sync.Mutex
	pooled map[string]Snapshot
}

// sync brings the pools in step with the catalog: each golden
// (non-ephemeral), restorable snapshot is warmed, and the pools of
// snapshots gone since the last call are stopped. Warm keeps the machines
// a pool already holds for the same bake, so calling it again is cheap.
func (p *pools) sync() {
	w := p.w
	if w == nil || p.size <= 0 {
		return
	}
	snaps, _, err := p.catalog.List()
	if err != nil {
		p.log.Warn("warm pools: list snapshots", "err", err)
		return
	}
	var warm []Snapshot
	for _, s := range snaps {
		if s.Manifest.Ephemeral || len(s.Manifest.Machine.Mismatch(p.drv.Shape())) > 0 {
			continue
		}
		warm = append(warm, s)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range warm {
		if _, had := p.pooled[s.Name]; !had {
			p.log.Info("warm pool started", "snapshot", s.Name, "machines", p.size)
		}
	}
	next := make(map[string]Snapshot, len(warm))
	for _, s := range warm {
		next[s.Name] = s
		w.Warm(s, p.size)
	}
	for name, s := range p.pooled {
		if _, still := next[name]; !still {
			w.Warm(s, 0)
			p.log.Info("warm pool stopped: its snapshot left the catalog", "snapshot", name)
		}
	}
	p.pooled = next
}

// start warms a new golden snapshot's pool (after a snapshot of a
// desktop), when pools are on.
func (p *pools) start(s Snapshot) {
	if p.w != nil && p.size > 0 {
		p.w.Warm(s, p.size)
	}
}

// stop ends a snapshot's pool before the snapshot goes.
func (p *pools) stop(s Snapshot) {
	if p.w != nil {
		p.w.Warm(s, 0)
	}
}

// Warm (re)starts the warm pool of one snapshot, e.g. after a bake.
func (l *Lineage) Warm(name string) error {
	s, err := l.m.catalog.Get(name)
	if err != nil {
		return err
	}
	if w := l.pools.w; w != nil && !s.Manifest.Ephemeral {
		w.Warm(s, l.pools.size)
	}
	return nil
}

// watch calls sync whenever an entry of the catalog's directory is added,
// renamed or removed, until the Manager closes. Drafts and trash (dot
// names) are the steps of a bake or a removal, not its end, so they are
// ignored. A watch that cannot start is logged: pools then follow the
// catalog only at hostd's start, as they did before.
func (p *pools) watch() {
	if p.w == nil || p.size <= 0 {
		return
	}
	f, err := watchDir(p.catalog.Dir())
	if err != nil {
		p.log.Warn("snapshots baked while hostd runs get no warm pool until it restarts", "err", err)
		return
	}
	go func() {
		<-p.closed
		f.Close()
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				if !errors.Is(err, os.ErrClosed) {
					p.log.Warn("watch the snapshot catalog", "err", err)
				}
				return
			}
			names, overflow := parseInotify(buf[:n])
			if overflow || slices.ContainsFunc(names, func(n string) bool { return !strings.HasPrefix(n, ".") }) {
				p.sync()
			}
		}
	}()
}

// catalogEvents are the changes of a directory's entries that can add or
// remove a snapshot: a draft renamed into place, a link made by hand, a
// snapshot renamed to trash or deleted.
const catalogEvents = syscall.IN_CREATE | syscall.IN_MOVED_TO | syscall.IN_MOVED_FROM | syscall.IN_DELETE | syscall.IN_ONLYDIR

// watchDir returns an inotify descriptor watching dir's entries, as a
// pollable file: a blocked Read returns os.ErrClosed when it is closed.
func watchDir(dir string) (*os.File, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, catalogEvents); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), "inotify:"+dir), nil
}

// parseInotify reads the names of a buffer of inotify events; overflow
// says the kernel dropped events (its queue was full), so the caller must
// look at the whole directory again. A truncated event ends the parse.
func parseInotify(buf []byte) (names []string, overflow bool) {
	const header = syscall.SizeofInotifyEvent
	for len(buf) >= header {
		mask := binary.NativeEndian.Uint32(buf[4:8])
		n := int(binary.NativeEndian.Uint32(buf[12:16]))
		if n > len(buf)-header {
			return names, overflow
		}
		if mask&syscall.IN_Q_OVERFLOW != 0 {
			overflow = true
		}
		if name := buf[header : header+n]; n > 0 {
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			names = append(names, string(name))
		}
		buf = buf[header+n:]
	}
	return names, overflow
}
