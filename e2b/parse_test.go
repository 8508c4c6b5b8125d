package e2b

import (
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
)

func TestEntriesInEnvdsShape(t *testing.T) {
	at := time.UnixMilli(1700000000500).UTC()
	a := entryOf(drive.FileEntry{Name: "a b\nc", Path: "/tmp/a b\nc", Type: drive.FileRegular, Size: 11, Mode: 0o644, Owner: "user", Modified: at})
	if a.Name != "a b\nc" || a.Type != "FILE_TYPE_FILE" || a.Size != "11" || a.Mode != 0o644 || a.Owner != "user" || a.ModifiedTime.UnixMilli() != 1700000000500 || a.SymlinkTarget != nil {
		t.Errorf("file: %+v", a)
	}
	if l := entryOf(drive.FileEntry{Path: "/tmp/link", Type: drive.FileSymlink, SymlinkTarget: "/etc/x"}); l.Type != "FILE_TYPE_SYMLINK" || l.SymlinkTarget == nil || *l.SymlinkTarget != "/etc/x" {
		t.Errorf("link: %+v", l)
	}
	if d := entryOf(drive.FileEntry{Path: "/tmp/d", Type: drive.FileDir}); d.Type != "FILE_TYPE_DIRECTORY" || d.Path != "/tmp/d" {
		t.Errorf("dir: %+v", d)
	}
	if o := entryOf(drive.FileEntry{Path: "/dev/null", Type: drive.FileOther}); o.Type != "FILE_TYPE_UNSPECIFIED" {
		t.Errorf("device: %+v", o) // the SDK skips it
	}
}

