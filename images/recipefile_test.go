package images

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// writeRecipe writes files into a fresh directory and returns the path of
// the first one named.
func writeRecipe(t *testing.T, files map[string]string, main string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, main)
}

const fullRecipe = `name: office
from: minimal
screen: {width: 1024, height: 768}
disk_mib: 4096
memory_mib: 2048
cpus: 1
packages: [libreoffice-calc, mupdf]
files:
  - src: doc.ods
    dst: /root/doc.ods
    mode: "0600"
    owner: root:root
  - src: tree
    dst: /opt/tree
build:
  - echo built > /etc/built
apps:
  - name: calc
    run: soffice --calc /root/doc.ods
    ready: {window: '^doc\.ods'}
    timeout: 3m
  - name: server
    run: busybox httpd -f -p 8080
    ready: {port: 8080}
on_create:
  - hostname > /root/name
`

func TestLoadRecipeEveryField(t *testing.T) {
	path := writeRecipe(t, map[string]string{
		"office.yaml": fullRecipe, "doc.ods": "cells", "tree/a.txt": "a", "tree/sub/b.txt": "b",
	}, "office.yaml")
	r, name, err := LoadRecipe(path)
	if err != nil {
		t.Fatal(err)
	}
	if name != "office" || r.Flavor != FlavorMinimal || r.Width != 1024 || r.Height != 768 || r.DiskMiB != 4096 {
		t.Errorf("name %q flavor %q screen %dx%d disk %d", name, r.Flavor, r.Width, r.Height, r.DiskMiB)
	}
	if r.Bake.MemoryMiB != 2048 || r.Bake.CPUs != 1 || len(r.Bake.OnCreate) != 1 {
		t.Errorf("bake defaults %+v", r.Bake)
	}
	if !contains(r.AptPackages, "libreoffice-calc") || !contains(r.AptPackages, "mupdf") {
		t.Errorf("apt packages %v", r.AptPackages)
	}
	var dsts []string
	for _, c := range r.Copies {
		dsts = append(dsts, c.Dst)
	}
	if strings.Join(dsts, " ") != "/root/doc.ods /opt/tree/a.txt /opt/tree/sub/b.txt" {
		t.Errorf("copies %v", dsts)
	}
	if c := r.Copies[0]; c.Mode != 0o600 || c.Owner != "root:root" || c.Size != 5 || len(c.Digest) != 64 {
		t.Errorf("copy %+v", c)
	}
	if c := r.Copies[1]; c.Mode != 0o640 {
		t.Errorf("a directory's file keeps its own mode when none is given: %o", c.Mode)
	}
	if len(r.BuildSteps) != 1 || len(r.Apps) != 2 || r.Apps[0].Timeout != 180 || r.Apps[1].Timeout != defaultAppTimeout {
		t.Errorf("build %v apps %+v", r.BuildSteps, r.Apps)
	}
	var scripts []string
	for _, f := range r.Files {
		if strings.Contains(f.Path, "/apps.d/") {
			scripts = append(scripts, filepath.Base(f.Path))
		}
	}
	if strings.Join(scripts, " ") != "10-xterm 50-01-calc 50-02-server" {
		t.Errorf("the session starts %v", scripts)
	}
	if r.Source != path {
		t.Errorf("source %q", r.Source)
	}
}

func TestRecipeFromRecipe(t *testing.T) {
	path := writeRecipe(t, map[string]string{
		"base.yaml": "name: base\nfrom: browser\npackages: [mupdf]\napps:\n  - {name: a, run: a, ready: {file: /a}}\non_create: [one]\nmemory_mib: 1536\n",
		"top.yaml":  "name: top\nfrom: base.yaml\npackages: [mupdf, gimp]\napps:\n  - {name: b, run: b, ready: {command: 'true'}}\non_create: [two]\n",
	}, "top.yaml")
	r, name, err := LoadRecipe(path)
	if err != nil {
		t.Fatal(err)
	}
	if name != "top" || r.Flavor != FlavorBrowser || !contains(r.AptPackages, "chromium") || !contains(r.AptPackages, "gimp") {
		t.Errorf("name %q flavor %q packages %v", name, r.Flavor, r.AptPackages)
	}
	n := 0
	for _, p := range r.AptPackages {
		if p == "mupdf" {
			n++
		}
	}
	if n != 1 || len(r.Apps) != 2 || r.Apps[0].Name != "a" || strings.Join(r.Bake.OnCreate, ",") != "one,two" || r.Bake.MemoryMiB != 1536 {
		t.Errorf("mupdf %d times, apps %+v, bake %+v", n, r.Apps, r.Bake)
	}
}

