package qemu_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/movestream"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// A running machine moves to another driver (another host's, here in one
// process) through the move stream: its guest runs on there, answering
// its agent, its kernel whole, and the source is left stopped.
func TestAMachineMovesToAnotherDriver(t *testing.T) {
	testenv.SkipShort(t)
	baked := testenv.Snapshot(t, "minimal")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	newDriver := func() *qemu.Driver {
		d, err := qemu.New(ctx, qemu.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: testenv.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	}
	src, dst := newDriver(), newDriver()
	const id = "d-0123456789abcdef"
	m, err := src.Restore(ctx, desktop.RestoreSpec{ID: id, Snapshot: baked.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy(context.Background())
	ping := func(mach desktop.Machine) error {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return mach.Agent().Call(pctx, "guest-ping", nil, nil)
	}
	if err := ping(m); err != nil {
		t.Fatalf("the source's agent: %v", err)
	}
	// As a create does: the guest's clock set (from the snapshot's time),
	// then a guest that keeps its timers and memory busy while it moves.
	if err := desktop.SetTime(ctx, m.Agent(), time.Now()); err != nil {
		t.Fatalf("set the guest's clock: %v", err)
	}
	busy := map[string]any{"path": "/bin/sh", "arg": []string{"-c", "while :; do date +%s%N; sleep 0.05; done > /tmp/ticks 2>&1 &"}}
	if err := m.Agent().Call(ctx, "guest-exec", busy, nil); err != nil {
		t.Fatalf("start the guest's loop: %v", err)
	}
	in, err := dst.Incoming(ctx, desktop.IncomingSpec{ID: id, Snapshot: baked.Snapshot, Source: m.Record()})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	held := false
	go func() {
		st, err := m.(desktop.LiveSender).SendLive(ctx, pw, func(context.Context) error { held = true; return nil })
		t.Logf("sent: %+v", st)
		if err == nil {
			w := movestream.NewWriter(pw)
			if err = w.Write(movestream.Commit, 0, []byte("commit")); err == nil {
				err = w.Flush()
			}
		}
		pw.CloseWithError(err)
		sent <- err
	}()
	mach, commit, err := in.Receive(ctx, pr)
	if err != nil {
		in.Abandon(ctx)
		t.Fatalf("receive: %v (send: %v)", err, <-sent)
	}
	defer mach.Destroy(context.Background())
	if err := <-sent; err != nil || string(commit) != "commit" || !held {
		t.Fatalf("send: %v, commit %q, held %v", err, commit, held)
	}
	if stopped, err := m.(desktop.Stopper).Stopped(ctx); err != nil || !stopped {
		t.Fatalf("the source after the move: stopped %v, %v", stopped, err)
	}
	if err := mach.(desktop.Committer).Committed(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ping(mach); err != nil {
		t.Fatalf("the moved guest's agent: %v", err)
	}
	// As the Manager does after a move: the clock set again.
	if err := desktop.SetTime(ctx, mach.Agent(), time.Now()); err != nil {
		t.Fatalf("set the moved guest's clock: %v", err)
	}
	// The guest goes on: its loop writes 20 more readings.
	more := "a=$(wc -l < /tmp/ticks); while [ $(wc -l < /tmp/ticks) -lt $((a+20)) ]; do sleep 0.1; done"
	if res, err := desktop.Shell(ctx, mach.Agent(), more, 30*time.Second); err != nil || res.ExitCode != 0 {
		t.Errorf("the moved guest's loop did not go on: %+v, %v", res, err)
	}
	var rec struct {
		DataDir string `json:"data_dir"`
	}
	if err := json.Unmarshal(mach.Record(), &rec); err != nil {
		t.Fatal(err)
	}
	console, err := os.ReadFile(filepath.Join(rec.DataDir, "console.log"))
	if err != nil {
		t.Fatalf("the moved guest's console log: %v", err)
	}
	if strings.Contains(string(console), "Kernel panic") || strings.Contains(string(console), "BUG:") {
		t.Fatalf("the moved guest's kernel failed:\n%s", console)
	}
}
