package drive

import (
	"errors"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/screenshot"
)

// listing is the window helper's output for an xterm (focused, decimal
// 29360141 = 0x01c0000d) in openbox's frame (a 1-pixel border, a title bar
// of 19 rows and a 4-row handle), an undecorated Chromium window whose
// title holds a tab, a window without WM_CLASS or _NET_WM_PID, a line
// with a broken workspace, one with negative extents and a line the
// helper never prints.
const listing = "active 29360141\n" +
	"window\t0x01c0000d\t0\t212\t42\t60\t904\t544\t1\t1\t20\t5\txterm\tXTerm\troot@warmdesk: ~\n" +
	"window\t0x02200004\t-1\t305\t0\t28\t1280\t772\t0\t0\t0\t0\tchromium\tChromium\tNew Tab\t- Chromium\n" +
	"window\t0x02400001\t0\t0\t-20\t5\t100\t50\t0\t0\t0\t0\t\t\t\n" +
	"window\t0x0240000\tx\t1\t2\t3\t4\t5\t0\t0\t0\t0\ta\tB\tbroken workspace\n" +
	"window\t0x02400002\t0\t1\t2\t3\t4\t5\t-1\t0\t0\t0\ta\tB\tnegative extents\n" +
	"second line of a title\n"

func TestParseWindows(t *testing.T) {
	wins, err := parseWindows(listing)
	if err != nil {
		t.Fatal(err)
	}
	want := []Window{
		{ID: "0x01c0000d", Workspace: 0, PID: 212, X: 42, Y: 60, Width: 904, Height: 544, Frame: Rect{41, 40, 906, 569},
			Instance: "xterm", Class: "XTerm", Title: "root@warmdesk: ~", Focused: true},
		{ID: "0x02200004", Workspace: -1, PID: 305, X: 0, Y: 28, Width: 1280, Height: 772, Frame: Rect{0, 28, 1280, 772},
			Instance: "chromium", Class: "Chromium", Title: "New Tab\t- Chromium"},
		{ID: "0x02400001", Workspace: 0, PID: 0, X: -20, Y: 5, Width: 100, Height: 50, Frame: Rect{-20, 5, 100, 50}},
	}
	if len(wins) != len(want) {
		t.Fatalf("%d windows %+v, want %d", len(wins), wins, len(want))
	}
	for i := range want {
		if wins[i] != want[i] {
			t.Errorf("window %d\n%+v\nwant\n%+v", i, wins[i], want[i])
		}
	}
	if wins, err := parseWindows("active 0\n"); err != nil || len(wins) != 0 || wins == nil {
		t.Errorf("no windows: %v %v (want an empty list, not nil)", wins, err)
	}
	for _, bad := range []string{"", "window\t0x1\n", "active x\n", "active -1\n", "no window\n"} {
		if _, err := parseWindows(bad); !errors.Is(err, errWindowsOutput) {
			t.Errorf("%q: %v, want errWindowsOutput", bad, err)
		}
	}
}

func FuzzParseWindows(f *testing.F) {
	f.Add(listing)
	f.Add("active 0\nwindow\t0x1\t0\t0\t0\t0\t1\t1\t0\t0\t0\t0\t\t\t\n")
	f.Fuzz(func(t *testing.T, out string) {
		wins, err := parseWindows(out)
		if err != nil {
			return
		}
		focused := 0
		for _, w := range wins {
			if id, err := WindowID(w.ID); err != nil || id != w.ID {
				t.Fatalf("id %q is not in the list's form", w.ID)
			}
			f := w.Frame
			if w.Width < 0 || w.Height < 0 || w.PID < 0 || strings.Contains(w.Title, "\n") ||
				f.X > w.X || f.Y > w.Y || f.X+f.Width < w.X+w.Width || f.Y+f.Height < w.Y+w.Height {
				t.Fatalf("window %+v", w)
			}
			if w.Focused {
				focused++
			}
		}
		if focused > 1 {
			t.Fatalf("%d windows focused", focused)
		}
	})
}

