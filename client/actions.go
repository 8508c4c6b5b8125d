package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/input"
)

func desktopPath(id, rest string) string { return "/v1/desktops/" + url.PathEscape(id) + rest }

// send makes one request with a raw body; the caller reads the answer.
func (c *Client) send(ctx context.Context, method, path, contentType string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return c.HTTP.Do(req)
}

// apiError reads an error answer.
func apiError(resp *http.Response, data []byte) error {
	var e api.Error
	if json.Unmarshal(data, &e) != nil || e.Error.Message == "" {
		e.Error = api.ErrorBody{Code: "http", Message: strings.TrimSpace(string(data))}
	}
	return &Error{Status: resp.StatusCode, ErrorBody: e.Error}
}

// postJSON posts in and decodes the answer, success or failure, into out;
// a failure is also returned as an *Error.
func (c *Client) postJSON(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.postRaw(ctx, path, b, out)
}

func (c *Client) postRaw(ctx context.Context, path string, body []byte, out any) error {
	_, err := c.postRawHeaders(ctx, path, body, out)
	return err
}

// postRawHeaders is postRaw that also returns the answer's headers (empty
// when there was no answer).
func (c *Client) postRawHeaders(ctx context.Context, path string, body []byte, out any) (http.Header, error) {
	resp, err := c.send(ctx, http.MethodPost, path, "application/json", bytes.NewReader(body))
	if err != nil {
		return http.Header{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return resp.Header, err
	}
	if resp.StatusCode >= 300 {
		if out != nil {
			json.Unmarshal(data, out)
		}
		return resp.Header, apiError(resp, data)
	}
	if out == nil {
		return resp.Header, nil
	}
	return resp.Header, json.Unmarshal(data, out)
}

// Actions runs a batch of canonical actions. When it fails the answer
// still reports every action (ok, error or skipped), with the error.
func (c *Client) Actions(ctx context.Context, id string, req api.ActionsRequest) (api.ActionsResponse, error) {
	var out api.ActionsResponse
	err := c.postJSON(ctx, desktopPath(id, "/actions"), req, &out)
	return out, err
}

// ComputerOptions are the query parameters of the computer-use adapters.
type ComputerOptions struct {
	// DisplayWidth and DisplayHeight are the display the model was told
	// about; zero means the native screen.
	DisplayWidth, DisplayHeight int
	// ToolUseID answers an Anthropic tool_use (a whole block sent as the
	// body carries its own).
	ToolUseID string
	// Acknowledge is OpenAI's acknowledge_safety_checks: "all", "none" or
	// a comma list of ids.
	Acknowledge string
	// SettleMs, when not nil, is the quiet period before the screenshot.
	SettleMs *int
}

func (o ComputerOptions) query(w, h string) string {
	q := url.Values{}
	if o.DisplayWidth > 0 {
		q.Set(w, fmt.Sprint(o.DisplayWidth))
		q.Set(h, fmt.Sprint(o.DisplayHeight))
	}
	if o.ToolUseID != "" {
		q.Set("tool_use_id", o.ToolUseID)
	}
	if o.Acknowledge != "" {
		q.Set("acknowledge_safety_checks", o.Acknowledge)
	}
	if o.SettleMs != nil {
		q.Set("settle_ms", fmt.Sprint(*o.SettleMs))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Anthropic sends the input of a computer tool_use block (or the whole
// block) as the model emitted it and returns the tool_result to hand back.
// On failure the tool_result (is_error) comes with the error.
func (c *Client) Anthropic(ctx context.Context, id string, body json.RawMessage, o ComputerOptions) (input.AnthropicToolResult, error) {
	var out json.RawMessage
	err := c.postRaw(ctx, desktopPath(id, "/computer/anthropic")+o.query("display_width_px", "display_height_px"), body, &out)
	if err != nil {
		var f api.AnthropicFailure
		json.Unmarshal(out, &f)
		return f.ToolResult, err
	}
	var tr input.AnthropicToolResult
	return tr, json.Unmarshal(out, &tr)
}

// BrowserTurn sends an assistant turn with Anthropic browser toolset calls
// (a JSON array of content blocks, or a message with them in content, and
// the request's tools beside it for the toolset's configs) and returns the
// user message that answers them, and the index of the call that failed
// (-1 when none did).
func (c *Client) BrowserTurn(ctx context.Context, id string, turn json.RawMessage) (api.BrowserTurnResult, int, error) {
	var out api.BrowserTurnResult
	h, err := c.postRawHeaders(ctx, desktopPath(id, "/browser/anthropic"), turn, &out)
	failed := -1
	if v := h.Get("X-Warmdesk-Failed-Call"); v != "" {
		failed, _ = strconv.Atoi(v)
	}
	return out, failed, err
}

// OpenAI sends a computer_call item as the model emitted it and returns
// the computer_call_output to hand back.
func (c *Client) OpenAI(ctx context.Context, id string, item json.RawMessage, o ComputerOptions) (input.OpenAIComputerCallOutput, error) {
	var out input.OpenAIComputerCallOutput
	err := c.postRaw(ctx, desktopPath(id, "/computer/openai")+o.query("display_width", "display_height"), item, &out)
	return out, err
}

// Exec runs a program in the guest. A program that ran and failed is no
// error: see ExitCode and TimedOut.
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest) (api.ExecResponse, error) {
	var out api.ExecResponse
	err := c.Do(ctx, http.MethodPost, desktopPath(id, "/exec"), req, &out)
	return out, err
}

// ReadFile streams a guest file into w.
func (c *Client) ReadFile(ctx context.Context, id, path string, w io.Writer) (int64, error) {
	return c.download(ctx, desktopPath(id, "/files?path="+url.QueryEscape(path)), w)
}

// download streams the body of a GET into w; an error answer is returned
// as the API's error.
func (c *Client) download(ctx context.Context, path string, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, apiError(resp, data)
	}
	return io.Copy(w, resp.Body)
}

// WriteFile uploads r into a guest file, creating or truncating it.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader) (api.FileWritten, error) {
	var out api.FileWritten
	resp, err := c.send(ctx, http.MethodPut, desktopPath(id, "/files?path="+url.QueryEscape(path)), "application/octet-stream", r)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return out, apiError(resp, data)
	}
	return out, json.Unmarshal(data, &out)
}

