package drive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// The guest's filesystem beyond one file's bytes (files.go): describe,
// list, make, move and remove, each a small shell helper run as a guest
// user, so that the guest checks that user's permissions. find(1)
// describes the entries, NUL-separated so that no file name can break the
// parse.

// GuestUser is the guest account an operation acts as, by the ids the
// guest's passwd gives it; the zero value is root.
type GuestUser struct{ UID, GID string }

var guestID = regexp.MustCompile(`^[0-9]{1,10}$`)

func (u GuestUser) check() error {
	if u == (GuestUser{}) || guestID.MatchString(u.UID) && guestID.MatchString(u.GID) {
		return nil
	}
	return &FieldError{"user", fmt.Sprintf("user %q:%q: a uid and gid, numbers both", u.UID, u.GID)}
}

// Wrap runs a program as the user: setpriv(1) changes the ids and nothing
// else (it is about twice as quick as runuser under TCG, which opens a PAM
// session); the caller sets HOME and the rest of the environment.
func (u GuestUser) Wrap(program string, args []string) (string, []string) {
	if u.UID == "" || u.UID == "0" {
		return program, args
	}
	return "setpriv", append([]string{"--reuid=" + u.UID, "--regid=" + u.GID, "--init-groups", "--", program}, args...)
}

// FileType is what kind of file an entry is.
type FileType string

const (
	FileRegular FileType = "file"
	FileDir     FileType = "dir"
	FileSymlink FileType = "symlink"
	// FileOther is a socket, pipe or device.
	FileOther FileType = "other"
)

// FileEntry describes a guest file as find(1) saw it.
type FileEntry struct {
	Name, Path string
	Type       FileType
	Size       int64
	// Mode is the permission bits as find's %m gives them: setuid, setgid
	// and sticky are 04000, 02000 and 01000, not fs.FileMode's bits.
	Mode uint32
	// Permissions is ls -l's symbolic form, "drwxr-xr-x".
	Permissions  string
	Owner, Group string
	Modified     time.Time
	// SymlinkTarget is a symlink's target as written; empty for the rest.
	SymlinkTarget string
}

// Why the guest refused a file operation: errors.Is tells them apart, and
// each is also the desktop error (not found, invalid, conflict) a door
// classifies by. The error's text is the path and the reason, "/tmp/x
// does not exist".
var (
	ErrNotExist error = &fsRefusal{"does not exist", desktop.ErrNotFound}
	ErrNotDir   error = &fsRefusal{"is not a directory", desktop.ErrInvalid}
	ErrExist    error = &fsRefusal{"already exists", desktop.ErrConflict}
)

type fsRefusal struct {
	text string
	kind error
}

func (e *fsRefusal) Error() string { return e.text }

func (e *fsRefusal) Is(target error) bool { return target == e.kind }

// The helpers' exit codes for the refusals, each about the first path.
var fsExits = map[int]error{2: ErrNotExist, 3: ErrNotDir, 4: ErrExist}

// MaxListDepth bounds a ListDir.
const MaxListDepth = 64

// entryFormat is find -printf's format for one entry: type, size, octal
// permissions, symbolic ones, owner, group, mtime, link target, path.
const entryFormat = `%y\0%s\0%m\0%M\0%u\0%g\0%T@\0%l\0%p\0`

const entryFields = 9

const (
	fsMustExist = `[ -e "$1" ] || [ -L "$1" ] || exit 2
`
	fsDescribe = `find "$1" -maxdepth 0 -printf '` + entryFormat + `'`
)

// Stat describes the file at an absolute path, as the user.
func (s *Service) Stat(ctx context.Context, id string, user GuestUser, p string) (FileEntry, error) {
	return s.fsOne(ctx, id, user, "stat "+p, fsMustExist+fsDescribe, p)
}

// ListDir describes what a directory holds, depth levels down (1 is its
// own entries, at most MaxListDepth), as the user.
func (s *Service) ListDir(ctx context.Context, id string, user GuestUser, p string, depth int) ([]FileEntry, error) {
	if depth < 1 || depth > MaxListDepth {
		return nil, &FieldError{"depth", fmt.Sprintf("depth %d: at most %d", depth, MaxListDepth)}
	}
	script := fsMustExist + `[ -d "$1" ] || exit 3
find "$1" -mindepth 1 -maxdepth "$2" -printf '` + entryFormat + `'`
	return s.fsHelper(ctx, id, user, "list "+p, script, []string{p}, strconv.Itoa(depth))
}

// MakeDir makes a directory and any missing parents, as the user; an
// existing path is ErrExist.
func (s *Service) MakeDir(ctx context.Context, id string, user GuestUser, p string) (FileEntry, error) {
	script := `[ -e "$1" ] && exit 4
mkdir -p -- "$1" && ` + fsDescribe
	return s.fsOne(ctx, id, user, "make directory "+p, script, p)
}

