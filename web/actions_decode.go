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

	"github.com/gin-gonic/gin"

	"github.com/warmdesk/warmdesk/api"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/input"
	"github.com/warmdesk/warmdesk/screenshot"
)

// decodeBatchRequest decodes a batch request strictly. Every error is an
// *input.ValidationError naming the field at fault, so nothing is sent for
// a request that fails here.
func decodeBatchRequest(data []byte) (drive.Request, error) {
	var r api.ActionsRequest
	if err := strictJSON(data, &r); err != nil {
		return drive.Request{}, err
	}
	return batchRequest(r)
}

// decodeControlBatch decodes an "actions" message of the control
// WebSocket: a batch request with the envelope's fields beside it.
func decodeControlBatch(data []byte) (drive.Request, error) {
	var m struct {
		api.ControlMessage
		api.ActionsRequest
	}
	if err := strictJSON(data, &m); err != nil {
		return drive.Request{}, err
	}
	return batchRequest(m.ActionsRequest)
}

// batchRequest checks a batch request's own fields (the actions are
// checked by the drive service, against the desktop's screen).
func batchRequest(f api.ActionsRequest) (drive.Request, error) {
	if f.Actions == nil {
		return drive.Request{}, &input.ValidationError{Field: "actions", Reason: "required: a list of actions"}
	}
	if len(f.Actions) == 0 {
		return drive.Request{}, &input.ValidationError{Field: "actions", Reason: "no actions given"}
	}
	r := drive.NewRequest(f.Actions)
	r.Screenshot, r.Quality, r.Cursor, r.MidShots = f.Screenshot, f.Quality, f.Cursor, true
	var err error
	if f.SettleMs != nil {
		if r.Settle, err = drive.SettleBound.Millis(int64(*f.SettleMs)); err != nil {
			return r, err
		}
	}
	if f.TimeoutMs != nil {
		if r.SettleTimeout, err = drive.SettleTimeoutBound.Millis(int64(*f.TimeoutMs)); err != nil {
			return r, err
		}
	}
	if f.ReactionMs != nil {
		if r.Reaction, err = drive.ReactionBound.Millis(int64(*f.ReactionMs)); err != nil {
			return r, err
		}
	}
	if r.Display, err = displaySize(f.DisplayWidth, f.DisplayHeight, "display_width", "display_height"); err != nil {
		return r, err
	}
	if r.Format, err = imageFormat(f.Format, "format"); err != nil {
		return r, err
	}
	if f.Quality != 0 && (f.Quality < 1 || f.Quality > 100 || r.Format != screenshot.JPEG) {
		return r, input.Invalid("quality", "%d: a JPEG quality is 1 to 100, with format jpeg", f.Quality)
	}
	return r, nil
}

// displaySize checks a declared display size: both sides or neither.
func displaySize(w, h int, wField, hField string) (image.Point, error) {
	switch {
	case w == 0 && h == 0:
		return image.Point{}, nil
	case w <= 0 || w > screenshot.MaxOutputEdge:
		return image.Point{}, input.Invalid(wField, "%d: use 1 to %d, with %s", w, screenshot.MaxOutputEdge, hField)
	case h <= 0 || h > screenshot.MaxOutputEdge:
		return image.Point{}, input.Invalid(hField, "%d: use 1 to %d, with %s", h, screenshot.MaxOutputEdge, wField)
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
	return "", input.Invalid(field, "%q: use png or jpeg", s)
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
	var ve *input.ValidationError
	if errors.As(err, &ve) {
		return ve // from a type's own decoder (input.Batch), naming its field
	}
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
// field path ("ActionsRequest.settle_ms"): the API's JSON names are all
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

// readBody reads a JSON request body: at most maxJSONBody bytes (a longer
// one is 413, on every route that takes JSON), every string in it text
// (input.CheckText: encoding/json would type broken text as U+FFFD).
func readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxJSONBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			tooLarge(c, mb.Limit)
			return nil, false
		}
		badRequest(c, "", fmt.Sprintf("request body: %v", err))
		return nil, false
	}
	if err := input.CheckText(body); err != nil {
		failWith(c, err)
		return nil, false
	}
	return body, true
}

// tooLarge answers a request body over limit bytes.
func tooLarge(c *gin.Context, limit int64) {
	abort(c, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over the limit of %d bytes: send less (files go through PUT /v1/desktops/ID/files, up to %d bytes)", limit, drive.MaxFileBytes), "")
}
