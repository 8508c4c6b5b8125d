package drive

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// heldOutputAgent is a guest agent whose program exited at once but left
// a process holding its output: guest-exec-status says it runs until the
// program's process group is killed.
type heldOutputAgent struct {
	mu     sync.Mutex
	killed []string // the kill script's arguments
}

func (a *heldOutputAgent) Call(ctx context.Context, cmd string, args, result any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var reply any
	switch cmd {
	case "guest-exec":
		b, _ := json.Marshal(args)
		var ex struct {
			Path string   `json:"path"`
			Arg  []string `json:"arg"`
		}
		json.Unmarshal(b, &ex)
		if ex.Path == "/bin/sh" && len(ex.Arg) > 3 && slices.Contains(ex.Arg, "sh") {
			a.killed = ex.Arg[3:]
			reply = map[string]int{"pid": 77}
		} else {
			reply = map[string]int{"pid": 42}
		}
	case "guest-exec-status":
		reply = map[string]any{"exited": a.killed != nil, "exitcode": 0, "out-data": base64.StdEncoding.EncodeToString([]byte("hi\n"))}
	}
	if result == nil {
		return nil
	}
	b, _ := json.Marshal(reply)
	return json.Unmarshal(b, result)
}

// A program that exits leaving a background job that holds its output is
// ended with its process group soon after its timeout, and answered as
// timed out (it was a 504 after the timeout and the agent's 3 s margin,
// the job still running).
func TestExecEndsAProcessGroupThatOutlivesItsTimeout(t *testing.T) {
	s := &Service{log: slog.New(slog.DiscardHandler)}
	ag := &heldOutputAgent{}
	req := ExecRequest{Path: "/bin/sh", Args: []string{"-c", "(while :; do :; done) & echo hi"}, Timeout: 500 * time.Millisecond}
	if err := req.Check(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := s.execOn(context.Background(), ag, req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("after %s: %v", took, err)
	}
	if !res.TimedOut || string(res.Stdout) != "hi\n" {
		t.Errorf("result %+v, want timed out with the output so far", res)
	}
	if took > req.Timeout+agentMargin/2 {
		t.Errorf("answered after %s, want soon after the %s timeout", took, req.Timeout)
	}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if len(ag.killed) != 2 || ag.killed[0] != "42" {
		t.Errorf("kill script arguments %q, want the program's pid 42 (its process group) and the grace", ag.killed)
	}
}
