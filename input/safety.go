package input

import (
	"errors"
	"fmt"
)

// ErrUnconfirmed is matched by every *ConfirmationError: web/ maps it to
// 409 confirmation_required.
var ErrUnconfirmed = errors.New("a person must confirm this call first")

// ConfirmationError refuses a call that its model flagged for a person's
// confirmation (Gemini's require_confirmation safety_decision, OpenAI's
// pending_safety_checks) when the request did not say a person confirmed
// it. Nothing of the call ran, so posting it again confirmed runs nothing
// twice. Both adapters refuse through safetyRule, in the same words.
type ConfirmationError struct {
	// Field is the flag in the call's own names ("args.safety_decision",
	// "pending_safety_checks[1]").
	Field string
	// Flag is what the model said of it.
	Flag string
	// Confirm says how to post the call again once a person confirmed it.
	Confirm string
}

func (e *ConfirmationError) Error() string {
	return fmt.Sprintf("%s: %s: a person must confirm this call first, and nothing of it ran; once they have, post it again with %s", e.Field, e.Flag, e.Confirm)
}

// Is makes it match ErrUnconfirmed.
func (e *ConfirmationError) Is(target error) bool { return target == ErrUnconfirmed }

// FieldName is the flag's field.
func (e *ConfirmationError) FieldName() string { return e.Field }

// safetyFlag is one thing a model asked a person to confirm before its
// call runs, and whether the request says a person did.
type safetyFlag struct {
	field, flag string
	confirmed   bool
}

// safetyRule is the one rule both adapters run flagged calls by: a call
// runs only when every flag on it is confirmed; the first that is not is
// the refusal, saying how to confirm (confirm).
func safetyRule(flags []safetyFlag, confirm string) error {
	for _, f := range flags {
		if !f.confirmed {
			return &ConfirmationError{Field: f.field, Flag: f.flag, Confirm: confirm}
		}
	}
	return nil
}
