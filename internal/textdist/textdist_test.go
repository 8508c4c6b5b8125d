package textdist

import "testing"

func TestEdit(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		bound int
		want  int
	}{
		{"", "", 0, 0}, {"abc", "", 0, 3}, {"", "ab", 0, 2}, {"enter", "entr", 0, 1},
		{"kitten", "sitting", 0, 3}, {"return", "retrun", 0, 2},
		// Bounded: the distance, or the bound once it is reached.
		{"mupdf", "mupdf", 3, 0},
		{"mupfd", "mupdf", 3, 2},
		{"chromiun", "chromium", 3, 1},
		{"gimp", "inkscape", 3, 3},
		{"", "abc", 5, 3},
		{"kitten", "sitting", 2, 2},
	} {
		if got := Edit(tc.a, tc.b, tc.bound); got != tc.want {
			t.Errorf("Edit(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.bound, got, tc.want)
		}
	}
}
