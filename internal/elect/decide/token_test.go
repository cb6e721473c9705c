package decide

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/fence"
)

// acquiredBy writes holder's acquire into s at now, as leasehold writes
// one: acquireTime and renewTime stamped alike, no token published. It
// returns the new version's token.
func acquiredBy(s *store, holder string, now time.Time) fence.Token {
	l := s.lease.DeepCopy()
	stamp := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = new(int32(15))
	l.Spec.AcquireTime, l.Spec.RenewTime = &stamp, &stamp
	delete(l.Annotations, fence.Annotation)
	delete(l.Annotations, ReleasedByAnnotation)
	written, err := s.update(holder, l)
	if err != nil {
		panic(err)
	}
	return tokenOf(written.ResourceVersion)
}

// renewedBy writes the holder's renewal at now, publishing token.
func renewedBy(s *store, token fence.Token, now time.Time) {
	l := s.lease.DeepCopy()
	stamp := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &stamp
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[fence.Annotation] = token.String()
	if _, err := s.update(holderOf(l), l); err != nil {
		panic(err)
	}
}

// observerConfig is standardConfig for an instance that never campaigns.
func observerConfig(identity string) Config {
	cfg := standardConfig(identity)
	cfg.StartWithdrawn = true
	return cfg
}

// wantToken delivers what the watch has yet to deliver, then checks the
// token h's Machine reports.
func wantToken(h *harness, when string, want fence.Token) {
	h.t.Helper()
	h.feed(Tick{})
	if got := h.last.Report.Token; got != want {
		h.t.Errorf("%s: token %d; want %d", when, got, want)
	}
}

// An instance whose watch showed the acquire reports the new holder's
// token at once, before the holder publishes it, and keeps it through a
// hand edit of that very record (which leaves it looking like an acquire).
func TestFollowerReportsTheTokenOfAnAcquireItWatched(t *testing.T) {
	h := afterRelease(t, observerConfig("c"))
	h.begin(true)
	if r := h.last.Report; r.Holder != "" || h.count(Acquire, h.start) != 0 {
		t.Fatalf("holder %q after %d acquires; want a released Lease", r.Holder, h.count(Acquire, h.start))
	}
	token := acquiredBy(h.store, "y", h.now)
	h.feed(Tick{})
	if r := h.last.Report; r.Holder != "y" || r.Token != token {
		t.Fatalf("after the acquire: holder %q token %d; want y with %d", r.Holder, r.Token, token)
	}
	h.store.edit(func(l *coordinationv1.Lease) { l.Annotations = map[string]string{"example.com/note": "1"} })
	wantToken(h, "after a hand edit of the acquiring record", token)
	renewedBy(h.store, token, h.now.Add(time.Second))
	wantToken(h, "after the publishing renewal", token)
}

// An instance that did not see the acquire written (here it starts after
// it: its list shows the acquiring record) cannot tell that record from a
// hand edit of it, so it reports no token until the holder publishes one.
func TestFollowerThatMissedTheAcquireWaitsForThePublishedToken(t *testing.T) {
	h := afterRelease(t, observerConfig("c"))
	token := acquiredBy(h.store, "y", h.now)
	h.begin(true)
	if r := h.last.Report; r.Holder != "y" || r.Token != 0 {
		t.Fatalf("holder %q token %d; want y with no token known", r.Holder, r.Token)
	}
	renewedBy(h.store, token, h.now.Add(time.Second))
	wantToken(h, "after the publishing renewal", token)
}

// A new term's first renewal, which publishes its token, comes a
// retryPeriod after the acquire, like every renewal: a takeover is one
// write, not two.
func TestFirstRenewalPublishesTheTokenARetryPeriodOn(t *testing.T) {
	h := afterRelease(t, standardConfig("c"))
	h.begin(true)
	if !h.leading() {
		t.Fatal("not leading after a signed release")
	}
	token := h.last.Report.Token
	acquired, _ := h.firstSent(Acquire, h.start)
	h.advance(h.cfg.RetryPeriod - time.Millisecond)
	if n := h.count(Renew, h.start); n != 0 {
		t.Fatalf("%d renewals within a retryPeriod of the acquire; want none", n)
	}
	h.advance(time.Millisecond)
	renewed, ok := h.firstSent(Renew, h.start)
	if !ok || renewed.Sub(acquired) != h.cfg.RetryPeriod {
		t.Fatalf("first renewal sent %v after the acquire (sent: %v); want %v", renewed.Sub(acquired), ok, h.cfg.RetryPeriod)
	}
	if got := h.store.lease.Annotations[fence.Annotation]; got != token.String() {
		t.Errorf("published token %q after the first renewal; want %d", got, token)
	}
}
