// Package agentmcp is warmdesk's MCP server: tools that create, list, reset
// and delete desktops, drive them with the computer tool's input (the one
// Anthropic's models emit, which most models know), list and arrange their
// windows, read their accessibility tree, run commands and read and write
// files. Every tool calls hostd's HTTP API with the caller's own
// token, so MCP clients get exactly the API's access model, errors and the
// drive service's input guarantees; nothing here drives a desktop itself.
//
// Two transports serve it: streamable HTTP at /mcp on hostd (web mounts
// Handler) and stdio (`hostd mcp`, which talks to the running hostd).
package agentmcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/client"
	"github.com/warmdesk/warmdesk/input"
)

// Version is the server's version as MCP clients see it.
const Version = "0.1.0"

// maxReadBytes bounds what read_file returns: a model reads it whole.
const maxReadBytes = 256 << 10

// Options configure one server (one MCP session).
type Options struct {
	// Client returns the API client a tool call uses: the caller's token
	// against hostd.
	Client func(req *mcp.CallToolRequest) (*client.Client, error)
	// DisplayWidth and DisplayHeight, when set, are the size screenshots
	// come back at and the coordinate space of the computer tool (as the
	// display_width_px the agent would declare); zero is the native screen.
	DisplayWidth, DisplayHeight int
	// DefaultSnapshot is what create_desktop starts from when the model
	// names none.
	DefaultSnapshot string
	// Desktop, when set, fixes the session to one desktop: the session
	// of a per-desktop token, which reaches no other. The host's tools
	// (list, create and delete desktops, list snapshots) are left out, a
	// call naming another desktop is refused, and Reach says which of the
	// desktop's tools are offered.
	Desktop string
	// Reach is how far a per-desktop token goes; it is not read without
	// Desktop.
	Reach Reach
}

// Reach is how far a per-desktop token goes on its desktop, as hostd's
// roles nest. A token that may only watch opens no session: every tool
// here drives or reaches inside.
type Reach int

const (
	// ReachControl offers computer, windows, accessibility and
	// reset_desktop.
	ReachControl Reach = iota + 1
	// ReachShell adds exec, read_file and write_file.
	ReachShell
)

// session is what one MCP session remembers: the desktop its calls drive
// when they name none.
type session struct {
	opts Options
	mu   sync.Mutex
	// bound is the desktop of the last create, reset or call naming one.
	bound string
}

// NewServer returns an MCP server with warmdesk's tools for one session.
func NewServer(o Options) *mcp.Server {
	if o.DefaultSnapshot == "" {
		o.DefaultSnapshot = "minimal"
	}
	s := &session{opts: o, bound: o.Desktop}
	instructions := "Each tool works on one Linux desktop (X11, 1280x800 by default). Create one with create_desktop " +
		"(it becomes the session's desktop: later calls may omit desktop_id), look at it with computer " +
		"{\"action\": \"screenshot\"}, and act with computer's other actions. exec, read_file and write_file " +
		"reach the desktop's shell and files when the token allows it."
	if o.Desktop != "" {
		instructions = "Every tool works on one Linux desktop, " + o.Desktop + " (X11, 1280x800 by default): desktop_id " +
			"may be left out. Look at it with computer {\"action\": \"screenshot\"} and act with computer's other actions"
		if o.Reach >= ReachShell {
			instructions += "; exec, read_file and write_file reach its shell and files"
		}
		instructions += "."
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "warmdesk", Title: "warmdesk desktops", Version: Version}, &mcp.ServerOptions{
		Instructions: instructions,
	})
	host, shell := o.Desktop == "", o.Desktop == "" || o.Reach >= ReachShell
	if host {
		mcp.AddTool(srv, &mcp.Tool{Name: "list_desktops", Description: "List the desktops this token can see, with their id, state and snapshot."}, s.listDesktops)
		mcp.AddTool(srv, &mcp.Tool{Name: "create_desktop", Description: "Create a desktop from a snapshot (a saved desktop: see list_snapshots) in well under a second. It becomes this session's desktop."}, s.createDesktop)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "reset_desktop", Description: "Return a desktop to the snapshot it was created from, in about the time of a create: everything done in it since is gone; it keeps its id, and becomes this session's desktop."}, s.resetDesktop)
	if host {
		mcp.AddTool(srv, &mcp.Tool{Name: "delete_desktop", Description: "Delete a desktop and everything on it."}, s.deleteDesktop)
		mcp.AddTool(srv, &mcp.Tool{Name: "list_snapshots", Description: "List the snapshots desktops can be created from (needs the host's token)."}, s.listSnapshots)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "computer", Description: computerDescription, InputSchema: computerSchema()}, s.computer)
	mcp.AddTool(srv, &mcp.Tool{Name: "browser", Description: browserDescription, InputSchema: browserSchema()}, s.browser)
	mcp.AddTool(srv, &mcp.Tool{Name: "windows", Description: windowsDescription}, s.windows)
	mcp.AddTool(srv, &mcp.Tool{Name: "accessibility", Description: accessibilityDescription}, s.accessibility)
	if shell {
		mcp.AddTool(srv, &mcp.Tool{Name: "exec", Description: "Run a shell command line (sh -c) in the desktop as root and return its exit code, stdout and stderr."}, s.exec)
		mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Description: "Read a file of the desktop (absolute path). Text comes back as text, other bytes as base64; at most 256 KiB."}, s.readFile)
		mcp.AddTool(srv, &mcp.Tool{Name: "write_file", Description: "Write text to a file of the desktop (absolute path), replacing it; parent directories must exist."}, s.writeFile)
	}
	return srv
}

