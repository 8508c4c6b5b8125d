package libvirt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemuvm"
)

var _ desktop.Sweeper = (*Driver)(nil)

// Sweep ends the desktop domains of this driver (marked RoleDesktop, their
// run directory under this driver's) that no record in owned names: a
// create that crashed between starting its domain and recording it. A
// domain of a desktop whose record says hibernated is a wake that crashed
// before its record: it ends too, and only its run directory goes, for
// the hibernated desktop's disk and state are in its data directory.
func (d *Driver) Sweep(ctx context.Context, owned []json.RawMessage) ([]string, error) {
	keep, hibernated := map[string]bool{}, map[string]bool{}
	for _, raw := range owned {
		if rec, err := parseRecord(raw); err == nil {
			keep[rec.ID] = !rec.Hibernated
			hibernated[rec.ID] = rec.Hibernated
		}
	}
	doms, err := call(ctx, d.conn, func(l *golibvirt.Libvirt) ([]golibvirt.Domain, error) {
		ds, _, err := l.ConnectListAllDomains(1, golibvirt.ConnectListDomainsActive)
		return ds, err
	})
	if err != nil {
		return nil, fmt.Errorf("sweep: list domains: %w", err)
	}
	var swept []string
	var errs []error
	for _, dom := range doms {
		meta, err := d.domainMeta(ctx, dom)
		if err != nil || meta.Role != RoleDesktop || meta.ID == "" || keep[meta.ID] {
			continue // not hostd's, or owned
		}
		dirs := qemuvm.Dirs{RunDir: filepath.Join(d.opts.RunDir, meta.ID), DataDir: filepath.Join(d.opts.DataDir, meta.ID)}
		if _, err := os.Stat(dirs.RunDir); err != nil {
			continue // another driver's (another run directory)
		}
		err = do(ctx, d.conn, func(l *golibvirt.Libvirt) error { return l.DomainDestroyFlags(dom, golibvirt.DomainDestroyDefault) })
		if err != nil && !errors.Is(err, desktop.ErrNotFound) && !errors.Is(err, desktop.ErrConflict) {
			errs = append(errs, fmt.Errorf("sweep: destroy %s: %w", dom.Name, err))
			continue
		}
		do(ctx, d.conn, func(l *golibvirt.Libvirt) error { return l.DomainUndefineFlags(dom, 0) })
		// No machine of this hostd watched the domain end, so its cgroup
		// goes here (it has none when libvirt placed it, or none was made).
		if d.cgroups != nil {
			if g, err := d.cgroups.Group(meta.ID); err == nil {
				if err := g.Remove(); err != nil {
					errs = append(errs, fmt.Errorf("sweep: %w", err))
				}
			}
		}
		if hibernated[meta.ID] {
			// A wake cut short gave the kept disk to an id nobody holds
			// now: root's again before the id goes to another desktop.
			if err := rootOwnsFiles(dirs.DataDir); err != nil {
				errs = append(errs, fmt.Errorf("sweep: %w", err))
			}
			dirs.DataDir = ""
		}
		if err := dirs.Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		swept = append(swept, dom.Name)
	}
	return swept, errors.Join(errs...)
}

// rootOwnsFiles gives every file directly in dir to root.
func rootOwnsFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return qemuvm.Root.Chown(files...)
}
