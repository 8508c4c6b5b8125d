package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/images"
)

func cmdImage(ctx context.Context, e *env, args []string) error {
	return sub(ctx, e, "image", args, map[string]func(context.Context, *env, []string) error{
		"build": imageBuild,
		"list":  imageList,
		"rm":    imageRemove,
		"prune": imagePrune,
	})
}

// imagePrune removes images no snapshot uses, keeping the newest of each
// name.
func imagePrune(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "image prune")
	paths := config.DefaultPaths()
	paths.Register(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	cat, err := desktop.NewCatalog(paths.Snapshots())
	if err != nil {
		return err
	}
	snaps, _, err := cat.List()
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, s := range snaps {
		used[s.Manifest.Image.Hash] = true
	}
	removed, err := images.Prune(paths.CacheDir, used)
	for _, im := range removed {
		fmt.Fprintf(e.stdout, "removed image %s (%s), %d MiB\n", im.Name, short(im.Hash), im.DiskBytes>>20)
	}
	return err
}

func imageBuild(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "image build")
	paths := config.DefaultPaths()
	paths.Register(fs)
	file := fs.String("f", "", "recipe file (YAML) to build, instead of a flavor; see docs/RECIPES.md")
	flavor := fs.String("flavor", images.FlavorMinimal, "minimal (openbox, xterm) or browser (adds Chromium, open at boot)")
	name := fs.String("name", "", "image name (default: the recipe's name, or the flavor)")
	width := fs.Int("width", images.DefaultWidth, "screen width, pixels")
	height := fs.Int("height", images.DefaultHeight, "screen height, pixels")
	mirror := fs.String("mirror", "", "Debian mirror URL for debootstrap and the check of package names (default: debootstrap's own)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	var r images.Recipe
	var err error
	if *file != "" {
		var clash []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "flavor" || f.Name == "width" || f.Name == "height" {
				clash = append(clash, "--"+f.Name)
			}
		})
		if len(clash) > 0 {
			return usagef("%s and -f: a recipe file says its flavor (from) and screen itself", strings.Join(clash, ", "))
		}
		var recipeName string
		if r, recipeName, err = images.LoadRecipe(*file); err != nil {
			return err
		}
		if *name == "" {
			*name = recipeName
		}
		if *name == images.FlavorMinimal || *name == images.FlavorBrowser {
			return usagef("--name %s is a flavor's: give the recipe's image a name of its own", *name)
		}
		r.Name = *name
	} else if r, err = images.NewRecipe(*flavor, *width, *height); err != nil {
		return usagef("%v", err)
	}
	im, err := images.Build(ctx, r, images.BuildOptions{CacheDir: paths.CacheDir, Name: *name, Mirror: *mirror, Progress: e.stderr})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s\t%s\t%s\n", im.Name, im.Hash[:12], im.Dir)
	return nil
}

func imageList(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "image list")
	paths := config.DefaultPaths()
	paths.Register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	all, err := images.List(paths.CacheDir)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(all)
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "NAME\tFLAVOR\tHASH\tSCREEN\tKERNEL\tDISK\tBUILT\tBUILD TIME\tSOURCE")
	for _, im := range all {
		source := im.Recipe.Source
		if source == "" {
			source = "(flavor)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%dx%d\t%s\t%d MiB\t%s\t%s\t%s\n", im.Name, im.Flavor, im.Hash[:12], im.Width, im.Height,
			im.KernelVersion, im.DiskBytes>>20, im.CreatedAt.Local().Format(time.DateTime), time.Duration(im.BuildSeconds*float64(time.Second)).Round(time.Second), source)
	}
	return tw.Flush()
}

func imageRemove(ctx context.Context, e *env, args []string) error {
	fs := flags(e, "image rm")
	paths := config.DefaultPaths()
	paths.Register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one image name or hash")
	}
	im, err := images.Find(paths.CacheDir, pos[0])
	if err != nil {
		return err
	}
	cat, err := desktop.NewCatalog(paths.Snapshots())
	if err != nil {
		return err
	}
	snaps, _, err := cat.List()
	if err != nil {
		return err
	}
	var users []string
	for _, s := range snaps {
		if s.Manifest.Image.Hash == im.Hash {
			users = append(users, s.Name)
		}
	}
	if len(users) > 0 {
		return fmt.Errorf("image %s is the base of snapshots %s: remove them first", im.Name, strings.Join(users, ", "))
	}
	return images.Remove(im)
}