const computerDescription = "Use the desktop's mouse and keyboard and see its screen. Every action but cursor_position " +
	"answers a screenshot taken once the screen has settled. Actions: screenshot; left_click, right_click, middle_click, " +
	"double_click, triple_click (coordinate [x, y]; text holds modifier keys such as \"shift\"); mouse_move (coordinate); " +
	"left_click_drag (start_coordinate, coordinate); left_mouse_down, left_mouse_up; scroll (coordinate, scroll_direction " +
	"up/down/left/right, scroll_amount in wheel clicks); type (text); key (text: xdotool names such as \"ctrl+s\" or " +
	"\"Return\"); hold_key (text, duration seconds); wait (duration seconds); zoom (region [x1, y1, x2, y2]); " +
	"cursor_position. Coordinates are pixels of the screenshots this tool returns."

// DesktopRef names the desktop a call acts on.
type DesktopRef struct {
	DesktopID string `json:"desktop_id,omitempty" jsonschema:"the desktop to act on; omit for this session's desktop (the last created or named)"`
}

// DesktopSummary is a desktop as the tools show it.
type DesktopSummary struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Snapshot string `json:"snapshot"`
	Width    int    `json:"width,omitempty"`
	Height   int    `json:"height,omitempty"`
}

func summary(d api.Desktop) DesktopSummary {
	s := DesktopSummary{ID: d.ID, Name: d.Name, State: d.State, Snapshot: d.Snapshot}
	if d.Screen != nil {
		s.Width, s.Height = d.Screen.Width, d.Screen.Height
	}
	return s
}

// DesktopList is list_desktops' answer.
type DesktopList struct {
	Desktops []DesktopSummary `json:"desktops"`
}

// desktop resolves a call's desktop: the one named (which becomes the
// session's), or the session's.
func (s *session) desktop(ref DesktopRef) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Desktop != "" && ref.DesktopID != "" && ref.DesktopID != s.opts.Desktop {
		return "", fmt.Errorf("desktop_id %s: this session's token reaches only desktop %s; leave desktop_id out", ref.DesktopID, s.opts.Desktop)
	}
	if ref.DesktopID != "" {
		s.bound = ref.DesktopID
		return ref.DesktopID, nil
	}
	if s.bound == "" {
		return "", errors.New("no desktop: give desktop_id, or create one with create_desktop first")
	}
	return s.bound, nil
}

func (s *session) bind(id string) {
	s.mu.Lock()
	s.bound = id
	s.mu.Unlock()
}

func (s *session) unbind(id string) {
	s.mu.Lock()
	if s.bound == id {
		s.bound = ""
	}
	s.mu.Unlock()
}

// target is what a tool that acts on one desktop starts with: the
// caller's API client and the desktop the call names or the session has.
func (s *session) target(req *mcp.CallToolRequest, ref DesktopRef) (*client.Client, string, error) {
	c, err := s.opts.Client(req)
	if err != nil {
		return nil, "", err
	}
	id, err := s.desktop(ref)
	return c, id, err
}

