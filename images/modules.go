package images

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// vmModules are the kernel modules a warmdesk guest needs on QEMU's q35
// machine with the devices of desktop/qemuvm.DeviceArgs; everything else in
// /lib/modules is removed (it is most of the image otherwise).
var vmModules = []string{
	"virtio_pci", "virtio_blk", "virtio_console", "virtio_net", // disk, agent, NIC
	"ext4", "crc32c_generic", "crc32c_intel", // root filesystem (crc32c is a soft dependency)
	"bochs",                 // std VGA as a DRM device for Xorg modesetting
	"virtio_input", "evdev", // virtio-tablet-pci
}

// moduleName is a module's canonical name: file base without .ko, with '-'
// read as '_' (modprobe treats them alike).
func moduleName(file string) string {
	base := path.Base(file)
	for _, ext := range []string{".ko.xz", ".ko.zst", ".ko.gz", ".ko"} {
		base = strings.TrimSuffix(base, ext)
	}
	return strings.ReplaceAll(base, "-", "_")
}

// parseModulesDep reads a modules.dep file: "path: dep dep ..." per line.
// It returns each module's path and dependency paths, by module name.
func parseModulesDep(r io.Reader) (map[string]moduleEntry, error) {
	mods := map[string]moduleEntry{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		file, deps, ok := strings.Cut(line, ":")
		file = strings.TrimSpace(file)
		if !ok || file == "" || strings.ContainsAny(file, " \t") || !strings.Contains(file, ".ko") {
			return nil, fmt.Errorf("modules.dep line %d: malformed %.60q", n, line)
		}
		mods[moduleName(file)] = moduleEntry{Path: file, Deps: strings.Fields(deps)}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("modules.dep: %w", err)
	}
	return mods, nil
}

type moduleEntry struct {
	Path string
	Deps []string
}

// moduleClosure returns the paths of the wanted modules and everything they
// depend on, sorted. Wanted modules missing from the kernel are reported.
func moduleClosure(mods map[string]moduleEntry, wanted []string) (paths []string, missing []string) {
	byPath := map[string]bool{}
	var visit func(name string) bool
	visit = func(name string) bool {
		m, ok := mods[name]
		if !ok {
			return false
		}
		if byPath[m.Path] {
			return true
		}
		byPath[m.Path] = true
		for _, d := range m.Deps {
			visit(moduleName(d))
		}
		return true
	}
	for _, w := range wanted {
		if !visit(strings.ReplaceAll(w, "-", "_")) {
			missing = append(missing, w)
		}
	}
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths, missing
}
