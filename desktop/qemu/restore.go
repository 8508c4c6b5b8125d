package qemu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/warmdesk/warmdesk/desktop/qemu/qmp"
)

// migrationStatus is the status field of query-migrate and MIGRATION events.
type migrationStatus struct {
	Status      string `json:"status"`
	ErrorDesc   string `json:"error-desc"`
	TotalTimeMs int64  `json:"total-time"`
	DowntimeMs  int64  `json:"downtime"`
	RAM         *struct {
		Transferred int64 `json:"transferred"`
	} `json:"ram"`
}

// unthrottled lifts QEMU's default migration bandwidth cap (128 MiB/s,
// meant for networks): every migration here is to a local file or socket,
// and a hibernate or fork waits for it.
const unthrottled = 1 << 40

func setCapabilities(ctx context.Context, c *qmp.Client, ignoreShared bool) error {
	caps := []map[string]any{
		{"capability": "x-ignore-shared", "state": ignoreShared},
		{"capability": "events", "state": true},
	}
	if err := c.Execute(ctx, "migrate-set-capabilities", map[string]any{"capabilities": caps}, nil); err != nil {
		return fmt.Errorf("set migration capabilities: %w", err)
	}
	if err := c.Execute(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": unthrottled}, nil); err != nil {
		return fmt.Errorf("set migration bandwidth: %w", err)
	}
	return nil
}

// waitMigration waits for a MIGRATION event that ends the migration
// (completed, failed, cancelled). The subscription must predate the command
// that started the migration, so the event cannot be missed.
func waitMigration(ctx context.Context, c *qmp.Client, sub *qmp.Subscription) error {
	for {
		ev, err := sub.Wait(ctx, "MIGRATION", nil)
		if err != nil {
			return fmt.Errorf("migration: %w", err)
		}
		var st migrationStatus
		json.Unmarshal(ev.Data, &st)
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			var q migrationStatus
			c.Execute(ctx, "query-migrate", nil, &q)
			return fmt.Errorf("migration %s: %s", st.Status, q.ErrorDesc)
		}
	}
}

// restore loads a saved state into a QEMU waiting with -incoming defer, then
// runs the guest (DESIGN.md, recipe step 3). The state file goes over as a
// file descriptor (getfd, then fd:NAME): the fastest path measured, and the
// only one the sandbox allows besides sockets (exec: would spawn).
func (m *Machine) restore(ctx context.Context, statePath string, ignoreShared bool) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	f, err := os.Open(statePath)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	if err := setCapabilities(ctx, m.qmp, ignoreShared); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := m.qmp.SendFD(ctx, "state", int(f.Fd())); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	sub := m.qmp.Subscribe()
	defer sub.Close()
	if err := m.qmp.Execute(ctx, "migrate-incoming", map[string]string{"uri": "fd:state"}, nil); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := waitMigration(ctx, m.qmp, sub); err != nil {
		return fmt.Errorf("restore: %w: %s", err, logTail(m.rec.path("qemu.log"), 4))
	}
	// The template was stopped when it was saved, so the clone arrives paused.
	status, err := m.Status(ctx)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if status != "running" {
		if err := m.qmp.Execute(ctx, "cont", nil, nil); err != nil {
			return fmt.Errorf("restore: start guest: %w", err)
		}
	}
	return nil
}
