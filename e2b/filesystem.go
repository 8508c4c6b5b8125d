package e2b

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
)

// envd's filesystem service, over small shell helpers in the guest (run as
// the call's user, so permissions are the user's): find(1) describes
// entries, NUL-separated so that no file name can break the parse.

// entryInfo is envd's EntryInfo.
type entryInfo struct {
	Name          string    `json:"name"`
	Type          string    `json:"type"`
	Path          string    `json:"path"`
	Size          string    `json:"size"` // int64: a string in proto3 JSON
	Mode          uint32    `json:"mode"`
	Permissions   string    `json:"permissions"`
	Owner         string    `json:"owner"`
	Group         string    `json:"group"`
	ModifiedTime  time.Time `json:"modifiedTime"`
	SymlinkTarget *string   `json:"symlinkTarget,omitempty"`
}

// entryFormat is find -printf's format for one entry: type, size, octal
// permissions, symbolic ones, owner, group, mtime, link target, path.
const entryFormat = `%y\0%s\0%m\0%M\0%u\0%g\0%T@\0%l\0%p\0`

const entryFields = 9

// parseEntries reads entryFormat's output.
func parseEntries(out []byte) ([]entryInfo, error) {
	if len(out) == 0 {
		return nil, nil
	}
	if out[len(out)-1] != 0 {
		return nil, fmt.Errorf("entry list cut short")
	}
	fields := strings.Split(string(out[:len(out)-1]), "\x00")
	if len(fields)%entryFields != 0 {
		return nil, fmt.Errorf("entry list of %d fields: not a multiple of %d", len(fields), entryFields)
	}
	var entries []entryInfo
	for i := 0; i < len(fields); i += entryFields {
		f := fields[i : i+entryFields]
		size, err1 := strconv.ParseInt(f[1], 10, 64)
		mode, err2 := strconv.ParseUint(f[2], 8, 32)
		secs, err3 := strconv.ParseFloat(f[6], 64)
		if err := errors.Join(err1, err2, err3); err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || !path.IsAbs(f[8]) {
			return nil, fmt.Errorf("entry %q: malformed description", f[8])
		}
		e := entryInfo{Name: path.Base(f[8]), Path: f[8], Size: strconv.FormatInt(size, 10), Mode: uint32(mode),
			Permissions: f[3], Owner: f[4], Group: f[5], ModifiedTime: time.Unix(0, int64(secs*1e9)).UTC()}
		switch f[0] {
		case "f":
			e.Type = "FILE_TYPE_FILE"
		case "d":
			e.Type = "FILE_TYPE_DIRECTORY"
		case "l":
			e.Type = "FILE_TYPE_SYMLINK"
			target := f[7]
			e.SymlinkTarget = &target
		default:
			e.Type = "FILE_TYPE_UNSPECIFIED" // sockets, devices: the SDK skips them
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// Exit codes of the filesystem helpers.
const (
	exitNotFound = 2
	exitNotDir   = 3
	exitExists   = 4
)

const (
	mustExist = `[ -e "$1" ] || [ -L "$1" ] || { echo "$1 does not exist" >&2; exit 2; }
`
	describe = `find "$1" -maxdepth 0 -printf '` + entryFormat + `'`
)

var fsScripts = map[string]string{
	"Stat": mustExist + describe,
	"ListDir": mustExist + `[ -d "$1" ] || { echo "$1 is not a directory" >&2; exit 3; }
find "$1" -mindepth 1 -maxdepth "$2" -printf '` + entryFormat + `'`,
	"MakeDir": `if [ -e "$1" ]; then echo "$1 already exists" >&2; exit 4; fi
mkdir -p -- "$1" && ` + describe,
	"Move":   mustExist + `mkdir -p -- "$(dirname -- "$2")" && mv -T -- "$1" "$2" && set -- "$2" && ` + describe,
	"Remove": mustExist + `rm -rf -- "$1"`,
}

// fsRequest is the union of the filesystem requests' fields.
type fsRequest struct {
	Path        string `json:"path"`
	Depth       uint32 `json:"depth"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// maxDepth bounds a ListDir.
const maxDepth = 64

// filesystemRPC serves filesystem.Filesystem/{method}.
func (s *Server) filesystemRPC(w http.ResponseWriter, r *http.Request, d desktop.Desktop) {
	method := r.PathValue("method")
	script, ok := fsScripts[method]
	if !ok {
		writeUnaryError(w, rpcErrorf(CodeUnimplemented, "filesystem.Filesystem/%s is not implemented by warmdesk (directory watching is not built: docs/E2B.md)", method))
		return
	}
	var req fsRequest
	if !readUnary(w, r, &req) {
		return
	}
	user, err := userOf(r, "")
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	a, err := s.account(r.Context(), d, user)
	if err != nil {
		writeUnaryError(w, rpcOf(err))
		return
	}
	var args []string
	switch method {
	case "Move":
		src, err1 := resolvePath(req.Source, a)
		dst, err2 := resolvePath(req.Destination, a)
		if err := errors.Join(err1, err2); err != nil {
			writeUnaryError(w, rpcErrorf(CodeInvalidArgument, "move: source and destination: %v", err))
			return
		}
		args = []string{src, dst}
	default:
		p, err := resolvePath(req.Path, a)
		if err != nil {
			writeUnaryError(w, err)
			return
		}
		args = []string{p}
		if method == "ListDir" {
			depth := max(req.Depth, 1)
			if depth > maxDepth {
				writeUnaryError(w, rpcErrorf(CodeInvalidArgument, "depth %d: at most %d", depth, maxDepth))
				return
			}
			args = append(args, strconv.Itoa(int(depth)))
		}
	}
	if method == "Remove" && s.shots.remove(d.ID, args[0]) {
		writeUnary(w, struct{}{}) // a fast screenshot, never in the guest
		return
	}
	res, err := s.run(r.Context(), d.ID, asUser(a, script, args...))
	if err != nil {
		writeUnaryError(w, rpcOf(err))
		return
	}
	switch res.code {
	case 0:
	case exitNotFound:
		writeUnaryError(w, rpcErrorf(CodeNotFound, "%s", res.message()))
		return
	case exitNotDir:
		writeUnaryError(w, rpcErrorf(CodeInvalidArgument, "%s", res.message()))
		return
	case exitExists:
		writeUnaryError(w, rpcErrorf(CodeAlreadyExists, "%s", res.message()))
		return
	default:
		writeUnaryError(w, rpcErrorf(CodeInternal, "%s %v: %s (exit %d)", method, args, res.message(), res.code))
		return
	}
	entries, err := parseEntries(res.stdout)
	if err != nil {
		writeUnaryError(w, rpcErrorf(CodeInternal, "%s: %v", method, err))
		return
	}
	switch method {
	case "ListDir":
		if entries == nil {
			entries = []entryInfo{}
		}
		writeUnary(w, struct {
			Entries []entryInfo `json:"entries"`
		}{entries})
	case "Remove":
		writeUnary(w, struct{}{})
	default:
		if len(entries) != 1 {
			writeUnaryError(w, rpcErrorf(CodeInternal, "%s: %d entries described, want 1", method, len(entries)))
			return
		}
		writeUnary(w, struct {
			Entry entryInfo `json:"entry"`
		}{entries[0]})
	}
}

// envdError answers /files in envd's JSON error shape.
func envdError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	var re *RPCError
	if errors.As(err, &re) {
		status = httpStatus[re.Code]
		err = errors.New(re.Message)
	}
	apiError(w, status, "%v", err)
}

// filesAccount is the user a /files request acts as (?username=, else
// the default); on error it has answered.
func (s *Server) filesAccount(w http.ResponseWriter, r *http.Request, d desktop.Desktop) (account, bool) {
	user, err := userOf(r, r.URL.Query().Get("username"))
	if err == nil {
		var a account
		if a, err = s.account(r.Context(), d, user); err == nil {
			return a, true
		}
	}
	envdError(w, err)
	return account{}, false
}

// readFiles serves GET /files?path=: the file's bytes.
func (s *Server) readFiles(w http.ResponseWriter, r *http.Request, d desktop.Desktop) {
	a, ok := s.filesAccount(w, r, d)
	if !ok {
		return
	}
	p, err := resolvePath(r.URL.Query().Get("path"), a)
	if err != nil {
		envdError(w, err)
		return
	}
	if png, ok := s.shots.get(d.ID, p); ok {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(png)))
		w.Write(png)
		return
	}
	f, err := s.cfg.Guest.ReadFile(r.Context(), d.ID, p)
	if err != nil {
		envdError(w, err)
		return
	}
	defer f.Close()
	// The first chunk is read before answering, so that a directory (whose
	// end on ext4 seeks to 2^63-1) is a clean 400, not a 200 that never
	// comes.
	br := bufio.NewReaderSize(f, 64<<10)
	if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		envdError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if n := f.Size(); n >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	}
	io.Copy(w, br)
}

// writtenFile is one entry of /files' answer to a write.
type writtenFile struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

// writeFiles serves POST /files: one file as a raw body or many as
// multipart parts whose file names are their paths.
func (s *Server) writeFiles(w http.ResponseWriter, r *http.Request, d desktop.Desktop) {
	q := r.URL.Query()
	a, ok := s.filesAccount(w, r, d)
	if !ok {
		return
	}
	if r.Header.Get("Content-Encoding") != "" {
		envdError(w, rpcErrorf(CodeInvalidArgument, "Content-Encoding %q: send files uncompressed", r.Header.Get("Content-Encoding")))
		return
	}
	var written []writtenFile
	put := func(target string, body io.Reader) error {
		p, err := resolvePath(target, a)
		if err != nil {
			return err
		}
		if err := s.putFile(r.Context(), d.ID, a, p, body); err != nil {
			return err
		}
		written = append(written, writtenFile{Name: path.Base(p), Path: p, Type: "file"})
		return nil
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		if err := put(q.Get("path"), r.Body); err != nil {
			envdError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, written)
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			envdError(w, rpcErrorf(CodeInvalidArgument, "multipart body: %v", err))
			return
		}
		// Part.FileName keeps only the base name; the SDK sends the path.
		_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		target := dp["filename"]
		if p := q.Get("path"); p != "" {
			target = p
		}
		if target == "" {
			envdError(w, rpcErrorf(CodeInvalidArgument, "a multipart part without a file name: name each part's file by its path"))
			return
		}
		if err := put(target, part); err != nil {
			envdError(w, err)
			return
		}
	}
	if len(written) == 0 {
		envdError(w, rpcErrorf(CodeInvalidArgument, "no file in the request"))
		return
	}
	writeJSON(w, http.StatusOK, written)
}

// putFile writes a file as envd does: missing directories made, a new
// file owned by the user.
func (s *Server) putFile(ctx context.Context, id string, a account, p string, body io.Reader) error {
	// The first bytes tell an upload that never began from a short one:
	// only the former may be retried after making the directory.
	br := &peeked{r: body}
	_, err := s.cfg.Guest.WriteFile(ctx, id, p, br)
	if errors.Is(err, desktop.ErrNotFound) && !br.read {
		res, merr := s.run(ctx, id, asUser(a, `mkdir -p -- "$(dirname -- "$1")"`, p))
		if merr != nil {
			return merr
		}
		if res.code != 0 {
			return rpcErrorf(CodeInvalidArgument, "make %s's directory: %s", p, res.message())
		}
		_, err = s.cfg.Guest.WriteFile(ctx, id, p, br)
	}
	if err != nil {
		return err
	}
	if a.uid != "0" {
		res, err := s.run(ctx, id, asUser(account{uid: "0"}, `chown -- "$2:$3" "$1"`, p, a.uid, a.gid))
		if err != nil {
			return err
		}
		if res.code != 0 {
			return rpcErrorf(CodeInternal, "give %s to %s: %s", p, a.name, res.message())
		}
	}
	return nil
}

// peeked records whether anything was read.
type peeked struct {
	r    io.Reader
	read bool
}

func (p *peeked) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.read = true
	}
	return n, err
}

// health answers 204 while the sandbox runs; the SDK takes 502 as gone.
func (s *Server) health(w http.ResponseWriter, r *http.Request, d desktop.Desktop) {
	if d.State != desktop.StateRunning {
		apiError(w, http.StatusBadGateway, "sandbox %s is %s", d.ID, d.State)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
