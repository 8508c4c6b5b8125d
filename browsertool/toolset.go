package browsertool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/warmdesk/warmdesk/input"
)

// Toolset is the browser toolset's tools entry as a request declared it:
// which members are enabled.
type Toolset struct {
	enabled map[string]bool
}

// DefaultToolset is the toolset with its configs omitted: every member but
// the four that are off by default.
func DefaultToolset() Toolset {
	t := Toolset{enabled: map[string]bool{}}
	for _, m := range Members() {
		t.enabled[m] = !OffByDefault(m)
	}
	return t
}

// Enabled tells whether a member may run.
func (t Toolset) Enabled(member string) bool {
	if t.enabled == nil {
		return !OffByDefault(member) && IsMember(member)
	}
	return t.enabled[member]
}

// ToolsetError is a tools entry the Messages API would refuse.
type ToolsetError struct {
	Field, Problem string
}

func (e *ToolsetError) Error() string { return e.Field + ": " + e.Problem }

// Is makes every ToolsetError match input.ErrInvalid.
func (e *ToolsetError) Is(target error) bool { return target == input.ErrInvalid }

// DecodeToolset reads the browser toolset's entry among a request's tools
// entries (other tools' entries are skipped; none is DefaultToolset). It
// refuses what the Messages API refuses: a name on the entry, defer_loading,
// strict or input_examples on the entry, a config for a name that is not
// a member or with a key other than enabled and defer_loading, configs
// that leave no member enabled, enabled members whose defer_loading
// differ, and a second browser toolset entry.
func DecodeToolset(tools []json.RawMessage) (Toolset, error) {
	t := DefaultToolset()
	seen := -1
	for i, raw := range tools {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return t, &ToolsetError{Field: fmt.Sprintf("tools[%d]", i), Problem: "not a tools entry: " + err.Error()}
		}
		if head.Type != ToolsetType {
			continue
		}
		field := fmt.Sprintf("tools[%d]", i)
		if seen >= 0 {
			return t, &ToolsetError{Field: field, Problem: fmt.Sprintf("a second %s entry (tools[%d] is the first): a request holds one", ToolsetType, seen)}
		}
		seen = i
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(raw, &entry); err != nil {
			return t, &ToolsetError{Field: field, Problem: "not a tools entry: " + err.Error()}
		}
		for _, k := range sortedKeys(entry) {
			switch k {
			case "type", "configs", "cache_control", "allowed_callers":
			case "name":
				return t, &ToolsetError{Field: field + ".name", Problem: "the browser toolset's entry has no name: members are named by the toolset"}
			default:
				return t, &ToolsetError{Field: field + "." + k, Problem: "not a field of the browser toolset's entry: it takes type, configs, cache_control and allowed_callers"}
			}
		}
		if err := t.applyConfigs(field+".configs", entry["configs"]); err != nil {
			return DefaultToolset(), err
		}
	}
	return t, nil
}

func (t *Toolset) applyConfigs(field string, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var configs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &configs); err != nil {
		return &ToolsetError{Field: field, Problem: "an object keyed by member name: " + err.Error()}
	}
	deferLoading := map[string]bool{}
	for _, m := range sortedKeys(configs) {
		if !IsMember(m) {
			return &ToolsetError{Field: field + "." + m, Problem: fmt.Sprintf("%q is not a member of the browser toolset: use one of %s", m, strings.Join(Members(), ", "))}
		}
		var cfg struct {
			Enabled      *bool `json:"enabled"`
			DeferLoading *bool `json:"defer_loading"`
		}
		dec := json.NewDecoder(bytes.NewReader(configs[m]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return &ToolsetError{Field: field + "." + m, Problem: `a member's config is {"enabled": true|false, "defer_loading": true|false}: ` + err.Error()}
		}
		if cfg.Enabled != nil {
			t.enabled[m] = *cfg.Enabled
		}
		if cfg.DeferLoading != nil {
			deferLoading[m] = *cfg.DeferLoading
		}
	}
	var on []string
	for _, m := range Members() {
		if t.enabled[m] {
			on = append(on, m)
		}
	}
	if len(on) == 0 {
		return &ToolsetError{Field: field, Problem: "leaves no member enabled"}
	}
	first := deferLoading[on[0]]
	if i := slices.IndexFunc(on, func(m string) bool { return deferLoading[m] != first }); i >= 0 {
		return &ToolsetError{Field: field + "." + on[i] + ".defer_loading", Problem: fmt.Sprintf("every enabled member must share defer_loading: %s has %v, %s has %v", on[0], first, on[i], !first)}
	}
	return nil
}
