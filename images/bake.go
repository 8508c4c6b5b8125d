package images

import (
	"context"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// Lines the guest's session script writes on its serial console.
const (
	readyLine  = "warmdesk: ready"
	failedLine = "warmdesk: failed"
)

// BakeOptions configure a bake.
type BakeOptions struct {
	Driver  desktop.Driver
	Catalog *desktop.Catalog
	Image   Image
	// Name of the snapshot (default: the image's name).
	Name      string
	CPUs      int
	MemoryMiB int
	// ReadyTimeout bounds the boot, up to the guest's ready line.
	ReadyTimeout time.Duration
	// Settle waits, after the ready line, until the screen has stopped
	// changing (the apps have painted). Required.
	Settle func(ctx context.Context, m desktop.Machine) error
	// Progress receives a line per step.
	Progress io.Writer
	// FailureDir, when set, receives a screenshot of a guest that did not
	// get ready, named in the error.
	FailureDir string
}

// DefaultReadyTimeout covers a Chromium desktop booting under TCG (about
// 90 s measured here) with room for a loaded host.
const DefaultReadyTimeout = 10 * time.Minute

// Bake boots an image once, waits for its desktop to be ready and settled,
// and saves it as a golden snapshot (docs/ARCHITECTURE.md, copy-on-write step 1). It
// then restores the snapshot once as a copy-on-write clone and checks that
// the guest agent answers and the screen is not blank. On any failure it
// kills what it started and leaves no snapshot behind.
func Bake(ctx context.Context, o BakeOptions) (desktop.Snapshot, error) {
	if o.Name == "" {
		o.Name = o.Image.Name
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 1024
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.CPUs < 1 || o.CPUs > 64 {
		return desktop.Snapshot{}, fmt.Errorf("%w: --cpus %d: use 1 to 64", desktop.ErrInvalid, o.CPUs)
	}
	if o.MemoryMiB < 256 || o.MemoryMiB > 64<<10 {
		return desktop.Snapshot{}, fmt.Errorf("%w: --memory %d MiB: use 256 MiB to 64 GiB", desktop.ErrInvalid, o.MemoryMiB)
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(o.Progress, "[bake %s %s] %s\n", o.Name, time.Since(start).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
	}
	draft, err := o.Catalog.Begin(o.Name)
	if err != nil {
		return desktop.Snapshot{}, err
	}
	defer draft.Abort()
	if err := checkFree(draft.Dir, int64(o.MemoryMiB)<<20+512<<20); err != nil {
		return desktop.Snapshot{}, err
	}

	console := newLineRing(20)
	ready := make(chan error, 1)
	signal := func(err error) {
		select {
		case ready <- err:
		default:
		}
	}
	step("booting image %s (%s) with %d CPUs and %d MiB under %s", o.Image.Name, short(o.Image.Hash), o.CPUs, o.MemoryMiB, o.Driver.Shape().Accel)
	m, err := o.Driver.Boot(ctx, desktop.BootSpec{
		Name: o.Name, Image: o.Image.Boot(), CPUs: o.CPUs, MemoryMiB: o.MemoryMiB, Dir: draft.Dir,
		ConsoleLine: func(line string) {
			console.add(line)
			switch {
			case strings.Contains(line, readyLine):
				signal(nil)
			case strings.Contains(line, failedLine):
				signal(fmt.Errorf("the guest reported %q", strings.TrimSpace(line)))
			}
		},
	})
	if err != nil {
		return desktop.Snapshot{}, fmt.Errorf("bake %s: %w", o.Name, err)
	}
	saved := false
	defer func() {
		if !saved {
			m.Destroy(context.WithoutCancel(ctx))
		}
	}()
	bootCtx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	select {
	case err = <-ready:
	case <-m.Exited():
		err = fmt.Errorf("QEMU %s", m.ExitReason())
	case <-bootCtx.Done():
		err = fmt.Errorf("the guest did not report ready within %s (a bake runs at an idle desktop's CPU share, so on a host whose desktops keep the CPUs busy it is slow: bake when the host is quieter)", o.ReadyTimeout)
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		if shot := o.saveScreen(ctx, m); shot != "" {
			err = fmt.Errorf("%w; its screen is in %s", err, shot)
		}
		return desktop.Snapshot{}, fmt.Errorf("bake %s: %w; the guest's last console lines:\n%s", o.Name, err, console.String())
	}
	step("desktop ready; waiting for the screen to settle")
	if err := o.Settle(bootCtx, m); err != nil {
		return desktop.Snapshot{}, fmt.Errorf("bake %s: %w", o.Name, err)
	}
	step("saving the snapshot")
	shape, err := m.Snapshot(ctx, draft.Dir, desktop.SnapshotOptions{})
	saved = err == nil
	if err != nil {
		return desktop.Snapshot{}, fmt.Errorf("bake %s: %w", o.Name, err)
	}
	step("checksumming its files")
	snap, err := draft.Commit(&desktop.Manifest{BakedBy: o.Driver.Name(), Machine: shape, Image: o.Image.Ref(), OnCreate: o.Image.Recipe.Bake.OnCreate})
	if err != nil {
		return desktop.Snapshot{}, fmt.Errorf("bake %s: %w", o.Name, err)
	}
	step("restore check: one copy-on-write clone")
	if err := RestoreCheck(ctx, o.Driver, snap); err != nil {
		o.Catalog.Remove(snap.Name)
		return desktop.Snapshot{}, fmt.Errorf("bake %s: the snapshot does not restore, so it was removed: %w", o.Name, err)
	}
	step("done")
	return snap, nil
}

// saveScreen writes what a failed guest shows into FailureDir and returns
// the file's path, or "" when it has none to give.
func (o BakeOptions) saveScreen(ctx context.Context, m desktop.Machine) string {
	if o.FailureDir == "" {
		return ""
	}
	select {
	case <-m.Exited():
		return ""
	default:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	img, err := m.Screendump(sctx)
	if err != nil {
		return ""
	}
	if err := os.MkdirAll(o.FailureDir, 0o755); err != nil {
		return ""
	}
	path := filepath.Join(o.FailureDir, fmt.Sprintf("%s-%s.png", o.Name, time.Now().UTC().Format("20060102T150405Z")))
	f, err := os.Create(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		os.Remove(path)
		return ""
	}
	return path
}

// RestoreCheck restores a snapshot once copy-on-write, checks that the guest
// agent answers and the screen is not blank, and removes the clone.
func RestoreCheck(ctx context.Context, drv desktop.Driver, snap desktop.Snapshot) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	m, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("check-"), Snapshot: snap})
	if err != nil {
		return err
	}
	defer m.Destroy(context.WithoutCancel(ctx))
	agentCtx, cancelAgent := context.WithTimeout(ctx, 30*time.Second)
	defer cancelAgent()
	if err := m.Agent().Call(agentCtx, "guest-ping", nil, nil); err != nil {
		return fmt.Errorf("guest agent: %w", err)
	}
	img, err := m.Screendump(ctx)
	if err != nil {
		return err
	}
	if desktop.BlankScreen(img) {
		return errors.New("the restored screen is blank")
	}
	return nil
}

// checkFree fails early, with the figures, when dir's filesystem has less
// than need bytes free.
func checkFree(dir string, need int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * st.Bsize
	if free < need {
		return fmt.Errorf("not enough space in %s: a bake needs %d MiB free (the guest's memory file and disk), there are %d MiB", dir, need>>20, free>>20)
	}
	return nil
}

// lineRing keeps the last n lines of the console, for error messages.
type lineRing struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newLineRing(n int) *lineRing { return &lineRing{n: n} }

func (r *lineRing) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	if len(r.lines) > r.n {
		r.lines = r.lines[len(r.lines)-r.n:]
	}
}

func (r *lineRing) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) == 0 {
		return "(none)"
	}
	return strings.Join(r.lines, "\n")
}
