package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/desktop/desktoptest"
)

func TestExecRequests(t *testing.T) {
	h := newActHarness(t)
	var got desktoptest.GuestCmd
	h.guest.Program = func(ctx context.Context, c desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		got = c
		return desktoptest.GuestResult{ExitCode: 3, Stdout: []byte("out\n"), Stderr: []byte{0xff, 0xfe}}, nil
	}
	status, body := h.do("POST", h.path("/exec"), `{"cmd": "ls", "args": ["-l", "/"], "env": {"A": "1"}, "cwd": "/tmp", "timeout": "5s", "stdin": "in"}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp api.ExecResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.ExitCode != 3 || resp.Stdout != "out\n" || resp.Stderr != "" || string(resp.StderrBase64) != "\xff\xfe" || resp.DurationMs <= 0 {
		t.Errorf("response %s", body)
	}
	if got.Path != "ls" || fmt.Sprint(got.Args) != "[-l /]" || fmt.Sprint(got.Env) != "[A=1]" || got.Cwd != "/tmp" ||
		got.Timeout != "5.000" || string(got.Stdin) != "in" {
		t.Errorf("request reached the guest as %+v", got)
	}

	status, body = h.do("POST", h.path("/exec"), `{"shell": "echo $HOME | wc -c", "timeout": 2}`)
	if status != http.StatusOK || got.Path != "/bin/sh" || fmt.Sprint(got.Args) != "[-c echo $HOME | wc -c]" || got.Timeout != "2.000" {
		t.Errorf("shell: %d %s, request %+v", status, body, got)
	}

	h.guest.Program = func(context.Context, desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		return desktoptest.GuestResult{}, fmt.Errorf("%w: guest agent did not answer", desktop.ErrUnavailable)
	}
	status, body = h.do("POST", h.path("/exec"), `{"cmd": "true"}`)
	if code, _, _, _ := actError(t, body); status != http.StatusGatewayTimeout || code != "unavailable" {
		t.Errorf("agent down: %d %s", status, body)
	}
}

func TestExecRejects(t *testing.T) {
	h := newActHarness(t)
	calls := 0
	h.guest.Program = func(context.Context, desktoptest.GuestCmd) (desktoptest.GuestResult, error) {
		calls++
		return desktoptest.GuestResult{}, nil
	}
	cases := []struct{ name, body, field string }{
		{"nothing to run", `{}`, "cmd"},
		{"cmd and shell", `{"cmd": "ls", "shell": "ls"}`, "shell"},
		{"args with shell", `{"shell": "ls", "args": ["x"]}`, "args"},
		{"relative cwd", `{"cmd": "ls", "cwd": "tmp"}`, "cwd"},
		{"bad env name", `{"cmd": "ls", "env": {"A-B": "1"}}`, "env.A-B"},
		{"timeout too long", `{"cmd": "ls", "timeout": "1h"}`, "timeout"},
		{"stdin twice", `{"cmd": "cat", "stdin": "a", "stdin_base64": "YQ=="}`, "stdin_base64"},
		{"output bound too big", `{"cmd": "ls", "max_output": 100000000}`, "max_output"},
		{"unknown field", `{"cmd": "ls", "dir": "/"}`, ""},
		{"a program with =", `{"cmd": "A=B"}`, "cmd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := h.do("POST", h.path("/exec"), c.body)
			code, field, _, _ := actError(t, body)
			if status != http.StatusBadRequest || code != "invalid" || field != c.field {
				t.Errorf("%d %s field %q, want 400 field %q: %s", status, code, field, c.field, body)
			}
		})
	}
	if calls != 0 {
		t.Errorf("%d rejected requests reached the guest", calls)
	}
	ctx := t.Context()
	if _, err := h.mgr.Pause(ctx, h.id); err != nil {
		t.Fatal(err)
	}
	status, body := h.do("POST", h.path("/exec"), `{"cmd": "true"}`)
	if _, _, state, _ := actError(t, body); status != http.StatusConflict || state != "paused" {
		t.Errorf("exec on a paused desktop: %d %s", status, body)
	}
}

func TestFiles(t *testing.T) {
	h := newActHarness(t)
	data := strings.Repeat("warmdesk\x00\xff", 20000) // over the first chunk
	status, body := h.do("PUT", h.path("/files?path=/tmp/a.bin"), data)
	if status != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf(`"bytes":%d`, len(data))) {
		t.Fatalf("upload: %d %s", status, body)
	}
	req, _ := http.NewRequest("GET", h.srv.URL+h.path("/files?path=/tmp/a.bin"), nil)
	req.Header.Set("Authorization", "Bearer "+actToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := new(strings.Builder)
	fmt.Fprint(got, readAll(t, resp))
	if resp.StatusCode != http.StatusOK || got.String() != data || resp.Header.Get("X-File-Size") != fmt.Sprint(len(data)) {
		t.Errorf("download: %d, %d bytes, size header %q", resp.StatusCode, got.Len(), resp.Header.Get("X-File-Size"))
	}
	cases := []struct {
		name, method, query string
		status              int
		field               string
	}{
		{"no path", "GET", "", 400, "path"},
		{"relative path", "GET", "?path=tmp/a", 400, "path"},
		{"trailing slash", "PUT", "?path=/tmp/", 400, "path"},
		{"missing file", "GET", "?path=/nope", 404, ""},
		{"a directory", "GET", "?path=/tmp", 400, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := h.do(c.method, h.path("/files"+c.query), "x")
			_, field, _, msg := actError(t, body)
			if status != c.status || field != c.field || msg == "" {
				t.Errorf("%d field %q %q, want %d field %q", status, field, msg, c.status, c.field)
			}
		})
	}
}

func TestClipboard(t *testing.T) {
	h := newActHarness(t)
	status, body := h.do("PUT", h.path("/clipboard"), `{"text": "naïve café 日本語 🙂"}`)
	if status != http.StatusOK {
		t.Fatalf("put: %d %s", status, body)
	}
	status, body = h.do("GET", h.path("/clipboard"), "")
	if status != http.StatusOK || string(body) != `{"text":"naïve café 日本語 🙂","selection":"clipboard"}` {
		t.Errorf("get: %d %s", status, body)
	}
	if status, body = h.do("GET", h.path("/clipboard?selection=primary"), ""); status != http.StatusOK || !strings.Contains(string(body), `"text":""`) {
		t.Errorf("primary: %d %s", status, body)
	}
	if status, _ = h.do("GET", h.path("/clipboard?selection=secondary"), ""); status != http.StatusBadRequest {
		t.Errorf("secondary selection: %d, want 400", status)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b := new(strings.Builder)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}
