package input

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Anthropic's GA computer toolset (computer_toolset_20260801) has a model
// send several computer calls in one assistant turn. They run in order;
// the first that fails answers is_error with its error, and every later
// one answers is_error with AnthropicNotExecuted, unrun.

// AnthropicNotExecuted is the tool_result text of a call after a failed one.
const AnthropicNotExecuted = "Not executed: an earlier computer action in this turn failed."

// AnthropicNotExecutedResult answers a call after a failed one.
func AnthropicNotExecutedResult(toolUseID string) AnthropicToolResult {
	return AnthropicToolResult{
		Type: "tool_result", ToolUseID: toolUseID, IsError: true,
		Content: []AnthropicBlock{{Type: "text", Text: AnthropicNotExecuted}},
	}
}

// AnthropicToolUse is one tool_use block of an assistant turn.
type AnthropicToolUse struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// IsAnthropicTurn tells a turn body (a JSON array of content blocks, or a
// message object with "content") from the input of one call or one block.
func IsAnthropicTurn(body []byte) bool {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		return true
	}
	var probe struct {
		Content json.RawMessage `json:"content"`
		Action  json.RawMessage `json:"action"`
	}
	if json.Unmarshal(body, &probe) != nil || probe.Action != nil {
		return false
	}
	c := bytes.TrimSpace(probe.Content)
	return len(c) > 0 && c[0] == '['
}

// DecodeAnthropicTurn reads an assistant turn's content blocks and returns
// its computer tool_use blocks in order, and the names of other tools'
// tool_use blocks, which are the caller's to answer. Text and thinking
// blocks are skipped.
func DecodeAnthropicTurn(body []byte) (uses []AnthropicToolUse, others []string, err error) {
	blocks, err := TurnBlocks(body)
	if err != nil {
		return nil, nil, err
	}
	for i, raw := range blocks {
		var b struct {
			Type        string `json:"type"`
			ToolsetName string `json:"toolset_name"`
			AnthropicToolUse
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, nil, &ValidationError{Field: fmt.Sprintf("content[%d]", i), Reason: "not a content block: " + err.Error()}
		}
		if b.Type != "tool_use" {
			continue
		}
		// Another toolset's member may share a computer member's name
		// (the browser toolset's left_click): dispatch on both.
		if (b.ToolsetName != "" && b.ToolsetName != "computer") || !IsAnthropicComputerTool(b.Name) {
			others = append(others, b.Name)
			continue
		}
		if b.ID == "" {
			return nil, nil, &ValidationError{Field: fmt.Sprintf("content[%d].id", i), Reason: "a tool_use block needs its id: the tool_result answers it"}
		}
		uses = append(uses, b.AnthropicToolUse)
	}
	if len(uses) == 0 {
		return nil, others, &ValidationError{Field: "content", Reason: "the turn has no computer tool_use block"}
	}
	return uses, others, nil
}

// TurnBlocks reads a turn body's content blocks: a JSON array of them, or
// a message with them in content.
func TurnBlocks(body []byte) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	var blocks []json.RawMessage
	var err error
	if len(body) > 0 && body[0] == '[' {
		err = json.Unmarshal(body, &blocks)
	} else {
		var msg struct {
			Content []json.RawMessage `json:"content"`
		}
		err = json.Unmarshal(body, &msg)
		blocks = msg.Content
	}
	if err != nil {
		return nil, &ValidationError{Field: "content", Reason: "a turn is an array of content blocks, or a message with one in content: " + err.Error()}
	}
	return blocks, nil
}

// IsAnthropicComputerTool tells whether a tool_use name is the computer
// tool or a computer_toolset member.
func IsAnthropicComputerTool(name string) bool {
	return name == "computer" || slices.Contains(AnthropicActions(), name)
}

