package tokenfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/internal/tokenfile"
)

// A rotation replaces the token file whole with a new token only its
// owner reads.
func TestRotateTokenReplacesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	first, err := tokenfile.Rotate(path)
	if err != nil {
		t.Fatal(err)
	}
	second, err := tokenfile.Rotate(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	if first == second || strings.TrimSpace(string(data)) != second || !strings.HasPrefix(second, "wd_") || info.Mode().Perm() != 0o600 {
		t.Fatalf("tokens %q then %q, file %q mode %v", first, second, data, info.Mode())
	}
	if _, err := os.Stat(path + ".new"); err == nil {
		t.Fatal("the temporary file remains")
	}
}
