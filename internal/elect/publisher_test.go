package elect_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
)

func TestPublisherAdvancesIndexOnlyOnMeaningfulChange(t *testing.T) {
	p := elect.NewPublisher(elect.Snapshot{Identity: "a"})
	first := p.Load()
	if first.Index != 0 {
		t.Fatalf("initial index %d", first.Index)
	}

	renewed := p.Publish(elect.Snapshot{Identity: "a", RenewedAt: time.Now()})
	if renewed.Index != 0 || isClosed(first.Changed()) {
		t.Fatalf("a renewal moved the index (%d) or woke watchers", renewed.Index)
	}
	for i, s := range []elect.Snapshot{
		{Identity: "a", Holder: "b"},
		{Identity: "a", Holder: "b", Term: 1},
		{Identity: "a", Holder: "b", Term: 1, Token: 7},
		{Identity: "a", Holder: "a", Term: 1, Token: 7, Leading: true},
	} {
		prev := p.Load()
		got := p.Publish(s)
		if got.Index != prev.Index+1 || !isClosed(prev.Changed()) || isClosed(got.Changed()) {
			t.Errorf("change %d: index %d after %d, prev closed %v, new closed %v", i, got.Index, prev.Index, isClosed(prev.Changed()), isClosed(got.Changed()))
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