func TestRecipeHashCoversCopiedContent(t *testing.T) {
	files := map[string]string{"r.yaml": "name: r\nfrom: minimal\nfiles:\n  - {src: f, dst: /f}\non_create: [a]\nmemory_mib: 512\n", "f": "one"}
	path := writeRecipe(t, files, "r.yaml")
	a, _, err := LoadRecipe(path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(filepath.Dir(path), "f"), []byte("two"), 0o640)
	b, _, err := LoadRecipe(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash() == b.Hash() {
		t.Error("editing a copied file did not change the hash")
	}
	// Moving the recipe, or changing what only the bake reads, does not.
	moved := writeRecipe(t, map[string]string{"r.yaml": strings.Replace(files["r.yaml"], "[a]", "[b]", 1), "f": "two"}, "r.yaml")
	c, _, err := LoadRecipe(moved)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash() != b.Hash() {
		t.Error("moving the recipe or changing on_create changed the hash")
	}
	// The name is part of the hash: a recipe that adds nothing to its
	// flavor, or two recipes alike but for their names, never share (and
	// rename) one cached image.
	flavor, _ := NewRecipe(FlavorMinimal, 0, 0)
	plain, _, err := LoadRecipe(writeRecipe(t, map[string]string{"p.yaml": "name: p\nfrom: minimal\n"}, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := LoadRecipe(writeRecipe(t, map[string]string{"q.yaml": "name: q\nfrom: minimal\n"}, "q.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Hash() == flavor.Hash() || plain.Hash() == other.Hash() {
		t.Error("recipes named apart, or a recipe and its flavor, hash alike: they would rename each other's image")
	}
}

func TestRecipeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, recipe string
		extra        map[string]string
		want         string
	}{
		{"unknown key", "name: a\nfrom: minimal\npackage: [x]\n", nil, "line 3: field package not found"},
		{"wrong type", "name: a\nfrom: minimal\ncpus: two\n", nil, "line 3: cannot unmarshal !!str `two` into int"},
		{"bad yaml", "name: a\nfrom: [minimal\n", nil, "did not find expected"},
		{"empty", "", nil, "empty"},
		{"no name", "from: minimal\n", nil, "name is missing"},
		{"no from", "name: a\n", nil, "from is missing"},
		{"from nowhere", "name: a\nfrom: base.yaml\n", nil, "line 2: from base.yaml: no such recipe"},
		{"from itself", "name: a\nfrom: r.yaml\n", nil, "starts from itself"},
		{"screen", "name: a\nfrom: minimal\nscreen: {width: 100, height: 100}\n", nil, "line 3: screen size 100x100"},
		{"package name", "name: a\nfrom: minimal\npackages:\n  - ok\n  - 'x; rm -rf /'\n", nil, "line 5: package \"x; rm -rf /\""},
		{"missing file", "name: a\nfrom: minimal\nfiles:\n  - {src: nope, dst: /nope}\n", nil, "line 4: file nope: no such file"},
		{"relative dst", "name: a\nfrom: minimal\nfiles:\n  - {src: f, dst: etc/f}\n", map[string]string{"f": "x"}, "line 4: dst \"etc/f\""},
		{"dst in /proc", "name: a\nfrom: minimal\nfiles:\n  - {src: f, dst: /proc/f}\n", map[string]string{"f": "x"}, "not kept in the image"},
		{"mode", "name: a\nfrom: minimal\nfiles:\n  - {src: f, dst: /f, mode: rw}\n", map[string]string{"f": "x"}, "line 4: mode \"rw\""},
		{"owner", "name: a\nfrom: minimal\nfiles:\n  - {src: f, dst: /f, owner: 'a b'}\n", map[string]string{"f": "x"}, "owner \"a b\""},
		{"empty step", "name: a\nfrom: minimal\nbuild:\n  - echo\n  - ''\n", nil, "line 5: build step 2 is empty"},
		{"no check", "name: a\nfrom: minimal\napps:\n  - {name: x, run: x}\n", nil, "line 4: app x: ready needs exactly one"},
		{"two checks", "name: a\nfrom: minimal\napps:\n  - {name: x, run: x, ready: {port: 1, file: /f}}\n", nil, "exactly one"},
		{"bad regexp", "name: a\nfrom: minimal\napps:\n  - {name: x, run: x, ready: {window: '('}}\n", nil, "ready.window"},
		{"timeout", "name: a\nfrom: minimal\napps:\n  - {name: x, run: x, ready: {file: /f}, timeout: 5}\n", nil, "line 4: timeout \"5\""},
		{"app twice", "name: a\nfrom: minimal\napps:\n  - {name: x, run: x, ready: {file: /f}}\n  - {name: x, run: y, ready: {file: /g}}\n", nil, "line 5: app \"x\" appears twice"},
		{"app name", "name: a\nfrom: minimal\napps:\n  - {name: X/Y, run: x, ready: {file: /f}}\n", nil, "app name \"X/Y\""},
		{"memory", "name: a\nfrom: minimal\nmemory_mib: 10\n", nil, "line 3: memory_mib 10"},
		{"disk", "name: a\nfrom: minimal\ndisk_mib: 100\n", nil, "line 3: disk_mib 100"},
		{"flavor's name", "name: minimal\nfrom: minimal\n", nil, "line 1: name \"minimal\" is a flavor's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"r.yaml": tc.recipe}
			for k, v := range tc.extra {
				files[k] = v
			}
			path := writeRecipe(t, files, "r.yaml")
			_, _, err := LoadRecipe(path)
			var re *RecipeError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a RecipeError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "r.yaml") {
				t.Errorf("got %q, want it to name r.yaml and say %q", err, tc.want)
			}
		})
	}
}

