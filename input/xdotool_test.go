package input

import (
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestDecodeXdotool(t *testing.T) {
	for line, want := range map[string]Batch{
		"xdotool mousemove --sync 10 20":         {{Kind: KindMove, At: &Point{X: 10, Y: 20}}},
		"xdotool click --repeat 2 1":             {{Kind: KindClick, Button: ButtonLeft, Count: 2}},
		"xdotool click --repeat 3 4":             {{Kind: KindScroll, DY: -3}},
		"xdotool mouseup 3":                      {{Kind: KindMouseUp, Button: ButtonRight}},
		"xdotool key ctrl+a":                     {{Kind: KindKey, Chord: "ctrl+a"}},
		`xdotool type --delay 0 -- 'it'"'"'s ü'`: {{Kind: KindType, Text: "it's ü"}},
	} {
		got, ok := DecodeXdotool(line)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%q = %+v, %v; want %+v", line, got, ok, want)
		}
	}
	for _, line := range []string{"xdotool click 9", "xdotool click --repeat 4 1", "xdotool mousemove 1", "xdotool key nokey+", "xdotool type --delay 75 -- 'plain'", "echo xdotool click 1"} {
		if got, ok := DecodeXdotool(line); ok {
			t.Errorf("%q read as %+v, want it left to the guest", line, got)
		}
	}
}

func FuzzDecodeXdotool(f *testing.F) {
	f.Add("xdotool mousemove --sync 10 20")
	f.Add(`xdotool type --delay 75 -- 'hello, wörld'`)
	f.Add("xdotool click --repeat 2 5")
	f.Fuzz(func(t *testing.T, line string) {
		batch, ok := DecodeXdotool(line)
		if !ok {
			return
		}
		if len(batch) != 1 {
			t.Fatalf("%q: %d actions", line, len(batch))
		}
		if a := batch[0]; a.Kind == KindType && (a.Text == "" || !utf8.ValidString(a.Text)) {
			t.Fatalf("%q: text %q", line, a.Text)
		}
	})
}
