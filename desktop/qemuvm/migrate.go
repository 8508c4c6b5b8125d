package qemuvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// Bounds of one migration: loading a saved state, and writing one (the RAM
// of a 1 GiB guest moves in about a second here).
const (
	RestoreTimeout = time.Minute
	SaveTimeout    = 2 * time.Minute
)

// Unthrottled is the migration bandwidth every migration runs with. QEMU
// caps migration at 128 MiB/s by default, which is meant for networks;
// every migration here goes to a local file or socket, and a hibernate or
// fork waits for it (a hibernate took 2.5 s with the cap, under one
// without).
const Unthrottled = 1 << 40

// Migration is one migration of a machine's device state (and RAM, unless
// it is in a shared memory file that IgnoreShared leaves out).
type Migration struct {
	// Incoming loads a state into a QEMU started with -incoming defer
	// (migrate-incoming); otherwise the machine sends its state (migrate).
	Incoming bool
	// URI is where the state comes from or goes to: fd:NAME (a descriptor
	// passed with getfd) or unix:PATH. Never exec: (QEMU's sandbox, and
	// libvirt's, forbid spawning).
	URI string
	// IgnoreShared leaves guest RAM that lives in a shared memory-backend
	// file out of the stream (x-ignore-shared): a template's RAM is already
	// in its memory file.
	IgnoreShared bool
	// Log is QEMU's log file; when QEMU gives no reason for a failure over
	// QMP (an incoming migration never does), its last lines are the reason.
	Log string
	// Listening says an incoming machine already listens on URI: it was
	// started with -incoming URI (bound before it dropped root, where it
	// could no longer bind), so only the capabilities are set.
	Listening bool
	// Fault is a kill point (desktop.Fault) reached once an outgoing
	// migration is under way: the crash tests end hostd there.
	Fault string
	// LateBlockActivate, on an incoming migration, leaves the disks
	// inactive after the state loaded, until cont: a live move writes the
	// disk overlay's last changes in between.
	LateBlockActivate bool
}

// Capabilities is the argument of migrate-set-capabilities for a
// migration: x-ignore-shared and late-block-activate as asked, and
// MIGRATION events, which the wait for the end listens to.
func Capabilities(ignoreShared, lateBlockActivate bool) map[string]any {
	return map[string]any{"capabilities": []map[string]any{
		{"capability": "x-ignore-shared", "state": ignoreShared},
		{"capability": "late-block-activate", "state": lateBlockActivate},
		{"capability": "events", "state": true},
	}}
}

// Migrating is a migration that has started; Wait for its end, then Close.
type Migrating struct {
	mon      Monitor
	events   Events
	log      string
	outgoing bool
}

