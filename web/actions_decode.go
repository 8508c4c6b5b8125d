package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

// Bounds of a batch request's own fields (the actions have input.Limits).
const (
	maxSettle  = 10 * time.Second
	maxTimeout = time.Minute
	// defaultSettleTimeout bounds the wait for a quiet screen.
	defaultSettleTimeout = 5 * time.Second
)

// batchRequest is a decoded, checked POST /actions body (or control
// WebSocket "actions" message).
type batchRequest struct {
	batch      input.Batch
	screenshot bool
	// settle is the quiet period before a screenshot; 0 captures at once.
	settle  time.Duration
	timeout time.Duration
	// display is the declared coordinate space; zero means native.
	display image.Point
	format  screenshot.Format
	quality int
	cursor  bool
}

// batchFields is the JSON form of a batch request; actions are decoded by
// input.DecodeBatch, which names the offending field inside them.
type batchFields struct {
	Actions       json.RawMessage `json:"actions"`
	Screenshot    bool            `json:"screenshot"`
	SettleMs      *int            `json:"settle_ms"`
	TimeoutMs     *int            `json:"timeout_ms"`
	DisplayWidth  int             `json:"display_width"`
	DisplayHeight int             `json:"display_height"`
	Format        string          `json:"format"`
	Quality       int             `json:"quality"`
	Cursor        bool            `json:"cursor"`
}

// controlFields are the envelope fields a control WebSocket message adds.
type controlFields struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Stream bool   `json:"stream"`
}

// decodeBatchRequest decodes a batch request strictly. Every error is an
// *input.ValidationError naming the field at fault, so nothing is sent for
// a request that fails here.
func decodeBatchRequest(data []byte) (batchRequest, error) {
	var f batchFields
	if err := strictJSON(data, &f); err != nil {
		return batchRequest{}, err
	}
	return f.check()
}

// decodeControlBatch decodes an "actions" message of the control
// WebSocket: a batch request with the envelope's fields beside it.
func decodeControlBatch(data []byte) (batchRequest, error) {
	var f struct {
		controlFields
		batchFields
	}
	if err := strictJSON(data, &f); err != nil {
		return batchRequest{}, err
	}
	return f.batchFields.check()
}

func (f batchFields) check() (batchRequest, error) {
	if len(f.Actions) == 0 || string(f.Actions) == "null" {
		return batchRequest{}, &input.ValidationError{Field: "actions", Reason: "required: a list of actions"}
	}
	batch, err := input.DecodeBatch(f.Actions)
	if err != nil {
		return batchRequest{}, err
	}
	if len(batch) == 0 {
		return batchRequest{}, &input.ValidationError{Field: "actions", Reason: "no actions given"}
	}
	r := batchRequest{
		batch: batch, screenshot: f.Screenshot, settle: screenshot.DefaultQuiet, timeout: defaultSettleTimeout,
		format: screenshot.PNG, quality: f.Quality, cursor: f.Cursor,
	}
	if f.SettleMs != nil {
		if *f.SettleMs < 0 || time.Duration(*f.SettleMs)*time.Millisecond > maxSettle {
			return r, fieldError("settle_ms", "%d: use 0 (capture at once) to %d", *f.SettleMs, maxSettle.Milliseconds())
		}
		r.settle = time.Duration(*f.SettleMs) * time.Millisecond
	}
	if f.TimeoutMs != nil {
		if *f.TimeoutMs < 0 || time.Duration(*f.TimeoutMs)*time.Millisecond > maxTimeout {
			return r, fieldError("timeout_ms", "%d: use 0 to %d", *f.TimeoutMs, maxTimeout.Milliseconds())
		}
		r.timeout = time.Duration(*f.TimeoutMs) * time.Millisecond
	}
	if r.display, err = displaySize(f.DisplayWidth, f.DisplayHeight, "display_width", "display_height"); err != nil {
		return r, err
	}
	if r.format, err = imageFormat(f.Format, "format"); err != nil {
		return r, err
	}
	if f.Quality != 0 && (f.Quality < 1 || f.Quality > 100 || r.format != screenshot.JPEG) {
		return r, fieldError("quality", "%d: a JPEG quality is 1 to 100, with format jpeg", f.Quality)
	}
	return r, nil
}

// displaySize checks a declared display size: both sides or neither.
func displaySize(w, h int, wField, hField string) (image.Point, error) {
	switch {
	case w == 0 && h == 0:
		return image.Point{}, nil
	case w <= 0 || w > screenshot.MaxOutputEdge:
		return image.Point{}, fieldError(wField, "%d: use 1 to %d, with %s", w, screenshot.MaxOutputEdge, hField)
	case h <= 0 || h > screenshot.MaxOutputEdge:
		return image.Point{}, fieldError(hField, "%d: use 1 to %d, with %s", h, screenshot.MaxOutputEdge, wField)
	}
	return image.Pt(w, h), nil
}

func imageFormat(s, field string) (screenshot.Format, error) {
	switch strings.ToLower(s) {
	case "", "png":
		return screenshot.PNG, nil
	case "jpeg", "jpg":
		return screenshot.JPEG, nil
	}
	return "", fieldError(field, "%q: use png or jpeg", s)
}

func fieldError(field, format string, args ...any) *input.ValidationError {
	return &input.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// strictJSON decodes one JSON object into v: unknown fields, wrong types
// and trailing data are *input.ValidationError values naming the field.
func strictJSON(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &input.ValidationError{Reason: "empty body: send a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonFieldError(err)
	}
	if dec.More() {
		return &input.ValidationError{Reason: "malformed JSON: data after the object"}
	}
	return nil
}

// jsonFieldError names the field an encoding/json error is about.
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := jsonPath(te.Field)
		if field == "" {
			return &input.ValidationError{Reason: fmt.Sprintf("malformed JSON: a %s where an object belongs", te.Value)}
		}
		return &input.ValidationError{Field: field, Reason: fmt.Sprintf("wrong type: a %s where %s belongs", te.Value, typeName(te.Type.String()))}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field := strings.Trim(name, `"`)
		return &input.ValidationError{Field: field, Reason: "unknown field"}
	}
	return &input.ValidationError{Reason: "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// jsonPath drops the Go names of embedded structs from encoding/json's
// field path ("batchFields.settle_ms"): the API's JSON names are all
// lowercase.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	out := parts[:0]
	for _, p := range parts {
		if strings.ToLower(p) == p {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

func typeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"):
		return "a whole number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "[]"), strings.HasPrefix(goType, "map"):
		return "a list or object"
	}
	return goType
}

// readBody reads a JSON request body of at most maxJSONBody bytes.
func readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxJSONBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			abort(c, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", maxJSONBody), "")
			return nil, false
		}
		badRequest(c, "", fmt.Sprintf("request body: %v", err))
		return nil, false
	}
	return body, true
}
