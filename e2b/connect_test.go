package e2b

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	msg := []byte(`{"process":{"cmd":"/bin/true"}}`)
	framed := appendEnvelope(nil, 0, msg)
	if want := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...); !bytes.Equal(framed, want) {
		t.Fatalf("framed %x, want %x", framed, want)
	}
	flags, got, err := readEnvelope(bytes.NewReader(framed))
	if err != nil || flags != 0 || !bytes.Equal(got, msg) {
		t.Fatalf("read back %d %q %v", flags, got, err)
	}
}

func TestEnvelopeRefusals(t *testing.T) {
	for name, in := range map[string][]byte{
		"cut head":   {0, 0, 0},
		"cut body":   {0, 0, 0, 0, 9, '{', '}'},
		"oversized":  {0, 0x7f, 0, 0, 0},
		"compressed": appendEnvelope(nil, flagCompressed, []byte(`{}`)),
	} {
		if _, _, err := readEnvelope(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
	_, _, err := readEnvelope(bytes.NewReader([]byte{0, 0x7f, 0, 0, 0}))
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeResourceExhausted {
		t.Errorf("oversized: %v, want resource_exhausted", err)
	}
}

func FuzzReadEnvelope(f *testing.F) {
	f.Add(appendEnvelope(nil, 0, []byte(`{"a":1}`)))
	f.Add(appendEnvelope(nil, flagEndStream, []byte(`{}`)))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		flags, msg, err := readEnvelope(bytes.NewReader(in))
		if err != nil {
			return
		}
		// What was read frames back to the input's prefix.
		if again := appendEnvelope(nil, flags, msg); !bytes.HasPrefix(in, again) {
			t.Fatalf("read %d %q from %x, which frames as %x", flags, msg, in, again)
		}
	})
}

// readFrames splits a server stream's body into its messages.
func readFrames(t *testing.T, body io.Reader) (msgs []string, end string) {
	t.Helper()
	for {
		flags, msg, err := readEnvelope(body)
		if err == io.EOF {
			t.Fatal("the stream ended without its end-of-stream message")
		}
		if err != nil {
			t.Fatal(err)
		}
		if flags&flagEndStream != 0 {
			if _, _, err := readEnvelope(body); err != io.EOF {
				t.Fatalf("data after the end of the stream: %v", err)
			}
			return msgs, string(msg)
		}
		msgs = append(msgs, string(msg))
	}
}

func TestStreamEndsWithTheErrorOnce(t *testing.T) {
	rec := httptest.NewRecorder()
	st := newStream(rec)
	if err := st.Send(eventMessage{Event: processEvent{Start: &startEvent{PID: 42}}}); err != nil {
		t.Fatal(err)
	}
	st.Send(eventMessage{Event: processEvent{Data: &dataEvent{Stdout: []byte("hi\n")}}})
	st.End(rpcErrorf(CodeDeadlineExceeded, "too slow"))
	st.End(nil) // a second end writes nothing
	if err := st.Send(struct{}{}); err == nil {
		t.Error("a message after the end was taken")
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/connect+json" {
		t.Errorf("status %d, type %q: a stream answers 200 application/connect+json, errors in its trailer", rec.Code, rec.Header().Get("Content-Type"))
	}
	msgs, end := readFrames(t, rec.Body)
	want := []string{`{"event":{"start":{"pid":42}}}`, `{"event":{"data":{"stdout":"aGkK"}}}`}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	if end != `{"error":{"code":"deadline_exceeded","message":"too slow"}}` {
		t.Errorf("end of stream %s", end)
	}
}

func TestUnaryErrorsCarryConnectCodes(t *testing.T) {
	for code, status := range map[string]int{CodeNotFound: 404, CodeUnimplemented: 501, CodeAlreadyExists: 409, CodeInvalidArgument: 400} {
		rec := httptest.NewRecorder()
		writeUnaryError(rec, rpcErrorf(code, "because"))
		var body RPCError
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != status || body.Code != code || body.Message != "because" {
			t.Errorf("%s: %d %s, want %d with the code", code, rec.Code, rec.Body, status)
		}
	}
	rec := httptest.NewRecorder()
	writeUnaryError(rec, errors.New("disk on fire"))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"code":"internal"`) {
		t.Errorf("a plain error: %d %s, want 500 internal", rec.Code, rec.Body)
	}
}

func TestTimeoutHeader(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "60000": true, "0": false, "-5": false, "abc": false, "99999999999": false} {
		r := httptest.NewRequest("POST", "/", nil)
		if v != "" {
			r.Header.Set("Connect-Timeout-Ms", v)
		}
		if _, err := timeoutOf(r); (err == nil) != ok {
			t.Errorf("Connect-Timeout-Ms %q: err %v", v, err)
		}
	}
}
