package input

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Fuzz targets: go test -fuzz=FuzzDecodeBatch ./input/ (one target at a
// time). Plain go test runs their seeds, taken from the table tests.

func FuzzDecodeBatch(f *testing.F) {
	var all []string
	for _, c := range actionCases {
		f.Add("[" + c.body + "]")
		all = append(all, c.body)
	}
	f.Add("[" + strings.Join(all, ",") + "]")
	f.Add(`[{"action":"click","x":1,"x":2}]`)
	f.Add(`[{"action":"drag","path":[{"x":1e400,"y":-0}]}]`)
	f.Fuzz(func(t *testing.T, body string) {
		batch, err := DecodeBatch([]byte(body))
		if err != nil {
			checkInvalid(t, err)
			return
		}
		// What decodes re-encodes to the same actions.
		b, err := json.Marshal(batch)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := DecodeBatch(b)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		if !sameBatch(batch, back) {
			t.Fatalf("round trip changed the batch:\n%+v\n%+v", batch, back)
		}
		validateNeverPanics(t, batch)
	})
}

func FuzzDecodeAnthropic(f *testing.F) {
	for _, c := range anthropicCases {
		f.Add(c.body)
	}
	f.Add(`{"action":"key","text":"ctrl++ + ++"}`)
	f.Fuzz(func(t *testing.T, body string) {
		call, err := DecodeAnthropic([]byte(body))
		if err != nil {
			checkInvalid(t, err)
			return
		}
		if len(call.Batch) == 0 {
			t.Fatalf("%s decoded to an empty batch", body)
		}
		validateNeverPanics(t, call.Batch)
	})
}

func FuzzDecodeOpenAI(f *testing.F) {
	for _, c := range openAICases {
		f.Add(c.body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		call, err := DecodeOpenAI([]byte(body), OpenAIOptions{})
		if err != nil {
			checkInvalid(t, err)
			return
		}
		if call.CallID == "" || len(call.Batch) == 0 {
			t.Fatalf("%s decoded without a call_id or actions: %+v", body, call)
		}
		validateNeverPanics(t, call.Batch)
		if _, err := json.Marshal(NewOpenAIOutput(call, Image{MediaType: "image/png"}, func(OpenAISafetyCheck) bool { return true }, "original")); err != nil {
			t.Fatalf("output does not encode: %v", err)
		}
	})
}

func FuzzParseChord(f *testing.F) {
	for _, c := range chordCases {
		f.Add(c.chord)
	}
	f.Add("ctrl+++")
	f.Add("+ +")
	f.Fuzz(func(t *testing.T, s string) {
		chord, err := ParseChord(s)
		if err != nil {
			checkInvalid(t, err)
			return
		}
		if len(chord) == 0 {
			t.Fatalf("ParseChord(%q) returned no keys", s)
		}
		seen := map[string]bool{}
		for _, q := range chord {
			if !slices.Contains(qemu72QKeyCodes, q) {
				t.Fatalf("ParseChord(%q) = %v: %q is not a QEMU 7.2 qcode", s, chord, q)
			}
			if seen[q] {
				t.Fatalf("ParseChord(%q) = %v presses %q twice", s, chord, q)
			}
			seen[q] = true
		}
	})
}

// checkInvalid fails unless err is a validation error, as every decoding
// and parsing error must be for web/ to answer 400.
func checkInvalid(t *testing.T, err error) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
}

func validateNeverPanics(t *testing.T, batch Batch) {
	t.Helper()
	if err := Validate(batch, ValidateOptions{Space: native, HasGuest: true}); err != nil {
		checkInvalid(t, err)
	}
}

// sameBatch compares batches, allowing durations to drift by the rounding
// of seconds through a float.
func sameBatch(a, b Batch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if d := x.Duration - y.Duration; d > time.Microsecond || d < -time.Microsecond {
			return false
		}
		x.Duration, y.Duration = 0, 0
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
