package api

import (
	"encoding/json"

	"github.com/warmdesk/warmdesk/browsertool"
	"github.com/warmdesk/warmdesk/input"
)

// ActionsRequest is the body of POST /v1/desktops/{id}/actions, and of an
// "actions" message on the control WebSocket. The server decodes it
// strictly (unknown fields are errors naming the field).
type ActionsRequest struct {
	// Actions are canonical actions (see input.Action), run in order; the
	// server decodes them strictly, naming the field at fault
	// ("actions[2].x").
	Actions input.Batch `json:"actions"`
	// Screenshot asks for a trailing screenshot even when the last action
	// is not a screenshot or zoom.
	Screenshot bool `json:"screenshot,omitempty"`
	// SettleMs is how long the screen must stay unchanged before the
	// trailing screenshot (default 300; 0 captures at once).
	SettleMs *int `json:"settle_ms,omitempty"`
	// TimeoutMs bounds that wait (default 5000): the screenshot is taken
	// when the screen settles or at this deadline, whichever comes first.
	TimeoutMs *int `json:"timeout_ms,omitempty"`
	// ReactionMs bounds how long, before the quiet period is timed, the
	// server waits for the screen to react to the batch's input (default
	// 1000, at most 10000; 0 does not wait for a reaction).
	ReactionMs *int `json:"reaction_ms,omitempty"`
	// DisplayWidth and DisplayHeight declare the coordinate space of the
	// actions and the size of the screenshot, when the agent works on a
	// scaled picture of the screen; absent means native pixels.
	DisplayWidth  int `json:"display_width,omitempty"`
	DisplayHeight int `json:"display_height,omitempty"`
	// Format is png (default) or jpeg; Quality the JPEG quality.
	Format  string `json:"format,omitempty"`
	Quality int    `json:"quality,omitempty"`
	// Cursor draws the pointer into the screenshot when the display sends
	// it apart from the picture (a guest that draws its own pointer, as
	// the minimal image does, shows it anyway).
	Cursor bool `json:"cursor,omitempty"`
}

// ActionsResponse answers a batch. On failure (a non-2xx status) Error is
// set and Results still report every action: ok, error or skipped.
type ActionsResponse struct {
	Results    []ActionResult `json:"results"`
	QueuedMs   float64        `json:"queued_ms"`
	ElapsedMs  float64        `json:"elapsed_ms"`
	Screenshot *Image         `json:"screenshot,omitempty"`
	// SyncMs is how long the batch waited for the guest to take input
	// before sending more (keys after a click, a drag's press).
	SyncMs float64 `json:"sync_ms,omitempty"`
	// Warnings say what the server could not confirm, such as keys sent
	// after a click the guest was not seen to take.
	Warnings []string   `json:"warnings,omitempty"`
	Error    *ErrorBody `json:"error,omitempty"`
}

// ActionResult reports one action of a batch.
type ActionResult struct {
	Index     int     `json:"index"`
	Action    string  `json:"action"`
	Status    string  `json:"status"` // ok, error or skipped
	Error     string  `json:"error,omitempty"`
	ElapsedMs float64 `json:"elapsed_ms"`
	// Cursor is where a cursor_position action found the pointer, in the
	// batch's coordinate space.
	Cursor *Point `json:"cursor,omitempty"`
	// Region is a zoom action's region in native pixels [x1, y1, x2, y2].
	Region []int `json:"region,omitempty"`
	// Screenshot is the picture of a screenshot or zoom action that is not
	// the last of its batch (taken at once, without settling).
	Screenshot *Image `json:"screenshot,omitempty"`
}

// Point is a pixel position.
type Point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// Image is an encoded screenshot inside a JSON answer.
type Image struct {
	MediaType string `json:"media_type"` // image/png or image/jpeg
	// Data is the encoded picture; JSON carries it as base64.
	Data   []byte `json:"data"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// ScreenWidth and ScreenHeight are the native screen size.
	ScreenWidth  int `json:"screen_width"`
	ScreenHeight int `json:"screen_height"`
	// Region is the native area shown [x, y, width, height].
	Region []int `json:"region"`
	// Counter is the screen's change counter of the content shown.
	Counter   uint64  `json:"counter"`
	CaptureMs float64 `json:"capture_ms"`
	// Settle says how the wait for a quiet screen ended, when there was
	// one.
	Settle *Settle `json:"settle,omitempty"`
}

// Settle is how a wait for the screen to stop changing ended.
type Settle struct {
	// Settled is true when the screen stayed unchanged for the quiet
	// period, false when the deadline came first.
	Settled  bool    `json:"settled"`
	WaitedMs float64 `json:"waited_ms"`
	QuietMs  int     `json:"quiet_ms"`
	// Changes counts the screen updates seen while waiting.
	Changes uint64 `json:"changes"`
	// Reacted says whether the screen reacted to the batch's input (more
	// than the pointer's redraw, or any change after a bare move) before
	// the quiet period was timed; absent when the batch sent no input.
	// ReactionMs is how long that wait took.
	Reacted    *bool   `json:"reacted,omitempty"`
	ReactionMs float64 `json:"reaction_ms,omitempty"`
}

// ExecRequest is the body of POST /v1/desktops/{id}/exec: a program run in
// the guest through its agent. Give cmd (with args) or shell.
type ExecRequest struct {
	Cmd  string   `json:"cmd,omitempty"`
	Args []string `json:"args,omitempty"`
	// Shell is a command line for /bin/sh -c, instead of cmd and args.
	Shell string            `json:"shell,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	// Cwd is the working directory (absolute); default /.
	Cwd string `json:"cwd,omitempty"`
	// Timeout bounds the program (default 30s, at most 10m); it is then
	// killed and the answer says timed_out.
	Timeout Duration `json:"timeout,omitempty"`
	// Stdin is text fed to the program; StdinBase64 is for bytes.
	Stdin       string `json:"stdin,omitempty"`
	StdinBase64 []byte `json:"stdin_base64,omitempty"`
	// MaxOutput bounds stdout and stderr each, in bytes (default 1 MiB,
	// at most 16 MiB); longer output is cut and reported truncated.
	MaxOutput int `json:"max_output,omitempty"`
}

