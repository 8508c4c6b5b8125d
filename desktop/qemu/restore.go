package qemu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu/qmp"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

// monitor is a machine's QMP client as the Monitor qemuvm's shared QMP
// code speaks to.
type monitor struct{ *qmp.Client }

func (c monitor) Subscribe(ctx context.Context) (qemuvm.Events, error) {
	return subscription{c.Client.Subscribe()}, nil
}

type subscription struct{ *qmp.Subscription }

func (s subscription) Wait(ctx context.Context, name string) (json.RawMessage, error) {
	ev, err := s.Subscription.Wait(ctx, name, nil)
	return ev.Data, err
}

func (m *Machine) monitor() qemuvm.Monitor { return monitor{m.qmp} }

// restore loads a saved state into a QEMU waiting with -incoming defer, then
// runs the guest unless paused. The state file goes over as a file
// descriptor (getfd, then fd:NAME): the fastest path measured, and the only
// one the sandbox allows besides sockets (exec: would spawn).
func (m *Machine) restore(ctx context.Context, statePath string, ignoreShared, paused bool) error {
	ctx, cancel := context.WithTimeout(ctx, qemuvm.RestoreTimeout)
	defer cancel()
	f, err := os.Open(statePath)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	if err := m.qmp.SendFD(ctx, "state", int(f.Fd())); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	mig := qemuvm.Migration{Incoming: true, URI: "fd:state", IgnoreShared: ignoreShared, Log: m.rec.Path("qemu.log")}
	if err := qemuvm.Migrate(ctx, m.monitor(), mig); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := qemuvm.PointTablet(ctx, m.qmp); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	desktop.MarkPhase(ctx, "restore")
	if paused {
		return nil
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
	desktop.MarkPhase(ctx, "cont")
	return nil
}

// saveState migrates a stopped machine's state into a new file, handed over
// as a descriptor, and syncs it.
func (m *Machine) saveState(ctx context.Context, path string, ignoreShared bool, fault string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := m.qmp.SendFD(ctx, "save", int(f.Fd())); err != nil {
		return err
	}
	mig := qemuvm.Migration{URI: "fd:save", IgnoreShared: ignoreShared, Log: m.rec.Path("qemu.log"), Fault: fault}
	if err := qemuvm.Migrate(ctx, m.monitor(), mig); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}
