package decide

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// A release ends the term in the very step that asks for it (the report
// says so before any request leaves), waits for the holds on the term, then
// reads and writes a signed release conditioned on that read.
func TestReleaseStepsDownFirstWaitsForHoldsThenSigns(t *testing.T) {
	h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
	held(h.store, "c", 15)
	h.begin(true)
	token, validUntil := h.last.Report.Token, h.last.Report.ValidUntil

	out := h.m.Step(h.now, Release{ID: 7, StayOut: time.Minute})
	h.record(out)
	if out.Report.Leading || out.AwaitHolds != token || out.Request != nil {
		t.Fatalf("release step: leading=%v awaitHolds=%d request=%+v; want not leading, awaiting holds on %d, nothing sent", out.Report.Leading, out.AwaitHolds, out.Request, token)
	}
	if !out.Wake.Equal(validUntil) {
		t.Errorf("wake %v; want the hold bound, validUntil %v", out.Wake, validUntil)
	}
	h.advance(time.Second)
	if len(h.replies) != 0 {
		t.Fatalf("replied while holds remain: %+v", h.replies)
	}
	h.feed(HoldsCleared{})
	if len(h.replies) != 1 || h.replies[0].ID != 7 || !h.replies[0].Released {
		t.Fatalf("replies %+v; want one, released", h.replies)
	}
	if got := h.store.lease; holderOf(got) != "" || got.Annotations[ReleasedByAnnotation] != "c" {
		t.Errorf("record: holder %q signature %q", holderOf(got), got.Annotations[ReleasedByAnnotation])
	}
	h.advance(50 * time.Second)
	if h.count(Acquire, h.start.Add(2*time.Second)) != 0 {
		t.Error("acquired while staying out")
	}
	h.advance(15 * time.Second)
	h.waitLeading(h.now, 5*time.Second)
}

// Holds never hold a release past the term's validity.
func TestHoldsWaitAtMostUntilValidityEnds(t *testing.T) {
	h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
	held(h.store, "c", 15)
	h.begin(true)
	validUntil := h.last.Report.ValidUntil
	out := h.m.Step(h.now, Release{ID: 1})
	h.record(out)
	h.runUntil(validUntil.Add(-time.Millisecond))
	if len(h.replies) != 0 {
		t.Fatal("released before validUntil with a hold")
	}
	h.runUntil(validUntil)
	if len(h.replies) != 1 || !h.replies[0].Released {
		t.Fatalf("replies %+v at validUntil; want the release written", h.replies)
	}
}

// A leader that knows the record it holds releases with one write, on that
// record: no read first, and the write is conditioned on the record's
// resourceVersion (the harness's store, like the apiserver, takes it only
// on the current one).
func TestReleaseWritesOnTheRecordItKnows(t *testing.T) {
	h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
	held(h.store, "c", 15)
	h.begin(true)
	h.waitLeading(h.now, 5*time.Second)
	from := h.now
	h.feed(Stop{})
	if !h.last.Stopped || holderOf(h.store.lease) != "" {
		t.Fatalf("stopped=%v holder %q; want released and stopped", h.last.Stopped, holderOf(h.store.lease))
	}
	if sends, reads := h.count(ReleaseSend, from), h.count(ReleaseRead, from); sends != 1 || reads != 0 {
		t.Fatalf("%d release writes and %d reads; want one write and no read", sends, reads)
	}
	for _, req := range h.sent {
		if req.Purpose == ReleaseSend && req.Lease.ResourceVersion == "" {
			t.Error("release not conditioned on a resourceVersion") // the store takes it only on the current one
		}
	}
}

