package e2b

import (
	"bufio"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
)

// envd's filesystem service, on drive's file operations (run in the guest
// as the call's user, so permissions are the user's).

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

// fileTypes are envd's names of drive's file types; the SDK skips
// FILE_TYPE_UNSPECIFIED (sockets, devices).
var fileTypes = map[drive.FileType]string{
	drive.FileRegular: "FILE_TYPE_FILE",
	drive.FileDir:     "FILE_TYPE_DIRECTORY",
	drive.FileSymlink: "FILE_TYPE_SYMLINK",
}

// entryOf is a drive entry as envd's.
func entryOf(e drive.FileEntry) entryInfo {
	info := entryInfo{Name: e.Name, Type: fileTypes[e.Type], Path: e.Path, Size: strconv.FormatInt(e.Size, 10), Mode: e.Mode,
		Permissions: e.Permissions, Owner: e.Owner, Group: e.Group, ModifiedTime: e.Modified}
	if info.Type == "" {
		info.Type = "FILE_TYPE_UNSPECIFIED"
	}
	if e.Type == drive.FileSymlink {
		target := e.SymlinkTarget
		info.SymlinkTarget = &target
	}
	return info
}

// fsRequest is the union of the filesystem requests' fields.
type fsRequest struct {
	Path        string `json:"path"`
	Depth       uint32 `json:"depth"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// fsMethods are the filesystem RPCs served.
var fsMethods = []string{"Stat", "ListDir", "MakeDir", "Move", "Remove"}

// filesystemRPC serves filesystem.Filesystem/{method}.
func (s *Server) filesystemRPC(w http.ResponseWriter, r *http.Request, d desktop.Desktop) {
	method := r.PathValue("method")
	if !slices.Contains(fsMethods, method) {
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
	answer, err := s.filesystem(r.Context(), d.ID, a, method, req)
	if err != nil {
		writeUnaryError(w, fsError(err))
		return
	}
	writeUnary(w, answer)
}

// filesystem runs one filesystem call and returns its answer.
func (s *Server) filesystem(ctx context.Context, sandbox string, a account, method string, req fsRequest) (any, error) {
	type entryAnswer struct {
		Entry entryInfo `json:"entry"`
	}
	g, user := s.cfg.Guest, a.guest()
	if method == "Move" {
		src, err1 := resolvePath(req.Source, a)
		dst, err2 := resolvePath(req.Destination, a)
		if err := errors.Join(err1, err2); err != nil {
			return nil, rpcErrorf(CodeInvalidArgument, "move: source and destination: %v", err)
		}
		e, err := g.Move(ctx, sandbox, user, src, dst)
		return entryAnswer{entryOf(e)}, err
	}
	p, err := resolvePath(req.Path, a)
	if err != nil {
		return nil, err
	}
	switch method {
	case "ListDir":
		entries, err := g.ListDir(ctx, sandbox, user, p, int(max(req.Depth, 1)))
		infos := make([]entryInfo, 0, len(entries))
		for _, e := range entries {
			infos = append(infos, entryOf(e))
		}
		return struct {
			Entries []entryInfo `json:"entries"`
		}{infos}, err
	case "Remove":
		if s.shots.remove(sandbox, p) {
			return struct{}{}, nil // a fast screenshot, never in the guest
		}
		return struct{}{}, g.Remove(ctx, sandbox, user, p)
	case "MakeDir":
		e, err := g.MakeDir(ctx, sandbox, user, p)
		return entryAnswer{entryOf(e)}, err
	}
	e, err := g.Stat(ctx, sandbox, user, p)
	return entryAnswer{entryOf(e)}, err
}

// fsError is envd's code for a filesystem call's error.
func fsError(err error) *RPCError {
	for _, m := range []struct {
		err  error
		code string
	}{{drive.ErrNotExist, CodeNotFound}, {drive.ErrNotDir, CodeInvalidArgument}, {drive.ErrExist, CodeAlreadyExists}, {drive.ErrTooLarge, CodeResourceExhausted}} {
		if errors.Is(err, m.err) {
			return &RPCError{Code: m.code, Message: err.Error()}
		}
	}
	return rpcOf(err)
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
