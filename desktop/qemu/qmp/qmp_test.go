package qmp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeQEMU serves one QMP connection with scripted answers, for unit tests.
type fakeQEMU struct {
	t       *testing.T
	conn    *net.UnixConn
	r       *bufio.Reader
	pending []byte
}

func pipe(t *testing.T) (*net.UnixConn, *fakeQEMU) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	toConn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "qmp")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	client, server := toConn(fds[0]), toConn(fds[1])
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, &fakeQEMU{t: t, conn: server, r: bufio.NewReader(server)}
}

func (f *fakeQEMU) send(line string) {
	if _, err := f.conn.Write([]byte(line + "\r\n")); err != nil {
		f.t.Error(err)
	}
}

// next reads one command, and any file descriptor sent with it.
func (f *fakeQEMU) next() (cmd map[string]any, fd int) {
	fd = -1
	for !bytes.Contains(f.pending, []byte("\n")) {
		buf := make([]byte, 4096)
		oob := make([]byte, syscall.CmsgSpace(4))
		n, oobn, _, _, err := f.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			f.t.Fatalf("read command: %v", err)
		}
		if oobn > 0 {
			msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
			fds, _ := syscall.ParseUnixRights(&msgs[0])
			fd = fds[0]
		}
		f.pending = append(f.pending, buf[:n]...)
	}
	i := bytes.IndexByte(f.pending, '\n')
	line := f.pending[:i+1]
	f.pending = f.pending[i+1:]
	if err := json.Unmarshal(line, &cmd); err != nil {
		f.t.Fatalf("command %q: %v", line, err)
	}
	return cmd, fd
}

const greeting = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7"}, "capabilities": ["oob"]}}`