// A deposed leader never erases its successor: whether it was cut off (its
// renewals failed: it reads first) or a write it never saw replaced its own
// (its release, conditioned on the record it knew, conflicts; it reads), it
// writes nothing once a read shows another holder.
func TestReleaseNeverErasesAnotherHolder(t *testing.T) {
	t.Run("cut off", func(t *testing.T) {
		h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
		held(h.store, "c", 15)
		h.begin(false)
		h.cutOff = true
		h.advance(12 * time.Second)
		held(h.store, "successor", 15)
		h.cutOff = false
		from := h.now
		h.feed(Release{ID: 1})
		if len(h.replies) != 1 || h.replies[0].Released || holderOf(h.store.lease) != "successor" {
			t.Fatalf("replies %+v, holder %q; want no release, successor untouched", h.replies, holderOf(h.store.lease))
		}
		if sends, reads := h.count(ReleaseSend, from), h.count(ReleaseRead, from); sends != 0 || reads != 1 {
			t.Errorf("%d release writes and %d reads; want a read and no write", sends, reads)
		}
	})
	t.Run("a write it never saw", func(t *testing.T) {
		h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
		held(h.store, "c", 15)
		h.begin(false)
		h.waitLeading(h.now, 5*time.Second)
		held(h.store, "successor", 15) // unseen: no watch, no request since
		successor := h.store.lease.ResourceVersion
		from := h.now
		h.feed(Release{ID: 1, StayOut: time.Minute})
		h.feed(HoldsCleared{})
		if len(h.replies) != 1 || h.replies[0].Released || holderOf(h.store.lease) != "successor" || h.store.lease.ResourceVersion != successor {
			t.Fatalf("replies %+v, holder %q; want no release, successor untouched", h.replies, holderOf(h.store.lease))
		}
		if sends, reads := h.count(ReleaseSend, from), h.count(ReleaseRead, from); sends != 1 || reads != 1 {
			t.Errorf("%d release writes and %d reads; want one write (refused: conflict), then a read, and nothing more", sends, reads)
		}
	})
}

// Withdrawn while an acquire is in flight: if it lands, no term starts and
// the record is released once the answer is in.
func TestWithdrawnDuringAcquireReleasesWhatLanded(t *testing.T) {
	h := afterRelease(t, standardConfig("c"))
	h.watching = true
	out := h.m.Step(h.now, Start{})
	h.record(out)
	out = h.m.Step(h.now, h.perform(*out.Request)) // read: released, free
	h.record(out)
	if out.Request == nil || out.Request.Purpose != Acquire {
		t.Fatalf("want an acquire, got %+v", out.Request)
	}
	answer := h.perform(*out.Request) // lands
	h.queued = nil
	h.record(h.m.Step(h.now, SetCandidate{ID: 3, Reason: "app unhealthy"}))
	h.feed(answer)
	if h.leading() {
		t.Fatal("a withdrawn instance started a term")
	}
	if len(h.replies) != 1 || !h.replies[0].Released || holderOf(h.store.lease) != "" {
		t.Fatalf("replies %+v, holder %q; want the landed acquire released", h.replies, holderOf(h.store.lease))
	}
	h.advance(time.Hour)
	if h.count(Acquire, h.start.Add(time.Nanosecond)) != 0 || h.count(Placeholder, h.start) != 0 {
		t.Error("a withdrawn instance campaigned")
	}
}

// Stop releases the Lease when this instance holds it, and then stops;
// otherwise it stops without a request.
func TestStop(t *testing.T) {
	t.Run("holding", func(t *testing.T) {
		h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
		held(h.store, "c", 15)
		h.begin(true)
		h.feed(Stop{})
		if !h.last.Stopped || holderOf(h.store.lease) != "" {
			t.Fatalf("stopped=%v holder %q; want released and stopped", h.last.Stopped, holderOf(h.store.lease))
		}
	})
	t.Run("holding, the release refused", func(t *testing.T) {
		h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
		held(h.store, "c", 15)
		h.begin(true)
		h.cutOff = true
		h.m.Step(h.now, Stop{})
		if out := h.m.Step(h.now, HoldsCleared{}); out.Request == nil || out.Request.Purpose != ReleaseSend {
			t.Fatalf("want the release's write, got %+v", out.Request)
		}
		out := h.m.Step(h.now, Result{Err: timeout})
		said := false
		for _, l := range out.Logs {
			said = said || strings.Contains(l.Msg, "release on shutdown failed")
		}
		if !out.Stopped || !said {
			t.Fatalf("stopped=%v logs %+v; want stopped, saying the release failed", out.Stopped, out.Logs)
		}
	})
	t.Run("following", func(t *testing.T) {
		h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
		held(h.store, "x", 15)
		h.begin(true)
		sent := len(h.sent)
		h.feed(Stop{})
		if !h.last.Stopped || len(h.sent) != sent {
			t.Fatalf("stopped=%v, %d requests; want stopped without a request", h.last.Stopped, len(h.sent)-sent)
		}
	})
	t.Run("acquire outcome unknown", func(t *testing.T) {
		h := afterRelease(t, standardConfig("c"))
		h.lose[Acquire] = 1
		h.begin(false)
		h.store.edit(func(l *coordinationv1.Lease) {}) // the cache is stale: only a read tells
		h.feed(Stop{})
		if !h.last.Stopped || holderOf(h.store.lease) != "" {
			t.Fatalf("stopped=%v holder %q; want the landed acquire released", h.last.Stopped, holderOf(h.store.lease))
		}
	})
}
