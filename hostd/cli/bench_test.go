package cli

import (
	"slices"
	"testing"
)

func TestParseCounts(t *testing.T) {
	if got, err := parseCounts("1, 2,4,8"); err != nil || !slices.Equal(got, []int{1, 2, 4, 8}) {
		t.Errorf("parseCounts(1, 2,4,8) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,,2", "65", "two", "-1"} {
		if got, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) = %v, want an error", bad, got)
		}
	}
	if joinInts([]int{1, 2, 4, 8}) != "1,2,4,8" {
		t.Errorf("joinInts = %q", joinInts([]int{1, 2, 4, 8}))
	}
}
