package cli

import "testing"

func TestParseVolumeFlag(t *testing.T) {
	for in, want := range map[string]string{"ws:/workspace": "ws /workspace ", "docs:/docs:ro": "docs /docs ro", "x:/y:rw": "x /y rw"} {
		m, err := parseVolumeFlag(in)
		if err != nil || m.Name+" "+m.Mount+" "+m.Mode != want {
			t.Errorf("%q: %+v, %v", in, m, err)
		}
	}
	for _, bad := range []string{"ws", ":/w", "ws:", "ws:/w:rwx", "a:/b:ro:x"} {
		if _, err := parseVolumeFlag(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
