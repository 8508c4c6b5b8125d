package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/hostd/app"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/hostd/settle"
	"github.com/warmdesk/warmdesk/hostd/store"
	"github.com/warmdesk/warmdesk/images"
)

func cmdSnapshot(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "snapshot", args, map[string]func(context.Context, *env, []string) error{
		"bake":   snapshotBake,
		"list":   snapshotList,
		"verify": snapshotVerify,
		"rm":     snapshotRemove,
	})
}

func snapshotBake(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "snapshot bake")
	cfg := config.DefaultServe()
	cfg.Paths.Register(fs)
	fs.StringVar(&cfg.Accel, "accel", cfg.Accel, "accelerator: auto, kvm or tcg")
	imageName := fs.String("image", images.FlavorMinimal, "image to boot (see hostd image list)")
	name := fs.String("name", "", "snapshot name (default: the image's name)")
	memory := fs.String("memory", "1GiB", "guest memory, e.g. 1GiB or 2048MiB")
	cpus := fs.Int("cpus", 2, "virtual CPUs")
	quiet := fs.Duration("quiet", 2*time.Second, "how long the screen must stay unchanged before the snapshot is taken")
	ifMissing := fs.Bool("if-missing", false, "do nothing when a usable snapshot of this name and image exists; replace an unusable one that no desktop uses")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	mib, err := config.ParseSize(*memory)
	if err != nil {
		return usagef("--memory: %v", err)
	}
	im, err := images.Find(cfg.CacheDir, *imageName)
	if err != nil {
		return err
	}
	// A recipe's memory and CPUs, unless the flags say otherwise.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if d := im.Recipe.Bake; !given["memory"] && d.MemoryMiB != 0 {
		mib = d.MemoryMiB
	}
	if d := im.Recipe.Bake; !given["cpus"] && d.CPUs != 0 {
		*cpus = d.CPUs
	}
	if *name == "" {
		*name = im.Name
	}
	if err := cfg.MakeStateDirs(); err != nil {
		return err
	}
	cat, err := desktop.NewCatalog(cfg.Snapshots())
	if err != nil {
		return err
	}
	drv, err := app.NewDriver(ctx, cfg, nil, nil, e.log)
	if err != nil {
		return err
	}
	if c, ok := drv.(app.Closer); ok {
		defer c.Close()
	}
	if *ifMissing {
		done, err := keepOrClear(ctx, e, cfg, cat, drv, *name, im, mib, *cpus)
		if err != nil || done {
			return err
		}
	}
	start := time.Now()
	snap, err := images.Bake(ctx, images.BakeOptions{
		Driver: drv, Catalog: cat, Image: im, Name: *name, CPUs: *cpus, MemoryMiB: mib, Progress: e.stderr,
		FailureDir: filepath.Join(cfg.CacheDir, "bake-failures"),
		Settle: func(ctx context.Context, m desktop.Machine) error {
			res, err := settle.Machine(ctx, m, *quiet, 5*time.Minute, e.log)
			if err != nil {
				return err
			}
			if !res.Settled {
				fmt.Fprintf(e.stderr, "warning: the screen was still changing after %s; taking the snapshot anyway\n", res.Waited.Round(time.Second))
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "baked %s from image %s in %s: %s\n", snap.Name, im.Name, time.Since(start).Round(time.Second), snap.Dir)
	return nil
}

// keepOrClear decides what --if-missing does with an existing snapshot:
// keep a usable one (done), remove an unusable unused one (bake again), or
// refuse to touch one that desktops use.
func keepOrClear(ctx context.Context, e *env, cfg config.Serve, cat *desktop.Catalog, drv desktop.Driver, name string, im images.Image, mib, cpus int) (bool, error) {
	s, err := cat.Get(name)
	if errors.Is(err, desktop.ErrNotFound) {
		return false, nil
	}
	var why []string
	if err != nil {
		why = append(why, err.Error())
	} else {
		why = s.Manifest.Machine.Mismatch(drv.Shape())
		if s.Manifest.Image.Hash != im.Hash {
			why = append(why, fmt.Sprintf("it was baked from image %s, the current %s image is %s", short(s.Manifest.Image.Hash), im.Name, short(im.Hash)))
		}
		if !slices.Equal(s.Manifest.OnCreate, im.Recipe.Bake.OnCreate) {
			why = append(why, "its on_create commands are not the recipe's")
		}
		if s.Manifest.Machine.MemoryMiB != mib || s.Manifest.Machine.CPUs != cpus {
			why = append(why, fmt.Sprintf("it has %d CPUs and %d MiB, %d and %d were asked for", s.Manifest.Machine.CPUs, s.Manifest.Machine.MemoryMiB, cpus, mib))
		}
		if len(why) == 0 {
			if err := cat.Verify(s); err != nil {
				why = append(why, err.Error())
			}
		}
	}
	if len(why) == 0 {
		fmt.Fprintf(e.stderr, "snapshot %s is baked and usable: nothing to do\n", name)
		return true, nil
	}
	users, err := offlineUsers(cfg, name)
	if err != nil {
		return false, fmt.Errorf("snapshot %s must be baked again (%s), but: %w", name, strings.Join(why, "; "), err)
	}
	if len(users) > 0 {
		return false, fmt.Errorf("snapshot %s must be baked again (%s), but desktops %s use it: delete them, or bake under another --name", name, strings.Join(why, "; "), strings.Join(users, ", "))
	}
	fmt.Fprintf(e.stderr, "snapshot %s is stale (%s): baking it again\n", name, strings.Join(why, "; "))
	return false, cat.Remove(name)
}

// offlineUsers lists desktops that use a snapshot, from the records store;
// it fails when a running hostd holds the store.
func offlineUsers(cfg config.Serve, name string) ([]string, error) {
	st, err := store.Open(cfg.Records())
	if err != nil {
		return nil, err
	}
	defer st.Close()
	records, err := st.LoadDesktops()
	if err != nil {
		return nil, err
	}
	var users []string
	for _, d := range records {
		if slices.Contains(d.Uses, name) {
			users = append(users, d.ID)
		}
	}
	return users, nil
}

func snapshotList(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "snapshot list")
	paths := config.DefaultPaths()
	paths.Register(fs)
	asJSON := fs.Bool("json", false, "print every snapshot with its full manifest, as JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	cat, err := desktop.NewCatalog(paths.Snapshots())
	if err != nil {
		return err
	}
	snaps, bad, err := cat.List()
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(snaps)
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "NAME\tIMAGE\tFLAVOR\tCPUS\tMEMORY\tSCREEN\tACCEL\tQEMU\tMACHINE\tPARENT\tCREATED")
	for _, s := range snaps {
		m := s.Manifest
		parent := m.Parent
		if parent == "" {
			parent = "-"
		}
		fmt.Fprintf(tw, "%s\t%s (%s)\t%s\t%d\t%d MiB\t%dx%d\t%s\t%s\t%s\t%s\t%s\n", s.Name, m.Image.Name, short(m.Image.Hash), m.Image.Flavor,
			m.Machine.CPUs, m.Machine.MemoryMiB, m.Machine.Width, m.Machine.Height, m.Machine.Accel, m.Machine.QEMUVersion, m.Machine.Type, parent,
			m.CreatedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
	for name, err := range bad {
		fmt.Fprintf(e.stderr, "unreadable snapshot directory %s: %v\n", name, err)
	}
	return nil
}

func snapshotVerify(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "snapshot verify")
	paths := config.DefaultPaths()
	paths.Register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one snapshot name")
	}
	cat, err := desktop.NewCatalog(paths.Snapshots())
	if err != nil {
		return err
	}
	s, err := cat.Get(pos[0])
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cat.Verify(s); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "snapshot %s: %d files match their checksums (%s)\n", s.Name, len(s.Manifest.Files), time.Since(start).Round(time.Millisecond))
	return nil
}

func snapshotRemove(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "snapshot rm")
	paths := config.DefaultPaths()
	paths.Register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one snapshot name")
	}
	name := pos[0]
	// A running daemon knows which desktops use the snapshot: ask it.
	if c, err := daemonClient(paths); err == nil {
		err := c.RemoveSnapshot(ctx, name)
		if err == nil {
			fmt.Fprintf(e.stdout, "removed snapshot %s\n", name)
			return nil
		}
		if !isUnreachable(err) {
			return err
		}
	}
	cfg := config.DefaultServe()
	cfg.Paths = paths
	users, err := offlineUsers(cfg, name)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return fmt.Errorf("snapshot %s is used by desktops %s: delete them first", name, strings.Join(users, ", "))
	}
	cat, err := desktop.NewCatalog(paths.Snapshots())
	if err != nil {
		return err
	}
	snaps, _, err := cat.List()
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if s.Manifest.Parent == name {
			return fmt.Errorf("snapshot %s is layered on %s: remove it first", s.Name, name)
		}
	}
	if err := cat.Remove(name); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "removed snapshot %s\n", name)
	return nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
