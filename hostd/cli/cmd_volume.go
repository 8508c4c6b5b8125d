package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/warmdesk/warmdesk/api"
)

func cmdVolume(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "volume", args, map[string]func(context.Context, *env, []string) error{
		"create":   volumeCreate,
		"list":     volumeList,
		"rm":       volumeRemove,
		"snapshot": volumeSnapshot,
		"attach":   volumeAttach,
		"detach":   volumeDetach,
		"export":   volumeExport,
		"import":   volumeImport,
	})
}

func oneName(pos []string, what string) (string, error) {
	if len(pos) != 1 {
		return "", usagef("want one %s", what)
	}
	return pos[0], nil
}

func volumeCreate(ctx context.Context, e *env, args []string) error {
	var req api.CreateVolume
	pos, c, err := connectAs(e, "volume create", args, func(fs *flagSet) {
		fs.IntVar(&req.SizeMiB, "size-mib", 0, "size in MiB (not with --from)")
		fs.StringVar(&req.From, "from", "", "start from this volume snapshot")
	})
	if err != nil {
		return err
	}
	if req.Name, err = oneName(pos, "volume name"); err != nil {
		return err
	}
	v, err := c.CreateVolume(ctx, req)
	if err != nil {
		return err
	}
	return printVolumes(e, []api.Volume{v}, false)
}

func volumeList(ctx context.Context, e *env, args []string) error {
	var asJSON bool
	_, c, err := connectAs(e, "volume list", args, func(fs *flagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON") })
	if err != nil {
		return err
	}
	vs, err := c.Volumes(ctx)
	if err != nil {
		return err
	}
	return printVolumes(e, vs, asJSON)
}

func printVolumes(e *env, vs []api.Volume, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(vs)
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "NAME\tSIZE\tUSED\tKIND\tFROM\tATTACHED")
	for _, v := range vs {
		kind := "volume"
		if v.Snapshot {
			kind = "snapshot"
		}
		if v.Damaged != "" {
			kind += " (damaged)"
		}
		var at []string
		for _, h := range v.AttachedTo {
			at = append(at, h.Desktop+":"+h.Mode)
		}
		fmt.Fprintf(tw, "%s\t%d MiB\t%.1f MiB\t%s\t%s\t%s\n", v.Name, v.SizeMiB, float64(v.AllocatedBytes)/(1<<20), kind, v.From, strings.Join(at, ","))
	}
	return tw.Flush()
}

func volumeRemove(ctx context.Context, e *env, args []string) error {
	pos, c, err := connectAs(e, "volume rm", args, nil)
	if err != nil {
		return err
	}
	name, err := oneName(pos, "volume name")
	if err != nil {
		return err
	}
	return c.RemoveVolume(ctx, name)
}

func volumeSnapshot(ctx context.Context, e *env, args []string) error {
	var snap string
	pos, c, err := connectAs(e, "volume snapshot", args, func(fs *flagSet) { fs.StringVar(&snap, "name", "", "name of the volume snapshot") })
	if err != nil {
		return err
	}
	name, err := oneName(pos, "volume name")
	if err != nil {
		return err
	}
	if snap == "" {
		return usagef("--name: name the volume snapshot")
	}
	v, err := c.FreezeVolume(ctx, name, snap)
	if err != nil {
		return err
	}
	return printVolumes(e, []api.Volume{v}, false)
}

func volumeAttach(ctx context.Context, e *env, args []string) error {
	var m api.VolumeMount
	var id string
	pos, c, err := connectAs(e, "volume attach", args, func(fs *flagSet) {
		fs.StringVar(&id, "desktop", "", "the desktop's id")
		fs.StringVar(&m.Mount, "mount", "/workspace", "where the guest mounts it")
		fs.StringVar(&m.Mode, "mode", "rw", "rw (one desktop) or ro (any number)")
	})
	if err != nil {
		return err
	}
	if m.Name, err = oneName(pos, "volume name"); err != nil {
		return err
	}
	d, err := c.AttachVolume(ctx, id, m)
	if err != nil {
		return err
	}
	return printDesktops(e, []api.Desktop{d}, false)
}

func volumeDetach(ctx context.Context, e *env, args []string) error {
	var id string
	pos, c, err := connectAs(e, "volume detach", args, func(fs *flagSet) { fs.StringVar(&id, "desktop", "", "the desktop's id") })
	if err != nil {
		return err
	}
	name, err := oneName(pos, "volume name")
	if err != nil {
		return err
	}
	_, err = c.DetachVolume(ctx, id, name)
	return err
}

func volumeExport(ctx context.Context, e *env, args []string) error {
	pos, c, err := connectAs(e, "volume export", args, nil)
	if err != nil {
		return err
	}
	name, err := oneName(pos, "volume name")
	if err != nil {
		return err
	}
	_, err = c.ExportVolume(ctx, name, e.stdout)
	return err
}

func volumeImport(ctx context.Context, e *env, args []string) error {
	var file string
	pos, c, err := connectAs(e, "volume import", args, func(fs *flagSet) { fs.StringVar(&file, "file", "", "the tar to fill the volume from") })
	if err != nil {
		return err
	}
	name, err := oneName(pos, "volume name")
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.ImportVolume(ctx, name, f)
}

// parseVolumeFlag reads --volume NAME:/MOUNT[:ro|rw].
func parseVolumeFlag(v string) (api.VolumeMount, error) {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return api.VolumeMount{}, fmt.Errorf("volume %q: give NAME:/MOUNT or NAME:/MOUNT:ro", v)
	}
	m := api.VolumeMount{Name: parts[0], Mount: parts[1]}
	if len(parts) == 3 {
		if parts[2] != "ro" && parts[2] != "rw" {
			return api.VolumeMount{}, fmt.Errorf("volume %q: the mode is ro or rw", v)
		}
		m.Mode = parts[2]
	}
	return m, nil
}
