package volume

import (
	"errors"
	"strings"
	"testing"
)

func TestCreateRequestValidate(t *testing.T) {
	cases := []struct {
		req  CreateRequest
		want error
	}{
		{CreateRequest{Name: "ws", SizeMiB: 64}, nil},
		{CreateRequest{Name: "ws", From: "base"}, nil},
		{CreateRequest{Name: "WS", SizeMiB: 64}, ErrInvalid},
		{CreateRequest{Name: "", SizeMiB: 64}, ErrInvalid},
		{CreateRequest{Name: "ws/x", SizeMiB: 64}, ErrInvalid},
		{CreateRequest{Name: strings.Repeat("a", 64), SizeMiB: 64}, ErrInvalid},
		{CreateRequest{Name: "ws", SizeMiB: 0}, ErrInvalid},
		{CreateRequest{Name: "ws", SizeMiB: MinSizeMiB - 1}, ErrInvalid},
		{CreateRequest{Name: "ws", SizeMiB: 1025}, ErrInvalid},
		{CreateRequest{Name: "ws", SizeMiB: 64, From: "base"}, ErrInvalid},
		{CreateRequest{Name: "ws", From: "Base"}, ErrInvalid},
	}
	for _, c := range cases {
		err := c.req.Validate(1024)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%+v: got %v, want %v", c.req, err, c.want)
		}
	}
}

func TestValidMount(t *testing.T) {
	for _, ok := range []string{"/workspace", "/home/user/ws", "/mnt/data", "/tmp/x", "/data/a-b_c.d"} {
		if err := ValidMount(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "workspace", "/", "/home", "/tmp", "/etc", "/etc/x", "/usr/local/ws", "/var/lib/x", "/proc", "/sys/x", "/dev/shm",
		"/ws/", "/ws/../etc", "/a//b", "/a/./b", "/w's", "/w\"s", "/w$s", "/w`s", "/w\ns", "/" + strings.Repeat("a", 300)} {
		if err := ValidMount(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: got %v, want ErrInvalid", bad, err)
		}
	}
}

func TestValidateSet(t *testing.T) {
	m := func(name, at string) Mount { return Mount{Name: name, Mount: at, Mode: ReadWrite} }
	if err := ValidateSet([]Mount{m("a", "/a"), m("b", "/b")}); err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string][]Mount{
		"same volume twice": {m("a", "/a"), m("a", "/b")},
		"same mount":        {m("a", "/a"), m("b", "/a")},
		"nested mounts":     {m("a", "/a"), m("b", "/a/b")},
		"too many":          {m("a", "/a"), m("b", "/b"), m("c", "/c"), m("d", "/d"), m("e", "/e")},
		"bad mode":          {{Name: "a", Mount: "/a", Mode: "rwx"}},
	} {
		if err := ValidateSet(set); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if got := (Mount{Name: "a", Mount: "/a"}).Normalize().Mode; got != ReadWrite {
		t.Errorf("default mode %q, want rw", got)
	}
}

// The attachment rules: one writer and nobody else, or any number of
// readers; a snapshot only read; a damaged volume never.
func TestCheckAttach(t *testing.T) {
	v := Volume{Name: "ws"}
	rw := func(d string) Holder { return Holder{Desktop: d, Mode: ReadWrite} }
	ro := func(d string) Holder { return Holder{Desktop: d, Mode: ReadOnly} }
	cases := []struct {
		name    string
		v       Volume
		holders []Holder
		mode    Mode
		want    error
		names   string
	}{
		{"first writer", v, nil, ReadWrite, nil, ""},
		{"first reader", v, nil, ReadOnly, nil, ""},
		{"readers share", v, []Holder{ro("d-a"), ro("d-b")}, ReadOnly, nil, ""},
		{"second writer", v, []Holder{rw("d-a")}, ReadWrite, ErrConflict, "d-a"},
		{"reader after writer", v, []Holder{rw("d-a")}, ReadOnly, ErrConflict, "d-a"},
		{"writer after readers", v, []Holder{ro("d-b"), ro("d-a")}, ReadWrite, ErrConflict, "d-a, d-b"},
		{"twice on one desktop", v, []Holder{ro("d-x")}, ReadOnly, ErrConflict, "d-x"},
		{"snapshot read-write", Volume{Name: "s", Frozen: true}, nil, ReadWrite, ErrConflict, "snapshot"},
		{"snapshot read-only", Volume{Name: "s", Frozen: true}, []Holder{ro("d-a")}, ReadOnly, nil, ""},
		{"damaged", Volume{Name: "ws", Damaged: "bad"}, nil, ReadOnly, ErrDamaged, "bad"},
	}
	for _, c := range cases {
		err := CheckAttach(c.v, c.holders, "d-x", c.mode)
		if (c.want == nil) != (err == nil) || !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), c.names) {
			t.Errorf("%s: %q does not name %q", c.name, err, c.names)
		}
	}
}

func TestFreeSlot(t *testing.T) {
	if s := FreeSlot(nil); s != 0 {
		t.Errorf("empty: %d", s)
	}
	if s := FreeSlot([]Mount{{Slot: 0}, {Slot: 2}}); s != 1 {
		t.Errorf("0,2 taken: %d, want 1", s)
	}
	full := []Mount{{Slot: 0}, {Slot: 1}, {Slot: 2}, {Slot: 3}}
	if s := FreeSlot(full); s != -1 {
		t.Errorf("full: %d, want -1", s)
	}
	if Serial(3) != "wdvol3" {
		t.Errorf("serial %q", Serial(3))
	}
}

func TestBranchName(t *testing.T) {
	if got := BranchName("ws", "d-0123"); got != "ws-d-0123" {
		t.Errorf("short: %q", got)
	}
	long := strings.Repeat("v", 40)
	a, b := BranchName(long, strings.Repeat("c", 30)+"1"), BranchName(long, strings.Repeat("c", 30)+"2")
	if a == b {
		t.Errorf("two long names collide: %q", a)
	}
	for _, n := range []string{a, b, BranchName("x", strings.Repeat("-", 70))} {
		if err := ValidName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
}