// TestRecipeSyntaxErrorLine checks that a YAML syntax error names the line
// the mistake is on. The YAML library names where the construct around it
// begins, counting from 0 for some errors: a recipe with a comment on top
// had every such error "at line 1".
func TestRecipeSyntaxErrorLine(t *testing.T) {
	top := "# office desktop\nname: office\nfrom: minimal\ncpus: 1\n"
	for _, tc := range []struct {
		name, recipe string
		line         int
	}{
		{"indented key", top + "memory_mib: 512\n  disk_mib: 4096\n", 6},
		{"key out of a list item", top + "apps:\n  - name: x\n    run: y\n   ready: {file: /f}\n", 8},
		{"list item in a mapping", top + "packages: [a]\n- b\nbuild: [c]\n", 6},
		{"tab", top + "build:\n\t- echo\n", 6},
		{"unclosed list", top + "packages: [a, b\nbuild: [c]\nmemory_mib: 512\n", 5},
		{"quote", top + "on_create: ['it's']\nmemory_mib: 512\n", 5},
		{"no comment, last line", "name: a\nfrom: minimal\ncpus: 1\nmemory_mib: 512\ndisk_mib: 4096\n- x", 6},
		{"first line", "name: a: b\nfrom: minimal\n", 1},
		{"a key after a list", "- a\nname: b\n", 2},
		{"CR line ends", strings.ReplaceAll(top, "\n", "\r") + "packages: [a]\r- b\r", 6},
		{"CRLF line ends", strings.ReplaceAll(top, "\n", "\r\n") + "packages: [a]\r\n- b\r\n", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := LoadRecipe(writeRecipe(t, map[string]string{"r.yaml": tc.recipe}, "r.yaml"))
			var re *RecipeError
			if !errors.As(err, &re) || re.Line != tc.line {
				t.Fatalf("got %v, want an error at line %d", err, tc.line)
			}
		})
	}
}

func TestLoadRecipeNotFound(t *testing.T) {
	_, _, err := LoadRecipe(filepath.Join(t.TempDir(), "none.yaml"))
	if err == nil || !strings.Contains(err.Error(), "none.yaml: no such recipe") {
		t.Errorf("got %v", err)
	}
}

// TestAppScriptsGolden pins the scripts the session runs for each kind of
// readiness check (go test -run Golden -update rewrites them).
func TestAppScriptsGolden(t *testing.T) {
	for _, a := range []App{
		{Name: "calc", Run: "soffice --calc '/root/my doc.ods'", Ready: ReadyCheck{Window: `^my doc\.ods - LibreOffice$`}, Timeout: 300},
		{Name: "server", Run: "busybox httpd -f -p 8080", Ready: ReadyCheck{Port: 8080}, Timeout: 60},
		{Name: "file", Run: "touch /run/up", Ready: ReadyCheck{File: "/run/up"}, Timeout: 10},
		{Name: "command", Run: "sleep infinity", Ready: ReadyCheck{Command: "pgrep -x sleep"}, Timeout: 120},
	} {
		got := appScript(a)
		path := filepath.Join("testdata", "apps", a.Name+".golden")
		if *update {
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(got), 0o644)
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("app %s:\n%s\nwant:\n%s", a.Name, got, want)
		}
	}
}

func TestExampleRecipesLoad(t *testing.T) {
	paths, _ := filepath.Glob("../examples/recipes/*.yaml")
	if len(paths) < 3 {
		t.Fatalf("examples: %v", paths)
	}
	for _, p := range paths {
		if _, _, err := LoadRecipe(p); err != nil {
			t.Error(err)
		}
	}
}

func FuzzDecodeRecipe(f *testing.F) {
	f.Add([]byte(fullRecipe))
	f.Add([]byte("name: a\nfrom: minimal\napps:\n  - {name: x, run: x, ready: {port: 1}, timeout: 1m}\n"))
	f.Add([]byte("files:\n  - {mode: 0755}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rf, err := decodeRecipe(data)
		if err != nil {
			var re *RecipeError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a RecipeError", err)
			}
			// The line named is a line of the file: the YAML library counts
			// line breaks of its own (CR, LS, in UTF-16 too), and a line has
			// one byte at least.
			if re.Line < 0 || re.Line > len(data)+1 {
				t.Fatalf("error %v names line %d of a file of %d bytes", err, re.Line, len(data))
			}
			return
		}
		// What decodes is checked: every app has one readiness check.
		for _, a := range rf.Apps {
			if checkApp(a) != nil {
				t.Fatalf("app %+v passed decoding but not its check", a)
			}
		}
	})
}

func TestUnknownPackageLine(t *testing.T) {
	out := "Reading package lists...\nBuilding dependency tree...\nE: Unable to locate package libreoffice-calcc\n"
	m := unknownPackage.FindStringSubmatch(out)
	if m == nil || m[1] != "libreoffice-calcc" {
		t.Fatalf("apt's line not recognised: %v", m)
	}
}
