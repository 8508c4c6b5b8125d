package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// A recipe's image end to end: built and baked from testdata/recipe, a
// desktop created from it has the recipe's app windows open and its port
// listening at create, its copied files in place with their mode and
// owner, its build step's output, and its on_create run (the setup says
// so). A snapshot of the changed desktop is a template: desktops created
// from it have the change and run on_create too.
func TestRecipeImageEndToEnd(t *testing.T) {
	baked := testenv.RecipeSnapshot(t, "testdata/recipe/recipe.yaml")
	if m := baked.Snapshot.Manifest.Machine; m.MemoryMiB != 768 || m.CPUs != 1 {
		t.Errorf("baked with %d MiB and %d CPUs, the recipe asks for 768 and 1", m.MemoryMiB, m.CPUs)
	}
	s := startStackFrom(t, baked, 0)
	ctx := s.ctx(t)

	// The app was open when the snapshot was taken: it is there at once.
	for line, want := range map[string]string{
		"xdotool search --onlyvisible --name '^recipe-note$' | wc -l": "1",
		"stat -c '%a %U:%G' /opt/recipe/hello.txt":                    "640 daemon:daemon",
		"cat /opt/recipe/hello.txt":                                   "hello from the recipe",
		"cat /etc/recipe-built":                                       "built",
		"busybox wget -q -O - http://127.0.0.1:8099/hello.txt":        "hello from the recipe",
		"ls /usr/local/lib/warmdesk/apps.d/ | tr '\\n' ' ' | xargs":   "10-xterm 50-01-note 50-02-web",
	} {
		if got := strings.TrimSpace(string(s.shell(t, line).Stdout)); got != want {
			t.Errorf("%s: got %q, want %q", line, got, want)
		}
	}
	setupDone := func(id string) {
		t.Helper()
		var d api.Desktop
		if !testenv.Poll(time.Minute, 50*time.Millisecond, time.Second, func() bool {
			d, _ = s.c.Desktop(ctx, id)
			return d.Setup != nil && d.Setup.State != "running"
		}) || d.Setup.State != "done" || d.Setup.Commands != 1 {
			t.Fatalf("setup of %s: %+v", id, d.Setup)
		}
		res, err := s.c.Exec(ctx, id, api.ExecRequest{Shell: "cat /root/on-create"})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != id {
			t.Fatalf("on_create in %s wrote %q (%v), want its hostname", id, res.Stdout, err)
		}
	}
	setupDone(s.id)

	// A template made from the live desktop.
	s.shell(t, "echo changed > /root/marker")
	tmpl, err := s.c.Snapshot(ctx, s.id, "recipe-template")
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Parent != baked.Snapshot.Name {
		t.Errorf("template's parent %q, want %q", tmpl.Parent, baked.Snapshot.Name)
	}
	d, err := s.c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: tmpl.Name})
	if err != nil {
		t.Fatal(err)
	}
	setupDone(d.ID)
	res, err := s.c.Exec(ctx, d.ID, api.ExecRequest{Shell: "cat /root/marker"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "changed" {
		t.Fatalf("a desktop from the template has marker %q (%v), want the change", res.Stdout, err)
	}
	if err := s.c.RemoveSnapshot(ctx, tmpl.Name); err == nil {
		t.Error("a template in use was removed")
	}
	// Both use it: the copy, and the source, whose disk now layers on it.
	for _, id := range []string{d.ID, s.id} {
		if err := s.c.DeleteDesktop(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.c.RemoveSnapshot(ctx, tmpl.Name); err != nil {
		t.Errorf("remove the unused template: %v", err)
	}
	var list api.SnapshotList
	if err := s.c.Do(ctx, http.MethodGet, "/v1/snapshots", nil, &list); err != nil {
		t.Fatal(err)
	}
	for _, sn := range list.Snapshots {
		if sn.Name == tmpl.Name {
			t.Error("the removed template is still listed")
		}
	}
}
