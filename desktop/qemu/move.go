package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/movestream"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
	"github.com/warmdesk/warmdesk/internal/qcow2"
)

var (
	_ desktop.LiveSender   = (*Machine)(nil)
	_ desktop.LiveReceiver = (*Driver)(nil)
)

// SendLive writes the machine's move stream (desktop.LiveSender): the disk
// overlay whole while the guest runs, then QEMU's migration (under KVM
// pre-copy: RAM copied while the guest runs, then the rest with its CPUs
// stopped, within QEMU's downtime limit; under TCG all of it with the
// guest stopped), then the overlay's chunks that changed meanwhile, read
// once QEMU flushed and let go of the overlay.
func (m *Machine) SendLive(ctx context.Context, out io.Writer, hold func(context.Context) error) (desktop.MoveStats, error) {
	var st desktop.MoveStats
	rec := m.record()
	if rec.Template {
		return st, fmt.Errorf("%w: a template machine never moves", desktop.ErrConflict)
	}
	w := movestream.NewWriter(out)
	var disk movestream.DiskPasses
	n, err := disk.Send(rec.Disk, w)
	st.DiskBytes += n
	if err == nil {
		err = w.Write(movestream.Start, 0, nil)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return st, fmt.Errorf("move: send the disk: %w", err)
	}
	if err := hold(ctx); err != nil {
		return st, err
	}
	// Under TCG the guest stops before its state goes (stop-and-copy):
	// QEMU 7.2's TCG misses some of a running guest's writes to memory
	// during a migration (3 of about 70 moves here came over with their
	// kernel's timers corrupt; none of 25 stopped), while KVM tracks them
	// in the kernel (docs/FLEET.md).
	stopFirst := rec.Shape.Accel != "kvm"
	stopped := time.Now()
	if stopFirst {
		if err := m.qmp.Execute(ctx, "stop", nil, nil); err != nil {
			return st, fmt.Errorf("move: stop the guest: %w", err)
		}
	}
	stateBytes, err := m.sendState(ctx, w)
	st.StateBytes = stateBytes
	if err != nil {
		m.endMigration()
		return st, fmt.Errorf("move: %w", err)
	}
	st.Downtime = time.Since(stopped)
	if !stopFirst {
		// Pre-copy: QEMU's own count of the stop at its end.
		var q struct {
			Downtime int64 `json:"downtime"`
		}
		if err := m.qmp.Execute(ctx, "query-migrate", nil, &q); err == nil {
			st.Downtime = time.Duration(q.Downtime) * time.Millisecond
		}
	}
	n, err = disk.Send(rec.Disk, w)
	st.DiskBytes += n
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return st, fmt.Errorf("move: send the disk's last changes: %w", err)
	}
	return st, nil
}

// sendState runs QEMU's migration into w's State frames, over a
// socketpair whose one end QEMU holds, and returns the bytes it sent.
func (m *Machine) sendState(ctx context.Context, w *movestream.Writer) (int64, error) {
	ours, err := m.handOver(ctx)
	if err != nil {
		return 0, err
	}
	defer ours.Close()
	type copied struct {
		n   int64
		err error
	}
	done := make(chan copied, 1)
	go func() {
		n, err := io.Copy(w.StateWriter(), ours)
		if err != nil {
			// The stream to the target broke: QEMU's next write fails,
			// and so does its migration, instead of waiting on a reader
			// that is gone.
			ours.Close()
		}
		done <- copied{n, err}
	}()
	g, err := qemuvm.StartMigration(ctx, m.monitor(), qemuvm.Migration{URI: "fd:move", Log: m.rec.Path("qemu.log")})
	if err != nil {
		m.qmp.Execute(context.WithoutCancel(ctx), "closefd", map[string]string{"fdname": "move"}, nil)
		ours.Close()
		<-done
		return 0, err
	}
	defer g.Close()
	if err := g.Wait(ctx); err != nil {
		ours.Close()
		<-done
		return 0, err
	}
	c := <-done
	if c.err != nil {
		return c.n, fmt.Errorf("carry the state: %w", c.err)
	}
	return c.n, w.Write(movestream.StateEnd, 0, nil)
}

// handOver makes a socketpair, hands one end to QEMU as the descriptor
// "move" and returns the other, non-blocking, so closing it ends a read
// or write on it that waits.
func (m *Machine) handOver(ctx context.Context) (*os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fds[1], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, err
	}
	ours := os.NewFile(uintptr(fds[1]), "move")
	if dl, ok := ctx.Deadline(); ok {
		ours.SetDeadline(dl) // a QEMU that stops reading or writing does not hold the move past it
	}
	err = m.qmp.SendFD(ctx, "move", fds[0])
	// QEMU holds its own copy now: ours ends when QEMU closes it, at the
	// migration's end.
	syscall.Close(fds[0])
	if err != nil {
		ours.Close()
		return nil, err
	}
	return ours, nil
}

// endMigration cancels a move's migration that did not end, so the
// machine is the Manager's to run again.
func (m *Machine) endMigration() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := qemuvm.EndInterruptedMigration(ctx, m.monitor()); err != nil {
		m.log.Warn("end a move's migration", "err", err)
	}
}

// incoming is a machine a desktop moves into: its overlay fills from the
// stream, then its QEMU starts and loads the state.
type incoming struct {
	d    *Driver
	rec  record
	snap desktop.Snapshot
	disk *os.File
	m    *Machine
	mig  *qemuvm.Migrating
	// state is hostd's end of the socketpair QEMU loads the state from.
	state *os.File
}

