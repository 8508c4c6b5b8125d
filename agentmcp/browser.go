package agentmcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warmdesk/warmdesk/browsertool"
)

var browserDescription = "Drive a browser desktop's Chromium with Anthropic's browser toolset (" + browsertool.ToolsetType +
	"): one member call per tool call. Read the page with read_page or find, which tag elements [ref_N], then act " +
	"on them by ref ({\"target\": {\"type\": \"ref\", \"ref\": \"ref_3\"}}) or on viewport coordinates " +
	"({\"type\": \"coordinate\", \"x\": 10, \"y\": 20}). Tabs are tab-1, tab-2, ...: every member but the tab members " +
	"takes an optional tab_id (default: the current tab). " + strings.Join(optionalMembers(), ", ") +
	" are off unless named in enable. Only desktops created from a browser snapshot have Chromium."

// BrowserInput is the browser tool's input: one member's call.
type BrowserInput struct {
	DesktopRef
	Member string          `json:"member"`
	Input  json.RawMessage `json:"input,omitempty"`
	Enable []string        `json:"enable,omitempty"`
}

// optionalMembers are the members off by default, which enable turns on.
func optionalMembers() []string {
	var off []string
	for _, m := range browsertool.Members() {
		if browsertool.OffByDefault(m) {
			off = append(off, m)
		}
	}
	return off
}

// browserSchema is BrowserInput's schema, written out so the member and
// enable lists are the toolset's own and the model sees them as enums.
func browserSchema() map[string]any {
	desktopField, _ := reflect.TypeFor[DesktopRef]().FieldByName("DesktopID")
	return map[string]any{
		"type":                 "object",
		"required":             []string{"member"},
		"additionalProperties": false,
		"properties": map[string]any{
			"desktop_id": map[string]any{"type": "string", "description": desktopField.Tag.Get("jsonschema")},
			"member": map[string]any{"type": "string", "enum": browsertool.Members(),
				"description": "the toolset member to call"},
			// null too: a client may send a nil map for a member without fields.
			"input": map[string]any{"type": []string{"object", "null"},
				"description": "the member's input, exactly as the toolset's schemas: navigate {\"url\"}, read_page {\"filter\"?: \"interactive\", \"depth\"?, \"ref\"?}, " +
					"left_click {\"target\", \"modifiers\"?}, type {\"text\"}, key {\"text\"}, form_input {\"target\": a ref, \"value\"}, " +
					"scroll {\"target\": a coordinate, \"scroll_direction\"}, switch_tab and close_tab {\"tab_id\"}; {} or omitted for screenshot, get_page_text, list_tabs, new_tab"},
			"enable": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": optionalMembers()},
				"description": "optional members to enable for this call (they are off by default)"},
		},
	}
}

// browserUse is the turn's one tool_use block.
type browserUse struct {
	Type string `json:"type"`
	browsertool.ToolUse
}

// browserTurn is the body of a one-call turn: the toolset's entry, its
// configs enabling what the call asked for, and the call.
func browserTurn(in BrowserInput) ([]byte, error) {
	entry := map[string]any{"type": browsertool.ToolsetType}
	if len(in.Enable) > 0 {
		configs := map[string]any{}
		for _, m := range in.Enable {
			configs[m] = map[string]bool{"enabled": true}
		}
		entry["configs"] = configs
	}
	input := in.Input
	if len(bytes.TrimSpace(input)) == 0 || string(bytes.TrimSpace(input)) == "null" {
		input = json.RawMessage("{}")
	}
	return json.Marshal(map[string]any{
		"tools":   []any{entry},
		"content": []browserUse{{Type: "tool_use", ToolUse: browsertool.ToolUse{ID: "mcp_browser_call", Name: in.Member, ToolsetName: browsertool.ToolsetName, Input: input}}},
	})
}

func (s *session) browser(ctx context.Context, req *mcp.CallToolRequest, in BrowserInput) (*mcp.CallToolResult, any, error) {
	c, id, err := s.target(req, in.DesktopRef)
	if err != nil {
		return nil, nil, err
	}
	body, err := browserTurn(in)
	if err != nil {
		return nil, nil, fmt.Errorf("browser %s: the input is not JSON: %w", in.Member, err)
	}
	turn, _, err := c.BrowserTurn(ctx, id, body)
	if err != nil {
		return nil, nil, apiError("browser "+in.Member, err)
	}
	if len(turn.Content) != 1 {
		return nil, nil, fmt.Errorf("browser %s: hostd answered %d tool results for one call; is it older than this server?", in.Member, len(turn.Content))
	}
	return browserResult(in, turn.Content[0])
}

// browserResult makes a member's tool_result MCP content: text as text,
// images as images, a browser_state as the text the Messages API would
// render from it.
func browserResult(in BrowserInput, r browsertool.ToolResult) (*mcp.CallToolResult, any, error) {
	var call struct {
		TabID string `json:"tab_id"`
	}
	// Only for the rendering; hostd has checked the input already.
	_ = json.Unmarshal(in.Input, &call)
	res := &mcp.CallToolResult{IsError: r.IsError}
	withText := false
	for _, b := range r.Content {
		withText = withText || b.Type == "text"
	}
	for _, b := range r.Content {
		switch {
		case b.Type == "text":
			res.Content = append(res.Content, &mcp.TextContent{Text: b.Text})
		case b.Type == "image" && b.Source != nil:
			data, err := base64.StdEncoding.DecodeString(b.Source.Data)
			if err != nil {
				return nil, nil, fmt.Errorf("browser %s: the image hostd answered is not base64: %w", in.Member, err)
			}
			res.Content = append(res.Content, &mcp.ImageContent{MIMEType: b.Source.MediaType, Data: data})
		case b.Type == "browser_state" && b.BrowserState != nil:
			if text := browsertool.StateText(in.Member, call.TabID, withText, *b.BrowserState); text != "" {
				res.Content = append(res.Content, &mcp.TextContent{Text: text})
			}
		}
	}
	if len(res.Content) == 0 {
		return nil, nil, errors.New("browser " + in.Member + ": hostd answered an empty result")
	}
	return res, nil, nil
}
