package web

import (
	"slices"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/images"
)

// ImagesIn lists the images built in cacheDir as the API shows them: hostd
// wires it as Config.Images.
func ImagesIn(cacheDir string) func() ([]api.GuestImage, error) {
	return func() ([]api.GuestImage, error) { return imageViews(cacheDir) }
}

// imageViews lists the cache's images as the API shows them.
func imageViews(cacheDir string) ([]api.GuestImage, error) {
	all, err := images.List(cacheDir)
	if err != nil {
		return nil, err
	}
	out := make([]api.GuestImage, 0, len(all))
	for _, im := range all {
		v := api.GuestImage{
			Name: im.Name, Flavor: im.Flavor, Hash: im.Hash, Screen: api.Screen{Width: im.Width, Height: im.Height},
			Source: im.Recipe.Source, DiskBytes: im.DiskBytes, CreatedAt: im.CreatedAt, BuildSeconds: im.BuildSeconds,
		}
		if im.Recipe.Source != "" {
			base, err := images.NewRecipe(im.Flavor, im.Width, im.Height)
			if err == nil {
				v.Packages = added(base.AptPackages, im.Recipe.AptPackages)
			}
		}
		for _, a := range im.Recipe.Apps {
			v.Apps = append(v.Apps, a.Name)
		}
		out = append(out, v)
	}
	return out, nil
}

// added lists what b has that a has not.
func added(a, b []string) []string {
	var out []string
	for _, s := range b {
		if !slices.Contains(a, s) {
			out = append(out, s)
		}
	}
	return out
}
