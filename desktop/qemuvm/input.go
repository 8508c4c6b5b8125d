package qemuvm

import (
	"context"
	"fmt"

	"github.com/warmdesk/warmdesk/desktop"
)

// absMax is the top of QEMU's absolute pointer axes (INPUT_EVENT_ABS_MAX).
const absMax = 0x7fff

// absAxis converts a native pixel to QEMU's absolute axis, aiming at the
// middle of the pixel so that the guest, which scales the axis back to its
// screen, lands on exactly that pixel whatever way it rounds.
func absAxis(pixel, size int) int {
	v := ((2*pixel + 1) * (absMax + 1)) / (2 * size)
	return min(max(v, 0), absMax)
}

// InputEvents builds the argument list ("events") of QMP input-send-event
// for one frame of input on a width x height screen: keys by qcode,
// buttons by name, moves on the absolute axes of the tablet.
func InputEvents(events []desktop.InputEvent, width, height int) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(events)+1)
	for _, e := range events {
		switch e.Kind {
		case desktop.InputKey:
			if e.Key == "" {
				return nil, fmt.Errorf("%w: key event without a key", desktop.ErrInvalid)
			}
			out = append(out, map[string]any{"type": "key", "data": map[string]any{
				"down": e.Down,
				"key":  map[string]any{"type": "qcode", "data": e.Key},
			}})
		case desktop.InputButton:
			if e.Button == "" {
				return nil, fmt.Errorf("%w: button event without a button", desktop.ErrInvalid)
			}
			out = append(out, map[string]any{"type": "btn", "data": map[string]any{"down": e.Down, "button": e.Button}})
		case desktop.InputMove:
			if e.X < 0 || e.Y < 0 || e.X >= width || e.Y >= height {
				return nil, fmt.Errorf("%w: pointer position %d,%d is outside the %dx%d screen", desktop.ErrInvalid, e.X, e.Y, width, height)
			}
			out = append(out,
				map[string]any{"type": "abs", "data": map[string]any{"axis": "x", "value": absAxis(e.X, width)}},
				map[string]any{"type": "abs", "data": map[string]any{"axis": "y", "value": absAxis(e.Y, height)}},
			)
		default:
			return nil, fmt.Errorf("%w: unknown input event kind %d", desktop.ErrInvalid, e.Kind)
		}
	}
	return out, nil
}

// SendInput delivers one synchronised frame of input events (one
// input-send-event) to a machine whose screen is width x height.
func SendInput(ctx context.Context, ex Executor, events []desktop.InputEvent, width, height int) error {
	args, err := InputEvents(events, width, height)
	if err != nil {
		return err
	}
	if err := ex.Execute(ctx, "input-send-event", map[string]any{"events": args}, nil); err != nil {
		return fmt.Errorf("send input: %w", err)
	}
	return nil
}

// Mouse is one entry of QMP query-mice.
type Mouse struct {
	Name     string `json:"name"`
	Index    int    `json:"index"`
	Current  bool   `json:"current"`
	Absolute bool   `json:"absolute"`
}

// PointTablet makes the tablet the pointer device that receives button
// events, as it is in the machine that was saved. QEMU sends a button
// event to the first pointer device in its list that takes buttons; a
// device moves to the front when the guest first reads a report from it,
// and that order is not part of the migrated state. In a restored QEMU the
// PS/2 mouse, which the guest never enabled and which drops everything, is
// first until the guest has read a tablet report: so a click sent right
// after a restore was lost, and a drag's first press (docs/API.md has the
// evidence). mouse_set (QEMU's own command for choosing the current mouse)
// puts the tablet first before the guest runs.
func PointTablet(ctx context.Context, ex Executor) error {
	var mice []Mouse
	if err := ex.Execute(ctx, "query-mice", nil, &mice); err != nil {
		return fmt.Errorf("query mice: %w", err)
	}
	idx, err := tabletIndex(mice)
	if err != nil || mice[idx].Current {
		return err
	}
	out, err := humanMonitor(ctx, ex, fmt.Sprintf("mouse_set %d", mice[idx].Index))
	if err != nil {
		return fmt.Errorf("make the tablet the current mouse: %w", err)
	}
	if out != "" {
		return fmt.Errorf("make the tablet the current mouse: mouse_set: %s", out)
	}
	return nil
}

// tabletIndex finds the absolute pointer device (the tablet).
func tabletIndex(mice []Mouse) (int, error) {
	for i, m := range mice {
		if m.Absolute {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: no absolute pointer device among %d mice: the device list has no tablet", desktop.ErrMismatch, len(mice))
}

// humanMonitor runs an HMP command line through QMP and returns what it
// printed: the way to what QMP has no command for (mouse_set, info irq).
func humanMonitor(ctx context.Context, ex Executor, line string) (string, error) {
	var out string
	err := ex.Execute(ctx, "human-monitor-command", map[string]any{"command-line": line}, &out)
	return out, err
}
