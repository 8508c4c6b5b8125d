package browsertool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/warmdesk/warmdesk/input"
)

// NotExecuted is the tool_result text of every call after a failed one in
// a turn, in the docs' words.
const NotExecuted = "Not executed: an earlier action in this turn failed."

// ToolUse is one browser member's tool_use block of an assistant turn.
type ToolUse struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	ToolsetName string          `json:"toolset_name"`
	Input       json.RawMessage `json:"input"`
}

// DecodeTurn reads an assistant turn's content blocks (a JSON array, or a
// message with one in content) and returns its browser members' tool_use
// blocks in order: those whose toolset_name is "browser", since a custom
// tool or the computer toolset may share a member's name. others counts
// the other tool_use blocks, which are the caller's to answer.
func DecodeTurn(body []byte) (uses []ToolUse, others int, err error) {
	blocks, err := input.TurnBlocks(body)
	if err != nil {
		return nil, 0, err
	}
	for i, raw := range blocks {
		var b struct {
			Type string `json:"type"`
			ToolUse
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, 0, &input.ValidationError{Field: fmt.Sprintf("content[%d]", i), Reason: "not a content block: " + err.Error()}
		}
		if b.Type != "tool_use" {
			continue
		}
		if b.ToolsetName != ToolsetName {
			others++
			continue
		}
		if b.ID == "" {
			return nil, 0, &input.ValidationError{Field: fmt.Sprintf("content[%d].id", i), Reason: "a tool_use block needs its id: the tool_result answers it"}
		}
		uses = append(uses, b.ToolUse)
	}
	if len(uses) == 0 {
		return nil, others, &input.ValidationError{Field: "content", Reason: `the turn has no tool_use block with "toolset_name": "browser"`}
	}
	return uses, others, nil
}

// Outcome is what an executor did for one call: text (the member's output,
// or a line to add to a pure action's acknowledgment), an image, and the
// browser's state after it (nil when the executor does not report one).
type Outcome struct {
	Text  string
	Image *ImageSource
	State *BrowserState
}

// Executor runs one decoded call on a browser.
type Executor interface {
	Run(ctx context.Context, c Call) (Outcome, error)
}

// RunTurn runs a turn's calls in order, stopping at the first that fails
// (to decode, because its member is disabled, or to run), and answers
// every call, in order; the calls after a failure are answered NotExecuted,
// unrun. failed is the failed call's index, or -1.
func RunTurn(ctx context.Context, uses []ToolUse, toolset Toolset, exec Executor) (results []ToolResult, failed int) {
	failed = -1
	for i, u := range uses {
		if failed >= 0 {
			results = append(results, errorResult(u.ID, NotExecuted))
			continue
		}
		r, err := runOne(ctx, u, toolset, exec)
		if err != nil {
			failed = i
			r = errorResult(u.ID, ErrorText(err))
		}
		results = append(results, r)
	}
	return results, failed
}

// NotExecutedResult answers a call after a failed one.
func NotExecutedResult(toolUseID string) ToolResult { return errorResult(toolUseID, NotExecuted) }

// DisabledError is a call of a member the toolset's configs leave off.
type DisabledError struct{ Member string }

func (e *DisabledError) Error() string {
	return fmt.Sprintf("%s is not enabled in this environment: enable it in the toolset's configs ({\"configs\": {%q: {\"enabled\": true}}})", e.Member, e.Member)
}

func runOne(ctx context.Context, u ToolUse, toolset Toolset, exec Executor) (ToolResult, error) {
	if IsMember(u.Name) && !toolset.Enabled(u.Name) {
		return ToolResult{}, &DisabledError{Member: u.Name}
	}
	c, err := Decode(u.Name, u.Input)
	if err != nil {
		return ToolResult{}, err
	}
	out, err := exec.Run(ctx, c)
	if err != nil {
		return ToolResult{}, err
	}
	return NewResult(u.ID, c, out)
}

// NewResult builds a successful call's tool_result by the docs' rules: a
// tab member's is exactly one browser_state block; screenshot's and zoom's
// hold an image; every other member's a text block (its output, "(empty)"
// for an empty read, or the executor's acknowledgment, the SDK's when it
// gave none), then an image and a browser_state when the executor gave
// them. An
// outcome that breaks a rule is an error (the executor's bug), never a
// result the API would refuse.
func NewResult(id string, c Call, out Outcome) (ToolResult, error) {
	r := ToolResult{Type: "tool_result", ToolUseID: id, ToolsetName: ToolsetName}
	if out.State != nil {
		if err := out.State.Validate(); err != nil {
			return r, fmt.Errorf("%s: the executor's %w", c.Member, err)
		}
	}
	if IsTabMember(c.Member) {
		if out.State == nil {
			return r, fmt.Errorf("%s: the executor reported no browser_state", c.Member)
		}
		if c.Member == NewTab && !openedActive(*out.State) {
			return r, errors.New("new_tab opened a tab, but the browser does not report it as the only active tab. Call list_tabs to see the tabs.")
		}
		r.Content = []Block{{Type: "browser_state", BrowserState: out.State}}
		return r, nil
	}
	if returnsImage(c.Member) && out.Image == nil {
		return r, fmt.Errorf("%s: the executor returned no image", c.Member)
	}
	if text := resultText(c, out.Text); text != "" {
		r.Content = append(r.Content, textBlock(text))
	}
	if out.Image != nil {
		r.Content = append(r.Content, Block{Type: "image", Source: out.Image})
	}
	if out.State != nil {
		r.Content = append(r.Content, Block{Type: "browser_state", BrowserState: out.State})
	}
	return r, nil
}

// openedActive tells whether a new_tab's state has exactly one tab_opened,
// naming the active tab.
func openedActive(s BrowserState) bool {
	var opened []string
	for _, c := range s.StateChanges {
		if c.Type == "tab_opened" {
			opened = append(opened, c.TabID)
		}
	}
	if len(opened) != 1 {
		return false
	}
	for _, t := range s.Tabs {
		if t.Active {
			return t.TabID == opened[0]
		}
	}
	return false
}

// resultText is a non-tab member's text block.
func resultText(c Call, text string) string {
	switch c.Member {
	case Screenshot, Zoom:
		return text
	case Navigate:
		if text == "" {
			return Ack(c)
		}
		return text
	case ReadPage, Find, GetPageText, ReadConsole, ReadNetwork, JavascriptExec:
		if text == "" {
			return "(empty)"
		}
		return text
	}
	if text == "" {
		return Ack(c)
	}
	return text
}

// ErrorText is a failed call's tool_result text: "Error: " and what went
// wrong.
func ErrorText(err error) string {
	s := err.Error()
	if s == "" {
		return ""
	}
	if strings.HasPrefix(s, "Error:") {
		return s
	}
	return "Error: " + s
}
