// Package desktoptest has a fake desktop.Driver, an in-memory Store and the
// conformance suite that the fake and every real driver run.
package desktoptest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// Fake is an in-memory driver. Its machines are goroutine-free records of
// state, which survive a "restart" (a new Manager on the same Fake), so the
// conformance suite's restart test runs on it too.
type Fake struct {
	mu       sync.Mutex
	machines map[string]*FakeMachine // live, by id
	shape    desktop.MachineShape
	// RestoreDelay, when set, makes every restore take this long, so races
	// between concurrent calls get a window.
	RestoreDelay time.Duration
	// FailRestores makes restores fail with this error.
	FailRestores error
	// Guest, when set, is every machine's guest agent for the commands it
	// speaks (exec, files); set it before the first machine starts.
	Guest *Guest
	// agentGate, while set, holds every guest agent's answers (HoldAgents).
	agentGate chan struct{}
	// cut closes when Close cuts the agent calls in flight.
	cut chan struct{}
}

// Close cuts the guest agent calls in flight, as a real driver's end
// closes its connections to the guests. The Fake stays usable: the
// conformance suite's "restarted" hostd drives the same machines.
func (f *Fake) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.cut)
	f.cut = make(chan struct{})
}

// HoldAgents makes every machine's guest agent wait before answering until
// release is called (or the call's context ends), so a test can stop hostd
// while a guest's setup is in flight.
func (f *Fake) HoldAgents() (release func()) {
	gate := make(chan struct{})
	f.mu.Lock()
	f.agentGate = gate
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.agentGate = nil
			f.mu.Unlock()
			close(gate)
		})
	}
}

var _ desktop.Driver = (*Fake)(nil)

// NewFake returns a fake driver.
func NewFake() *Fake {
	return &Fake{
		machines: map[string]*FakeMachine{},
		cut:      make(chan struct{}),
		shape:    desktop.MachineShape{QEMUVersion: "fake", QEMUSHA256: "fakefakefakefake", Accel: "tcg", Type: "fake-q35", CPU: "max"},
	}
}

// Name is "fake".
func (f *Fake) Name() string { return "fake" }

// Shape is the fake host's shape.
func (f *Fake) Shape() desktop.MachineShape { return f.shape }

// Live counts machines whose "process" runs, for leak checks.
func (f *Fake) Live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.machines)
}

// Running names the machines whose "process" runs (Harness.Running).
func (f *Fake) Running() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.machines))
	for id := range f.machines {
		ids = append(ids, id)
	}
	return ids
}

type fakeRecord struct {
	ID         string `json:"id"`
	Dir        string `json:"dir,omitempty"`
	Hibernated bool   `json:"hibernated,omitempty"`
	Snapshot   string `json:"snapshot,omitempty"`
	Template   bool   `json:"template,omitempty"`
	Width      int    `json:"width"`
	Height     int    `json:"height"`
}

// Boot makes a template machine that writes its files into spec.Dir.
func (f *Fake) Boot(ctx context.Context, spec desktop.BootSpec) (desktop.Machine, error) {
	shape := f.shape
	shape.CPUs, shape.MemoryMiB, shape.Width, shape.Height = spec.CPUs, spec.MemoryMiB, spec.Image.Width, spec.Image.Height
	shape.Devices = []string{"fake-vga"}
	m := f.newMachine(fakeRecord{ID: desktop.NewID("bake-"), Template: true, Width: spec.Image.Width, Height: spec.Image.Height}, shape)
	if spec.ConsoleLine != nil {
		go spec.ConsoleLine("warmdesk: ready")
	}
	return m, nil
}

func (f *Fake) newMachine(rec fakeRecord, shape desktop.MachineShape) *FakeMachine {
	m := &FakeMachine{f: f, rec: rec, shape: shape, exited: make(chan struct{}), status: "running", halted: make(chan string, 1)}
	f.mu.Lock()
	f.machines[rec.ID] = m
	f.mu.Unlock()
	return m
}

