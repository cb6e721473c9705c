package decide

import (
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
