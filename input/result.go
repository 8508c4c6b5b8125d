package input

import "time"

// The results of running a batch. drive runs batches; the results are
// vocabulary because the adapters turn them into each vendor's answer.

// ActionStatus is how an action of a batch ended.
type ActionStatus string

// Action statuses.
const (
	StatusOK      ActionStatus = "ok"
	StatusError   ActionStatus = "error"
	StatusSkipped ActionStatus = "skipped" // after an earlier failure
)

// ActionResult reports one action of a batch.
type ActionResult struct {
	Index   int
	Kind    Kind
	Status  ActionStatus
	Error   string
	Elapsed time.Duration
	// Cursor is the pointer position a cursor_position action found, in
	// the batch's space.
	Cursor *Point
	// Region is a zoom action's region in native pixels.
	Region *Rect
}

// BatchResult reports a batch.
type BatchResult struct {
	// Results has one entry per action of the batch, in order.
	Results []ActionResult
	// Screenshot says the caller should wait for the screen to settle and
	// capture it: the caller asked for a trailing screenshot or the last
	// action is a screenshot or zoom.
	Screenshot bool
	// Zoom, when the last action is a zoom, is the native region to
	// capture instead of the whole screen.
	Zoom *Rect
	// Queued is how long the batch waited behind earlier batches.
	Queued time.Duration
	// Elapsed is how long the batch ran, after queueing.
	Elapsed time.Duration
}
