package agentmcp

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/warmdesk/warmdesk/input"
)

// The computer tool's schema is the decoder's: its actions are the ones
// input decodes, and every field it declares is one input takes, with a
// call that uses it decoding as the same call sent straight to hostd's
// endpoint would (the tool marshals its input and posts it).
func TestComputerSchemaIsTheDecoders(t *testing.T) {
	schema := computerSchema()
	var actions []string
	for _, a := range schema.Properties["action"].Enum {
		actions = append(actions, a.(string))
	}
	if !slices.Equal(actions, input.AnthropicActions()) {
		t.Errorf("the action enum %v, want input's %v", actions, input.AnthropicActions())
	}
	// One call per field, each decoding without error.
	uses := map[string]ComputerInput{
		"coordinate":       {Action: "left_click", Coordinate: []int{10, 20}},
		"start_coordinate": {Action: "left_click_drag", StartCoordinate: []int{1, 2}, Coordinate: []int{3, 4}},
		"text":             {Action: "type", Text: "hello"},
		"scroll_direction": {Action: "scroll", Coordinate: []int{5, 5}, ScrollDirection: "down", ScrollAmount: 3},
		"scroll_amount":    {Action: "scroll", Coordinate: []int{5, 5}, ScrollDirection: "up", ScrollAmount: 1},
		"duration":         {Action: "wait", Duration: 1},
		"region":           {Action: "zoom", Region: []int{0, 0, 100, 100}},
	}
	typ := reflect.TypeFor[ComputerInput]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "action" {
			continue // the embedded desktop reference, and the action above
		}
		in, ok := uses[name]
		if !ok {
			t.Errorf("field %s: no call in this test uses it", name)
			continue
		}
		body, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := input.DecodeAnthropic(body); err != nil {
			t.Errorf("field %s: %s does not decode: %v", name, body, err)
		}
	}
}