// Incoming prepares a machine for a desktop moving here
// (desktop.LiveReceiver): its directories and an empty overlay.
func (d *Driver) Incoming(ctx context.Context, spec desktop.IncomingSpec) (desktop.Incoming, error) {
	var src record
	if err := json.Unmarshal(spec.Source, &src); err != nil || src.Disk == "" {
		return nil, fmt.Errorf("%w: not a QEMU machine's record", desktop.ErrInvalid)
	}
	if err := d.checkSnapshot(spec.Snapshot); err != nil {
		return nil, err
	}
	dirs, err := d.machineDirs(spec.ID)
	if err != nil {
		return nil, err
	}
	rec := record{
		ID: spec.ID, Dirs: dirs, Snapshot: src.Snapshot, Shape: src.Shape,
		Disk: dirs.Path(filepath.Base(src.Disk)), DiskNode: qemuvm.DiskNodeID, DiskMiB: src.DiskMiB,
	}
	f, err := os.OpenFile(rec.Disk, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		rec.Remove()
		return nil, fmt.Errorf("move in: %w", err)
	}
	return &incoming{d: d, rec: rec, snap: spec.Snapshot, disk: f}, nil
}

// Receive applies the move stream (desktop.Incoming).
func (in *incoming) Receive(ctx context.Context, r io.Reader) (desktop.Machine, []byte, error) {
	fr := movestream.NewReader(r)
	receiving := false
	for {
		f, err := fr.Read()
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("the source's stream ended before the move's commit")
		}
		if err != nil {
			return nil, nil, fmt.Errorf("move stream: %w", err)
		}
		switch f.Kind {
		case movestream.Disk, movestream.DiskSize:
			err = movestream.ApplyDisk(in.disk, f)
		case movestream.Start:
			err = in.start(ctx)
		case movestream.State:
			if in.state == nil {
				return nil, nil, errors.New("move stream: state before the machine was started")
			}
			if !receiving {
				receiving = true
				desktop.Fault(desktop.FaultMoveReceiving)
			}
			_, err = in.state.Write(f.Data)
		case movestream.StateEnd:
			if in.state != nil {
				err = in.state.Close()
			}
		case movestream.Commit:
			if err := in.loaded(ctx); err != nil {
				return nil, nil, err
			}
			return in.m, append([]byte(nil), f.Data...), nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("move in: %w", err)
		}
	}
}

// start starts QEMU on the overlay the first pass wrote, waiting for the
// state with its guest and disks held until cont.
func (in *incoming) start(ctx context.Context) error {
	if in.m != nil {
		return errors.New("move stream: started twice")
	}
	if err := in.rebase(); err != nil {
		return err
	}
	m, err := in.d.start(ctx, in.rec, func(c *Config) {
		c.Memory = qemuvm.Memory{} // anonymous: the RAM comes with the state
		c.Incoming = true
		c.Paused = true
	})
	if err != nil {
		return err
	}
	in.m = m
	if in.state, err = m.handOver(ctx); err != nil {
		return err
	}
	in.mig, err = qemuvm.StartMigration(ctx, m.monitor(), qemuvm.Migration{
		Incoming: true, URI: "fd:move", LateBlockActivate: true, Log: m.rec.Path("qemu.log"),
	})
	return err
}

// rebase points the overlay at this host's copy of the layer under it:
// the source's header names the layer by its path there. The layer is
// found by its snapshot's name in this host's catalog.
func (in *incoming) rebase() error {
	if err := in.disk.Sync(); err != nil {
		return err
	}
	backing, err := qcow2.BackingFile(in.rec.Disk)
	if err != nil {
		return fmt.Errorf("move in: the overlay: %w", err)
	}
	if backing == "" {
		return nil
	}
	here := filepath.Join(filepath.Dir(in.snap.Dir), filepath.Base(filepath.Dir(backing)), filepath.Base(backing))
	if here == backing {
		return nil
	}
	if _, err := os.Stat(here); err != nil {
		return fmt.Errorf("move in: the layer under the disk (%s on the source) is not on this host: %w", backing, err)
	}
	return qcow2.SetBackingFile(in.rec.Disk, here)
}

// loaded waits for QEMU to have loaded the whole state, then makes the
// overlay, whole now, the one QEMU reads when it activates its disk.
func (in *incoming) loaded(ctx context.Context) error {
	if in.mig == nil {
		return errors.New("move stream: commit before the state")
	}
	if err := in.mig.Wait(ctx); err != nil {
		return fmt.Errorf("move in: load the state: %w", err)
	}
	in.mig.Close()
	if err := in.rebase(); err != nil {
		return err
	}
	in.m.mu.Lock()
	in.m.movedIn = true
	in.m.mu.Unlock()
	return in.disk.Close()
}

// Abandon ends what a receive that failed started, and removes its files.
func (in *incoming) Abandon(ctx context.Context) {
	in.disk.Close()
	if in.state != nil {
		in.state.Close()
	}
	if in.mig != nil {
		in.mig.Close()
	}
	if in.m != nil {
		if err := in.m.Destroy(ctx); err != nil {
			in.d.log.Warn("end an incoming machine", "machine", in.rec.ID, "err", err)
		}
		return
	}
	in.rec.Remove()
}
