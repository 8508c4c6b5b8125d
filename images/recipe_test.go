package images

import (
	"strings"
	"testing"
)

func TestRecipeHashIsStableAndSensitive(t *testing.T) {
	a, err := NewRecipe(FlavorMinimal, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewRecipe(FlavorMinimal, 1280, 800)
	if a.Hash() != b.Hash() {
		t.Fatal("the default size and an explicit 1280x800 hash differently")
	}
	// Order of packages does not matter; their set does.
	c := b
	c.Packages = append([]string(nil), b.Packages...)
	c.Packages[0], c.Packages[1] = c.Packages[1], c.Packages[0]
	if c.Hash() != b.Hash() {
		t.Error("package order changed the hash")
	}
	for name, change := range map[string]func(*Recipe){
		"size":    func(r *Recipe) { r.Width = 1024 },
		"package": func(r *Recipe) { r.Packages = append(r.Packages, "htop") },
		"file":    func(r *Recipe) { r.Files[0].Content += "\n# changed" },
		"cmdline": func(r *Recipe) { r.Cmdline += " debug" },
		"mkfs":    func(r *Recipe) { r.MkfsExtended = "root_owner=0:0" },
		"version": func(r *Recipe) { r.Version++ },
	} {
		r, _ := NewRecipe(FlavorMinimal, 0, 0)
		change(&r)
		if r.Hash() == a.Hash() {
			t.Errorf("changing the %s did not change the hash", name)
		}
	}
	br, _ := NewRecipe(FlavorBrowser, 0, 0)
	if br.Hash() == a.Hash() || !contains(br.AptPackages, "chromium") {
		t.Error("browser recipe is not distinct or lacks chromium")
	}
}

func TestRecipeRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		flavor string
		w, h   int
	}{
		{"gnome", 0, 0}, {FlavorMinimal, 100, 100}, {FlavorMinimal, 1281, 800}, {FlavorMinimal, 8000, 800},
	} {
		if _, err := NewRecipe(tc.flavor, tc.w, tc.h); err == nil {
			t.Errorf("NewRecipe(%q, %d, %d) accepted", tc.flavor, tc.w, tc.h)
		}
	}
}

func TestRecipeFilesRenderResolution(t *testing.T) {
	r, _ := NewRecipe(FlavorMinimal, 1024, 768)
	var xorg, env string
	for _, f := range r.Files {
		switch f.Path {
		case "/etc/X11/xorg.conf.d/10-warmdesk.conf":
			xorg = f.Content
		case "/etc/warmdesk/desktop.env":
			env = f.Content
		}
	}
	if !strings.Contains(xorg, `Modes "1024x768"`) || !strings.Contains(env, "WARMDESK_WIDTH=1024") {
		t.Errorf("resolution not rendered:\n%s\n%s", xorg, env)
	}
	for _, f := range r.Files {
		if strings.HasPrefix(f.Path, "/usr/local/lib/warmdesk/apps.d/") && strings.Contains(f.Path, "chromium") {
			t.Error("minimal image starts chromium")
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