// Restore makes a machine from a snapshot or a hibernated record.
func (f *Fake) Restore(ctx context.Context, spec desktop.RestoreSpec) (desktop.Machine, error) {
	if f.RestoreDelay > 0 {
		t := time.NewTimer(f.RestoreDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if f.FailRestores != nil {
		return nil, f.FailRestores
	}
	if spec.Hibernated != nil {
		var rec fakeRecord
		if err := json.Unmarshal(spec.Hibernated, &rec); err != nil || !rec.Hibernated {
			return nil, fmt.Errorf("%w: not a hibernated record", desktop.ErrInvalid)
		}
		rec.Hibernated = false
		return f.newMachine(rec, f.shapeOf(rec)), nil
	}
	s := spec.Snapshot
	if diffs := s.Manifest.Machine.Mismatch(f.shape); len(diffs) > 0 {
		return nil, fmt.Errorf("%w: %v", desktop.ErrMismatch, diffs)
	}
	for _, role := range []string{desktop.FileMemory, desktop.FileState, desktop.FileDisk} {
		if _, err := os.Stat(s.Path(role)); err != nil {
			return nil, fmt.Errorf("restore %s: %w", s.Name, err)
		}
	}
	rec := fakeRecord{ID: spec.ID, Snapshot: s.Name, Width: s.Manifest.Machine.Width, Height: s.Manifest.Machine.Height}
	return f.newMachine(rec, s.Manifest.Machine), nil
}

func (f *Fake) shapeOf(rec fakeRecord) desktop.MachineShape {
	s := f.shape
	s.Width, s.Height, s.CPUs, s.MemoryMiB, s.Devices = rec.Width, rec.Height, 2, 1024, []string{"fake-vga"}
	return s
}

// Attach finds a live machine by its record.
func (f *Fake) Attach(ctx context.Context, raw json.RawMessage) (desktop.Machine, error) {
	var rec fakeRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.machines[rec.ID]
	if !ok {
		return nil, fmt.Errorf("%w: machine %s", desktop.ErrNotFound, rec.ID)
	}
	return m, nil
}

// Cleanup forgets a machine.
func (f *Fake) Cleanup(ctx context.Context, raw json.RawMessage) error {
	var rec fakeRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return err
	}
	f.mu.Lock()
	m := f.machines[rec.ID]
	delete(f.machines, rec.ID)
	f.mu.Unlock()
	if m != nil {
		m.end("cleaned up")
	}
	return nil
}

var _ desktop.Sweeper = (*Fake)(nil)

// Sweep ends the machines no record in owned names.
func (f *Fake) Sweep(ctx context.Context, owned []json.RawMessage) ([]string, error) {
	keep := map[string]bool{}
	for _, raw := range owned {
		var rec fakeRecord
		if json.Unmarshal(raw, &rec) == nil {
			keep[rec.ID] = true
		}
	}
	var ended []*FakeMachine
	var swept []string
	f.mu.Lock()
	for id, m := range f.machines {
		if !keep[id] {
			delete(f.machines, id)
			ended = append(ended, m)
			swept = append(swept, id)
		}
	}
	f.mu.Unlock()
	for _, m := range ended {
		m.end("swept: no record owned it")
	}
	return swept, nil
}

// FakeMachine is one fake machine.
type FakeMachine struct {
	f     *Fake
	shape desktop.MachineShape

	mu     sync.Mutex
	rec    fakeRecord
	status string
	// resumed is closed when a paused machine runs again; nil while it runs.
	resumed chan struct{}
	inputs  [][]desktop.InputEvent
	// pointer is where the last move went (shown once moved); keys counts
	// key presses: the fake screen shows both, as a guest's would.
	pointer *image.Point
	keys    int
	reason  string
	exited  chan struct{}
	ended   bool
	halted  chan string
	// shells are the scripts run with sh -c through its agent, in order;
	// lastExit the exit code of the last ("exit N" exits N, any other 0).
	shells   []string
	lastExit int
	// files are what guest-file-write wrote, by path; open is the path of
	// the handle open for writing (the fake has one at a time).
	files map[string]string
	open  string
	// clock is the time the guest's clock was last set to.
	clock time.Time
	// busySince, when set, makes the guest's CPUs busy from then on.
	busySince time.Time
	// driven are the CPU shares the Manager set, in order (SetDriven).
	driven []bool
}

var _ desktop.Machine = (*FakeMachine)(nil)

// Clock is the time the guest's clock was last set to (guest-set-time),
// zero if never.
func (m *FakeMachine) Clock() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clock
}

