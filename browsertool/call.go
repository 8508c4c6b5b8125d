package browsertool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/warmdesk/warmdesk/input"
)

// Target is where a pointer member acts: a point in viewport pixels, or
// an element by the ref read_page or find gave it.
type Target struct {
	// Ref is the element's ref ("ref_7"); empty for a coordinate.
	Ref  string
	X, Y int
}

// IsRef tells a ref target from a coordinate.
func (t Target) IsRef() bool { return t.Ref != "" }

func (t Target) String() string {
	if t.IsRef() {
		return t.Ref
	}
	return fmt.Sprintf("(%d, %d)", t.X, t.Y)
}

// Call is one member call, decoded and checked. Only the member's own
// fields are set; the defaults the docs state are filled in.
type Call struct {
	Member string
	// TabID is the tab the call addresses; empty means the active tab
	// (for switch_tab and close_tab, the tab they act on: required).
	TabID string
	// URL is navigate's target, with https added when it had no scheme,
	// or one of "back", "forward", "reload".
	URL string
	// Region is zoom's [x0, y0, x1, y1] in viewport pixels.
	Region [4]int
	Target Target
	// From is left_click_drag's start.
	From Target
	// Modifiers are the keys a click holds, as the chord gave them.
	Modifiers []string
	// Direction and Amount are scroll's: up, down, left or right, and
	// wheel notches (1 to 10, 3 when omitted).
	Direction string
	Amount    int
	// Text is type's text, key's and hold_key's keys, and
	// javascript_exec's code.
	Text string
	// Repeat is key's count (1 to 100, 1 when omitted).
	Repeat int
	// Seconds is wait's and hold_key's duration (0 to 30).
	Seconds float64
	// Filter, Depth and Ref are read_page's ("", "interactive" or "all";
	// 15 when omitted; a subtree's root ref or empty).
	Filter string
	Depth  int
	Ref    string
	// Query is find's.
	Query string
	// Value is form_input's: a string, a float64 or a bool.
	Value any
	// Paths and DocumentIDs are file_upload's (at least one of the two).
	Paths       []string
	DocumentIDs []string
}

// Bounds the docs state to the model, which the executor enforces.
const (
	MaxScrollAmount     = 10
	DefaultScrollAmount = 3
	MaxRepeat           = 100
	MaxSeconds          = 30
	DefaultDepth        = 15
	// MaxFieldChars bounds a tab_id (the limit browser_state puts on the
	// ids it renders, which switch_tab's and close_tab's are).
	MaxFieldChars = 4096
)

// InputError is a member input that does not fit the member's schema. Its
// text is the SDK's: "invalid input for browser member 'NAME': FIELD:
// PROBLEM".
type InputError struct {
	Member, Field, Problem string
}

func (e *InputError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("invalid input for browser member '%s': %s", e.Member, e.Problem)
	}
	return fmt.Sprintf("invalid input for browser member '%s': %s: %s", e.Member, e.Field, e.Problem)
}

// Is makes every InputError match input.ErrInvalid, the vocabulary's.
func (e *InputError) Is(target error) bool { return target == input.ErrInvalid }

