package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

var _ desktop.Sweeper = (*Driver)(nil)

// Sweep ends the machines under this driver's directories that no record
// in owned names: a desktop's ("d-"), a pool machine's ("pool-") whose
// pool marker is gone (taken by a create that never recorded it), and a
// bake's or snapshot template's ("bake-", "tmpl-") whose snapshot draft no
// live process holds. Pool machines still marked are the pool's own. A
// hibernated desktop's record owns its files but no process: a QEMU
// running in its directories is a wake a crash cut short, and ends (the
// state it woke from is still there).
func (d *Driver) Sweep(ctx context.Context, owned []json.RawMessage) ([]string, error) {
	keep := map[string]bool{}
	var errs []error
	for _, raw := range owned {
		var rec record
		if json.Unmarshal(raw, &rec) != nil {
			continue
		}
		keep[filepath.Base(rec.RunDir)] = true
		keep[filepath.Base(rec.DataDir)] = true
		if rec.Hibernated {
			if err := killQEMUsOf(ctx, rec.RunDir); err != nil {
				errs = append(errs, err)
				continue
			}
			// As Hibernate leaves them: no run directory, no cgroup, its
			// files root's.
			os.RemoveAll(rec.RunDir)
			d.removeCgroup(rec.ID, &errs)
			if err := qemuvm.Root.Chown(rec.DataDir, rec.Disk); err != nil {
				errs = append(errs, err)
			}
		}
	}
	names := map[string]bool{}
	for _, dir := range []string{d.opts.RunDir, d.opts.DataDir} {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("sweep: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() {
				names[e.Name()] = true
			}
		}
	}
	marked := func(name string) bool {
		_, err := os.Stat(filepath.Join(d.opts.RunDir, name, poolMarker))
		return err == nil
	}
	draftLive := func(name string) bool {
		draft, err := os.ReadFile(filepath.Join(d.opts.RunDir, name, draftMarker))
		return err == nil && desktop.DraftInUse(string(draft))
	}
	var swept []string
	for _, name := range unowned(names, keep, marked, draftLive) {
		if d.sweepMachine(ctx, name, &errs) {
			swept = append(swept, name)
		}
	}
	return swept, errors.Join(errs...)
}

// sweepMachine ends the QEMU running in machine name's directories, then
// removes them and its cgroup, and says whether it did; errors go to errs.
func (d *Driver) sweepMachine(ctx context.Context, name string, errs *[]error) bool {
	dirs := qemuvm.Dirs{RunDir: filepath.Join(d.opts.RunDir, name), DataDir: filepath.Join(d.opts.DataDir, name)}
	if err := killQEMUsOf(ctx, dirs.RunDir); err != nil {
		*errs = append(*errs, err)
		return false // its files stay while it may still use them
	}
	if err := dirs.Remove(); err != nil {
		*errs = append(*errs, err)
		return false
	}
	d.removeCgroup(name, errs)
	return true
}

// unowned picks, from machine directory names, those of desktops, taken
// pool machines, and bakes and templates whose draft is not live, that
// keep does not hold.
func unowned(names, keep map[string]bool, marked, draftLive func(string) bool) []string {
	var out []string
	for name := range names {
		switch {
		case keep[name]:
		case strings.HasPrefix(name, "d-"):
			out = append(out, name)
		case strings.HasPrefix(name, "pool-") && !marked(name):
			out = append(out, name)
		case (strings.HasPrefix(name, "tmpl-") || strings.HasPrefix(name, "bake-")) && !draftLive(name):
			out = append(out, name)
		}
	}
	return out
}

// draftMarker is the file in a bake's or template's run directory naming
// the snapshot draft it works for: while a live process holds that draft,
// the machine is not an orphan.
const draftMarker = "draft"

// markDraft writes the draft marker.
func markDraft(runDir, draft string) error {
	return os.WriteFile(filepath.Join(runDir, draftMarker), []byte(draft), 0o600)
}

// killQEMUsOf ends every QEMU process whose command line names runDir (its
// sockets live there) and waits for each to exit.
func killQEMUsOf(ctx context.Context, runDir string) error {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return err
	}
	needle := []byte(filepath.Clean(runDir) + "/")
	for _, path := range procs {
		cmdline, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(cmdline, needle) || !bytes.Contains(cmdline, []byte("qemu-system")) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		st, err := procStartTime(pid)
		if err != nil {
			continue // ended meanwhile
		}
		p, err := attachProcess(pid, st, runDir, "", nil)
		if err != nil {
			continue
		}
		if err := p.kill(ctx); err != nil {
			return err
		}
	}
	return nil
}

// removeCgroup removes the cgroup of machine id, if machines have cgroups.
func (d *Driver) removeCgroup(id string, errs *[]error) {
	if d.jails == nil || d.jails.cgroups == nil {
		return
	}
	if g, err := d.jails.cgroups.Group(id); err == nil {
		if err := g.Remove(); err != nil {
			*errs = append(*errs, err)
		}
	}
}
