package decide

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// When is a record free? Each case is a Lease history seen by candidate
// "c" (standard timings: lease 15s, renew deadline 10s, retry 2s) and the
// earliest time, from the moment the test marks, at which c may send its
// acquiring write. Another holder "x" is never seen stepping down by c:
// as far as c can know, x may be cut off and still valid, so c may only
// take the record once x's validity has certainly ended.
func TestWhenARecordIsFree(t *testing.T) {
	const lease = 15 * time.Second
	cases := []struct {
		name string
		// setUp runs before c starts; run then plays the history with c
		// running, and returns the mark from which wait is measured.
		setUp func(s *store)
		watch bool
		run   func(h *harness) time.Time
		wait  time.Duration
	}{{
		name:  "missing, fresh candidate: an empty placeholder, acquired a lease duration after it was seen",
		watch: true,
		run:   func(h *harness) time.Time { return h.start },
		wait:  lease,
	}, {
		name:  "released by its holder (signed): at once",
		setUp: func(s *store) { held(s, "x", 15) },
		watch: true,
		run: func(h *harness) time.Time {
			h.advance(3 * time.Second)
			released(h.store, "x")
			h.feed(Tick{})
			return h.now
		},
		wait: 0,
	}, {
		name:  "emptied and signed by someone other than the holder last seen: at once (only a holder that stepped down signs, and a new holder's writes drop the signature)",
		setUp: func(s *store) { held(s, "x", 15) },
		watch: true,
		run: func(h *harness) time.Time {
			h.advance(3 * time.Second)
			held(h.store, "y", 15) // y took over from x (after x's expiry), unseen: the watch lost it
			h.queued = h.queued[:0]
			released(h.store, "y")
			h.feed(Tick{})
			return h.now
		},
		wait: 0,
	}, {
		name:  "held by another: its observation plus its lease duration",
		setUp: func(s *store) { held(s, "x", 15) },
		watch: true,
		run:   func(h *harness) time.Time { return h.start },
		wait:  lease,
	}, {
		name:  "held, renewed while watched: the last renewal's observation plus the duration",
		setUp: func(s *store) { held(s, "x", 15) },
		watch: true,
		run: func(h *harness) time.Time {
			h.advance(5 * time.Second)
			held(h.store, "x", 15)
			h.feed(Tick{})
			return h.now
		},
		wait: lease,
	}, {
		name:  "emptied by hand while held and watched: its observation plus the duration",
		setUp: func(s *store) { held(s, "x", 15) },
		watch: true,
		run: func(h *harness) time.Time {
			h.advance(5 * time.Second)
			h.store.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
			h.feed(Tick{})
			return h.now
		},
		wait: lease,
	}, {
		name:  "deleted by hand while held and watched: a placeholder at once, acquired a duration after it was seen",
		setUp: func(s *store) { held(s, "x", 15) },
		watch: true,
		run: func(h *harness) time.Time {
			h.advance(5 * time.Second)
			h.store.remove()
			h.feed(Tick{})
			return h.now
		},
		wait: lease,
	}, {
		name: "emptied by hand before a fresh candidate starts: a full duration after its first look",
		setUp: func(s *store) {
			held(s, "x", 15)
			s.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
		},
		watch: true,
		run:   func(h *harness) time.Time { return h.start },
		wait:  lease,
	}, {
		name: "emptied by hand before a fresh polling candidate starts: a full duration after its first read",
		setUp: func(s *store) {
			held(s, "x", 15)
			s.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
		},
		run:  func(h *harness) time.Time { return h.start },
		wait: lease,
	}, {
		name: "deleted by hand before a fresh candidate starts: a full duration after its placeholder",
		setUp: func(s *store) {
			held(s, "x", 15)
			s.remove()
		},
		run:  func(h *harness) time.Time { return h.start },
		wait: lease,
	}, {
		name:  "a stale claim after failed polls does not free an emptied record",
		setUp: func(s *store) { held(s, "x", 15) },
		run: func(h *harness) time.Time {
			h.cutOff = true
			h.advance(20 * time.Second) // x renews unseen; c's claim from t=0 runs out
			held(h.store, "x", 15)
			h.store.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
			h.cutOff = false
			healed := h.now.Add(time.Nanosecond)
			for {
				if at, ok := h.firstSent(Read, healed); ok {
					return at // the first read that saw it empty
				}
				h.advance(10 * time.Millisecond)
			}
		},
		wait: lease,
	}, {
		name:  "duration shortened by hand while watched: the claim never moves earlier",
		setUp: func(s *store) { held(s, "x", 15) },
		watch: true,
		run: func(h *harness) time.Time {
			h.advance(5 * time.Second)
			h.store.edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(1)) })
			h.feed(Tick{})
			return h.now
		},
		wait: lease,
	}, {
		name: "duration shortened by hand before a fresh candidate starts: its own duration",
		setUp: func(s *store) {
			held(s, "x", 15)
			s.edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(1)) })
		},
		watch: true,
		run:   func(h *harness) time.Time { return h.start },
		wait:  lease,
	}, {
		name:  "a longer duration on the record is honoured",
		setUp: func(s *store) { held(s, "x", 40) },
		watch: true,
		run:   func(h *harness) time.Time { return h.start },
		wait:  40 * time.Second,
	}, {
		name: "a forged release signature on a held record does not free it",
		setUp: func(s *store) {
			held(s, "x", 15)
			s.edit(func(l *coordinationv1.Lease) { l.Annotations = map[string]string{ReleasedByAnnotation: "x"} })
		},
		watch: true,
		run:   func(h *harness) time.Time { return h.start },
		wait:  lease,
	}, {
		name:  "released after a hand edit named another holder: the signature still frees it",
		setUp: func(s *store) { held(s, "x", 15) },
		watch: true,
		run: func(h *harness) time.Time {
			h.advance(time.Second)
			released(h.store, "x")
			h.feed(Tick{})
			return h.now
		},
		wait: 0,
	}, {
		name: "a record naming this very instance (its own lost write): at once",
		setUp: func(s *store) {
			held(s, "c", 15)
		},
		watch: true,
		run:   func(h *harness) time.Time { return h.start },
		wait:  0,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore("ns", "lease")
			if tc.setUp != nil {
				tc.setUp(s)
			}
			h := newHarness(t, standardConfig("c"), s)
			h.begin(tc.watch)
			mark := tc.run(h)
			if tc.wait > 0 {
				h.runUntil(mark.Add(tc.wait - time.Millisecond))
				if at, ok := h.firstSent(Acquire, mark); ok {
					t.Fatalf("acquire sent %v after the mark; want no earlier than %v", at.Sub(mark), tc.wait)
				}
			}
			h.runUntil(mark.Add(tc.wait + 3*time.Second)) // room for a poll
			at, ok := h.firstSent(Acquire, mark)
			if !ok {
				t.Fatalf("no acquire within %v of the mark; report %+v", tc.wait+3*time.Second, h.last.Report)
			}
			if late := at.Sub(mark) - tc.wait; late > 2500*time.Millisecond || (tc.watch && late > 0) {
				t.Errorf("acquire sent %v after the mark; want %v (a watching candidate at once)", at.Sub(mark), tc.wait)
			}
			if !h.leading() {
				t.Errorf("not leading after the acquire; report %+v", h.last.Report)
			}
		})
	}
}