// File is what the agent last wrote to a guest file, and whether it did.
func (m *FakeMachine) File(path string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.files[path]
	return c, ok
}

// Shells returns the scripts run with sh -c through the machine's agent.
func (m *FakeMachine) Shells() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.shells...)
}

var _ desktop.Halter = (*FakeMachine)(nil)

// Halted delivers what Halt says.
func (m *FakeMachine) Halted() <-chan string { return m.halted }

// Halt pauses the machine on its own, as a QEMU machine does at its disk
// bound, and says why on Halted.
func (m *FakeMachine) Halt(reason string) {
	m.setStatus("paused")
	m.halted <- reason
}

// Record returns the machine's record.
func (m *FakeMachine) Record() json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _ := json.Marshal(m.rec)
	return b
}

func (m *FakeMachine) alive() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended {
		return fmt.Errorf("%w: machine ended", desktop.ErrUnavailable)
	}
	return nil
}

// Status is "running" or "paused".
func (m *FakeMachine) Status() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

func (m *FakeMachine) setStatus(s string) error {
	if err := m.alive(); err != nil {
		return err
	}
	m.mu.Lock()
	m.status = s
	switch {
	case s == "paused" && m.resumed == nil:
		m.resumed = make(chan struct{})
	case s == "running" && m.resumed != nil:
		close(m.resumed)
		m.resumed = nil
	}
	m.mu.Unlock()
	return nil
}

// answering waits until the guest could answer its agent: it runs (a
// paused guest answers nothing, like a real one) and HoldAgents does not
// hold it.
func (m *FakeMachine) answering(ctx context.Context) error {
	m.f.mu.Lock()
	cut := m.f.cut
	m.f.mu.Unlock()
	for {
		m.f.mu.Lock()
		wait := m.f.agentGate
		m.f.mu.Unlock()
		m.mu.Lock()
		ended := m.ended
		if wait == nil {
			wait = m.resumed
		}
		m.mu.Unlock()
		select {
		case <-cut:
			return fmt.Errorf("%w: the driver closed its connection to the guest agent", desktop.ErrUnavailable)
		default:
		}
		if ended {
			return fmt.Errorf("%w: machine ended", desktop.ErrUnavailable)
		}
		if wait == nil {
			return nil
		}
		select {
		case <-wait:
		case <-cut:
		case <-m.exited:
		case <-ctx.Done():
			return fmt.Errorf("%w: the guest agent did not answer: %w", desktop.ErrUnavailable, ctx.Err())
		}
	}
}

// Stopped says whether the machine is paused.
func (m *FakeMachine) Stopped(ctx context.Context) (bool, error) {
	return m.Status() == "paused", m.alive()
}

// Pause marks the machine paused.
func (m *FakeMachine) Pause(ctx context.Context) error { return m.setStatus("paused") }

// Resume marks it running.
func (m *FakeMachine) Resume(ctx context.Context) error { return m.setStatus("running") }

