package desktop

import (
	"context"
	"testing"
)

func TestPhasesMarkInOrderAndOnlyWhenAsked(t *testing.T) {
	MarkPhase(context.Background(), "ignored") // no record: nothing happens
	p := NewPhases()
	ctx := WithPhases(context.Background(), p)
	MarkPhase(ctx, "one")
	MarkPhase(carryPhases(context.Background(), ctx), "two")
	MarkPhase(carryPhases(context.Background(), context.Background()), "lost")
	marks := p.Marks()
	if len(marks) != 2 || marks[0].Name != "one" || marks[1].Name != "two" {
		t.Fatalf("marks %+v, want one then two", marks)
	}
}
