package input

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched by every error that rejects a request before any input
// is sent (errors.Is(err, ErrInvalid)): web/ maps it to 400.
var ErrInvalid = errors.New("invalid input request")

// ValidationError names the field of a request that was rejected: an unknown
// action, a missing or wrong-typed parameter, a value out of range or over a
// limit, an unknown key name. Nothing is sent for a batch that fails
// validation.
type ValidationError struct {
	// Field is the JSON path of the offending field in the caller's
	// vocabulary, e.g. "actions[2].x" or "coordinate".
	Field string
	// Reason says what is wrong, in lowercase.
	Reason string
	// Err is the underlying cause, if any (for example an *UnknownKeyError).
	Err error
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Is makes every ValidationError match ErrInvalid. The vocabulary knows no
// domain: drive, which runs batches on desktops, makes the errors it
// returns match desktop.ErrInvalid as well.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// FieldName is the request field at fault ("actions[2].x"), empty when the
// whole request is.
func (e *ValidationError) FieldName() string { return e.Field }

func (e *ValidationError) Unwrap() error { return e.Err }

// Invalid is a ValidationError naming field, with a formatted reason: the
// one constructor every door and the drive service use.
func Invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// fieldPath joins JSON path elements: "actions[2]" + "x" = "actions[2].x".
func fieldPath(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	case strings.HasPrefix(field, "["):
		return prefix + field
	default:
		return prefix + "." + field
	}
}

// withPrefix puts a validation error under prefix, so an error found inside
// one action reads "actions[3].chord: ..." at the batch level.
func withPrefix(err error, prefix string) error {
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return &ValidationError{Field: fieldPath(prefix, ve.Field), Reason: ve.Reason, Err: ve.Err}
	}
	return &ValidationError{Field: prefix, Reason: err.Error(), Err: err}
}

// UnknownKeyError reports a key name that is not in the key table, with the
// closest valid names by edit distance.
type UnknownKeyError struct {
	Name        string
	Suggestions []string
	// Hint explains names that are known but unusable, such as F13 to F24,
	// which have no qcode in QEMU 7.2.
	Hint string
}

func (e *UnknownKeyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown key %q", e.Name)
	if e.Hint != "" {
		b.WriteString(" (" + e.Hint + ")")
	}
	if len(e.Suggestions) > 0 {
		b.WriteString("; closest valid names: " + strings.Join(e.Suggestions, ", "))
	}
	return b.String()
}

// Is makes an UnknownKeyError match ErrInvalid on its own too.
func (e *UnknownKeyError) Is(target error) bool { return target == ErrInvalid }