// ExecResponse is how the program ended. Output that is valid UTF-8 comes
// as text in stdout/stderr, anything else in stdout_base64/stderr_base64.
type ExecResponse struct {
	ExitCode        int     `json:"exit_code"`
	Signal          int     `json:"signal,omitempty"`
	TimedOut        bool    `json:"timed_out,omitempty"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutBase64    []byte  `json:"stdout_base64,omitempty"`
	StderrBase64    []byte  `json:"stderr_base64,omitempty"`
	StdoutTruncated bool    `json:"stdout_truncated,omitempty"`
	StderrTruncated bool    `json:"stderr_truncated,omitempty"`
	DurationMs      float64 `json:"duration_ms"`
}

// FileWritten answers PUT /v1/desktops/{id}/files.
type FileWritten struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Clipboard is the body and answer of /v1/desktops/{id}/clipboard.
type Clipboard struct {
	Text string `json:"text"`
	// Selection is clipboard (default) or primary.
	Selection string `json:"selection,omitempty"`
}

// ControlMessage is what an agent sends on the control WebSocket
// (GET /v1/desktops/{id}/control). Type "actions" carries an
// ActionsRequest's fields in Body's place, "exec" an ExecRequest's (with
// stream for output as it comes), "cancel" ends the request named by id.
type ControlMessage struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Stream, on exec, sends output as exec.output messages while the
	// program runs.
	Stream bool `json:"stream,omitempty"`
}

// ControlReply is what the server sends on the control WebSocket:
//
//   - "hello" once, with the desktop;
//   - "result" with the answer to request id (Result holds an
//     ActionsResponse or an ExecResponse);
//   - "error" with the error of request id (Status is the HTTP status the
//     same error has on the HTTP API; Result may hold partial results);
//   - "exec.output" with a chunk of a streaming exec's output;
//   - "screen.changed" when the screen changed (at most every 100 ms);
//   - "desktop.state", "desktop.control", "desktop.deleted" when the
//     desktop changed.
type ControlReply struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Status  int             `json:"status,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *ErrorBody      `json:"error,omitempty"`
	Desktop *Desktop        `json:"desktop,omitempty"`
	// Stream and Data are an exec.output chunk: stdout or stderr, text
	// when valid UTF-8 (else DataBase64).
	Stream     string `json:"stream,omitempty"`
	Data       string `json:"data,omitempty"`
	DataBase64 []byte `json:"data_base64,omitempty"`
	// Counter is the screen's change counter, on screen.changed.
	Counter uint64 `json:"counter,omitempty"`
}

// AnthropicTurnResult answers a whole assistant turn posted to POST
// /v1/desktops/{id}/computer/anthropic: the user message that carries a
// tool_result for each computer tool_use of the turn, in order, ready to
// append to the conversation as it is.
type AnthropicTurnResult struct {
	Role    string                      `json:"role"` // "user"
	Content []input.AnthropicToolResult `json:"content"`
}

// BrowserTurnResult answers an assistant turn of Anthropic's browser
// toolset posted to POST /v1/desktops/{id}/browser/anthropic: the user
// message with a tool_result for each browser member's tool_use, in order.
type BrowserTurnResult struct {
	Role    string                   `json:"role"` // "user"
	Content []browsertool.ToolResult `json:"content"`
}

// MixedTurnResult answers an assistant turn holding calls of both
// Anthropic toolsets, computer and browser, posted to either endpoint:
// the user message with a tool_result for each call, in order, each an
// input.AnthropicToolResult or a browsertool.ToolResult.
type MixedTurnResult struct {
	Role    string `json:"role"` // "user"
	Content []any  `json:"content"`
}

// GeminiTurnResult answers POST /v1/desktops/{id}/computer/gemini: the
// user Content with a functionResponse part for each function call, in
// order, ready to append to the conversation.
type GeminiTurnResult struct {
	Role  string             `json:"role"` // "user"
	Parts []input.GeminiPart `json:"parts"`
}

// AnthropicFailure is the body of a failed POST
// /v1/desktops/{id}/computer/anthropic: the error as everywhere, and the
// tool_result (is_error) the agent can hand the model.
type AnthropicFailure struct {
	Error      ErrorBody                 `json:"error"`
	ToolResult input.AnthropicToolResult `json:"tool_result"`
}