func handshake(t *testing.T) (*Client, *fakeQEMU) {
	conn, srv := pipe(t)
	done := make(chan *Client)
	go func() {
		c, err := New(context.Background(), conn)
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	srv.send(greeting)
	cmd, _ := srv.next()
	if cmd["execute"] != "qmp_capabilities" {
		t.Fatalf("first command %v, want qmp_capabilities", cmd)
	}
	srv.send(`{"return": {}, "id": 1}`)
	c := <-done
	if c == nil {
		t.FailNow()
	}
	t.Cleanup(func() { c.Close() })
	return c, srv
}

func TestHandshakeAndVersion(t *testing.T) {
	c, _ := handshake(t)
	if got := c.Version().String(); got != "7.2.22" {
		t.Errorf("version %s, want 7.2.22", got)
	}
	if !strings.HasPrefix(c.Version().Package, "Debian") {
		t.Errorf("package %q", c.Version().Package)
	}
}

func TestExecuteMatchesRepliesByID(t *testing.T) {
	c, srv := handshake(t)
	type status struct {
		Status  string `json:"status"`
		Running bool   `json:"running"`
	}
	results := make(chan string, 2)
	for range 2 {
		go func() {
			var st status
			if err := c.Execute(context.Background(), "query-status", nil, &st); err != nil {
				t.Error(err)
			}
			results <- st.Status
		}()
	}
	a, _ := srv.next()
	b, _ := srv.next()
	// Answer in reverse order: each caller must still get its own reply.
	srv.send(`{"return": {"status": "paused", "running": false}, "id": ` + jsonNum(b["id"]) + `}`)
	srv.send(`{"event": "STOP", "data": {}, "timestamp": {"seconds": 1, "microseconds": 2}}`)
	srv.send(`{"return": {"status": "running", "running": true}, "id": ` + jsonNum(a["id"]) + `}`)
	got := map[string]bool{<-results: true, <-results: true}
	if !got["paused"] || !got["running"] {
		t.Errorf("results %v", got)
	}
}

func jsonNum(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestErrorReply(t *testing.T) {
	c, srv := handshake(t)
	errc := make(chan error)
	go func() { errc <- c.Execute(context.Background(), "cont", nil, nil) }()
	cmd, _ := srv.next()
	srv.send(`{"error": {"class": "GenericError", "desc": "migration is in progress"}, "id": ` + jsonNum(cmd["id"]) + `}`)
	err := <-errc
	var qerr *Error
	if !errors.As(err, &qerr) || qerr.Desc != "migration is in progress" {
		t.Fatalf("error %v, want the QMP error", err)
	}
}

func TestEventsReachSubscribers(t *testing.T) {
	c, srv := handshake(t)
	sub := c.Subscribe()
	defer sub.Close()
	srv.send(`{"event": "MIGRATION", "data": {"status": "active"}, "timestamp": {"seconds": 1, "microseconds": 0}}`)
	srv.send(`{"event": "MIGRATION", "data": {"status": "completed"}, "timestamp": {"seconds": 1, "microseconds": 5}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := sub.Wait(ctx, "MIGRATION", func(e Event) bool { return strings.Contains(string(e.Data), "completed") })
	if err != nil {
		t.Fatal(err)
	}
	if ev.Time.Unix() != 1 {
		t.Errorf("event time %v", ev.Time)
	}
}

func TestSendFDPassesDescriptor(t *testing.T) {
	c, srv := handshake(t)
	f, err := os.CreateTemp(t.TempDir(), "state")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("hello")
	errc := make(chan error)
	go func() { errc <- c.SendFD(context.Background(), "state", int(f.Fd())) }()
	cmd, fd := srv.next()
	if cmd["execute"] != "getfd" || fd < 0 {
		t.Fatalf("got %v with fd %d, want getfd with a descriptor", cmd, fd)
	}
	got := make([]byte, 5)
	if _, err := syscall.Pread(fd, got, 0); err != nil || string(got) != "hello" {
		t.Fatalf("passed fd reads %q, %v", got, err)
	}
	syscall.Close(fd)
	srv.send(`{"return": {}, "id": ` + jsonNum(cmd["id"]) + `}`)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestPendingCommandsFailWhenQEMUExits(t *testing.T) {
	c, srv := handshake(t)
	errc := make(chan error)
	go func() { errc <- c.Execute(context.Background(), "query-status", nil, nil) }()
	srv.next()
	srv.conn.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("error %v, want ErrClosed", err)
	}
	<-c.Done()
	if err := c.Execute(context.Background(), "query-status", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestContextEndsWait(t *testing.T) {
	c, _ := handshake(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Execute(ctx, "query-status", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
}

func TestParseMessage(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{greeting, true},
		{`{"return": {}, "id": 3}`, true},
		{`{"error": {"class": "CommandNotFound", "desc": "x"}, "id": 3}`, true},
		{`{"event": "RESUME", "timestamp": {"seconds": 1, "microseconds": 2}}`, true},
		{`{"return": {}}`, false},
		{`{"return": {}, "event": "STOP", "id": 1}`, false},
		{`{}`, false},
		{`not json`, false},
		{`{"id": "x", "return": 1}`, false},
	} {
		_, err := parseMessage([]byte(tc.line))
		if (err == nil) != tc.ok {
			t.Errorf("parseMessage(%s): err %v, want ok=%v", tc.line, err, tc.ok)
		}
	}
}

func TestEncodeCommand(t *testing.T) {
	b, err := encodeCommand("migrate-incoming", map[string]string{"uri": "fd:state"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"execute":"migrate-incoming","arguments":{"uri":"fd:state"},"id":7}` + "\r\n"
	if string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	b, _ = encodeCommand("stop", nil, 8)
	if string(b) != `{"execute":"stop","id":8}`+"\r\n" {
		t.Errorf("got %q", b)
	}
}

func TestReadLineBounded(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", maxMessage+10)+"\n"), 4096)
	if _, err := readLine(r); !errors.Is(err, errTooLong) {
		t.Fatalf("error %v, want errTooLong", err)
	}
}

func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{greeting, `{"return": {}, "id": 3}`, `{"event": "STOP"}`, `{"error": {"class": "a", "desc": "b"}, "id": 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMessage(data)
		if err != nil {
			return
		}
		if (m.Return != nil || m.Error != nil) && m.ID == nil {
			t.Fatalf("reply without id accepted: %q", data)
		}
	})
}
