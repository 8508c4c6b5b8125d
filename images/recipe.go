// Package images builds warmdesk guest images from Debian packages
// (debootstrap, the guest's own kernel and initramfs, a pruned module tree,
// an ext4 root on a qcow2 disk), caches them by a hash of their recipe, and
// bakes golden snapshots from them by driving a desktop.Driver.
package images

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"text/template"
)

// recipeVersion changes when the build steps change in a way the recipe's
// content does not show, so old cached images are not reused.
const recipeVersion = 1

// Flavors.
const (
	FlavorMinimal = "minimal" // openbox + xterm: small, boots fast, most tests use it
	FlavorBrowser = "browser" // minimal + Chromium open on a local page
)

// DefaultWidth and DefaultHeight are the screen size when none is given.
const (
	DefaultWidth  = 1280
	DefaultHeight = 800
)

//go:embed guest
var guestFiles embed.FS

// File is one file the recipe writes into the image.
type File struct {
	Path    string `json:"path"`
	Mode    uint32 `json:"mode"`
	Content string `json:"content,omitempty"`
	// Link makes the file a symbolic link to this target instead.
	Link string `json:"link,omitempty"`
}

// Recipe is everything an image is built from. Its hash names the image in
// the cache: the same recipe never builds twice.
type Recipe struct {
	Version  int      `json:"version"`
	Suite    string   `json:"suite"`
	Flavor   string   `json:"flavor"`
	Width    int      `json:"width"`
	Height   int      `json:"height"`
	Packages []string `json:"packages"`
	// AptPackages are installed with apt inside the image after
	// debootstrap: debootstrap orders the configuration of large
	// dependency trees (Chromium's) badly, apt does not.
	AptPackages []string `json:"apt_packages,omitempty"`
	Modules     []string `json:"modules"`
	Files       []File   `json:"files"`
	Cmdline     string   `json:"cmdline"`
	// MkfsExtended is mkfs.ext4's -E for the root filesystem.
	MkfsExtended string `json:"mkfs_extended"`

	// What a recipe file adds to its flavor (docs/RECIPES.md). Every field
	// is omitted when empty, so the flavors' hashes stay as they were.

	// Name is a recipe image's name. It is part of the hash, so two
	// recipes never share (and rename) one cached image, nor take a
	// flavor's.
	Name string `json:"name,omitempty"`

	// DiskMiB is the least size of the root filesystem.
	DiskMiB int `json:"disk_mib,omitempty"`
	// Copies are the files the recipe ships, written after the packages.
	Copies []Copy `json:"copies,omitempty"`
	// BuildSteps run in the image tree, as root, after the copies.
	BuildSteps []string `json:"build,omitempty"`
	// Apps are started in the session at boot; their scripts are in Files.
	Apps []App `json:"apps,omitempty"`
	// Source is the recipe file's path, and Bake what the snapshot is
	// baked with: neither is part of the hash, and a cached image takes
	// them from the recipe it was asked for again.
	Source string       `json:"source,omitempty"`
	Bake   BakeDefaults `json:"bake,omitzero"`
}

// BakeDefaults are a recipe's wishes for the snapshots baked from its
// image: flags given to the bake win.
type BakeDefaults struct {
	MemoryMiB int `json:"memory_mib,omitempty"`
	CPUs      int `json:"cpus,omitempty"`
	// OnCreate runs in each new desktop after its restore, through the
	// guest agent, in order.
	OnCreate []string `json:"on_create,omitempty"`
}

// mkfsExtended has mkfs write the inode tables and the journal out in
// full. Left lazy, the guest kernel's ext4lazyinit thread zeroes them after
// boot, and since a snapshot is taken before it is done, every clone
// started over again from the snapshot's point (measured: about 1.2 GB of
// zeroing writes and a second of guest CPU in a clone's first 20 s).
const mkfsExtended = "root_owner=0:0,lazy_itable_init=0,lazy_journal_init=0"

var basePackages = []string{
	"linux-image-amd64", "initramfs-tools", "kmod", "udev", "tini", "procps", "iproute2",
	"util-linux-extra", // hwclock, which guest-set-time runs
	"xserver-xorg-core", "xserver-xorg-input-libinput", "x11-xserver-utils",
	"openbox", "xterm",
	"xdotool", "xclip", // the guest side of input: Unicode text, clipboard
	"curl", "ca-certificates", "busybox", // for agents and tests on a desktop with network (busybox httpd serves a port)
	"qemu-guest-agent",
	"wmctrl", // the window list and its operations (EWMH, which openbox speaks)
	"fonts-dejavu-core", "fonts-wqy-microhei",
}

// python3-minimal runs the DevTools bridge (guest/cdp-bridge). The
// accessibility bus (at-spi2-core, on a D-Bus session of its own) and
// libatspi's Python bindings serve the accessibility tree (guest/a11y-tree).
var browserPackages = []string{
	"chromium", "fonts-liberation", "fonts-noto-color-emoji", "python3-minimal",
	"at-spi2-core", "dbus-daemon", "dbus-session-bus-common", "dbus-bin", "python3-gi", "gir1.2-atspi-2.0",
}