// A Lease deleted or emptied while this instance's own term is valid is
// free for it (only) at once: nobody else can have acquired since its last
// write. One whose deletion it learns after its validity ran out is not:
// another instance may have taken it unseen, and been cut off in turn.
func TestOwnClaimCountsOnlyWhileTheTermIsValid(t *testing.T) {
	for name, edit := range map[string]func(s *store){
		"deleted": func(s *store) { s.remove() },
		"emptied": func(s *store) { s.edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") }) },
	} {
		t.Run(name+" while valid", func(t *testing.T) {
			h := newHarness(t, standardConfig("a"), newStore("ns", "lease"))
			held(h.store, "a", 15) // a's own record (a lost acquire, say): taken back at once
			h.begin(true)
			first := h.last.Report
			if !h.leading() {
				t.Fatalf("a does not lead: %+v", first)
			}
			h.advance(3 * time.Second)
			edit(h.store)
			h.feed(Tick{})
			if !h.leading() || h.last.Report.Token <= first.Token {
				t.Fatalf("after the edit: leading=%v token %d (was %d); want a new term at once", h.leading(), h.last.Report.Token, first.Token)
			}
		})
		t.Run(name+" after the term ended unseen", func(t *testing.T) {
			h := newHarness(t, standardConfig("a"), newStore("ns", "lease"))
			held(h.store, "a", 15)
			h.begin(false)
			if !h.leading() {
				t.Fatal("a does not lead")
			}
			h.cutOff = true
			h.advance(12 * time.Second) // a's validity ends
			if h.leading() {
				t.Fatal("a still leads while cut off past its validity")
			}
			held(h.store, "b", 15) // b took over, unseen by a, then was cut off in turn
			edit(h.store)
			h.cutOff = false
			healed := h.now.Add(time.Nanosecond)
			h.advance(14 * time.Second)
			if at, ok := h.firstSent(Acquire, healed); ok {
				t.Fatalf("a acquired %v after healing; b may still be valid", at.Sub(healed))
			}
			h.waitLeading(healed, 20*time.Second)
		})
	}
}

// Report.FreeAt says when the record becomes free for this instance: the
// claim of a holder it observed ends a lease duration after it first saw
// that version; a signed release, or its own term, makes it zero.
func TestReportFreeAt(t *testing.T) {
	const lease = 15 * time.Second
	h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
	held(h.store, "x", 15)
	cfg := standardConfig("c")
	cfg.StartWithdrawn = true // a follower that never takes it: FreeAt is what it reports
	h.m, _ = New(cfg, 1)
	h.begin(true)
	if got, want := h.last.Report.FreeAt, h.start.Add(lease); !got.Equal(want) {
		t.Fatalf("held by x, seen at the start: FreeAt %v, want %v", got, want)
	}
	h.advance(3 * time.Second)
	held(h.store, "x", 15) // x renews: a new version, seen now
	h.feed(Tick{})
	if got, want := h.last.Report.FreeAt, h.now.Add(lease); !got.Equal(want) {
		t.Fatalf("after x's renewal: FreeAt %v, want %v", got, want)
	}
	h.advance(lease) // the claim ends unrenewed
	h.feed(Tick{})
	if got := h.last.Report.FreeAt; !got.IsZero() {
		t.Fatalf("after the claim ended: FreeAt %v, want zero (free now)", got)
	}
	held(h.store, "x", 15)
	h.feed(Tick{})
	released(h.store, "x")
	h.feed(Tick{})
	if got := h.last.Report.FreeAt; !got.IsZero() || h.last.Report.Holder != "" {
		t.Fatalf("after x's signed release: FreeAt %v holder %q, want zero and none", got, h.last.Report.Holder)
	}
	h.feed(SetCandidate{Candidate: true})
	if !h.leading() || !h.last.Report.FreeAt.IsZero() {
		t.Fatalf("own term: leading %v, FreeAt %v; want leading and zero", h.leading(), h.last.Report.FreeAt)
	}
}
