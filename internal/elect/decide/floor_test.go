package decide

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/fence"
)

// floorConfig is standardConfig with the token floor published.
func floorConfig(identity string) Config {
	cfg := standardConfig(identity)
	cfg.FencingFloor = true
	return cfg
}

// With FencingFloor, the acquiring write publishes the replaced record's
// resourceVersion + 1: above the previous term's token, not above the new
// one; renewals keep it beside the token. Without it (the default), the
// acquiring write carries no floor, and takes off one left on the record.
func TestAcquirePublishesTheTokenFloor(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"on", floorConfig("c"), true},
		{"off", standardConfig("c"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := afterRelease(t, tc.cfg)
			previous := tokenOf(h.store.lease.Annotations[fence.Annotation])
			h.store.edit(func(l *coordinationv1.Lease) { l.Annotations[fence.FloorAnnotation] = "1" })
			replaced := h.store.lease.ResourceVersion
			h.begin(true)
			if !h.leading() {
				t.Fatal("not leading after a signed release")
			}
			token := h.last.Report.Token
			floor, has := h.store.lease.Annotations[fence.FloorAnnotation]
			if has != tc.want {
				t.Fatalf("acquiring write: floor %q present %v; want present %v", floor, has, tc.want)
			}
			if !tc.want {
				return
			}
			f := tokenOf(floor)
			if want, _ := fence.FloorAbove(replaced); f != want {
				t.Errorf("floor %d; want the replaced record's resourceVersion %s + 1", f, replaced)
			}
			if f <= previous || f > token {
				t.Errorf("floor %d; want above the previous token %d and not above the new one %d", f, previous, token)
			}
			h.advance(h.cfg.RetryPeriod)
			if got := h.store.lease.Annotations; got[fence.Annotation] != token.String() || got[fence.FloorAnnotation] != floor {
				t.Errorf("after the first renewal: token %q floor %q; want %d and %s", got[fence.Annotation], got[fence.FloorAnnotation], token, floor)
			}
		})
	}
}

// A handover in one write starts the heir's term, so it publishes the
// floor too: the record it replaces + 1, not above the heir's token.
func TestHandoverPublishesTheTokenFloor(t *testing.T) {
	h := newHarness(t, floorConfig("c"), newStore("ns", "lease"))
	held(h.store, "c", 15)
	h.begin(true)
	h.waitLeading(h.now, 5*time.Second)
	h.advance(h.cfg.RetryPeriod)
	ours := h.last.Report.Token
	witness := h.store.otherWrite("next")
	known := h.store.lease
	h.feed(Stop{To: "next", Witness: witness})
	stored := h.store.lease
	if holderOf(stored) != "next" {
		t.Fatalf("holder %q after the handover; want next", holderOf(stored))
	}
	f := tokenOf(stored.Annotations[fence.FloorAnnotation])
	if want, _ := fence.FloorAbove(known.ResourceVersion); f != want {
		t.Errorf("floor %d; want the replaced record's resourceVersion %s + 1", f, known.ResourceVersion)
	}
	if heirs := tokenOf(stored.ResourceVersion); f <= ours || f > heirs {
		t.Errorf("floor %d; want above the leaver's token %d and not above the heir's %d", f, ours, heirs)
	}
}

// The simulator's checker fails a term-starting write whose fencing floor
// is not above the previous term's token (the replaced record's
// resourceVersion instead of + 1), one whose floor is above its own token,
// one without a floor, and, with the floor off, one that carries a floor:
// the invariant can fail (checker.floorWrite).
func TestCheckerJudgesTheFencingFloor(t *testing.T) {
	plusOne := func(replaced, _ fence.Token) fence.Token { return replaced + 1 }
	for _, tc := range []struct {
		name  string
		on    bool
		floor func(replaced, token fence.Token) fence.Token // nil: none
		want  string                                        // "": no violation
	}{
		{"replaced + 1", true, plusOne, ""},
		{"replaced", true, func(replaced, _ fence.Token) fence.Token { return replaced }, "not above the earlier term's token"},
		{"above the new token", true, func(_, token fence.Token) fence.Token { return token + 1 }, "above the new term's token"},
		{"none", true, nil, "carries no fencing floor"},
		{"off, and none", false, nil, ""},
		{"off, and one", false, plusOne, "with the fencing floor off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sim{params: simParams{timing: Config{FencingFloor: tc.on}}, store: newStore("ns", "lease")}
			s.check = newChecker(s)
			// i1's term starts on the first write, i2's on the record of i1's.
			acquire := func(identity string, floor func(replaced, token fence.Token) fence.Token) {
				l := &coordinationv1.Lease{}
				if s.store.lease != nil {
					l = s.store.lease.DeepCopy()
				}
				l.Spec.HolderIdentity = &identity
				l.Annotations = map[string]string{}
				if floor != nil {
					l.Annotations[fence.FloorAnnotation] = floor(tokenOf(l.ResourceVersion), fence.Token(s.store.rev+1)).String()
				}
				if _, err := s.store.update(identity, l); err != nil {
					t.Fatal(err)
				}
				s.check.floorWrite(identity, s.store.versions[s.store.latest])
			}
			var first func(replaced, token fence.Token) fence.Token
			if tc.on {
				first = func(_, token fence.Token) fence.Token { return token }
			}
			acquire("i1", first)
			if s.check.err != nil {
				t.Fatalf("the first term's write: %v", s.check.err)
			}
			acquire("i2", tc.floor)
			switch err := s.check.err; {
			case tc.want == "" && err != nil:
				t.Errorf("%v; want no violation", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("violation %v; want one saying %q", err, tc.want)
			}
		})
	}
}