// Clipboard reads an X selection ("" or "clipboard", or "primary").
func (c *Client) Clipboard(ctx context.Context, id, selection string) (string, error) {
	var out api.Clipboard
	path := desktopPath(id, "/clipboard")
	if selection != "" {
		path += "?selection=" + url.QueryEscape(selection)
	}
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out.Text, err
}

// SetClipboard sets an X selection to text.
func (c *Client) SetClipboard(ctx context.Context, id, selection, text string) error {
	return c.Do(ctx, http.MethodPut, desktopPath(id, "/clipboard"), api.Clipboard{Text: text, Selection: selection}, nil)
}

// Control is an open control WebSocket of one desktop. Send and Recv may
// be used from one goroutine each.
type Control struct {
	ws *websocket.Conn
}

// OpenControl opens the control WebSocket of a desktop; its first message
// is "hello".
func (c *Client) OpenControl(ctx context.Context, id string) (*Control, error) {
	u := "ws" + strings.TrimPrefix(c.BaseURL, "http") + desktopPath(id, "/control")
	d := websocket.Dialer{Subprotocols: []string{"warmdesk.v1"}}
	ws, resp, err := d.DialContext(ctx, u, http.Header{"Authorization": {"Bearer " + c.Token}})
	if err != nil {
		if resp != nil {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			return nil, apiError(resp, data)
		}
		return nil, err
	}
	return &Control{ws: ws}, nil
}

// ActionsMessage is an "actions" message: the batch request beside the
// envelope's id and type.
type ActionsMessage struct {
	ID   string `json:"id"`
	Type string `json:"type"` // "actions"
	api.ActionsRequest
}

// ExecMessage is an "exec" message; Stream asks for exec.output messages.
type ExecMessage struct {
	ID     string `json:"id"`
	Type   string `json:"type"` // "exec"
	Stream bool   `json:"stream,omitempty"`
	api.ExecRequest
}

// SendActions sends a batch under a request id.
func (ct *Control) SendActions(id string, req api.ActionsRequest) error {
	return ct.ws.WriteJSON(ActionsMessage{ID: id, Type: "actions", ActionsRequest: req})
}

// SendExec sends an exec under a request id.
func (ct *Control) SendExec(id string, req api.ExecRequest, stream bool) error {
	return ct.ws.WriteJSON(ExecMessage{ID: id, Type: "exec", Stream: stream, ExecRequest: req})
}

// Send sends any message (ping, cancel, or one built by hand).
func (ct *Control) Send(msg any) error { return ct.ws.WriteJSON(msg) }

// Recv returns the next message from the server.
func (ct *Control) Recv() (api.ControlReply, error) {
	var m api.ControlReply
	err := ct.ws.ReadJSON(&m)
	return m, err
}

// SetReadDeadline makes Recv fail once t has passed (zero: never).
func (ct *Control) SetReadDeadline(t time.Time) error { return ct.ws.SetReadDeadline(t) }

// Close closes the socket.
func (ct *Control) Close() error { return ct.ws.Close() }