// guestCmdline boots the guest's own kernel with warmdesk's init as PID 1:
// no init system, so the desktop is up in seconds even under TCG.
const guestCmdline = "console=ttyS0,115200 root=/dev/vda rw rootfstype=ext4 init=/usr/local/sbin/warmdesk-init quiet loglevel=3 random.trust_cpu=on"

// NewRecipe returns the recipe of a flavor at a screen size.
func NewRecipe(flavor string, width, height int) (Recipe, error) {
	if width == 0 && height == 0 {
		width, height = DefaultWidth, DefaultHeight
	}
	if width < 640 || height < 480 || width > 3840 || height > 2160 || width%8 != 0 {
		return Recipe{}, fmt.Errorf("screen size %dx%d: use a width from 640 to 3840 (a multiple of 8) and a height from 480 to 2160", width, height)
	}
	r := Recipe{
		Version: recipeVersion, Suite: "bookworm", Flavor: flavor, Width: width, Height: height,
		Modules: vmModules, Cmdline: guestCmdline, MkfsExtended: mkfsExtended,
	}
	r.Packages = append(r.Packages, basePackages...)
	apps := []string{"10-xterm"}
	switch flavor {
	case FlavorMinimal:
	case FlavorBrowser:
		r.AptPackages = append(r.AptPackages, browserPackages...)
		apps = append(apps, "15-a11y", "20-chromium")
	default:
		return Recipe{}, fmt.Errorf("flavor %q: use %s or %s", flavor, FlavorMinimal, FlavorBrowser)
	}
	files, err := guestFileList(width, height, apps, flavor == FlavorBrowser)
	if err != nil {
		return Recipe{}, err
	}
	r.Files = files
	return r, nil
}

// Hash is the recipe's identity: the SHA-256 of its canonical JSON.
func (r Recipe) Hash() string {
	c := r
	c.Packages = sortedCopy(r.Packages)
	c.AptPackages = sortedCopy(r.AptPackages)
	c.Modules = sortedCopy(r.Modules)
	c.Files = append([]File(nil), r.Files...)
	sort.Slice(c.Files, func(i, j int) bool { return c.Files[i].Path < c.Files[j].Path })
	c.Copies = append([]Copy(nil), r.Copies...)
	for i := range c.Copies {
		c.Copies[i].Src = ""
	}
	c.Source, c.Bake = "", BakeDefaults{}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

func guestFileList(width, height int, apps []string, browser bool) ([]File, error) {
	read := func(name string) (string, error) {
		b, err := guestFiles.ReadFile("guest/" + name)
		return string(b), err
	}
	var files []File
	add := func(path string, mode uint32, content string) {
		files = append(files, File{Path: path, Mode: mode, Content: content})
	}
	type guestFile struct {
		src, dst string
		mode     uint32
	}
	copies := []guestFile{
		{"init", "/usr/local/sbin/warmdesk-init", 0o755},
		{"session", "/usr/local/lib/warmdesk/session", 0o755},
	}
	for _, app := range apps {
		copies = append(copies, guestFile{"apps.d/" + app, "/usr/local/lib/warmdesk/apps.d/" + app, 0o755})
	}
	if browser {
		copies = append(copies,
			guestFile{"start.html", "/usr/local/share/warmdesk/start.html", 0o644},
			guestFile{"cdp-bridge", "/usr/local/lib/warmdesk/cdp-bridge", 0o755},
			guestFile{"a11y-tree", "/usr/local/lib/warmdesk/a11y-tree", 0o755})
	}
	for _, f := range copies {
		content, err := read(f.src)
		if err != nil {
			return nil, err
		}
		add(f.dst, f.mode, content)
	}
	tmpl, err := read("xorg.conf.tmpl")
	if err != nil {
		return nil, err
	}
	var xorg bytes.Buffer
	if err := template.Must(template.New("xorg").Parse(tmpl)).Execute(&xorg, map[string]int{"Width": width, "Height": height}); err != nil {
		return nil, err
	}
	add("/etc/X11/xorg.conf.d/10-warmdesk.conf", 0o644, xorg.String())
	add("/etc/warmdesk/desktop.env", 0o644, fmt.Sprintf("WARMDESK_WIDTH=%d\nWARMDESK_HEIGHT=%d\n", width, height))
	add("/etc/hostname", 0o644, "warmdesk\n")
	add("/etc/hosts", 0o644, "127.0.0.1 localhost\n127.0.1.1 warmdesk\n::1 localhost ip6-localhost ip6-loopback\n")
	add("/etc/resolv.conf", 0o644, "nameserver 10.0.2.3\n")
	add("/etc/fstab", 0o644, "/dev/vda / ext4 rw,relatime 0 1\n")
	add("/etc/timezone", 0o644, "Etc/UTC\n")
	files = append(files, File{Path: "/etc/localtime", Mode: 0o777, Link: "/usr/share/zoneinfo/Etc/UTC"})
	add("/etc/default/locale", 0o644, "LANG=C.UTF-8\n")
	// Only what the guest needs in its initramfs: it finds its root disk
	// and hands over to init.
	add("/etc/initramfs-tools/modules", 0o644, "virtio_pci\nvirtio_blk\next4\ncrc32c_generic\n")
	add("/etc/initramfs-tools/conf.d/warmdesk.conf", 0o644, "MODULES=list\nCOMPRESS=gzip\n")
	return files, nil
}