// Move renames src to dst, making dst's missing parents, as the user, and
// describes it there. A directory is not moved into an existing one
// (mv -T): dst is the new name.
func (s *Service) Move(ctx context.Context, id string, user GuestUser, src, dst string) (FileEntry, error) {
	script := fsMustExist + `mkdir -p -- "$(dirname -- "$2")" && mv -T -- "$1" "$2" && set -- "$2" && ` + fsDescribe
	return s.fsOne(ctx, id, user, "move "+src+" to "+dst, script, src, dst)
}

// Remove removes a file or a whole directory tree, as the user.
func (s *Service) Remove(ctx context.Context, id string, user GuestUser, p string) error {
	_, err := s.fsHelper(ctx, id, user, "remove "+p, fsMustExist+`rm -rf -- "$1"`, []string{p})
	return err
}

// fsOne runs a helper that describes one entry.
func (s *Service) fsOne(ctx context.Context, id string, user GuestUser, what, script string, paths ...string) (FileEntry, error) {
	entries, err := s.fsHelper(ctx, id, user, what, script, paths)
	if err != nil {
		return FileEntry{}, err
	}
	if len(entries) != 1 {
		return FileEntry{}, fmt.Errorf("desktop %s: %s: %d entries described, want 1", id, what, len(entries))
	}
	return entries[0], nil
}

// fsHelper runs a file operation's helper as the user, with the paths and
// then more as its arguments, and reads the entries it describes. A
// refusal is about the first path.
func (s *Service) fsHelper(ctx context.Context, id string, user GuestUser, what, script string, paths []string, more ...string) ([]FileEntry, error) {
	if err := user.check(); err != nil {
		return nil, err
	}
	for _, p := range paths {
		if !path.IsAbs(p) || strings.ContainsRune(p, 0) {
			return nil, &FieldError{"path", fmt.Sprintf("path %q: use an absolute path", p)}
		}
	}
	args := append(append([]string{"-c", script, "sh"}, paths...), more...)
	prog, argv := user.Wrap("/bin/sh", args)
	// Announced as Exec is, not quiet like drive's own helpers: the
	// operation is the caller's.
	res, err := s.Exec(ctx, id, ExecRequest{Path: prog, Args: argv, Timeout: DefaultExecTimeout, MaxOutput: MaxExecOutput})
	if err != nil {
		return nil, err
	}
	if res.TimedOut {
		return nil, fmt.Errorf("desktop %s: %s: not done within %s: %w", id, what, DefaultExecTimeout, context.DeadlineExceeded)
	}
	if res.StdoutTruncated {
		return nil, fmt.Errorf("%w: desktop %s: %s: over %d bytes of description, more than one call reads back", ErrTooLarge, id, what, MaxExecOutput)
	}
	if refusal, ok := fsExits[res.ExitCode]; ok {
		return nil, fmt.Errorf("%s %w", paths[0], refusal)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("desktop %s: %s: %s (exit %d)", id, what, strings.TrimSpace(string(res.Stderr)), res.ExitCode)
	}
	entries, err := parseEntries(res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("desktop %s: %s: %w", id, what, err)
	}
	return entries, nil
}

// parseEntries reads entryFormat's output.
func parseEntries(out []byte) ([]FileEntry, error) {
	if len(out) == 0 {
		return nil, nil
	}
	if out[len(out)-1] != 0 {
		return nil, errors.New("entry list cut short")
	}
	fields := strings.Split(string(out[:len(out)-1]), "\x00")
	if len(fields)%entryFields != 0 {
		return nil, fmt.Errorf("entry list of %d fields: not a multiple of %d", len(fields), entryFields)
	}
	var entries []FileEntry
	for i := 0; i < len(fields); i += entryFields {
		f := fields[i : i+entryFields]
		size, err1 := strconv.ParseInt(f[1], 10, 64)
		mode, err2 := strconv.ParseUint(f[2], 8, 32)
		secs, err3 := strconv.ParseFloat(f[6], 64)
		if err := errors.Join(err1, err2, err3); err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || !path.IsAbs(f[8]) {
			return nil, fmt.Errorf("entry %q: malformed description", f[8])
		}
		e := FileEntry{Name: path.Base(f[8]), Path: f[8], Size: size, Mode: uint32(mode),
			Permissions: f[3], Owner: f[4], Group: f[5], Modified: time.Unix(0, int64(secs*1e9)).UTC()}
		switch f[0] {
		case "f":
			e.Type = FileRegular
		case "d":
			e.Type = FileDir
		case "l":
			e.Type, e.SymlinkTarget = FileSymlink, f[7]
		default:
			e.Type = FileOther
		}
		entries = append(entries, e)
	}
	return entries, nil
}