// Hibernate ends the machine and returns a record that wakes it.
func (m *FakeMachine) Hibernate(ctx context.Context) (json.RawMessage, error) {
	if err := m.alive(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.rec.Hibernated = true
	b, _ := json.Marshal(m.rec)
	m.mu.Unlock()
	m.f.mu.Lock()
	delete(m.f.machines, m.rec.ID)
	m.f.mu.Unlock()
	m.end("hibernated")
	return b, nil
}

// Snapshot writes small stand-in files. Like a real driver's, it refuses
// a directory whose filesystem could not hold the machine's RAM.
func (m *FakeMachine) Snapshot(ctx context.Context, dir string, opts desktop.SnapshotOptions) (desktop.MachineShape, error) {
	if err := m.alive(); err != nil {
		return desktop.MachineShape{}, err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return desktop.MachineShape{}, err
	}
	if free := int64(st.Bavail) * st.Bsize; free < int64(m.shape.MemoryMiB)<<20 {
		return desktop.MachineShape{}, fmt.Errorf("%w: %s has %d MiB free, a snapshot needs %d MiB", desktop.ErrCapacity, dir, free>>20, m.shape.MemoryMiB)
	}
	for _, role := range []string{desktop.FileMemory, desktop.FileState, desktop.FileDisk} {
		if err := os.WriteFile(filepath.Join(dir, role), []byte(role+" of "+m.rec.ID), 0o600); err != nil {
			return desktop.MachineShape{}, err
		}
	}
	if m.rec.Template {
		m.f.mu.Lock()
		delete(m.f.machines, m.rec.ID)
		m.f.mu.Unlock()
		m.end("template saved")
	}
	return m.shape, nil
}

// AdoptSnapshot does nothing: fake disks have no backing chains.
func (m *FakeMachine) AdoptSnapshot(ctx context.Context, s desktop.Snapshot) error { return nil }

// Destroy ends the machine.
func (m *FakeMachine) Destroy(ctx context.Context) error {
	m.f.mu.Lock()
	delete(m.f.machines, m.rec.ID)
	m.f.mu.Unlock()
	m.end("destroyed")
	return nil
}

// Crash ends the machine as if its process died.
func (m *FakeMachine) Crash(reason string) {
	m.f.mu.Lock()
	delete(m.f.machines, m.rec.ID)
	m.f.mu.Unlock()
	m.end(reason)
}

func (m *FakeMachine) end(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ended {
		m.ended = true
		m.reason = reason
		close(m.exited)
	}
}

// Exited is closed when the machine ends.
func (m *FakeMachine) Exited() <-chan struct{} { return m.exited }

// ExitReason says why it ended.
func (m *FakeMachine) ExitReason() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reason
}

// SendInput records the frame, refusing what QEMU would refuse.
func (m *FakeMachine) SendInput(ctx context.Context, events []desktop.InputEvent) error {
	if err := m.alive(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	w, h := m.screen()
	for _, e := range events {
		if e.Kind == desktop.InputMove && (e.X < 0 || e.Y < 0 || e.X >= w || e.Y >= h) {
			return fmt.Errorf("%w: pointer position %d,%d is outside the %dx%d screen", desktop.ErrInvalid, e.X, e.Y, w, h)
		}
	}
	m.inputs = append(m.inputs, append([]desktop.InputEvent(nil), events...))
	for _, e := range events {
		switch {
		case e.Kind == desktop.InputMove:
			m.pointer = &image.Point{X: e.X, Y: e.Y}
		case e.Kind == desktop.InputKey && e.Down:
			m.keys++
		}
	}
	return nil
}

// screen is the fake screen's size; m.mu must be held.
func (m *FakeMachine) screen() (int, int) { return max(m.rec.Width, 64), max(m.rec.Height, 48) }

// Inputs returns the frames sent so far.
func (m *FakeMachine) Inputs() [][]desktop.InputEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]desktop.InputEvent(nil), m.inputs...)
}

