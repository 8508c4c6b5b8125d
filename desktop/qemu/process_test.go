package qemu

import (
	"errors"
	"os/exec"
	"testing"
)

func TestCrashedByTellsAFaultFromAnEnd(t *testing.T) {
	for _, c := range []struct {
		script string
		want   bool
	}{
		{"kill -SEGV $$", true},
		{"kill -ABRT $$", true},
		{"kill -KILL $$", false},
		{"kill -TERM $$", false},
		{"exit 3", false},
		{"exit 0", false},
	} {
		err := exec.Command("sh", "-c", c.script).Run()
		if got := crashedBy(err); got != c.want {
			t.Errorf("%q: crashedBy(%v) = %v, want %v", c.script, err, got, c.want)
		}
	}
	if crashedBy(errors.New("start failed")) {
		t.Error("an error that is no exit counts as a crash")
	}
}