// DecodeAnthropicUse translates one tool_use block of a turn.
func DecodeAnthropicUse(u AnthropicToolUse) (AnthropicCall, error) {
	if len(u.Input) == 0 {
		return AnthropicCall{}, &ValidationError{Field: "input", Reason: "required in a tool_use block"}
	}
	if u.Name == "computer" {
		return DecodeAnthropic(u.Input)
	}
	return DecodeAnthropicMember(u.Name, u.Input)
}

// AnthropicRun runs one translated call and returns what its tool_result
// is made of: the batch's result, the picture, warnings, and the failure.
type AnthropicRun func(call AnthropicCall) (BatchResult, *Image, []string, error)

// anthropicToolsetPrefix starts the type of the GA computer toolset's
// tools entry (computer_toolset_20260801).
const anthropicToolsetPrefix = "computer_toolset_"

// DecodeAnthropicToolset reads the tools entries a turn body may carry
// beside its content ({"content": [...], "tools": [...]}, the request's
// own tools array) and returns the toolset members its configs turn off
// ({"zoom": {"enabled": false}}). Other tools' entries are skipped. A
// config for a name that is not a member, or a key other than enabled,
// is an error naming it, as the Messages API rejects it.
func DecodeAnthropicToolset(body []byte) (disabled map[string]bool, err error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, nil
	}
	var msg struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, &ValidationError{Field: "tools", Reason: "a list of tools entries: " + err.Error()}
	}
	for i, raw := range msg.Tools {
		var entry struct {
			Type    string                     `json:"type"`
			Configs map[string]json.RawMessage `json:"configs"`
		}
		if err := json.Unmarshal(raw, &entry); err != nil {
			return nil, &ValidationError{Field: fmt.Sprintf("tools[%d]", i), Reason: "not a tools entry: " + err.Error()}
		}
		if !strings.HasPrefix(entry.Type, anthropicToolsetPrefix) {
			continue
		}
		members := make([]string, 0, len(entry.Configs))
		for m := range entry.Configs {
			members = append(members, m)
		}
		sort.Strings(members)
		for _, m := range members {
			field := fmt.Sprintf("tools[%d].configs.%s", i, m)
			if !slices.Contains(AnthropicActions(), m) {
				return nil, &ValidationError{Field: field, Reason: fmt.Sprintf("%q is not a member of the computer toolset: use one of %s", m, strings.Join(AnthropicActions(), ", "))}
			}
			var cfg struct {
				Enabled *bool `json:"enabled"`
			}
			dec := json.NewDecoder(bytes.NewReader(entry.Configs[m]))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cfg); err != nil {
				return nil, &ValidationError{Field: field, Reason: `a member's config is {"enabled": true|false}: ` + err.Error()}
			}
			if cfg.Enabled != nil && !*cfg.Enabled {
				if disabled == nil {
					disabled = map[string]bool{}
				}
				disabled[m] = true
			}
		}
	}
	return disabled, nil
}

// RunAnthropicTurn runs a turn's calls in order with run, stopping at the
// first that fails to decode or to run, and returns a tool_result for
// every call, in order. failed is the index of the call that failed, or -1.
// A call of a member in disabled (the toolset's configs turned it off)
// fails without running.
func RunAnthropicTurn(uses []AnthropicToolUse, disabled map[string]bool, run AnthropicRun) (results []AnthropicToolResult, failed int) {
	failed = -1
	for i, u := range uses {
		if failed >= 0 {
			results = append(results, AnthropicNotExecutedResult(u.ID))
			continue
		}
		var call AnthropicCall
		var err error
		if disabled[u.Name] {
			err = &ValidationError{Field: "name", Reason: fmt.Sprintf("%s is turned off in this toolset's configs", u.Name)}
		} else {
			call, err = DecodeAnthropicUse(u)
		}
		var res BatchResult
		var img *Image
		var warnings []string
		if err == nil {
			res, img, warnings, err = run(call)
		}
		if err != nil {
			failed = i
			img = nil
		}
		r := NewAnthropicToolResult(u.ID, call, res, err, img)
		r.Note(warnings)
		results = append(results, r)
	}
	return results, failed
}
