package libvirt

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// Migrations go over unix sockets in the machine's run directory: libvirt's
// monitor passthrough cannot hand QEMU a file descriptor, and the seccomp
// sandbox (spawn=deny) forbids exec: URIs. For a restore QEMU listens
// (migrate-incoming unix:PATH, or from its start, -incoming unix:PATH, for
// a desktop whose QEMU drops to an id of its own, which could not bind in
// its root-owned directory later) and hostd feeds it the state file; for a
// save hostd listens, gives the socket to the machine's id, and QEMU
// writes to it (migrate unix:PATH).

// incomingSocket is the name of a machine's incoming migration socket in
// its run directory.
const incomingSocket = "incoming.sock"

// restore loads a saved state into a domain waiting with -incoming defer,
// then resumes it and checks that libvirt reports it running.
func (m *Machine) restore(ctx context.Context, statePath string, ignoreShared bool) error {
	ctx, cancel := context.WithTimeout(ctx, qemuvm.RestoreTimeout)
	defer cancel()
	if err := m.loadPaused(ctx, statePath, ignoreShared); err != nil {
		return err
	}
	if err := m.armDiskBound(ctx); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// The state was saved from a stopped machine, so QEMU is paused now,
	// not inmigrate, and the resume takes.
	if err := m.resume(ctx); err != nil {
		return fmt.Errorf("restore: start guest: %w", err)
	}
	return nil
}

// loadPaused loads a saved state and readies the machine to run (its
// tablet, its agent's channel) without running its guest.
func (m *Machine) loadPaused(ctx context.Context, statePath string, ignoreShared bool) error {
	ctx, cancel := context.WithTimeout(ctx, qemuvm.RestoreTimeout)
	defer cancel()
	if err := m.load(ctx, statePath, ignoreShared); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := qemuvm.PointTablet(ctx, m.monitor()); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// Before the guest runs, so that stale agent output reaches hostd and
	// not libvirt (drain.go).
	if c := m.claimAgent(ctx); c != nil {
		m.drainAgentAsync(c)
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
	sock := m.record().Path(incomingSocket)
	listening := m.user != nil // since its start (DomainConfig.IncomingSocket)
	if !listening {
		os.Remove(sock)
	}
	defer os.Remove(sock)
	// migrate-incoming returns once QEMU listens on the socket.
	g, err := qemuvm.StartMigration(ctx, m.monitor(), qemuvm.Migration{Incoming: true, URI: "unix:" + sock, IgnoreShared: ignoreShared, Log: m.logPath(), Listening: listening})
	if err != nil {
		return err
	}
	defer g.Close()
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
	if err := g.Wait(ctx); err != nil {
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
func (m *Machine) saveState(ctx context.Context, path string, ignoreShared bool, fault string) error {
	sock := m.record().Path("save.sock")
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	// QEMU, as the machine's id, needs write permission to connect.
	if m.user != nil {
		if err := m.user.owner.Chown(sock); err != nil {
			return fmt.Errorf("give the save socket to the machine's user: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	copied := make(chan error, 1)
	go func() { copied <- receive(ctx, ln, f) }()
	g, err := qemuvm.StartMigration(ctx, m.monitor(), qemuvm.Migration{URI: "unix:" + sock, IgnoreShared: ignoreShared, Log: m.logPath(), Fault: fault})
	if err == nil {
		defer g.Close()
		err = g.Wait(ctx)
	}
	if err != nil {
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
	sock := dst.record().Path(incomingSocket)
	os.Remove(sock)
	defer os.Remove(sock)
	in, err := qemuvm.StartMigration(ctx, dst.monitor(), qemuvm.Migration{Incoming: true, URI: "unix:" + sock, Log: dst.logPath()})
	if err != nil {
		return err
	}
	defer in.Close()
	// The source's QEMU, as its desktop's id, must reach the socket: the
	// destination (a template, root's) lets it through its directory and
	// gives it the socket.
	if src.user != nil {
		if err := os.Chmod(dst.record().RunDir, 0o711); err != nil {
			return err
		}
		if err := src.user.owner.Chown(sock); err != nil {
			return fmt.Errorf("give the incoming socket to the source's user: %w", err)
		}
	}
	out, err := qemuvm.StartMigration(ctx, src.monitor(), qemuvm.Migration{URI: "unix:" + sock, Log: src.logPath()})
	if err != nil {
		return err
	}
	defer out.Close()
	if err := out.Wait(ctx); err != nil {
		return err
	}
	return in.Wait(ctx)
}
