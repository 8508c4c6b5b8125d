package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu/qmp"
)

// record is what a machine leaves in the Manager's store: enough to find
// its process again, or to clean up after it.
type record struct {
	ID        string               `json:"id"`
	Pid       int                  `json:"pid,omitempty"`
	StartTime uint64               `json:"start_time,omitempty"`
	RunDir    string               `json:"run_dir"`  // sockets (0700)
	DataDir   string               `json:"data_dir"` // disk overlays, logs, saved state (0700)
	Snapshot  string               `json:"snapshot,omitempty"`
	Shape     desktop.MachineShape `json:"shape"`
	// Disk is the current top overlay and DiskNode its QEMU node name:
	// both change when a snapshot of the running machine freezes a layer.
	Disk     string `json:"disk"`
	DiskNode string `json:"disk_node"`
	// Frozen is a layer frozen into a snapshot that is not committed yet;
	// the top overlay names it by this path until AdoptSnapshot.
	Frozen  string `json:"frozen,omitempty"`
	Network bool   `json:"network"`
	// Template machines (from Boot) must never resume after their snapshot.
	Template bool `json:"template,omitempty"`
	// Memory is a template's RAM file (on tmpfs) until its snapshot is saved.
	Memory string `json:"memory,omitempty"`
	// Hibernated machines have no process; their full state is in
	// HibernateFile.
	Hibernated    bool   `json:"hibernated,omitempty"`
	HibernateFile string `json:"hibernate_file,omitempty"`
}

func (r *record) path(name string) string {
	if filepath.Ext(name) == ".sock" {
		return filepath.Join(r.RunDir, name)
	}
	return filepath.Join(r.DataDir, name)
}

// Machine is one QEMU process and the channels to it.
type Machine struct {
	drv  *Driver
	log  *slog.Logger
	proc *process

	mu  sync.Mutex // guards rec
	rec record

	qmp   *qmp.Client
	agent *agentConn

	// poolKey identifies the bake a pooled machine was spawned for.
	poolKey string
}

var _ desktop.Machine = (*Machine)(nil)

// Record returns the machine's current record.
func (m *Machine) Record() json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _ := json.Marshal(m.rec)
	return b
}

func (m *Machine) record() record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec
}

// Pid is QEMU's process id.
func (m *Machine) Pid() int { return m.proc.pid }

// Exited is closed when QEMU ends.
func (m *Machine) Exited() <-chan struct{} { return m.proc.done }

// ExitReason says why QEMU ended.
func (m *Machine) ExitReason() string { return m.proc.Reason() }

// Agent is the guest agent channel.
func (m *Machine) Agent() desktop.GuestAgent { return m.agent }

// DialVNC connects to QEMU's VNC server.
func (m *Machine) DialVNC(ctx context.Context) (net.Conn, error) {
	return dialUnix(ctx, m.rec.path("vnc.sock"))
}

// Pause stops the guest's CPUs; its RAM stays.
func (m *Machine) Pause(ctx context.Context) error {
	if err := m.qmp.Execute(ctx, "stop", nil, nil); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return nil
}

// Resume continues the guest.
func (m *Machine) Resume(ctx context.Context) error {
	if m.record().Template {
		return fmt.Errorf("%w: a template machine never resumes: its writes would land in every clone's memory", desktop.ErrConflict)
	}
	if err := m.qmp.Execute(ctx, "cont", nil, nil); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

// SendInput delivers one synchronised frame of input events.
func (m *Machine) SendInput(ctx context.Context, events []desktop.InputEvent) error {
	shape := m.rec.Shape
	args, err := inputEvents(events, shape.Width, shape.Height)
	if err != nil {
		return err
	}
	if err := m.qmp.Execute(ctx, "input-send-event", map[string]any{"events": args}, nil); err != nil {
		return fmt.Errorf("send input: %w", err)
	}
	return nil
}

// Screendump asks QEMU for a picture of the screen (PPM, uncompressed).
func (m *Machine) Screendump(ctx context.Context) (image.Image, error) {
	f, err := os.CreateTemp(m.rec.RunDir, "screendump-*.ppm")
	if err != nil {
		return nil, fmt.Errorf("screendump: %w", err)
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	if err := m.qmp.Execute(ctx, "screendump", map[string]string{"filename": path}, nil); err != nil {
		return nil, fmt.Errorf("screendump: %w", err)
	}
	r, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("screendump: %w", err)
	}
	defer r.Close()
	img, err := decodePPM(r)
	if err != nil {
		return nil, fmt.Errorf("screendump: %w", err)
	}
	return img, nil
}

// Status is QEMU's run state ("running", "paused", "inmigrate", ...).
func (m *Machine) Status(ctx context.Context) (string, error) {
	var st struct {
		Status string `json:"status"`
	}
	if err := m.qmp.Execute(ctx, "query-status", nil, &st); err != nil {
		return "", err
	}
	return st.Status, nil
}

// Destroy ends QEMU and removes every file the machine owned.
func (m *Machine) Destroy(ctx context.Context) error {
	m.agent.close()
	quitCtx, cancel := deadline(ctx, 2*time.Second)
	// quit lets QEMU close its files cleanly; SIGKILL if it does not go.
	if err := m.qmp.Execute(quitCtx, "quit", nil, nil); err == nil {
		m.proc.waitExit(quitCtx)
	}
	cancel()
	if err := m.proc.kill(ctx); err != nil {
		return err
	}
	m.qmp.Close()
	return removeMachineDirs(m.record())
}

func removeMachineDirs(r record) error { return removeDirs(r.RunDir, r.DataDir) }

func removeDirs(dirs ...string) error {
	var errs []error
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove machine files: %w", errors.Join(errs...))
	}
	return nil
}

// watchConsole reads the serial console socket line by line, for Boot
// machines whose readiness is reported there.
func (m *Machine) watchConsole(ctx context.Context, fn func(string)) error {
	conn, err := dialUnix(ctx, m.rec.path("console.sock"))
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	WatchLines(ctx, conn, m.proc.done, fn)
	return nil
}
