package decide

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// withAddress writes s's record as holder writes it, advertising address (the
// two annotations of a leasehold holder with an advertised address).
func withAddress(s *store, holder, address string) {
	held(s, holder, 15)
	l := s.lease.DeepCopy()
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[LeaderAddressAnnotation] = address
	l.Annotations[LeaderAddressOfAnnotation] = holder
	if _, err := s.update(holder, l); err != nil {
		panic(err)
	}
}

func annotationsOf(l *coordinationv1.Lease) (address, of string, ok bool) {
	address, ok = l.Annotations[LeaderAddressAnnotation]
	return address, l.Annotations[LeaderAddressOfAnnotation], ok
}

// A leader with an advertised address writes it, bound to its identity, on
// the acquiring write and on every renewal, reports it as its own, and
// takes it off when it releases.
func TestLeaderWritesItsAddressAndReleaseTakesItOff(t *testing.T) {
	cfg := standardConfig("c")
	cfg.AdvertiseAddress = "10.0.0.3:4042"
	h := newHarness(t, cfg, newStore("ns", "lease"))
	withAddress(h.store, "old", "10.0.0.9:4042")
	released(h.store, "old")
	h.begin(true)
	h.waitLeading(h.now, 5*time.Second)
	if address, of, _ := annotationsOf(h.store.lease); address != "10.0.0.3:4042" || of != "c" {
		t.Fatalf("after the acquire: address %q of %q; want 10.0.0.3:4042 of c", address, of)
	}
	if got := h.last.Report.LeaderAddress; got != "10.0.0.3:4042" {
		t.Errorf("report: LeaderAddress %q, want its own", got)
	}
	renewals := h.count(Renew, h.start)
	h.advance(5 * time.Second)
	if h.count(Renew, h.start) == renewals {
		t.Fatal("no renewal in 5s")
	}
	if address, of, _ := annotationsOf(h.store.lease); address != "10.0.0.3:4042" || of != "c" {
		t.Fatalf("after renewals: address %q of %q", address, of)
	}
	h.feed(Release{ID: 1, StayOut: time.Minute})
	h.feed(HoldsCleared{})
	if _, _, ok := annotationsOf(h.store.lease); ok || holderOf(h.store.lease) != "" {
		t.Errorf("after the release: holder %q, annotations %v; want no holder, no address", holderOf(h.store.lease), h.store.lease.Annotations)
	}
	if got := h.last.Report.LeaderAddress; got != "" {
		t.Errorf("report after the release: LeaderAddress %q, want none", got)
	}
}

// Without an advertised address, a new holder takes its predecessor's off:
// no one reads it as the new holder's.
func TestLeaderWithoutAddressTakesThePredecessorsOff(t *testing.T) {
	h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
	withAddress(h.store, "old", "10.0.0.9:4042")
	released(h.store, "old")
	h.begin(true)
	h.waitLeading(h.now, 5*time.Second)
	if _, _, ok := annotationsOf(h.store.lease); ok {
		t.Errorf("annotations %v: the predecessor's address is still there", h.store.lease.Annotations)
	}
	if got := h.last.Report.LeaderAddress; got != "" {
		t.Errorf("report: LeaderAddress %q, want none", got)
	}
}

// A follower reports the holder's address only when the holder wrote it:
// an address bound to another identity (left by a predecessor, under a
// holder that does not write one), or one that is not host:port, is none.
func TestFollowerReportsTheHoldersOwnAddressOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*coordinationv1.Lease)
		want string
	}{
		{"the holder's own", func(*coordinationv1.Lease) {}, "10.0.0.9:4042"},
		{"left by a predecessor", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("client-go-pod") }, ""},
		{"not an address", func(l *coordinationv1.Lease) { l.Annotations[LeaderAddressAnnotation] = "http://x" }, ""},
		{"no binding", func(l *coordinationv1.Lease) { delete(l.Annotations, LeaderAddressOfAnnotation) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, standardConfig("c"), newStore("ns", "lease"))
			withAddress(h.store, "x", "10.0.0.9:4042")
			l := h.store.lease.DeepCopy()
			tc.edit(l)
			if _, err := h.store.update("admin", l); err != nil {
				t.Fatal(err)
			}
			h.begin(true)
			h.advance(time.Second)
			r := h.last.Report
			if r.Leading || r.Holder != holderOf(l) {
				t.Fatalf("report %+v; want following %s", r, holderOf(l))
			}
			if r.LeaderAddress != tc.want {
				t.Errorf("LeaderAddress %q, want %q", r.LeaderAddress, tc.want)
			}
		})
	}
}
