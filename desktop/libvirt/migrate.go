package libvirt

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu"
)

// Migrations go over unix sockets in the machine's run directory: libvirt's
// monitor passthrough cannot hand QEMU a file descriptor, and libvirt's
// seccomp sandbox (spawn=deny) forbids exec: URIs. For a restore QEMU
// listens (migrate-incoming unix:PATH) and hostd feeds it the state file;
// for a save hostd listens and QEMU writes to it (migrate unix:PATH).

// restoreTimeout bounds loading a state; saveTimeout writing one (the RAM
// of a 1 GiB guest moves in about a second here).
const (
	restoreTimeout = time.Minute
	saveTimeout    = 2 * time.Minute
)

// migrationStatus is the data of a MIGRATION event and of query-migrate.
type migrationStatus struct {
	Status    string `json:"status"`
	ErrorDesc string `json:"error-desc"`
}

// parseMigrationEvent reads the status out of a MIGRATION event's data.
func parseMigrationEvent(details []byte) (string, error) {
	var st migrationStatus
	if err := json.Unmarshal(details, &st); err != nil {
		return "", fmt.Errorf("malformed MIGRATION event %.80q: %w", details, err)
	}
	if st.Status == "" {
		return "", fmt.Errorf("MIGRATION event without a status: %.80q", details)
	}
	return st.Status, nil
}

func (m *Machine) setCapabilities(ctx context.Context, ignoreShared bool) error {
	caps := []map[string]any{
		{"capability": "x-ignore-shared", "state": ignoreShared},
		{"capability": "events", "state": true},
	}
	if err := m.qmp(ctx, "migrate-set-capabilities", map[string]any{"capabilities": caps}, nil); err != nil {
		return fmt.Errorf("set migration capabilities: %w", err)
	}
	return nil
}

// migrationWatch is a subscription to one domain's QMP events, made before
// the command that starts a migration so that its end cannot be missed.
type migrationWatch struct {
	m      *Machine
	events <-chan golibvirt.DomainEvent
	cancel context.CancelFunc
}

func (m *Machine) watchMigration(ctx context.Context) (*migrationWatch, error) {
	l, err := m.drv.conn.get(ctx)
	if err != nil {
		return nil, err
	}
	// The subscription lives until close, not until ctx: a caller may
	// abandon the wait, but the stream must still be shut down.
	sctx, cancel := context.WithCancel(context.Background())
	name := m.record().Domain
	events, err := call(ctx, m.drv.conn, func(*golibvirt.Libvirt) (<-chan golibvirt.DomainEvent, error) {
		return l.SubscribeQEMUEvents(sctx, name)
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("subscribe to QMP events: %w", err)
	}
	return &migrationWatch{m: m, events: events, cancel: cancel}, nil
}

// wait waits for the MIGRATION event that ends the migration.
func (w *migrationWatch) wait(ctx context.Context) error {
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				return fmt.Errorf("%w: the connection to libvirtd was lost during the migration", desktop.ErrUnavailable)
			}
			if ev.Event != "MIGRATION" {
				continue
			}
			status, err := parseMigrationEvent(ev.Details)
			if err != nil {
				return err
			}
			switch status {
			case "completed":
				return nil
			case "failed", "cancelled":
				var q migrationStatus
				w.m.qmp(ctx, "query-migrate", nil, &q)
				why := q.ErrorDesc
				if why == "" { // an incoming migration reports only to QEMU's log
					why = "QEMU's log ends:\n" + qemu.LogTail(w.m.logPath(), 4)
				}
				return fmt.Errorf("migration %s: %s", status, why)
			}
		case <-w.m.exited:
			return fmt.Errorf("QEMU ended during the migration: it %s", w.m.ExitReason())
		case <-ctx.Done():
			return fmt.Errorf("%w: migration did not end: %w", desktop.ErrUnavailable, ctx.Err())
		}
	}
}

// close ends the subscription. go-libvirt's stream blocks on sending an
// event nobody reads, so the channel is drained until it closes.
func (w *migrationWatch) close() {
	w.cancel()
	go func() {
		for range w.events {
		}
	}()
}

