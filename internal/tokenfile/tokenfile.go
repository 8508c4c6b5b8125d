// Package tokenfile keeps hostd's daemon token in its file: read at
// start, made on the first, rotated by hostd token rotate or the API, and
// always replaced whole, so the CLI polling it never reads half a token.
// It is standard library only, so the fleet can keep the shared token in
// the same file.
package tokenfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Load reads the API token, or makes one on first start.
func Load(path string) (tok string, made bool, err error) {
	data, err := os.ReadFile(path)
	if err == nil {
		if tok = strings.TrimSpace(string(data)); tok != "" {
			return tok, false, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read token: %w", err)
	}
	if tok, err = Rotate(path); err != nil {
		return "", false, err
	}
	return tok, true, nil
}

// Rotate makes a new API token and keeps it in path, replacing the
// file whole (a reader never sees half a token).
func Rotate(path string) (string, error) {
	tok := New()
	if err := WriteWhole(path, []byte(tok+"\n")); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	return tok, nil
}

// New makes a daemon token.
func New() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "wd_" + hex.EncodeToString(b)
}

// WriteWhole replaces path (mode 0600) so that a reader sees either
// the old content or all of the new, never a part.
// Each writer has a temporary file of its own, so two at once (token
// rotations) cannot rename each other's half-written file.
func WriteWhole(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
