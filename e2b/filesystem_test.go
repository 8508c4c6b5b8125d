package e2b_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/warmdesk/warmdesk/desktop/desktoptest"
	"github.com/warmdesk/warmdesk/e2b"
)

// The filesystem service over a guest that answers the account lookup
// and each file helper by the path it is given: the wire answers, the
// user the helpers run as, and drive's refusals as envd's codes.
func TestFilesystemAnswersAndRefusals(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var ran [][]string
	h.f.Guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		if c.Path == "/bin/sh" && strings.Contains(c.Args[1], "getent passwd") {
			return desktoptest.GuestResult{Stdout: []byte("user\nx\n1000\n1000\n\n/home/user\n/bin/bash\n")}, nil
		}
		mu.Lock()
		ran = append(ran, append([]string{c.Path}, c.Args...))
		mu.Unlock()
		if len(c.Args) < 9 {
			return desktoptest.GuestResult{ExitCode: 127}, nil
		}
		script, args := c.Args[6], c.Args[8:] // setpriv ... -- /bin/sh -c SCRIPT sh ARGS
		if code, ok := map[string]int{"/home/user/none": 2, "/home/user/f.txt": 3, "/home/user/made": 4}[args[0]]; ok {
			why := map[int]string{2: "does not exist", 3: "is not a directory", 4: "already exists"}[code]
			return desktoptest.GuestResult{ExitCode: code, Stderr: []byte(args[0] + " " + why + "\n")}, nil
		}
		if args[0] == "/home/user/empty" {
			return desktoptest.GuestResult{}, nil
		}
		p := args[len(args)-1]
		if strings.Contains(script, "mv -T") {
			p = args[1]
		}
		return desktoptest.GuestResult{Stdout: []byte("f\x0011\x00644\x00-rw-r--r--\x00user\x00user\x001700000000.5\x00\x00" + p + "\x00")}, nil
	}
	tok := e2b.AccessToken(daemonToken, h.f.ID)
	rpc := func(method, body string) (int, string) {
		st, _, out := h.do("POST", "/filesystem.Filesystem/"+method, body, "E2b-Sandbox-Id", h.f.ID, "X-Access-Token", tok)
		return st, out
	}
	for _, c := range []struct {
		method, body string
		status       int
		want         string
	}{
		{"Stat", `{"path":"a.txt"}`, 200, `{"entry":{"name":"a.txt","type":"FILE_TYPE_FILE","path":"/home/user/a.txt","size":"11","mode":420,"permissions":"-rw-r--r--","owner":"user","group":"user","modifiedTime":"2023-11-14T22:13:20.5Z"}}`},
		{"Stat", `{"path":"none"}`, 404, `{"code":"not_found","message":"/home/user/none does not exist"}`},
		{"Remove", `{"path":"~/none"}`, 404, `{"code":"not_found","message":"/home/user/none does not exist"}`},
		{"ListDir", `{"path":"f.txt"}`, 400, `{"code":"invalid_argument","message":"/home/user/f.txt is not a directory"}`},
		{"ListDir", `{"path":"/home/user/empty"}`, 200, `{"entries":[]}`},
		{"ListDir", `{"path":"/tmp","depth":65}`, 400, `{"code":"invalid_argument","message":"depth 65: at most 64"}`},
		{"MakeDir", `{"path":"made"}`, 409, `{"code":"already_exists","message":"/home/user/made already exists"}`},
		{"Move", `{"source":"a.txt","destination":"/tmp/b.txt"}`, 200, `"path":"/tmp/b.txt"`},
		{"Move", `{"source":"a.txt"}`, 400, `path is required`},
		{"Remove", `{"path":"a.txt"}`, 200, `{}`},
	} {
		if st, out := rpc(c.method, c.body); st != c.status || !strings.Contains(out, c.want) {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.body, st, out, c.status, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range ran {
		if strings.Join(r[:5], " ") != "setpriv --reuid=1000 --regid=1000 --init-groups --" {
			t.Errorf("a helper ran as %q, not as the user", r)
		}
	}
}
