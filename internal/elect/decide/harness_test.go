package decide

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// harness drives one Machine by hand for table tests: a synchronous driver
// on a store, where every request is answered at once (time does not pass)
// unless the test cuts the instance off or loses an answer, and where the
// test moves the clock.
type harness struct {
	t     *testing.T
	cfg   Config
	m     *Machine
	store *store
	start time.Time
	now   time.Time
	last  Output

	watching  bool            // store changes reach the Machine at once (a watch is up)
	cutOff    bool            // requests fail with a timeout and never reach the store
	lose      map[Purpose]int // the next n requests with a purpose reach the store, but their answers are lost
	queued    []watchEvent    // changes the watch has yet to deliver
	watchLast string          // resourceVersion of the version the watch delivered last ("" when none, or one was missed)
	sent      []sentRequest   // every request, in order
	replies   []Reply
	led       []Report // every report that said leading, in order
	// witnesses are this instance's writes to its member Lease whose
	// answers it got: resourceVersion → local send time. The watch's
	// observations of a record handed to it carry the send time of the
	// write the handover names (Observed.WitnessSentAt), as the driver
	// looks it up.
	witnesses map[string]time.Time
}

type sentRequest struct {
	at time.Time
	Request
}

// timeout is what client-go returns when a request's context ends.
var timeout = context.DeadlineExceeded

// standard timings: client-go's defaults.
func standardConfig(identity string) Config {
	return Config{
		Namespace: "ns", Name: "lease", Identity: identity,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnStop: true,
	}
}

// seedOf is a fixed seed per identity: table tests replay exactly.
func seedOf(cfg Config) uint64 { return uint64(len(cfg.Identity)) }

func newHarness(t *testing.T, cfg Config, s *store) *harness {
	t.Helper()
	m, err := New(cfg, seedOf(cfg))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := &harness{t: t, cfg: cfg, m: m, store: s, start: start, now: start, lose: map[Purpose]int{}, witnesses: map[string]time.Time{}}
	s.watchers = append(s.watchers, func(ev watchEvent) {
		if h.watching {
			h.queued = append(h.queued, ev)
		} else {
			h.watchLast = "" // missed: the next event follows an unknown version
		}
	})
	return h
}

// begin starts the Machine, with or without a watch.
func (h *harness) begin(watching bool) {
	h.watching = watching
	h.feed(Start{})
	if watching {
		l, _ := h.store.get()
		h.watchLast = h.rv()
		h.feed(h.observed(l, h.rv(), ""))
		h.feed(WatchUp{})
	}
}

// rv is the store's current revision.
func (h *harness) rv() string {
	if h.store.lease != nil {
		return h.store.lease.ResourceVersion
	}
	return ""
}

// feed steps the Machine with in at the current time, then carries out its
// output: requests are answered, watch events delivered, until it is quiet.
// It fails the test on more than maxStepsPerInstant steps: time does not
// pass meanwhile, so a Machine that keeps sending spins.
func (h *harness) feed(in Input) Output {
	h.t.Helper()
	out := h.m.Step(h.now, in)
	h.record(out)
	for steps := 1; ; steps++ {
		if steps > maxStepsPerInstant {
			h.t.Fatalf("more than %d steps at %v: the Machine spins (last sent %+v)", maxStepsPerInstant, h.now, h.sent[len(h.sent)-1].Request)
		}
		switch {
		case out.Request != nil:
			out = h.m.Step(h.now, h.perform(*out.Request))
		case len(h.queued) > 0:
			ev := h.queued[0]
			h.queued = h.queued[1:]
			follows := h.watchLast
			h.watchLast = ""
			if ev.lease != nil {
				h.watchLast = ev.rv
			}
			out = h.m.Step(h.now, h.observed(ev.lease, ev.rv, follows))
		case out.AwaitHolds != 0:
			out = h.m.Step(h.now, HoldsCleared{})
		default:
			return h.last
		}
		h.record(out)
	}
}

// observed is the watch's observation of l at rv, following the version
// follows, as the driver builds it: for a record handed to this instance,
// with the send time of its write that the handover names, if it knows it.
func (h *harness) observed(l *coordinationv1.Lease, rv, follows string) Observed {
	in := Observed{Lease: l, ResourceVersion: rv, Follows: follows}
	if holderOf(l) == h.cfg.Identity && handedWitness(l) != "" {
		in.WitnessSentAt = h.witnesses[handedWitness(l)]
	}
	return in
}

