package drive

import (
	"fmt"
	"strings"

	"github.com/warmdesk/warmdesk/input"
)

// maxSummaryActions bounds the actions a summary names one by one.
const maxSummaryActions = 6

// summarize says in one line what a batch did, for the viewer's strip of
// the agent's recent actions. Typed text is shown by length only: it may be
// a password.
func summarize(b input.Batch, err error) string {
	var parts []string
	for i, a := range b {
		if i == maxSummaryActions {
			parts = append(parts, fmt.Sprintf("and %d more", len(b)-i))
			break
		}
		parts = append(parts, describe(a))
	}
	s := "agent: " + strings.Join(parts, ", ")
	if err != nil {
		s += " (failed: " + firstLine(err.Error()) + ")"
	}
	return s
}

func describe(a input.Action) string {
	at := ""
	if a.At != nil {
		at = fmt.Sprintf(" at %d,%d", a.At.X, a.At.Y)
	}
	switch a.Kind {
	case input.KindClick:
		what := "click"
		if a.Count == 2 {
			what = "double-click"
		} else if a.Count == 3 {
			what = "triple-click"
		}
		if a.Button != "" && a.Button != input.ButtonLeft {
			what = string(a.Button) + " " + what
		}
		return what + at
	case input.KindType:
		return fmt.Sprintf("type %d characters", len([]rune(a.Text)))
	case input.KindKey:
		return "key " + a.Chord
	case input.KindScroll:
		return fmt.Sprintf("scroll %+d,%+d%s", a.DX, a.DY, at)
	case input.KindDrag:
		return fmt.Sprintf("drag through %d points", len(a.Path))
	case input.KindWait:
		return "wait " + a.Duration.String()
	default:
		return string(a.Kind) + at
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
