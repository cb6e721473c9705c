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

// The initial snapshot's Index is where the index starts: a process started
// later (at a later microsecond) starts above every index an earlier one
// reached, and the values stay exact as JSON doubles. Publish ignores the
// Index it is given.
func TestPublisherStartsAtTheInitialIndex(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	first := uint64(start.UnixMicro())
	p := elect.NewPublisher(elect.Snapshot{Identity: "a", Index: first})
	if got := p.Load().Index; got != first {
		t.Fatalf("initial index %d, want %d", got, first)
	}
	if got := p.Publish(elect.Snapshot{Identity: "a", Index: 3}).Index; got != first {
		t.Errorf("a renewal that claimed index 3 got index %d, want %d", got, first)
	}
	changed := p.Publish(elect.Snapshot{Identity: "a", Holder: "b", Index: 3})
	if changed.Index != first+1 {
		t.Errorf("a change that claimed index 3 got index %d, want %d", changed.Index, first+1)
	}

	// A restart a millisecond later starts above an index that moved a
	// thousand times meanwhile.
	for range 998 {
		s := *p.Load()
		s.Term++
		p.Publish(s)
	}
	restarted := elect.NewPublisher(elect.Snapshot{Identity: "a", Index: uint64(start.Add(time.Millisecond).UnixMicro())})
	if last := p.Load().Index; restarted.Load().Index <= last {
		t.Errorf("restarted index %d not above the previous process's %d", restarted.Load().Index, last)
	}
	// Exact as a JSON double (JavaScript's Number) until the year 2255.
	if far := uint64(time.Date(2255, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()); far >= 1<<53 || uint64(float64(far)) != far {
		t.Errorf("index %d of a process started in 2255 is not exact as a double", far)
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