// apiError makes an API failure a tool error the model can act on.
func apiError(what string, err error) error {
	var ae *client.Error
	if errors.As(err, &ae) {
		msg := ae.Message
		if ae.Field != "" && !strings.Contains(msg, ae.Field) {
			msg = ae.Field + ": " + msg
		}
		return fmt.Errorf("%s: %s (%s)", what, msg, ae.Code)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (s *session) listDesktops(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, DesktopList, error) {
	c, err := s.opts.Client(req)
	if err != nil {
		return nil, DesktopList{}, err
	}
	ds, err := c.Desktops(ctx)
	if err != nil {
		return nil, DesktopList{}, apiError("list desktops", err)
	}
	out := DesktopList{Desktops: []DesktopSummary{}}
	for _, d := range ds {
		out.Desktops = append(out.Desktops, summary(d))
	}
	return nil, out, nil
}

// CreateInput is create_desktop's input.
type CreateInput struct {
	Snapshot string `json:"snapshot,omitempty" jsonschema:"the snapshot to start from (default: the server's, usually minimal)"`
	Name     string `json:"name,omitempty" jsonschema:"a name for people watching the dashboard"`
}

func (s *session) createDesktop(ctx context.Context, req *mcp.CallToolRequest, in CreateInput) (*mcp.CallToolResult, DesktopSummary, error) {
	c, err := s.opts.Client(req)
	if err != nil {
		return nil, DesktopSummary{}, err
	}
	if in.Snapshot == "" {
		in.Snapshot = s.opts.DefaultSnapshot
	}
	d, err := c.CreateDesktop(ctx, api.CreateDesktop{Snapshot: in.Snapshot, Name: in.Name})
	if err != nil {
		return nil, DesktopSummary{}, apiError("create a desktop from "+in.Snapshot, err)
	}
	s.bind(d.ID)
	return nil, summary(d), nil
}

func (s *session) resetDesktop(ctx context.Context, req *mcp.CallToolRequest, ref DesktopRef) (*mcp.CallToolResult, DesktopSummary, error) {
	c, id, err := s.target(req, ref)
	if err != nil {
		return nil, DesktopSummary{}, err
	}
	d, err := c.Reset(ctx, id, api.Reset{})
	if err != nil {
		return nil, DesktopSummary{}, apiError("reset "+id, err)
	}
	s.bind(d.ID)
	return nil, summary(d), nil
}

// Done is the answer of tools that only report success.
type Done struct {
	Done string `json:"done"`
}

func (s *session) deleteDesktop(ctx context.Context, req *mcp.CallToolRequest, ref DesktopRef) (*mcp.CallToolResult, Done, error) {
	c, id, err := s.target(req, ref)
	if err != nil {
		return nil, Done{}, err
	}
	if err := c.DeleteDesktop(ctx, id); err != nil {
		return nil, Done{}, apiError("delete "+id, err)
	}
	s.unbind(id)
	return nil, Done{Done: "deleted " + id}, nil
}

// SnapshotSummary is a snapshot as list_snapshots shows it.
type SnapshotSummary struct {
	Name   string `json:"name"`
	Image  string `json:"image"`
	Parent string `json:"parent,omitempty"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// SnapshotList is list_snapshots' answer.
type SnapshotList struct {
	Snapshots []SnapshotSummary `json:"snapshots"`
}

func (s *session) listSnapshots(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, SnapshotList, error) {
	c, err := s.opts.Client(req)
	if err != nil {
		return nil, SnapshotList{}, err
	}
	snaps, err := c.Snapshots(ctx)
	if err != nil {
		return nil, SnapshotList{}, apiError("list snapshots", err)
	}
	out := SnapshotList{Snapshots: []SnapshotSummary{}}
	for _, sn := range snaps {
		if sn.Ephemeral {
			continue
		}
		out.Snapshots = append(out.Snapshots, SnapshotSummary{Name: sn.Name, Image: sn.Image, Parent: sn.Parent, Width: sn.Screen.Width, Height: sn.Screen.Height})
	}
	return nil, out, nil
}

// ComputerInput is the computer tool's input: Anthropic's computer tool
// input, plus the desktop.
type ComputerInput struct {
	DesktopRef
	Action          string  `json:"action" jsonschema:"what to do (the description says which fields each action takes)"`
	Coordinate      []int   `json:"coordinate,omitempty" jsonschema:"[x, y] in the screenshot's pixels"`
	StartCoordinate []int   `json:"start_coordinate,omitempty" jsonschema:"[x, y] where left_click_drag starts"`
	Text            string  `json:"text,omitempty" jsonschema:"the text to type, the key chord to press, or modifier keys held during a click or scroll"`
	ScrollDirection string  `json:"scroll_direction,omitempty" jsonschema:"up, down, left or right"`
	ScrollAmount    int     `json:"scroll_amount,omitempty" jsonschema:"wheel clicks to scroll"`
	Duration        float64 `json:"duration,omitempty" jsonschema:"seconds, for wait and hold_key"`
	Region          []int   `json:"region,omitempty" jsonschema:"[x1, y1, x2, y2] for zoom"`
}

// computerSchema is ComputerInput's schema, its actions an enum of the ones
// package input decodes, so the two cannot drift apart.
func computerSchema() *jsonschema.Schema {
	schema, err := jsonschema.For[ComputerInput](nil)
	if err != nil {
		panic(fmt.Sprintf("agentmcp: ComputerInput's schema: %v", err)) // a type of this package
	}
	for _, a := range input.AnthropicActions() {
		schema.Properties["action"].Enum = append(schema.Properties["action"].Enum, a)
	}
	return schema
}

func (s *session) computer(ctx context.Context, req *mcp.CallToolRequest, in ComputerInput) (*mcp.CallToolResult, any, error) {
	c, id, err := s.target(req, in.DesktopRef)
	if err != nil {
		return nil, nil, err
	}
	in.DesktopID = ""
	body, err := json.Marshal(in)
	if err != nil {
		return nil, nil, err
	}
	tr, err := c.Anthropic(ctx, id, body, client.ComputerOptions{DisplayWidth: s.opts.DisplayWidth, DisplayHeight: s.opts.DisplayHeight})
	// The tool_result carries the model-facing text of a failure too.
	res := &mcp.CallToolResult{IsError: err != nil || tr.IsError}
	for _, b := range tr.Content {
		switch {
		case b.Type == "image" && b.Source != nil:
			data, derr := base64.StdEncoding.DecodeString(b.Source.Data)
			if derr != nil {
				return nil, nil, derr
			}
			res.Content = append(res.Content, &mcp.ImageContent{MIMEType: b.Source.MediaType, Data: data})
		case b.Type == "text":
			res.Content = append(res.Content, &mcp.TextContent{Text: b.Text})
		}
	}
	if err != nil && len(res.Content) == 0 {
		return nil, nil, apiError(in.Action, err)
	}
	return res, nil, nil
}

// ExecInput is exec's input.
type ExecInput struct {
	DesktopRef
	Command        string `json:"command" jsonschema:"a shell command line, run with sh -c"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"kill it after this many seconds (default 30, at most 600)"`
}

// ExecOutput is exec's answer.
type ExecOutput struct {
	ExitCode int    `json:"exit_code"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

func (s *session) exec(ctx context.Context, req *mcp.CallToolRequest, in ExecInput) (*mcp.CallToolResult, ExecOutput, error) {
	c, id, err := s.target(req, in.DesktopRef)
	if err != nil {
		return nil, ExecOutput{}, err
	}
	if strings.TrimSpace(in.Command) == "" {
		return nil, ExecOutput{}, errors.New("command is empty")
	}
	r := api.ExecRequest{Shell: in.Command}
	if in.TimeoutSeconds > 0 {
		r.Timeout = api.Duration(time.Duration(in.TimeoutSeconds) * time.Second)
	}
	out, err := c.Exec(ctx, id, r)
	if err != nil {
		return nil, ExecOutput{}, apiError("exec", err)
	}
	return nil, ExecOutput{ExitCode: out.ExitCode, TimedOut: out.TimedOut, Stdout: out.Stdout, Stderr: out.Stderr}, nil
}

// PathInput names a file of the desktop.
type PathInput struct {
	DesktopRef
	Path string `json:"path" jsonschema:"an absolute path in the desktop"`
}

// FileContent is read_file's answer.
type FileContent struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Text is the content when it is UTF-8; Base64 otherwise.
	Text   string `json:"text,omitempty"`
	Base64 string `json:"base64,omitempty"`
}

// errTooLong stops a read past what read_file returns.
var errTooLong = errors.New("longer than read_file returns")

// limitWriter keeps up to n bytes and fails past them, which ends the
// download.
type limitWriter struct {
	buf bytes.Buffer
	n   int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.n {
		return 0, errTooLong
	}
	return w.buf.Write(p)
}

func (s *session) readFile(ctx context.Context, req *mcp.CallToolRequest, in PathInput) (*mcp.CallToolResult, FileContent, error) {
	c, id, err := s.target(req, in.DesktopRef)
	if err != nil {
		return nil, FileContent{}, err
	}
	w := &limitWriter{n: maxReadBytes}
	if _, err := c.ReadFile(ctx, id, in.Path, w); errors.Is(err, errTooLong) {
		return nil, FileContent{}, fmt.Errorf("read %s: more than the %d bytes this tool returns: read a part with exec (head -c, tail -c)", in.Path, maxReadBytes)
	} else if err != nil {
		return nil, FileContent{}, apiError("read "+in.Path, err)
	}
	out := FileContent{Path: in.Path, Size: int64(w.buf.Len())}
	if utf8.Valid(w.buf.Bytes()) {
		out.Text = w.buf.String()
	} else {
		out.Base64 = base64.StdEncoding.EncodeToString(w.buf.Bytes())
	}
	return nil, out, nil
}

// WriteInput is write_file's input.
type WriteInput struct {
	PathInput
	Content string `json:"content" jsonschema:"the file's new text"`
}

func (s *session) writeFile(ctx context.Context, req *mcp.CallToolRequest, in WriteInput) (*mcp.CallToolResult, Done, error) {
	c, id, err := s.target(req, in.DesktopRef)
	if err != nil {
		return nil, Done{}, err
	}
	w, err := c.WriteFile(ctx, id, in.Path, strings.NewReader(in.Content))
	if err != nil {
		return nil, Done{}, apiError("write "+in.Path, err)
	}
	return nil, Done{Done: fmt.Sprintf("wrote %d bytes to %s", w.Bytes, in.Path)}, nil
}
