package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// Image is a built guest image in the cache.
type Image struct {
	Name          string    `json:"name"`
	Flavor        string    `json:"flavor"`
	Hash          string    `json:"hash"`
	Width         int       `json:"width"`
	Height        int       `json:"height"`
	KernelVersion string    `json:"kernel_version"`
	Cmdline       string    `json:"cmdline"`
	CreatedAt     time.Time `json:"created_at"`
	// ChosenAt is when a build last found it cached: the newest of a name
	// is the one built or chosen last.
	ChosenAt     time.Time `json:"chosen_at,omitzero"`
	BuildSeconds float64   `json:"build_seconds"`
	DiskBytes    int64     `json:"disk_bytes"`
	Recipe       Recipe    `json:"recipe"`
	// Dir is where the image lives (not stored; filled in on load).
	Dir string `json:"-"`
}

// The files of an image in its cache directory.
const (
	imageManifest = "image.json"
	imageKernel   = "vmlinuz"
	imageInitrd   = "initrd.img"
	imageDisk     = "disk.qcow2"
)

// latest is when the image was last built or chosen.
func (im Image) latest() time.Time {
	if im.ChosenAt.After(im.CreatedAt) {
		return im.ChosenAt
	}
	return im.CreatedAt
}

// Ref is how snapshots name the image.
func (im Image) Ref() desktop.ImageRef {
	return desktop.ImageRef{Name: im.Name, Flavor: im.Flavor, Hash: im.Hash}
}

// Boot is the image as a desktop.BootImage.
func (im Image) Boot() desktop.BootImage {
	return desktop.BootImage{
		Ref:     im.Ref(),
		Kernel:  filepath.Join(im.Dir, imageKernel),
		Initrd:  filepath.Join(im.Dir, imageInitrd),
		Disk:    filepath.Join(im.Dir, imageDisk),
		Cmdline: im.Cmdline,
		Width:   im.Width,
		Height:  im.Height,
	}
}

// imagesDir is where images live inside the cache directory, one directory
// per recipe hash.
func imagesDir(cacheDir string) string { return filepath.Join(cacheDir, "images") }

// loadImage reads a complete image from its directory.
func loadImage(dir string) (Image, error) {
	data, err := os.ReadFile(filepath.Join(dir, imageManifest))
	if err != nil {
		return Image{}, err
	}
	var im Image
	if err := json.Unmarshal(data, &im); err != nil {
		return Image{}, fmt.Errorf("image %s: %w", filepath.Base(dir), err)
	}
	for _, f := range []string{imageKernel, imageInitrd, imageDisk} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return Image{}, fmt.Errorf("image %s: %w", filepath.Base(dir), err)
		}
	}
	if im.Hash != filepath.Base(dir) {
		return Image{}, fmt.Errorf("image directory %s holds image %s", filepath.Base(dir), im.Hash)
	}
	im.Dir = dir
	return im, nil
}

// List returns every built image in the cache, newest first.
func List(cacheDir string) ([]Image, error) {
	entries, err := os.ReadDir(imagesDir(cacheDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []Image
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		im, err := loadImage(filepath.Join(imagesDir(cacheDir), e.Name()))
		if err != nil {
			continue // not complete: a build in progress or a damaged one
		}
		out = append(out, im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].latest().After(out[j].latest()) })
	return out, nil
}

// Find returns the newest image with this name, or one whose hash starts
// with it.
func Find(cacheDir, name string) (Image, error) {
	all, err := List(cacheDir)
	if err != nil {
		return Image{}, err
	}
	for _, im := range all {
		if im.Name == name {
			return im, nil
		}
	}
	if len(name) >= 8 {
		for _, im := range all {
			if strings.HasPrefix(im.Hash, name) {
				return im, nil
			}
		}
	}
	if name == FlavorMinimal || name == FlavorBrowser {
		return Image{}, fmt.Errorf("%w: image %q is not built: run `hostd image build --flavor %s`", desktop.ErrNotFound, name, name)
	}
	return Image{}, fmt.Errorf("%w: image %q is not built: build its recipe with `hostd image build -f RECIPE.yaml` (see hostd image list)", desktop.ErrNotFound, name)
}

// Remove deletes an image. The caller checks that no snapshot uses it.
func Remove(im Image) error {
	trash := filepath.Join(filepath.Dir(im.Dir), ".trash-"+im.Hash)
	if err := os.Rename(im.Dir, trash); err != nil {
		return fmt.Errorf("remove image %s: %w", im.Name, err)
	}
	return os.RemoveAll(trash)
}

// Prune removes images that no snapshot uses (used holds the image hashes
// snapshots name) and that are not the newest image of their name: what
// recipe changes leave behind in the cache. It returns what it removed.
func Prune(cacheDir string, used map[string]bool) ([]Image, error) {
	all, err := List(cacheDir)
	if err != nil {
		return nil, err
	}
	newest := map[string]bool{}
	var removed []Image
	for _, im := range all { // newest first
		if !newest[im.Name] {
			newest[im.Name] = true
			continue
		}
		if used[im.Hash] {
			continue
		}
		if err := Remove(im); err != nil {
			return removed, err
		}
		removed = append(removed, im)
	}
	return removed, nil
}