// StartMigration sets the migration capabilities and lifts the bandwidth
// cap, subscribes to the machine's events (before the migration starts, so
// its end cannot be missed) and starts the migration. An incoming
// migration's command returns once QEMU listens on the URI.
func StartMigration(ctx context.Context, mon Monitor, m Migration) (*Migrating, error) {
	if err := mon.Execute(ctx, "migrate-set-capabilities", Capabilities(m.IgnoreShared, m.LateBlockActivate), nil); err != nil {
		return nil, fmt.Errorf("set migration capabilities: %w", err)
	}
	if err := mon.Execute(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": Unthrottled}, nil); err != nil {
		return nil, fmt.Errorf("set migration bandwidth: %w", err)
	}
	events, err := mon.Subscribe(ctx)
	if err != nil {
		return nil, fmt.Errorf("subscribe to QMP events: %w", err)
	}
	command := "migrate"
	if m.Incoming {
		command = "migrate-incoming"
	}
	if m.Incoming && m.Listening {
		return &Migrating{mon: mon, events: events, log: m.Log}, nil
	}
	if err := mon.Execute(ctx, command, map[string]string{"uri": m.URI}, nil); err != nil {
		events.Close()
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	if m.Fault != "" {
		desktop.Fault(m.Fault)
	}
	return &Migrating{mon: mon, events: events, log: m.Log, outgoing: !m.Incoming}, nil
}

// Wait waits for the MIGRATION event that ends the migration: nil when it
// completed, an error saying why when it failed or was cancelled, or when
// the machine went or ctx ended first.
func (g *Migrating) Wait(ctx context.Context) error {
	for {
		data, err := g.events.Wait(ctx, "MIGRATION")
		if err != nil {
			return fmt.Errorf("migration: %w%s", err, g.logTail("; "))
		}
		status, err := ParseMigrationEvent(data)
		if err != nil {
			return fmt.Errorf("migration: %w", err)
		}
		switch status {
		case "completed":
			if g.outgoing {
				return awaitFinalized(ctx, g.mon)
			}
			return nil
		case "failed", "cancelled":
			var q migrationStatus
			g.mon.Execute(ctx, "query-migrate", nil, &q)
			if q.ErrorDesc != "" {
				return fmt.Errorf("migration %s: %s", status, q.ErrorDesc)
			}
			return fmt.Errorf("migration %s%s", status, g.logTail(": "))
		}
	}
}

// awaitFinalized waits for the source of a completed migration to leave
// the finish-migrate state: QEMU says completed a moment before, and
// until then refuses cont ("Migration is not finalized yet"), which left a
// desktop stopped with its disks inactive after a snapshot (seen in CI).
// QEMU sends no event for it, so its state is read again, a little less
// often each time, within a few seconds.
func awaitFinalized(ctx context.Context, mon Executor) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	wait := time.Millisecond
	for {
		st, err := Status(ctx, mon)
		if err != nil {
			return fmt.Errorf("migration ended, but the machine's state: %w", err)
		}
		if st != "finish-migrate" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migration ended, but the machine stayed in finish-migrate: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

func (g *Migrating) logTail(sep string) string {
	if g.log == "" {
		return ""
	}
	if tail := LogTail(g.log, 4); tail != "" {
		return sep + "QEMU's log ends:\n" + tail
	}
	return ""
}

// Close ends the subscription.
func (g *Migrating) Close() { g.events.Close() }

// Migrate runs a whole migration: StartMigration, then Wait.
func Migrate(ctx context.Context, mon Monitor, m Migration) error {
	g, err := StartMigration(ctx, mon, m)
	if err != nil {
		return err
	}
	defer g.Close()
	return g.Wait(ctx)
}

// migrationStatus is the data of a MIGRATION event and of query-migrate.
type migrationStatus struct {
	Status    string `json:"status"`
	ErrorDesc string `json:"error-desc"`
}

// ParseMigrationEvent reads the status out of a MIGRATION event's data.
func ParseMigrationEvent(data []byte) (string, error) {
	var st migrationStatus
	if err := json.Unmarshal(data, &st); err != nil {
		return "", fmt.Errorf("malformed MIGRATION event %.80q: %w", data, err)
	}
	if st.Status == "" {
		return "", fmt.Errorf("MIGRATION event without a status: %.80q", data)
	}
	return st.Status, nil
}

// migrationRunning says whether a query-migrate status is of a migration
// still under way (QEMU's MigrationStatus): it has not completed, failed
// or been cancelled.
func migrationRunning(status string) bool {
	switch status {
	case "", "none", "completed", "failed", "cancelled":
		return false
	}
	return true
}

// EndInterruptedMigration ends an outgoing migration that outlived the
// hostd that started it (a hibernate, snapshot or fork a crash cut short:
// QEMU writes on into the state file it was handed). It is cancelled, and
// the wait lasts until QEMU says it ended and the machine left
// finish-migrate. Resuming the guest first would not last: the
// migration's completion stops it again (postmigrate), leaving a desktop
// listed running whose CPUs never run. It returns the status the
// migration ended with ("" or "none" when none ran).
func EndInterruptedMigration(ctx context.Context, mon Monitor) (string, error) {
	events, err := mon.Subscribe(ctx)
	if err != nil {
		return "", fmt.Errorf("subscribe to QMP events: %w", err)
	}
	defer events.Close()
	var q migrationStatus
	if err := mon.Execute(ctx, "query-migrate", nil, &q); err != nil {
		return "", fmt.Errorf("query-migrate: %w", err)
	}
	if !migrationRunning(q.Status) {
		return q.Status, awaitFinalized(ctx, mon)
	}
	if err := mon.Execute(ctx, "migrate_cancel", nil, nil); err != nil {
		return q.Status, fmt.Errorf("migrate_cancel: %w", err)
	}
	// The events capability was set by the hostd that started the
	// migration; its status is read again between events all the same, in
	// case it was not.
	wait := 10 * time.Millisecond
	for migrationRunning(q.Status) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, werr := events.Wait(wctx, "MIGRATION")
		cancel()
		if ctx.Err() != nil {
			return q.Status, fmt.Errorf("migration still %s after migrate_cancel: %w", q.Status, ctx.Err())
		}
		if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
			return q.Status, fmt.Errorf("migration: %w", werr)
		}
		if err := mon.Execute(ctx, "query-migrate", nil, &q); err != nil {
			return "", fmt.Errorf("query-migrate: %w", err)
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
	return q.Status, awaitFinalized(ctx, mon)
}
