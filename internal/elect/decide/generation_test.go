package decide

import (
	"testing"
	"time"
)

// A leader with PublishGeneration writes the generation it was given on
// its acquire and every renewal, and a new one with the next renewal; the
// release leaves it, so the candidates still see the last leader's. A
// follower reports the generation on the record.
func TestLeaderPublishesItsGeneration(t *testing.T) {
	cfg := standardConfig("c")
	cfg.PublishGeneration, cfg.StartWithdrawn = true, true
	h := newHarness(t, cfg, newStore("ns", "lease"))
	held(h.store, "old", 15)
	l := h.store.lease.DeepCopy()
	l.Annotations = map[string]string{GenerationAnnotation: "h-old"}
	if _, err := h.store.update("old", l); err != nil {
		t.Fatal(err)
	}
	released(h.store, "old")
	h.begin(true)
	h.advance(10 * time.Millisecond)
	if got := h.last.Report.Generation; got != "h-old" {
		t.Errorf("a follower reports Generation %q; want the last leader's h-old", got)
	}
	h.feed(SetGeneration{Generation: "h-1"})
	h.feed(SetCandidate{ID: 9, Candidate: true})
	h.waitLeading(h.now, 5*time.Second)
	if got := h.store.lease.Annotations[GenerationAnnotation]; got != "h-1" {
		t.Fatalf("after the acquire: generation %q; want h-1", got)
	}
	h.feed(SetGeneration{Generation: "h-2"})
	h.feed(SetGeneration{}) // unknown: the last known one stays
	renewals := h.count(Renew, h.start)
	h.advance(5 * time.Second)
	if h.count(Renew, h.start) == renewals {
		t.Fatal("no renewal in 5s")
	}
	if got := h.store.lease.Annotations[GenerationAnnotation]; got != "h-2" {
		t.Fatalf("after renewals: generation %q; want h-2", got)
	}
	if got := h.last.Report.Generation; got != "h-2" {
		t.Errorf("report: Generation %q; want its own h-2", got)
	}
	h.feed(Release{ID: 1, StayOut: time.Minute})
	h.feed(HoldsCleared{})
	if holderOf(h.store.lease) != "" || h.store.lease.Annotations[GenerationAnnotation] != "h-2" {
		t.Errorf("after the release: holder %q, annotations %v; want no holder, generation h-2 kept", holderOf(h.store.lease), h.store.lease.Annotations)
	}
	if got := h.last.Report.Generation; got != "h-2" {
		t.Errorf("report after the release: Generation %q; want the last leader's h-2", got)
	}
}

// Without PublishGeneration nothing is written: the default record stays
// as it was.
func TestGenerationIsNotPublishedWhenOff(t *testing.T) {
	h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
	held(h.store, "old", 15)
	released(h.store, "old")
	h.begin(true)
	h.feed(SetGeneration{Generation: "h-1"})
	h.waitLeading(h.now, 5*time.Second)
	h.advance(5 * time.Second)
	if _, ok := h.store.lease.Annotations[GenerationAnnotation]; ok {
		t.Errorf("annotations %v: a generation was published with the feature off", h.store.lease.Annotations)
	}
}