func TestWindowID(t *testing.T) {
	for in, want := range map[string]string{"0x01c0000d": "0x01c0000d", "0x1C0000D": "0x01c0000d", "29360141": "0x01c0000d", " 0x5 ": "0x00000005"} {
		if got, err := WindowID(in); err != nil || got != want {
			t.Errorf("WindowID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "0x", "-1", "0x100000000", "xterm", "0x1;reboot", "1e3"} {
		_, err := WindowID(bad)
		var ve interface{ FieldName() string }
		if !errors.Is(err, desktop.ErrInvalid) || !errors.As(err, &ve) || ve.FieldName() != "window" {
			t.Errorf("WindowID(%q): %v, want an invalid window field", bad, err)
		}
	}
}

func ptr(v int) *int { return &v }

func TestNativePlacement(t *testing.T) {
	half := screenshot.ScaleTo(1280, 800, 640, 400)
	cases := []struct {
		name  string
		p     Placement
		space *screenshot.Scale
		want  nativeTarget
		field string
	}{
		{"move native", Placement{X: ptr(100), Y: ptr(50)}, nil, nativeTarget{100, 50, -1, -1}, ""},
		{"resize native", Placement{Width: ptr(300), Height: ptr(200)}, nil, nativeTarget{-1, -1, 300, 200}, ""},
		{"move at half size", Placement{X: ptr(100), Y: ptr(50)}, &half, nativeTarget{200, 100, -1, -1}, ""},
		{"resize at half size", Placement{Width: ptr(320), Height: ptr(200)}, &half, nativeTarget{-1, -1, 640, 400}, ""},
		{"whole space is the whole screen", Placement{X: ptr(0), Y: ptr(0), Width: ptr(640), Height: ptr(400)}, &half, nativeTarget{0, 0, 1280, 800}, ""},
		{"negative corner", Placement{X: ptr(-1), Y: ptr(0)}, nil, nativeTarget{}, "x"},
		{"corner off the declared display", Placement{X: ptr(640), Y: ptr(0)}, &half, nativeTarget{}, "x"},
		{"zero size", Placement{Width: ptr(0), Height: ptr(10)}, nil, nativeTarget{}, "width"},
		{"larger than the declared display", Placement{Width: ptr(641), Height: ptr(10)}, &half, nativeTarget{}, "width"},
		{"huge", Placement{Width: ptr(maxWindowEdge + 1), Height: ptr(10)}, nil, nativeTarget{}, "width"},
	}
	for _, c := range cases {
		var got nativeTarget
		var err error
		if c.space != nil {
			got, err = nativePlacement(c.p, *c.space)
		} else {
			got, err = nativePlacement(c.p, nil)
		}
		if c.field != "" {
			var ve interface{ FieldName() string }
			if !errors.As(err, &ve) || ve.FieldName() != c.field {
				t.Errorf("%s: %v, want an error on %s", c.name, err, c.field)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestInSpaceMapsCorners(t *testing.T) {
	w := Window{X: 40, Y: 60, Width: 640, Height: 400, Frame: Rect{38, 40, 644, 424}}
	if got := inSpace(w, nil); got != w {
		t.Errorf("native: %+v", got)
	}
	got := inSpace(w, screenshot.ScaleTo(1280, 800, 640, 400))
	if got.X != 20 || got.Y != 30 || got.Width != 320 || got.Height != 200 || got.Frame != (Rect{19, 20, 322, 212}) {
		t.Errorf("half size: %+v, want 20,30 320x200 in a frame at 19,20 322x212", got)
	}
	full := inSpace(Window{Width: 1280, Height: 800}, screenshot.ScaleTo(1280, 800, 1024, 640))
	if full.X != 0 || full.Y != 0 || full.Width != 1024 || full.Height != 640 {
		t.Errorf("a window filling the screen fills the space: %+v", full)
	}
}
