package qemuvm

import (
	"fmt"
	"os/exec"
)

// FindTool resolves a host tool (path, or name on PATH when path is empty),
// or says which Debian package provides it.
func FindTool(path, name, pkg string) (string, error) {
	if path == "" {
		path = name
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%s not found: install the Debian package %s (apt-get install %s)", name, pkg, pkg)
	}
	return p, nil
}