// Screendump returns a picture of the machine's screen size: grey with a
// white dot, a white mark per key pressed along the top, and the pointer
// (a white square) where the last move went.
func (m *FakeMachine) Screendump(ctx context.Context) (image.Image, error) {
	if err := m.alive(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.picture(), nil
}

// picture draws the fake screen; m.mu must be held.
func (m *FakeMachine) picture() *image.RGBA {
	w, h := m.screen()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0x40
	}
	img.Set(10, 10, color.White)
	white := image.NewUniform(color.White)
	for k := range m.keys {
		x := 20 + 3*(k%((w-40)/3))
		draw.Draw(img, image.Rect(x, 20, x+2, 22), white, image.Point{}, draw.Src)
	}
	if p := m.pointer; p != nil {
		draw.Draw(img, image.Rect(p.X, p.Y, p.X+4, p.Y+4), white, image.Point{}, draw.Src)
	}
	return img
}

// Agent is a fake guest agent: the Fake's Guest when it has one.
func (m *FakeMachine) Agent() desktop.GuestAgent {
	if g := m.f.Guest; g != nil {
		return guestOrFake{g: g, fake: fakeAgent{m}}
	}
	return fakeAgent{m}
}

// DialVNC connects to the fake's RFB server (fakevnc.go), in memory.
func (m *FakeMachine) DialVNC(ctx context.Context) (net.Conn, error) {
	if err := m.alive(); err != nil {
		return nil, err
	}
	client, server := net.Pipe()
	go m.serveRFB(server)
	return client, nil
}

// DialNIC gives a stream that swallows frames: a NIC with no guest network
// stack behind it (the fake has no guest).
func (m *FakeMachine) DialNIC(ctx context.Context) (net.Conn, error) {
	if err := m.alive(); err != nil {
		return nil, err
	}
	client, server := net.Pipe()
	go func() {
		io.Copy(io.Discard, server)
		server.Close()
	}()
	return client, nil
}

// Pid is 0: the fake has no process.
func (m *FakeMachine) Pid() int { return 0 }

// VCPUTime is 0 (the guest idle whenever asked) until SetBusy; then it
// grows with the clock, as one virtual CPU running without a break.
func (m *FakeMachine) VCPUTime() (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.busySince.IsZero() {
		return 0, nil
	}
	return time.Since(m.busySince), nil
}

// SetBusy makes the guest's CPUs busy (true) or idle (false) from now.
func (m *FakeMachine) SetBusy(busy bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.busySince = time.Time{}
	if busy {
		m.busySince = time.Now()
	}
}

// SetDriven records the CPU share the Manager gives the machine
// (desktop.Prioritizer); Driven reports each change in order.
func (m *FakeMachine) SetDriven(driven bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.driven = append(m.driven, driven)
	return nil
}

// Driven reports the SetDriven calls so far.
func (m *FakeMachine) Driven() []bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.driven)
}

type fakeAgent struct{ m *FakeMachine }

