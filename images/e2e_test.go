package images_test

import (
	"context"
	"image"
	"testing"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/qemu"
	"github.com/warmdesk/warmdesk/images"
	"github.com/warmdesk/warmdesk/internal/testenv"
)

// desktopBackground is the root window colour the guest session sets
// (xsetroot -solid '#25303b').
var desktopBackground = [3]uint8{0x25, 0x30, 0x3b}

// TestBuildBakeRestoreShowsDesktop builds the minimal image, bakes it under
// TCG (or takes both from the cache), restores it once copy-on-write and
// checks the screen is the desktop: mostly the session's background colour
// with a window on it, not a blank or a text console.
func TestBuildBakeRestoreShowsDesktop(t *testing.T) {
	baked := testenv.Snapshot(t, images.FlavorMinimal)
	m := baked.Snapshot.Manifest
	if m.Machine.Width != 1280 || m.Machine.Height != 800 || m.Image.Hash != baked.Image.Hash {
		t.Fatalf("manifest %+v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	drv, err := qemu.New(ctx, qemu.Options{RunDir: testenv.RunDir(t), DataDir: testenv.DataDir(t), Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if err := images.RestoreCheck(ctx, drv, baked.Snapshot); err != nil {
		t.Fatalf("restore check: %v", err)
	}
	mach, err := drv.Restore(ctx, desktop.RestoreSpec{ID: desktop.NewID("e2e-"), Snapshot: baked.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	defer mach.Destroy(context.Background())
	img, err := mach.Screendump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bg, distinct := colourStats(img)
	t.Logf("screen: %.0f%% background, %d distinct colours", bg*100, distinct)
	if bg < 0.3 {
		t.Errorf("only %.0f%% of the screen is the desktop background: not the desktop", bg*100)
	}
	if distinct < 8 {
		t.Errorf("%d distinct colours: a blank or text screen, not the desktop with a window", distinct)
	}
}

func colourStats(img image.Image) (background float64, distinct int) {
	b := img.Bounds()
	seen := map[uint32]bool{}
	bg, n := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			r8, g8, b8 := uint8(r>>8), uint8(g>>8), uint8(bl>>8)
			seen[uint32(r8)<<16|uint32(g8)<<8|uint32(b8)] = true
			if [3]uint8{r8, g8, b8} == desktopBackground {
				bg++
			}
			n++
		}
	}
	return float64(bg) / float64(n), len(seen)
}

func TestBakeRefusesBadInput(t *testing.T) {
	cat, err := desktop.NewCatalog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []images.BakeOptions{
		{Catalog: cat, Name: "x", CPUs: 100},
		{Catalog: cat, Name: "x", MemoryMiB: 16},
		{Catalog: cat, Name: "Bad Name"},
	} {
		if _, err := images.Bake(context.Background(), o); err == nil {
			t.Errorf("bake %+v succeeded", o)
		}
	}
	if snaps, _, _ := cat.List(); len(snaps) != 0 {
		t.Errorf("a refused bake left snapshots: %v", snaps)
	}
}
