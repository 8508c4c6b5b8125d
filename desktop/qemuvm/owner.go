package qemuvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Owner is the user and group a machine's QEMU runs as, and owns its
// files as.
type Owner struct {
	UID, GID uint32
}

// Sandbox is QEMU's seccomp sandbox with every deny option; SandboxRunAs
// allows the set*id calls of -runas, whose switch comes after the sandbox
// is in place (QEMU dies of SIGSYS otherwise). Once QEMU is the machine's
// user it has no capability and no_new_privs, so such a call can only name
// its own ids.
const (
	Sandbox      = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"
	SandboxRunAs = "on,obsolete=deny,elevateprivileges=allow,spawn=deny,resourcecontrol=deny"
)

// Root owns what no machine may write.
var Root = Owner{}

// RunAs is QEMU's -runas value, uid:gid.
func (o Owner) RunAs() string {
	return strconv.FormatUint(uint64(o.UID), 10) + ":" + strconv.FormatUint(uint64(o.GID), 10)
}

// Chown gives each path to o, not following symbolic links. A missing path
// is skipped.
func (o Owner) Chown(paths ...string) error {
	var errs []error
	for _, p := range paths {
		if err := os.Lchown(p, int(o.UID), int(o.GID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Give makes each path o's and readable and writable by o alone (0600).
// A missing path is skipped.
func (o Owner) Give(paths ...string) error {
	for _, p := range paths {
		if err := o.Chown(p); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// OwnerOf is the owner of path.
func OwnerOf(path string) (Owner, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return Owner{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Owner{}, fmt.Errorf("%s: no owner on this system", path)
	}
	return Owner{UID: st.Uid, GID: st.Gid}, nil
}

// CheckRunsAs checks that process pid has become o: all four of its user
// ids o's (QEMU has dropped root with -runas).
func CheckRunsAs(pid int, o Owner) error {
	ids, err := ProcessOwner(pid)
	if err != nil {
		return fmt.Errorf("check QEMU's user: %w", err)
	}
	for _, id := range ids {
		if id != o.UID {
			return fmt.Errorf("QEMU runs as user ids %v, not as the machine's user %d", ids, o.UID)
		}
	}
	return nil
}

// ProcessOwner reads the real, effective, saved and filesystem user ids of
// process pid from /proc/PID/status.
func ProcessOwner(pid int) (uids []uint32, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return nil, err
	}
	return parseStatusIDs(string(data), "Uid:")
}

// parseStatusIDs reads one of the "Uid:" or "Gid:" lines of
// /proc/PID/status: four ids (real, effective, saved, filesystem).
func parseStatusIDs(status, key string) ([]uint32, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		var ids []uint32
		for _, f := range strings.Fields(rest) {
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("status line %q: %w", line, err)
			}
			ids = append(ids, uint32(n))
		}
		if len(ids) != 4 {
			return nil, fmt.Errorf("status line %q: want four ids", line)
		}
		return ids, nil
	}
	return nil, fmt.Errorf("no %s line in the process status", key)
}

// Traversable checks that every directory from dir up to / lets other
// users pass through (the x bit for others), which a QEMU running as a
// machine's own user needs to reach its directories below dir.
func Traversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s (mode %04o) does not let other users through, and QEMU runs as a machine's own user below it: chmod o+x %s, or move the directory", d, fi.Mode().Perm(), d)
		}
		if d == "/" {
			return nil
		}
	}
}
