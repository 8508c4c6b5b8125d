package images

import (
	"reflect"
	"strings"
	"testing"
)

const sampleDep = `kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko
kernel/lib/crc16.ko:
kernel/fs/mbcache.ko:
kernel/fs/jbd2/jbd2.ko:
kernel/drivers/gpu/drm/tiny/bochs.ko: kernel/drivers/gpu/drm/drm_vram_helper.ko kernel/drivers/gpu/drm/drm.ko
kernel/drivers/gpu/drm/drm_vram_helper.ko: kernel/drivers/gpu/drm/drm.ko
kernel/drivers/gpu/drm/drm.ko:
kernel/arch/x86/crypto/crc32c-intel.ko:
kernel/sound/core/snd.ko:
`

func TestModuleClosure(t *testing.T) {
	mods, err := parseModulesDep(strings.NewReader(sampleDep))
	if err != nil {
		t.Fatal(err)
	}
	got, missing := moduleClosure(mods, []string{"ext4", "bochs", "crc32c_intel", "virtio_blk"})
	want := []string{
		"kernel/arch/x86/crypto/crc32c-intel.ko",
		"kernel/drivers/gpu/drm/drm.ko",
		"kernel/drivers/gpu/drm/drm_vram_helper.ko",
		"kernel/drivers/gpu/drm/tiny/bochs.ko",
		"kernel/fs/ext4/ext4.ko",
		"kernel/fs/jbd2/jbd2.ko",
		"kernel/fs/mbcache.ko",
		"kernel/lib/crc16.ko",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("closure\n got %v\nwant %v", got, want)
	}
	if !reflect.DeepEqual(missing, []string{"virtio_blk"}) {
		t.Errorf("missing %v, want [virtio_blk]", missing)
	}
}

func TestParseModulesDepRejectsGarbage(t *testing.T) {
	for _, bad := range []string{"no colon here\n", ": deps\n", "kernel/x.ko x.ko: y\n", "notamodule: a\n"} {
		if _, err := parseModulesDep(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseModulesDep(f *testing.F) {
	f.Add(sampleDep)
	f.Add("a.ko:\n")
	f.Fuzz(func(t *testing.T, s string) {
		mods, err := parseModulesDep(strings.NewReader(s))
		if err != nil {
			return
		}
		var names []string
		for n := range mods {
			names = append(names, n)
		}
		paths, _ := moduleClosure(mods, names)
		for _, p := range paths {
			if !strings.Contains(p, ".ko") {
				t.Fatalf("closure holds a non-module %q", p)
			}
		}
	})
}

func TestParseMountsBelow(t *testing.T) {
	info := `22 1 0:21 / /proc rw,nosuid - proc proc rw
80 60 0:5 / /var/cache/warmdesk/images/.tmp-abc/root/proc rw - proc proc rw
81 60 0:6 / /var/cache/warmdesk/images/.tmp-abc/root/dev/pts rw - devpts devpts rw
82 60 0:7 / /var/cache/warmdesk/images/.tmp-abcd/root/proc rw - proc proc rw
83 60 0:8 / /tmp/with\040space/x rw - tmpfs tmpfs rw
`
	got := parseMountsBelow(info, "/var/cache/warmdesk/images/.tmp-abc/")
	want := []string{"/var/cache/warmdesk/images/.tmp-abc/root/dev/pts", "/var/cache/warmdesk/images/.tmp-abc/root/proc"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := parseMountsBelow(info, "/tmp/with space"); len(got) != 1 {
		t.Errorf("escaped mount point not found: %v", got)
	}
}