// Decode reads one member's input strictly: an unknown member or field, a
// missing required one, a wrong type or a value out of the stated bounds
// is an *InputError naming the field.
func Decode(member string, raw []byte) (Call, error) {
	c := Call{Member: member}
	bad := func(field, format string, args ...any) (Call, error) {
		return Call{}, &InputError{Member: member, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if !IsMember(member) {
		return bad("", "not a member of %s: use one of %s", ToolsetType, strings.Join(Members(), ", "))
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return bad("", "the input is a JSON object of the member's fields: %v", err)
	}
	accepted, required := fields(member)
	if !IsTabMember(member) {
		accepted = append(accepted, "tab_id")
	}
	for _, k := range sortedKeys(obj) {
		if !slices.Contains(accepted, k) {
			if len(accepted) == 0 {
				return bad(k, "%s takes no fields", member)
			}
			return bad(k, "not a field of %s: it takes %s", member, strings.Join(accepted, ", "))
		}
	}
	for _, k := range required {
		if _, ok := obj[k]; !ok {
			return bad(k, "required")
		}
	}
	f := fieldReader{member: member, obj: obj}
	if _, ok := obj["tab_id"]; ok {
		c.TabID = f.str("tab_id")
		if f.err == nil {
			if err := checkRendered(c.TabID); err != nil {
				return bad("tab_id", "%v", err)
			}
		}
	}
	switch member {
	case Navigate:
		c.URL = f.str("url")
		if f.err == nil {
			u, err := NavigationURL(c.URL)
			if errors.Is(err, ErrNavigationRefused) {
				return Call{}, err
			}
			if err != nil {
				return bad("url", "%v", err)
			}
			c.URL = u
		}
	case Zoom:
		c.Region = f.region("region")
	case LeftClick, RightClick, MiddleClick, DoubleClick, TripleClick:
		c.Target = f.target("target", true)
		if _, ok := obj["modifiers"]; ok {
			c.Modifiers = f.chord("modifiers")
		}
	case Hover:
		c.Target = f.target("target", true)
	case ScrollTo:
		c.Target = f.refTarget("target")
	case LeftMouseDown, LeftMouseUp, MouseMove:
		c.Target = f.target("target", false)
	case LeftClickDrag:
		c.From = f.target("from", false)
		c.Target = f.target("target", false)
	case Scroll:
		c.Target = f.target("target", false)
		c.Direction = f.enum("scroll_direction", "up", "down", "left", "right")
		c.Amount = f.intIn("scroll_amount", 1, MaxScrollAmount, DefaultScrollAmount)
	case Type, JavascriptExec:
		c.Text = f.nonEmpty("text")
	case Key:
		c.Text = f.keys("text")
		c.Repeat = f.intIn("repeat", 1, MaxRepeat, 1)
	case HoldKey:
		c.Text = f.keys("text")
		c.Seconds = f.seconds("duration")
	case Wait:
		c.Seconds = f.seconds("duration")
	case ReadPage:
		if _, ok := obj["filter"]; ok {
			c.Filter = f.enum("filter", "interactive", "all")
		}
		c.Depth = f.intIn("depth", 1, math.MaxInt32, DefaultDepth)
		if _, ok := obj["ref"]; ok {
			c.Ref = f.ref("ref")
		}
	case Find:
		c.Query = f.nonEmpty("query")
	case FormInput:
		c.Target = f.refTarget("target")
		c.Value = f.value("value")
	case FileUpload:
		c.Target = f.refTarget("target")
		c.Paths = f.strings("paths")
		c.DocumentIDs = f.strings("document_ids")
		if f.err == nil && len(c.Paths) == 0 && len(c.DocumentIDs) == 0 {
			return bad("paths", "give paths or document_ids: at least one file to upload")
		}
	case SwitchTab, CloseTab:
		if f.err == nil && c.TabID == "" {
			return bad("tab_id", "the id of an open tab, as list_tabs reports it")
		}
	}
	if f.err != nil {
		return Call{}, f.err
	}
	return c, nil
}

// ErrNavigationRefused is navigate's answer to a scheme other than http
// and https, in the docs' words.
var ErrNavigationRefused = errors.New("Navigation refused. Only http and https URLs are allowed.")

// NavigationURL checks navigate's url: http and https only (https added
// when there is no scheme), or back, forward or reload.
func NavigationURL(s string) (string, error) {
	switch s {
	case "back", "forward", "reload":
		return s, nil
	case "":
		return "", fmt.Errorf("a URL, or back, forward or reload")
	}
	if !strings.Contains(s, "://") && !hasScheme(s) {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w (the url's scheme is %s)", ErrNavigationRefused, u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q has no host", s)
	}
	return u.String(), nil
}

// hasScheme tells "mailto:x" or "javascript:alert(1)" (a scheme without
// "//") from "example.com:8080/x" (a host and port).
func hasScheme(s string) bool {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || scheme == "" {
		return false
	}
	for i, r := range scheme {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	// A port: digits up to the path.
	port, _, _ := strings.Cut(rest, "/")
	if port != "" && strings.Trim(port, "0123456789") == "" {
		return false
	}
	return true
}

// checkRendered applies browser_state's limits on a field the API renders
// into text: at most MaxFieldChars characters, no control characters or
// Unicode line and paragraph separators.
func checkRendered(s string) error {
	if n := len([]rune(s)); n > MaxFieldChars {
		return fmt.Errorf("%d characters, more than %d", n, MaxFieldChars)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("holds the control character %U", r)
		}
	}
	return nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