func TestParseListQuery(t *testing.T) {
	// The SDK escapes metadata's keys and values, then the whole query.
	q, err := url.ParseQuery("metadata=a%252520b%3Dc%252526d%26x%3Dy&state=running,paused&limit=5&nextToken=d-1")
	if err != nil {
		t.Fatal(err)
	}
	lq, err := parseListQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lq.metadata, map[string]string{"a%20b": "c%26d", "x": "y"}) && !reflect.DeepEqual(lq.metadata, map[string]string{"a b": "c&d", "x": "y"}) {
		t.Errorf("metadata %q", lq.metadata)
	}
	if lq.limit != 5 || lq.next != "d-1" || !reflect.DeepEqual(lq.states, []string{"running", "paused"}) {
		t.Errorf("query %+v", lq)
	}
	for _, bad := range []string{"state=gone", "limit=0", "limit=x", "startedAfter=yesterday", "metadata=a%3D%25zz"} {
		q, _ := url.ParseQuery(bad)
		if _, err := parseListQuery(q); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestEndOfHowAProgramEnded(t *testing.T) {
	for _, c := range []struct {
		res  drive.ExecResult
		want endEvent
	}{
		{drive.ExecResult{}, endEvent{Exited: true, Status: "exit status 0"}},
		{drive.ExecResult{ExecResult: desktop.ExecResult{ExitCode: 3}}, endEvent{ExitCode: 3, Exited: true, Status: "exit status 3", Error: "exit status 3"}},
		{drive.ExecResult{ExecResult: desktop.ExecResult{Signal: 9}}, endEvent{ExitCode: -1, Status: "signal: killed", Error: "signal: killed"}},
		{drive.ExecResult{ExecResult: desktop.ExecResult{ExitCode: 137}}, endEvent{ExitCode: -1, Status: "signal: killed", Error: "signal: killed"}},
	} {
		if got := endOf(c.res); *got != c.want {
			t.Errorf("%+v: %+v, want %+v", c.res, *got, c.want)
		}
	}
}

func TestUserAndPath(t *testing.T) {
	r := httptest.NewRequest("POST", "/", nil)
	if u, err := userOf(r, ""); u != "" || err != nil {
		t.Errorf("no user: %q %v", u, err)
	}
	r.Header.Set("Authorization", "Basic cm9vdDo=") // root:
	if u, err := userOf(r, ""); u != "root" || err != nil {
		t.Errorf("basic root: %q %v", u, err)
	}
	if u, _ := userOf(r, "user"); u != "user" {
		t.Errorf("the query wins: %q", u)
	}
	for _, bad := range []string{"Bearer x", "Basic !!"} {
		r.Header.Set("Authorization", bad)
		if _, err := userOf(r, ""); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := userOf(httptest.NewRequest("GET", "/", nil), "Robert'); DROP"); err == nil {
		t.Error("a name no account can have was accepted")
	}
	a, ok := parsePasswd("user\nx\n1000\n1000\n\n/home/user\n/bin/bash\n")
	if !ok || a != (account{name: "user", uid: "1000", gid: "1000", home: "/home/user", shell: "/bin/bash"}) {
		t.Fatalf("passwd entry: %+v %v", a, ok)
	}
	for _, bad := range []string{"", "user\nx\n1000\n1000\n\nrelative\n/bin/sh\n", "user\nx\nabc\n1000\n\n/home/u\n/bin/sh\n"} {
		if _, ok := parsePasswd(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	for in, want := range map[string]string{"notes.txt": "/home/user/notes.txt", "~/x/../y": "/home/user/y", "/etc/hosts": "/etc/hosts", "~": "/home/user"} {
		if got, err := resolvePath(in, a); got != want || err != nil {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := resolvePath("", a); err == nil {
		t.Error("an empty path was accepted")
	}
}

func TestSignalNames(t *testing.T) {
	for in, want := range map[any]string{"SIGNAL_SIGKILL": "KILL", "SIGNAL_SIGTERM": "TERM", float64(9): "KILL"} {
		if got, err := signalOf(in); got != want || err != nil {
			t.Errorf("%v: %q %v", in, got, err)
		}
	}
	if _, err := signalOf("SIGNAL_UNSPECIFIED"); err == nil {
		t.Error("an unspecified signal was accepted")
	}
}

func TestAccessTokensAreEachSandboxs(t *testing.T) {
	a, b := AccessToken("wd_x", "d-1"), AccessToken("wd_x", "d-2")
	if a == b || a == AccessToken("wd_y", "d-1") || a != AccessToken("wd_x", "d-1") {
		t.Errorf("tokens %q %q: one per sandbox and daemon token, stable", a, b)
	}
}

func TestParseFastTakesOnlyTheSDKsExactLines(t *testing.T) {
	bash := func(line string) processConfig {
		return processConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", line}}
	}
	pt := func(x, y int) *input.Point { return &input.Point{X: x, Y: y} }
	for line, want := range map[string]fastCommand{
		"scrot --pointer /tmp/screenshot-Ab3dEf6hIj9kLm0p.png": {shotPath: "/tmp/screenshot-Ab3dEf6hIj9kLm0p.png"},
		"xdotool mousemove --sync 300 200":                     {batch: input.Batch{{Kind: input.KindMove, At: pt(300, 200)}}},
		"xdotool mousemove 0 7":                                {batch: input.Batch{{Kind: input.KindMove, At: pt(0, 7)}}},
		"xdotool click 1":                                      {batch: input.Batch{{Kind: input.KindClick, Button: input.ButtonLeft, Count: 1}}},
		"xdotool click --repeat 2 1":                           {batch: input.Batch{{Kind: input.KindClick, Button: input.ButtonLeft, Count: 2}}},
		"xdotool click 3":                                      {batch: input.Batch{{Kind: input.KindClick, Button: input.ButtonRight, Count: 1}}},
		"xdotool click --repeat 3 5":                           {batch: input.Batch{{Kind: input.KindScroll, DY: 3}}},
		"xdotool click 4":                                      {batch: input.Batch{{Kind: input.KindScroll, DY: -1}}},
		"xdotool mousedown 2":                                  {batch: input.Batch{{Kind: input.KindMouseDown, Button: input.ButtonMiddle}}},
		"xdotool mouseup 1":                                    {batch: input.Batch{{Kind: input.KindMouseUp, Button: input.ButtonLeft}}},
		"xdotool type --delay 75 -- 'hello, wörld'":            {batch: input.Batch{{Kind: input.KindType, Text: "hello, wörld"}}},
		`xdotool type --delay 0 -- 'it'"'"'s'`:                 {batch: input.Batch{{Kind: input.KindType, Text: "it's"}}},
		"xdotool type --delay 75 -- a@b.c/d-e":                 {batch: input.Batch{{Kind: input.KindType, Text: "a@b.c/d-e"}}},
		"xdotool type --delay 75 -- 'line\nnext'":              {batch: input.Batch{{Kind: input.KindType, Text: "line\nnext"}}},
		"xdotool key Return":                                   {batch: input.Batch{{Kind: input.KindKey, Chord: "Return"}}},
		"xdotool key Control_L+Alt_L+t":                        {batch: input.Batch{{Kind: input.KindKey, Chord: "Control_L+Alt_L+t"}}},
	} {
		got, ok := parseFast(bash(line))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v %v, want %+v", line, got, ok, want)
		}
	}
	for _, line := range []string{
		"scrot --pointer /tmp/screenshot-x.png; rm -rf /", "scrot /tmp/screenshot-x.png", "scrot --pointer /home/user/x.png",
		"xdotool mousemove --sync 300", "xdotool mousemove -5 3", "xdotool mousemove 1 2 3", "xdotool mousemove 01 2",
		"xdotool click --repeat 4 1", "xdotool click 9", "xdotool click --repeat 0 1", "xdotool  click 1",
		"xdotool type hello", "xdotool getmouselocation", "xdotool mousedown", "echo hi",
		"xdotool key Return; reboot", "xdotool key nosuchkey", "xdotool key --clearmodifiers Return", "xdotool key Return Tab",
		"xdotool type --delay 75 -- hello world", "xdotool type --delay 75 -- 'a'b'", "xdotool type --delay 75 -- 'plain'",
		"xdotool type --delay 75 -- ''", "xdotool type --delay 075 -- x", "xdotool type -- x", "xdotool type --delay 75 'a b'",
		"xdotool type --delay 75 -- 'a\x00b'",
	} {
		if got, ok := parseFast(bash(line)); ok {
			t.Errorf("%q taken as %+v: it must run in the guest", line, got)
		}
	}
	if _, ok := parseFast(processConfig{Cmd: "/bin/sh", Args: []string{"-l", "-c", "xdotool click 1"}}); ok {
		t.Error("a command not sent as bash -l -c was taken")
	}
}

func FuzzParseFast(f *testing.F) {
	f.Add("xdotool click --repeat 2 1")
	f.Add("xdotool mousemove --sync 300 200")
	f.Add("scrot --pointer /tmp/screenshot-abc.png")
	f.Add(`xdotool type --delay 75 -- 'it'"'"'s a ü'`)
	f.Add("xdotool key Control_L+c")
	f.Fuzz(func(t *testing.T, line string) {
		fc, ok := parseFast(processConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", line}})
		if !ok {
			return
		}
		if fc.shotPath != "" {
			return
		}
		if len(fc.batch) != 1 {
			t.Fatalf("%q: %+v", line, fc)
		}
		a := fc.batch[0]
		if a.Kind == input.KindType {
			// What the guest's shell would have passed xdotool as its
			// last argument.
			if !strings.HasSuffix(line, " -- "+quoteLikeSDK(a.Text)) || !utf8.ValidString(a.Text) || a.Text == "" {
				t.Fatalf("%q: typed %q", line, a.Text)
			}
		}
		if a.At != nil && (a.At.X < 0 || a.At.Y < 0) || a.Count > 3 || a.Count < 0 {
			t.Fatalf("%q: out of range: %+v", line, a)
		}
	})
}

// quoteLikeSDK is @e2b/desktop's quoteString.
func quoteLikeSDK(s string) string {
	if s == "" {
		return "''"
	}
	if regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