// witness has this instance write its member Lease (another object in the
// store) now, and get the answer: it returns the write's resourceVersion,
// whose send time the driver now knows.
func (h *harness) witness() string {
	rv := h.store.otherWrite(h.cfg.Identity)
	h.witnesses[rv] = h.now
	return rv
}

func (h *harness) record(out Output) {
	h.t.Helper()
	switch {
	case out.Fatal != nil:
		h.t.Fatalf("fatal: %v", out.Fatal)
	case !out.Stopped && !out.Wake.After(h.now):
		// A wake at or before the step itself (the zero time included)
		// would be a step at which nothing happens, again and again.
		h.t.Fatalf("asked to be woken at %v, not after the step at %v", out.Wake, h.now)
	}
	if out.Request != nil {
		req := *out.Request
		if req.Lease != nil {
			req.Lease = req.Lease.DeepCopy() // as sent: the store takes the body it commits
		}
		h.sent = append(h.sent, sentRequest{at: h.now, Request: req})
	}
	h.replies = append(h.replies, out.Replies...)
	if out.Report.Leading {
		h.led = append(h.led, out.Report)
	}
	h.last = out
}

// perform answers req from the store.
func (h *harness) perform(req Request) Result {
	if h.cutOff {
		return Result{Err: timeout}
	}
	l, err := performOn(h.store, h.cfg.Identity, req)
	if h.lose[req.Purpose] > 0 {
		h.lose[req.Purpose]--
		return Result{Err: timeout}
	}
	return Result{Lease: l, Err: err}
}

// performOn performs req on s, as identity's.
func performOn(s *store, identity string, req Request) (*coordinationv1.Lease, error) {
	switch req.Verb {
	case Create:
		return s.create(identity, req.Lease)
	case Update:
		return s.update(identity, req.Lease)
	default:
		return s.get()
	}
}

// advance moves the clock by d, waking the Machine whenever it asked to be.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.runUntil(h.now.Add(d))
}

func (h *harness) runUntil(end time.Time) {
	h.t.Helper()
	for !h.last.Wake.After(end) {
		h.now = latest(h.now, h.last.Wake)
		h.feed(Tick{})
	}
	h.now = end
	h.feed(Tick{})
}

// leading reports whether the Machine holds a valid term now.
func (h *harness) leading() bool {
	r := h.last.Report
	return r.Leading && h.now.Before(r.ValidUntil)
}

// firstSent returns when the first request with purpose was sent at or
// after from, and false if none was.
func (h *harness) firstSent(purpose Purpose, from time.Time) (time.Time, bool) {
	for _, s := range h.sent {
		if s.Purpose == purpose && !s.at.Before(from) {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// count counts the requests with purpose sent at or after from.
func (h *harness) count(purpose Purpose, from time.Time) int {
	n := 0
	for _, s := range h.sent {
		if s.Purpose == purpose && !s.at.Before(from) {
			n++
		}
	}
	return n
}

// waitLeading advances in steps of 10ms until the Machine leads, at most
// for limit, and returns when it started leading (relative to from).
func (h *harness) waitLeading(from time.Time, limit time.Duration) time.Duration {
	h.t.Helper()
	for end := h.now.Add(limit); !h.leading(); {
		if !h.now.Before(end) {
			h.t.Fatalf("not leading %v after %v; report %+v", limit, from.Sub(h.start), h.last.Report)
		}
		h.advance(10 * time.Millisecond)
	}
	return h.now.Sub(from)
}

// held writes a record held by holder (as holder's own write, as leasehold
// writes it) into s.
func held(s *store, holder string, seconds int32) {
	l := &coordinationv1.Lease{}
	if s.lease != nil {
		l = s.lease.DeepCopy()
	}
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &seconds
	delete(l.Annotations, ReleasedByAnnotation)
	if s.lease == nil {
		if _, err := s.create(holder, l); err != nil {
			panic(err)
		}
		return
	}
	if _, err := s.update(holder, l); err != nil {
		panic(err)
	}
}

// afterRelease is a harness for cfg on a Lease that x held, then released
// (signed): free for anyone at once.
func afterRelease(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := newHarness(t, cfg, newStore("ns", "lease"))
	held(h.store, "x", 15)
	released(h.store, "x")
	return h
}

// released writes holder's signed release into s.
func released(s *store, holder string) {
	l := s.lease.DeepCopy()
	empty, one := "", int32(1)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &empty, &one
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[ReleasedByAnnotation] = holder
	if _, err := s.update(holder, l); err != nil {
		panic(err)
	}
}
