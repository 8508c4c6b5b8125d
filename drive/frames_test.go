package drive

import (
	"testing"

	"github.com/warmdesk/warmdesk/input"
)

func TestKeystrokeFitsPS2Queue(t *testing.T) {
	for _, c := range []struct {
		k    input.Keystroke
		want bool
	}{
		{input.Keystroke{"a"}, true},
		{input.Keystroke{"shift", "a"}, true},
		{input.Keystroke{"ctrl", "shift", "t"}, true},
		{input.Keystroke{"ctrl", "alt", "delete"}, true},            // 3 + 3 + 5
		{input.Keystroke{"ctrl", "alt", "shift", "t"}, true},        // 12
		{input.Keystroke{"meta_l", "shift", "left", "a"}, true},     // 16, exactly full
		{input.Keystroke{"meta_l", "shift", "left", "pgup"}, false}, // 18
		{input.Keystroke{"print", "alt", "ctrl", "a"}, false},       // 19
	} {
		if got := fitsOneFrame(c.k); got != c.want {
			t.Errorf("%v fits = %v, want %v", c.k, got, c.want)
		}
	}
}
