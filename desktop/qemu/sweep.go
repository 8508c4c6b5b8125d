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
// in owned names: a desktop's ("d-") or a pool machine's ("pool-") whose
// pool marker is gone (taken by a create that never recorded it). Pool
// machines still marked are the pool's own; templates ("tmpl-") belong to
// a snapshot that may be in progress elsewhere and are left alone.
func (d *Driver) Sweep(ctx context.Context, owned []json.RawMessage) ([]string, error) {
	keep := map[string]bool{}
	for _, raw := range owned {
		var rec record
		if json.Unmarshal(raw, &rec) == nil {
			keep[filepath.Base(rec.RunDir)] = true
			keep[filepath.Base(rec.DataDir)] = true
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
	var swept []string
	var errs []error
	for _, name := range unowned(names, keep, marked) {
		dirs := qemuvm.Dirs{RunDir: filepath.Join(d.opts.RunDir, name), DataDir: filepath.Join(d.opts.DataDir, name)}
		if err := killQEMUsOf(ctx, dirs.RunDir); err != nil {
			errs = append(errs, err)
			continue // its files stay while it may still use them
		}
		if err := dirs.Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		if d.jails != nil && d.jails.cgroups != nil {
			if g, err := d.jails.cgroups.Group(name); err == nil {
				if err := g.Remove(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		swept = append(swept, name)
	}
	return swept, errors.Join(errs...)
}

// unowned picks, from machine directory names, those of desktops and
// taken pool machines that keep does not hold.
func unowned(names, keep map[string]bool, marked func(string) bool) []string {
	var out []string
	for name := range names {
		switch {
		case keep[name]:
		case strings.HasPrefix(name, "d-"):
			out = append(out, name)
		case strings.HasPrefix(name, "pool-") && !marked(name):
			out = append(out, name)
		}
	}
	return out
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