// restore loads a saved state into a domain waiting with -incoming defer,
// then resumes it and checks that libvirt reports it running.
func (m *Machine) restore(ctx context.Context, statePath string, ignoreShared bool) error {
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	if err := m.load(ctx, statePath, ignoreShared); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// Before the guest runs, so that stale agent output reaches hostd and
	// not libvirt (drain.go).
	if c := m.claimAgent(ctx); c != nil {
		m.drainAgentAsync(c)
	}
	// The state was saved from a stopped machine, so QEMU is paused now,
	// not inmigrate, and the resume takes.
	if err := m.resume(ctx); err != nil {
		return fmt.Errorf("restore: start guest: %w", err)
	}
	return nil
}

// load feeds a state file to QEMU's incoming migration socket and waits
// for QEMU to report the migration completed.
func (m *Machine) load(ctx context.Context, statePath string, ignoreShared bool) error {
	f, err := os.Open(statePath)
	if err != nil {
		return err
	}
	defer f.Close()
	rec := m.record()
	sock := rec.path("incoming.sock")
	os.Remove(sock)
	defer os.Remove(sock)
	if err := m.setCapabilities(ctx, ignoreShared); err != nil {
		return err
	}
	w, err := m.watchMigration(ctx)
	if err != nil {
		return err
	}
	defer w.close()
	// migrate-incoming returns once QEMU listens on the socket.
	if err := m.qmp(ctx, "migrate-incoming", map[string]string{"uri": "unix:" + sock}, nil); err != nil {
		return err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("connect to QEMU's incoming migration: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	_, sendErr := io.Copy(c, f)
	stop()
	c.Close()
	// A refused state shows as a broken pipe here; QEMU's own account (the
	// event, or its exit and log) says why.
	if err := w.wait(ctx); err != nil {
		if sendErr != nil {
			return fmt.Errorf("%w (sending the state: %v)", err, sendErr)
		}
		return err
	}
	if sendErr != nil {
		return fmt.Errorf("send state: %w", sendErr)
	}
	return nil
}

// saveState migrates a stopped machine's state into a new file: QEMU
// connects to a socket hostd listens on, and hostd writes what arrives.
func (m *Machine) saveState(ctx context.Context, path string, ignoreShared bool) error {
	rec := m.record()
	sock := rec.path("save.sock")
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := m.setCapabilities(ctx, ignoreShared); err != nil {
		return err
	}
	w, err := m.watchMigration(ctx)
	if err != nil {
		return err
	}
	defer w.close()
	copied := make(chan error, 1)
	go func() { copied <- receive(ctx, ln, f) }()
	if err := m.qmp(ctx, "migrate", map[string]string{"uri": "unix:" + sock}, nil); err != nil {
		ln.Close()
		<-copied
		return err
	}
	if err := w.wait(ctx); err != nil {
		ln.Close() // QEMU may never have connected
		<-copied
		return err
	}
	// QEMU closes the socket after it reports completion.
	select {
	case err = <-copied:
	case <-ctx.Done():
		ln.Close()
		<-copied
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("receive state: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// receive accepts QEMU's one connection and copies it into w until QEMU
// closes it.
func receive(ctx context.Context, ln net.Listener, w io.Writer) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_, err = io.Copy(w, c)
	return err
}

// migrateInto moves a stopped machine's whole state (RAM included) into
// another domain waiting with -incoming defer, QEMU to QEMU over a unix
// socket the destination listens on.
func migrateInto(ctx context.Context, src, dst *Machine) error {
	sock := dst.record().path("incoming.sock")
	os.Remove(sock)
	defer os.Remove(sock)
	if err := dst.setCapabilities(ctx, false); err != nil {
		return err
	}
	wDst, err := dst.watchMigration(ctx)
	if err != nil {
		return err
	}
	defer wDst.close()
	if err := dst.qmp(ctx, "migrate-incoming", map[string]string{"uri": "unix:" + sock}, nil); err != nil {
		return err
	}
	if err := src.setCapabilities(ctx, false); err != nil {
		return err
	}
	wSrc, err := src.watchMigration(ctx)
	if err != nil {
		return err
	}
	defer wSrc.close()
	if err := src.qmp(ctx, "migrate", map[string]string{"uri": "unix:" + sock}, nil); err != nil {
		return err
	}
	if err := wSrc.wait(ctx); err != nil {
		return err
	}
	return wDst.wait(ctx)
}