// Call answers the commands the Manager and the suite use.
func (a fakeAgent) Call(ctx context.Context, command string, args, result any) error {
	if err := a.m.answering(ctx); err != nil {
		return err
	}
	var reply any
	switch command {
	case "guest-ping", "guest-file-close", "guest-file-flush":
		reply = map[string]any{}
	case "guest-set-time":
		a.m.setClock(args)
		reply = map[string]any{}
	case "guest-info":
		var cmds []map[string]any
		for _, c := range []string{"guest-ping", "guest-info", "guest-set-time", "guest-exec", "guest-exec-status", "guest-file-open", "guest-file-write", "guest-file-close", "guest-file-flush"} {
			cmds = append(cmds, map[string]any{"name": c, "enabled": true})
		}
		reply = map[string]any{"version": "fake", "supported_commands": cmds}
	case "guest-exec":
		a.m.exec(args)
		reply = map[string]int{"pid": 1}
	case "guest-exec-status":
		a.m.mu.Lock()
		reply = map[string]any{"exited": true, "exitcode": a.m.lastExit, "out-data": ""}
		a.m.mu.Unlock()
	case "guest-file-open", "guest-file-write":
		var req struct {
			Path string `json:"path"`
			Mode string `json:"mode"`
			Buf  string `json:"buf-b64"`
		}
		b, _ := json.Marshal(args)
		json.Unmarshal(b, &req)
		a.m.mu.Lock()
		if command == "guest-file-open" {
			a.m.open = req.Path
			reply = 1
		} else {
			data, err := base64.StdEncoding.DecodeString(req.Buf)
			if err != nil || a.m.open == "" {
				a.m.mu.Unlock()
				return fmt.Errorf("fake guest agent: guest-file-write: no open file or bad base64 (%v)", err)
			}
			if a.m.files == nil {
				a.m.files = map[string]string{}
			}
			a.m.files[a.m.open] = string(data)
			reply = map[string]int{"count": len(data)}
		}
		a.m.mu.Unlock()
	default:
		return fmt.Errorf("fake guest agent: %s not supported", command)
	}
	if result == nil {
		return nil
	}
	b, _ := json.Marshal(reply)
	return json.Unmarshal(b, result)
}

func (m *FakeMachine) setClock(args any) {
	b, _ := json.Marshal(args)
	var req struct {
		Time int64 `json:"time"`
	}
	json.Unmarshal(b, &req)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clock = time.Unix(0, req.Time)
}

// exec notes a guest-exec of sh -c SCRIPT; "exit N" exits N.
func (m *FakeMachine) exec(args any) {
	b, _ := json.Marshal(args)
	var req struct {
		Path string   `json:"path"`
		Arg  []string `json:"arg"`
	}
	json.Unmarshal(b, &req)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastExit = 0
	if req.Path != "/bin/sh" || len(req.Arg) != 2 || req.Arg[0] != "-c" {
		return
	}
	m.shells = append(m.shells, req.Arg[1])
	var code int
	if _, err := fmt.Sscanf(req.Arg[1], "exit %d", &code); err == nil {
		m.lastExit = code
	}
}

// MemStore is an in-memory desktop.Store.
type MemStore struct {
	mu       sync.Mutex
	desktops map[string]desktop.Desktop
}

var _ desktop.Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{desktops: map[string]desktop.Desktop{}} }

// LoadDesktops returns all records.
func (s *MemStore) LoadDesktops() ([]desktop.Desktop, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]desktop.Desktop, 0, len(s.desktops))
	for _, d := range s.desktops {
		out = append(out, d)
	}
	return out, nil
}

// PutDesktop stores a record.
func (s *MemStore) PutDesktop(d desktop.Desktop) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.desktops[d.ID] = d
	return nil
}

// DeleteDesktop removes a record.
func (s *MemStore) DeleteDesktop(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.desktops, id)
	return nil
}

// BakeFake makes a golden snapshot on the fake driver; onCreate are its
// manifest's on_create commands.
func BakeFake(ctx context.Context, f *Fake, c *desktop.Catalog, name string, onCreate ...string) (desktop.Snapshot, error) {
	draft, err := c.Begin(name)
	if err != nil {
		return desktop.Snapshot{}, err
	}
	defer draft.Abort()
	m, err := f.Boot(ctx, desktop.BootSpec{Name: name, CPUs: 2, MemoryMiB: 1024, Dir: draft.Dir,
		Image: desktop.BootImage{Width: 1280, Height: 800}})
	if err != nil {
		return desktop.Snapshot{}, err
	}
	shape, err := m.Snapshot(ctx, draft.Dir, desktop.SnapshotOptions{})
	if err != nil {
		return desktop.Snapshot{}, err
	}
	return draft.Commit(&desktop.Manifest{BakedBy: "fake", Machine: shape, Image: desktop.ImageRef{Name: "fake", Flavor: "minimal", Hash: "0"}, OnCreate: onCreate})
}
