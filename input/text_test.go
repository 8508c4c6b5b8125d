package input

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Text that encoding/json would turn into U+FFFD is refused, naming the
// string's field; text, however escaped, passes.
func TestCheckText(t *testing.T) {
	for _, c := range []struct{ body, field, says string }{
		{"{\"action\": \"type\", \"text\": \"ok\xff\xfe\xc3(\"}", "text", "byte 0xff"},
		{"{\"actions\": [{\"action\": \"key\", \"chord\": \"a\"}, {\"action\": \"type\", \"text\": \"\xc3\"}]}", "actions[1].text", "not valid UTF-8"},
		{"{\"actions\": [[1, 2], {\"a\": [0, \"x\xe2\x82\"]}]}", "actions[1].a[1]", "not valid UTF-8"},
		{`{"parts": [{"functionCall": {"name": "type", "args": {"text": "ok\udcff"}}}]}`, "parts[0].functionCall.args.text", `\udcff, the second half`},
		{`{"text": "\ud83d"}`, "text", `\ud83d, the first half`},
		{`{"text": "\ud83d\u0041"}`, "text", `the first half`},
		{"{\"args\": {\"te\xffxt\": \"a\"}}", "args", "a field name is not valid UTF-8"},
		{"[\"ok\", \"\xff\"]", "[1]", "not valid UTF-8"},
		{"\"\xff\"", "", "not valid UTF-8"},
	} {
		err := CheckText([]byte(c.body))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(ve.Reason, c.says) {
			t.Errorf("%q: got %v, want %s: ...%s", c.body, err, c.field, c.says)
		}
	}
	for _, body := range []string{
		`{"text": "naïve café 😀 \ud83d\ude00 \u00e9 \\udcff \"\\\\\" \ufffd �"}`,
		`{"a": [1, true, null, {"b": "c"}], "d": "\\ud800"}`,
		"not json \xff",     // the decoder's to report
		"{\"text\": \"\xff", // cut short, also
		``,
	} {
		if err := CheckText([]byte(body)); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
}

// Whatever CheckText passes, encoding/json decodes without a replacement
// character it did not see written.
func FuzzCheckText(f *testing.F) {
	f.Add([]byte("{\"actions\": [{\"action\": \"type\", \"text\": \"ok\xff\"}]}"))
	f.Add([]byte(`{"a": ["\ud83d\ude00", "\udcff"]}`))
	f.Add([]byte("[{\"k\xc3\": 1}, \"\\\\udc00\"]"))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := CheckText(body)
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		if err == nil && strings.Count(dump(v), "\ufffd") > strings.Count(string(body), "\ufffd")+strings.Count(strings.ToLower(string(body)), `\ufffd`) {
			t.Fatalf("%q passed but decodes with a replacement character", body)
		}
	})
}

// dump renders every string of a decoded value, keys included.
func dump(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				b.WriteString(k)
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}
