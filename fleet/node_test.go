package fleet

import "testing"

func TestAdvertiseAddress(t *testing.T) {
	for _, tt := range []struct{ flag, listen, peer, want string }{
		{"", "127.0.0.21:8787", "127.0.0.11", "127.0.0.21:8787"},
		{"", "0.0.0.0:8787", "127.0.0.11", "127.0.0.11:8787"},
		{"", "[::]:8787", "127.0.0.11", "127.0.0.11:8787"},
		{"h1.example:443", "0.0.0.0:8787", "127.0.0.11", "h1.example:443"},
	} {
		got, err := advertiseAddress(tt.flag, tt.listen, tt.peer)
		if err != nil || got != tt.want {
			t.Errorf("advertiseAddress(%q, %q, %q) = %q, %v; want %q", tt.flag, tt.listen, tt.peer, got, err, tt.want)
		}
	}
	if _, err := advertiseAddress("", "no-port", "127.0.0.11"); err == nil {
		t.Error("a listen address without a port was taken")
	}
	if _, err := advertiseAddress("", "0.0.0.0:8787", ""); err == nil {
		t.Error("an external etcd's host listening everywhere advertised no address, without an error")
	}
}
