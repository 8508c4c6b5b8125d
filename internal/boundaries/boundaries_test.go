// Package boundaries holds the test that keeps the packages' import
// boundaries (docs/ARCHITECTURE.md): dependencies point toward desktop, only
// hostd wires concrete drivers, the vocabulary, wire types and client know
// no domain package, and protocol packages stay free of HTTP frameworks. A
// forbidden import fails it, naming the import and the path that reaches
// it.
package boundaries

import (
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/warmdesk/warmdesk"

// rule forbids the packages under from (and their own imports, followed
// through the module) to reach an import that forbidden matches. With
// exact, only the packages named in from, not those below them. A rule
// whose from is empty holds for every package of the module but those
// under exceptFrom.
type rule struct {
	from       []string
	forbidden  func(path string) bool
	why        string
	exact      bool
	exceptFrom []string
}

// applies says whether the rule holds for pkg.
func (r rule) applies(pkg string) bool {
	if len(r.from) == 0 {
		return !under(pkg, r.exceptFrom...)
	}
	return under(pkg, r.from...) && (!r.exact || slices.Contains(r.from, trim(pkg)))
}

var drivers = []string{"desktop/qemu", "desktop/libvirt"}

// driverSide is what only hostd wires: the drivers and the QEMU machine
// facts they share.
var driverSide = []string{"desktop/qemu", "desktop/libvirt", "desktop/qemuvm"}

func under(path string, prefixes ...string) bool {
	for _, p := range prefixes {
		p = module + "/" + p
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func stdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

var rules = []rule{
	{[]string{"desktop"}, func(p string) bool {
		return !stdlib(p) && p != module+"/netpolicy" && p != module+"/volume" && p != module+"/internal/fanout"
	}, "the domain imports only the standard library, the policy it records, the volumes it mounts and the fan-out of its events", true, nil},
	{[]string{"internal/fanout"}, func(p string) bool { return !stdlib(p) }, "the fan-out of events is generic: standard library only", true, nil},
	{[]string{"netpolicy"}, func(p string) bool { return !stdlib(p) }, "the egress policy is pure: standard library only", true, nil},
	{[]string{"volume"}, func(p string) bool { return !stdlib(p) }, "volumes know nothing of desktops or drivers: standard library only", true, nil},
	{[]string{"devtools"}, func(p string) bool { return !stdlib(p) && p != "github.com/gorilla/websocket" }, "the DevTools bridge, discovery rewriting and the warm-up know nothing of desktops: standard library and the WebSocket client only", true, nil},
	{[]string{"desktop/confine"}, func(p string) bool { return !stdlib(p) }, "user ids and cgroups know nothing of QEMU or the domain: standard library only", true, nil},
	{[]string{"desktop/qemu"}, func(p string) bool { return under(p, "desktop/libvirt") }, "no driver imports another driver", false, nil},
	{[]string{"desktop/libvirt"}, func(p string) bool { return under(p, "desktop/qemu") }, "no driver imports another driver (shared QEMU facts live in desktop/qemuvm)", false, nil},
	{[]string{"desktop/qemuvm"}, func(p string) bool {
		return !stdlib(p) && p != module+"/desktop" && p != module+"/netpolicy" && p != module+"/volume" && p != module+"/internal/fanout" && p != module+"/desktop/confine" && !under(p, "desktop/qemuvm") && !strings.HasPrefix(p, "golang.org/x/sys/")
	}, "the shared QEMU facts belong to no driver: they import only desktop (and its confine), the standard library and x/sys", false, nil},
	{[]string{"desktop/desktoptest"}, func(p string) bool {
		return !stdlib(p) && p != module+"/desktop" && p != module+"/netpolicy" && p != module+"/volume" && p != module+"/internal/fanout"
	}, "the fake driver and the conformance suite rest on the domain alone", false, nil},
	{nil, func(p string) bool { return under(p, driverSide...) }, "only hostd wires concrete drivers and their shared QEMU facts (the test environment builds them for tests)", false,
		append([]string{"hostd", "internal/testenv"}, driverSide...)},
	{nil, func(p string) bool { return under(p, "web") }, "only hostd imports the HTTP front door; other doors reach desktops through drive or the API's client", false,
		[]string{"hostd", "web"}},
	{[]string{"vnc", "input", "screenshot", "drive", "egress", "recording"}, func(p string) bool { return strings.HasPrefix(p, "github.com/gin-gonic/") }, "no HTTP framework outside web", false, nil},
	{[]string{"input", "api", "client"}, func(p string) bool {
		return under(p, "desktop", "volume", "netpolicy", "internal/fanout", "drive", "web", "hostd", "vnc", "screenshot")
	}, "the action vocabulary, the wire types and the client depend on no domain package and no service: drive runs batches, and the front doors convert wire types at their edge", false, nil},
	{[]string{"browsertool"}, func(p string) bool { return !stdlib(p) && !under(p, "input", "internal/textdist") }, "the browser toolset's vocabulary imports only the standard library and the action vocabulary (its key names)", false, nil},
	{[]string{"agentmcp"}, func(p string) bool {
		return under(p, "web", "drive", "hostd", "vnc", "screenshot", "desktop/qemu", "desktop/libvirt")
	}, "the MCP front door drives desktops only through the API's client", false, nil},
	{[]string{"fleet"}, func(p string) bool {
		return under(p, "web", "drive", "hostd", "vnc", "screenshot", "desktop/qemu", "desktop/libvirt", "desktop/qemuvm")
	}, "the fleet's store and membership know desktops as records: no driver, no HTTP front door, no hostd", false, nil},
	{[]string{"e2b"}, func(p string) bool {
		return under(p, "web", "hostd", "desktop/qemu", "desktop/libvirt") || strings.HasPrefix(p, "github.com/gin-gonic/")
	}, "the E2B front door lands on the Manager and the drive service, in plain net/http", false, nil},
}

// graph maps each package of the module to its non-test imports.
type graph map[string][]string

func loadGraph(t *testing.T) graph {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	g := graph{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor") {
			return filepath.SkipDir
		}
		pkg, err := build.Default.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files here
		}
		rel, _ := filepath.Rel(root, path)
		ip := module
		if rel != "." {
			ip += "/" + filepath.ToSlash(rel)
		}
		g[ip] = pkg.Imports
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// violations lists each forbidden import a rule's packages reach, with the
// chain of module packages that reaches it.
func (g graph) violations(r rule) []string {
	var out []string
	for pkg := range g {
		if !r.applies(pkg) {
			continue
		}
		seen := map[string]bool{pkg: true}
		var walk func(p string, chain []string)
		walk = func(p string, chain []string) {
			for _, imp := range g[p] {
				if r.forbidden(imp) {
					out = append(out, fmt.Sprintf("%s imports %s (%s): %s", trim(pkg), imp, strings.Join(append(chain, trim(imp)), " -> "), r.why))
					continue
				}
				if _, in := g[imp]; in && !seen[imp] {
					seen[imp] = true
					walk(imp, append(chain, trim(imp)))
				}
			}
		}
		walk(pkg, []string{trim(pkg)})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func trim(p string) string { return strings.TrimPrefix(p, module+"/") }

func TestImportBoundaries(t *testing.T) {
	g := loadGraph(t)
	for _, want := range []string{module + "/desktop", module + "/web", module + "/drive", module + "/desktop/libvirt"} {
		if _, ok := g[want]; !ok {
			t.Fatalf("package %s not found: the walk of the module is broken", want)
		}
	}
	for _, r := range rules {
		for _, v := range g.violations(r) {
			t.Error(v)
		}
	}
}

// TestTheCheckFindsForbiddenImports runs the rules on a made-up module
// that breaks them, so a check that silently passes everything fails here.
func TestTheCheckFindsForbiddenImports(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	g := graph{
		m("desktop"):             {"fmt", "github.com/gin-gonic/gin"},
		m("desktop/libvirt"):     {m("desktop/qemu/qmp")},
		m("desktop/qemu/qmp"):    {"net"},
		m("web"):                 {m("drive")},
		m("drive"):               {m("desktop/qemu")},
		m("desktop/qemu"):        {m("desktop")},
		m("input"):               {"strings", m("desktop")},
		m("api"):                 {"time", m("api/wire")},
		m("api/wire"):            {m("netpolicy")},
		m("client"):              {m("api"), m("input")},
		m("netpolicy"):           {"net/netip"},
		m("vnc"):                 {m("vnc/internal")},
		m("vnc/internal"):        {"github.com/gin-gonic/gin"},
		m("screenshot"):          {"image"},
		m("hostd/app"):           {m("desktop/qemu"), m("desktop/libvirt")},
		m("desktop/desktoptest"): {m("desktop")},
		m("e2b"):                 {m("desktop/qemuvm")},
		m("desktop/qemuvm"):      {m("desktop")},
		m("recording"):           {m("web")},
		m("hostd/bench"):         {m("web"), m("desktop/qemuvm")},
	}
	var got []string
	for _, r := range rules {
		got = append(got, g.violations(r)...)
	}
	for _, want := range []string{
		"desktop imports github.com/gin-gonic/gin",
		"desktop/libvirt imports github.com/warmdesk/warmdesk/desktop/qemu/qmp",
		"web imports github.com/warmdesk/warmdesk/desktop/qemu (web -> drive -> desktop/qemu)",
		"vnc imports github.com/gin-gonic/gin (vnc -> vnc/internal -> github.com/gin-gonic/gin)",
		"e2b imports github.com/warmdesk/warmdesk/desktop/qemuvm",
		"recording imports github.com/warmdesk/warmdesk/web",
		"input imports github.com/warmdesk/warmdesk/desktop",
		"api imports github.com/warmdesk/warmdesk/netpolicy (api -> api/wire -> netpolicy)",
		"client imports github.com/warmdesk/warmdesk/netpolicy (client -> api -> api/wire -> netpolicy)",
	} {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, want) }) {
			t.Errorf("no violation %q among:\n%s", want, strings.Join(got, "\n"))
		}
	}
	for _, v := range got {
		if strings.HasPrefix(v, "hostd/") {
			t.Errorf("hostd may wire drivers, but: %s", v)
		}
	}
}
