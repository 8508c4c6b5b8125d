package desktop

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
)

// The warm pools follow the catalog: every golden snapshot this host can
// restore gets one, whoever put it there. A bake from the CLI, a fleet's
// pull or a snapshot removed by hand all change the catalog's directory
// while hostd serves; the Manager watches that directory (inotify) and
// starts or stops pools as snapshots appear and go, instead of only at
// start.

// warmAll brings the pools in step with the catalog: each golden
// (non-ephemeral), restorable snapshot is warmed, and the pools of
// snapshots gone since the last call are stopped. Warm keeps the machines
// a pool already holds for the same bake, so calling it again is cheap.
func (m *Manager) warmAll() {
	w, ok := m.drv.(Warmer)
	if !ok || m.capacity.limits.PoolSize <= 0 {
		return
	}
	snaps, _, err := m.catalog.List()
	if err != nil {
		m.log.Warn("warm pools: list snapshots", "err", err)
		return
	}
	var warm []Snapshot
	for _, s := range snaps {
		if s.Manifest.Ephemeral || len(s.Manifest.Machine.Mismatch(m.drv.Shape())) > 0 {
			continue
		}
		warm = append(warm, s)
	}
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	for _, s := range warm {
		if _, had := m.pooled[s.Name]; !had {
			m.log.Info("warm pool started", "snapshot", s.Name, "machines", m.capacity.limits.PoolSize)
		}
	}
	next := make(map[string]Snapshot, len(warm))
	for _, s := range warm {
		next[s.Name] = s
		w.Warm(s, m.capacity.limits.PoolSize)
	}
	for name, s := range m.pooled {
		if _, still := next[name]; !still {
			w.Warm(s, 0)
			m.log.Info("warm pool stopped: its snapshot left the catalog", "snapshot", name)
		}
	}
	m.pooled = next
}

// Warm (re)starts the warm pool of one snapshot, e.g. after a bake.
func (m *Manager) Warm(name string) error {
	s, err := m.catalog.Get(name)
	if err != nil {
		return err
	}
	if w, ok := m.drv.(Warmer); ok && !s.Manifest.Ephemeral {
		w.Warm(s, m.capacity.limits.PoolSize)
	}
	return nil
}

// watchCatalog calls warmAll whenever an entry of the catalog's directory
// is added, renamed or removed, until the Manager closes. Drafts and trash
// (dot names) are the steps of a bake or a removal, not its end, so they
// are ignored. A watch that cannot start is logged: pools then follow the
// catalog only at hostd's start, as they did before.
func (m *Manager) watchCatalog() {
	if _, ok := m.drv.(Warmer); !ok || m.capacity.limits.PoolSize <= 0 {
		return
	}
	f, err := watchDir(m.catalog.Dir())
	if err != nil {
		m.log.Warn("snapshots baked while hostd runs get no warm pool until it restarts", "err", err)
		return
	}
	go func() {
		<-m.closed
		f.Close()
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				if !errors.Is(err, os.ErrClosed) {
					m.log.Warn("watch the snapshot catalog", "err", err)
				}
				return
			}
			names, overflow := parseInotify(buf[:n])
			if overflow || slices.ContainsFunc(names, func(n string) bool { return !strings.HasPrefix(n, ".") }) {
				m.warmAll()
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
