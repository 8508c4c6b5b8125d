package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostd cluster certs writes the CA and each host's pair, and says what
// is wrong with a bad --host.
func TestClusterCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"cluster", "certs", "--dir", dir, "--cluster-name", "lab",
		"--host", "h1=127.0.0.11", "--host", "h2=127.0.0.12,h2.example"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, f := range []string{"ca.pem", "h1.pem", "h1-key.pem", "h2.pem", "h2-key.pem"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	code = Main(context.Background(), []string{"cluster", "certs", "--dir", dir, "--cluster-name", "lab", "--add", "--host", "h3=127.0.0.13"}, &out, &errOut)
	if _, err := os.Stat(filepath.Join(dir, "h3.pem")); code != 0 || err != nil {
		t.Fatalf("--add: exit %d, %v: %s", code, err, errOut.String())
	}
	errOut.Reset()
	code = Main(context.Background(), []string{"cluster", "certs", "--dir", filepath.Join(t.TempDir(), "c"), "--cluster-name", "lab", "--host", "h1"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "NAME=ADDRESS") {
		t.Errorf("a --host without an address: exit %d, %q", code, errOut.String())
	}
}
