package member

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// harness drives one Machine by hand: the test answers its requests.
type harness struct {
	t      *testing.T
	m      *Machine
	now    time.Time
	out    Output
	rv     int
	states []LeaseState // the elections' states every step is given
}

func testConfig(identity string, leases ...string) Config {
	return Config{Group: "g", Identity: identity, Leases: leases, TTL: 15 * time.Second, Settle: 4 * time.Second,
		RequestTimeout: 2 * time.Second, Balance: true}
}

func newMachine(t *testing.T, cfg Config) *harness {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, m: m, now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), rv: 100}
	for _, l := range cfg.Leases {
		h.states = append(h.states, LeaseState{Name: l})
	}
	h.step(Start{})
	return h
}

func (h *harness) step(in Input) Output {
	h.t.Helper()
	h.out = h.m.Step(h.now, h.states, in)
	if !h.out.Wake.After(h.now) && !h.out.Stopped {
		h.t.Fatalf("Wake %v not after now %v", h.out.Wake, h.now)
	}
	return h.out
}

// answer answers the outstanding request with l (its resourceVersion
// assigned) or err.
func (h *harness) answer(l *coordinationv1.Lease, err error) Output {
	h.t.Helper()
	if l != nil {
		l = l.DeepCopy()
		h.rv++
		l.ResourceVersion = fmt.Sprint(h.rv)
		if l.UID == "" {
			l.UID = types.UID("uid-" + l.Name)
		}
	}
	return h.step(Result{Lease: l, Err: err})
}

// joined takes the harness through its member Lease's create.
func (h *harness) joined() *coordinationv1.Lease {
	h.t.Helper()
	req := h.out.Request
	if req == nil || req.Purpose != PurposeJoin || req.Verb != Create {
		h.t.Fatalf("request %+v, want the member Lease's create", req)
	}
	h.answer(req.Lease, nil)
	return h.m.own
}

// memberLease is another member's Lease as it writes it, with duration d.
func memberLease(identity string, rv int, d int32, leases ...string) coordinationv1.Lease {
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName("g", identity), UID: types.UID("uid-" + identity), ResourceVersion: fmt.Sprint(rv),
			Labels: map[string]string{Label: "g"}, Annotations: map[string]string{ServesAnnotation: EncodeServes(leases)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(identity), LeaseDurationSeconds: ptr.To(d)},
	}
}

var errTimeout = context.DeadlineExceeded

// A member creates its member Lease, labelled with the group, naming
// itself, with the Leases it serves, its priority and start time; it
// remembers when it sent the write, and renews every third of its TTL.
// A create that finds the Lease (an earlier write whose answer was lost)
// reads it and writes on it, dated from the create's send time.
func TestMemberKeepsItsMemberLease(t *testing.T) {
	cfg := testConfig("a", "orders-1", "orders-0")
	cfg.Info = Info{Priority: 7, StartedAt: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)}
	h := newMachine(t, cfg)
	req := h.out.Request
	if req == nil || req.Verb != Create || req.Name != LeaseName("g", "a") {
		t.Fatalf("first request %+v, want the member Lease's create", req)
	}
	l := req.Lease
	if holder := ptr.Deref(l.Spec.HolderIdentity, ""); holder != "a" || l.Labels[Label] != "g" || l.Annotations[ServesAnnotation] != "orders-{0..1}" ||
		l.Annotations[PriorityAnnotation] != "7" || l.Annotations[StartedAtAnnotation] != "2026-12-01T11:00:00Z" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 15 {
		t.Errorf("member Lease %+v", l)
	}
	sent := h.now
	h.now = h.now.Add(50 * time.Millisecond)
	h.answer(nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, req.Name))
	if r := h.out.Request; r == nil || r.Verb != Get {
		t.Fatalf("after AlreadyExists: %+v, want a read", r)
	}
	stored := memberLease("a", 90, 15, "orders-0")
	h.answer(&stored, nil)
	if r := h.out.Request; r == nil || r.Verb != Update || r.Lease.Annotations[ServesAnnotation] != "orders-{0..1}" || r.Lease.UID != stored.UID {
		t.Fatalf("after the read: %+v, want an update on the stored record", r)
	}
	h.answer(h.out.Request.Lease, nil)
	if at, ok := SentAt(h.out.Writes, h.m.own.ResourceVersion); !ok || !at.Equal(sent) {
		t.Errorf("Writes %+v: want the write dated from the create's send, %v", h.out.Writes, sent)
	}
	if !h.out.Wake.Equal(sent.Add(5 * time.Second)) {
		t.Errorf("wake %v, want the renewal a third of the TTL after the send, %v", h.out.Wake, sent.Add(5*time.Second))
	}
	h.now = h.out.Wake
	h.step(Tick{})
	if r := h.out.Request; r == nil || r.Purpose != PurposeRenew {
		t.Fatalf("at the renewal: %+v", r)
	}
	h.answer(nil, errTimeout)
	if h.out.Request != nil || !h.out.Wake.Equal(h.now.Add(cfg.RequestTimeout)) {
		t.Errorf("after a failed renewal: request %+v wake %v; want a retry a request timeout on", h.out.Request, h.out.Wake)
	}
}

// A member that becomes unfit deletes its member Lease, with its UID as
// precondition, and every election leaves, handing its Lease to its heir;
// back fit, it joins again. On Stop it names each election's heir and
// deletes its member Lease, then it has stopped.
func TestMemberLeavesAndStops(t *testing.T) {
	cfg := testConfig("a", "orders-0")
	cfg.Handover = true
	h := newMachine(t, cfg)
	own := h.joined()
	h.step(Listed{Items: []coordinationv1.Lease{*own, memberLease("b", 50, 15, "orders-0")}})
	h.states = []LeaseState{{Name: "orders-0", Observed: true, Leading: true, Holder: "a"}}
	h.step(Tick{})
	for _, c := range h.out.Calls {
		h.step(CandidacyDone{Lease: c.Lease})
	}
	h.step(SetFit{Fit: false, Reason: "app unhealthy"})
	if r := h.out.Request; r == nil || r.Verb != Delete || r.Preconditions == nil || ptr.Deref(r.Preconditions.UID, "") != own.UID {
		t.Fatalf("unfit: request %+v, want the member Lease's delete conditioned on its UID", r)
	}
	if c := h.out.Calls; len(c) != 1 || !c[0].Leave || c[0].To.Identity != "b" || c[0].To.Witness != "50" {
		t.Fatalf("unfit: calls %+v, want orders-0 to leave, handed to b with witness 50", c)
	}
	h.answer(nil, nil)
	h.step(SetFit{Fit: true, Reason: "app healthy"})
	if r := h.out.Request; r == nil || r.Verb != Create {
		t.Fatalf("fit again: %+v, want a create", r)
	}
	h.answer(h.out.Request.Lease, nil)
	h.step(Stop{})
	if len(h.out.Heirs) != 1 || h.out.Heirs[0].Identity != "b" {
		t.Errorf("Heirs %+v, want b", h.out.Heirs)
	}
	if r := h.out.Request; r == nil || r.Verb != Delete || h.out.Stopped {
		t.Fatalf("stopping: request %+v stopped %v; want the delete first", r, h.out.Stopped)
	}
	h.answer(nil, nil)
	if !h.out.Stopped {
		t.Error("not stopped after the delete")
	}
}

// A member Lease that nobody renews counts as a live member only for the
// smaller of its own duration and this member's TTL after this member
// observed it, whatever duration it claims (a ghost left by a hand edit,
// a restore, or a member with other timings), so it is not given Leases
// that nobody would hold.
func TestAGhostMemberLeaseStopsCountingWithinOneTTL(t *testing.T) {
	h := newMachine(t, testConfig("a", "orders-0", "orders-1"))
	own := h.joined()
	h.step(Listed{Items: []coordinationv1.Lease{*own, memberLease("ghost", 50, 2147483647, "orders-0", "orders-1")}})
	if got := h.m.members.Identities; !slices.Equal(got, []string{"a", "ghost"}) {
		t.Fatalf("members %v, want a and the ghost at first", got)
	}
	for h.now.Before(time.Date(2026, 12, 1, 12, 0, 15, 0, time.UTC)) {
		h.now = h.out.Wake
		h.step(Tick{})
		if r := h.out.Request; r != nil {
			h.answer(r.Lease, nil)
		}
	}
	if got := h.m.members.Identities; !slices.Equal(got, []string{"a"}) {
		t.Errorf("a TTL on: members %v, want only a", got)
	}
}

// The live member with the smallest identity deletes a departed member's
// Lease once it has stayed unchanged for collectAfter TTLs, with its UID
// and resourceVersion as preconditions, and counts it; never its own,
// never one whose name is not its holder's member Lease name, and never
// while another live member has a smaller identity.
func TestDepartedMembersLeasesAreCollected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		self    string
		others  []coordinationv1.Lease
		collect string // the member Lease name deleted, "" for none
	}{
		{"a crashed member", "a", []coordinationv1.Lease{memberLease("dead", 50, 15, "orders-0")}, LeaseName("g", "dead")},
		{"a ghost with a long duration", "a", []coordinationv1.Lease{memberLease("dead", 50, 2147483647, "orders-0")}, LeaseName("g", "dead")},
		{"not named after its holder", "a", []coordinationv1.Lease{func() coordinationv1.Lease {
			l := memberLease("dead", 50, 15)
			l.Name = "g-member-0000000000000000"
			return l
		}()}, ""},
		{"another live member collects", "b", []coordinationv1.Lease{memberLease("dead", 50, 15), memberLease("a", 51, 15)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newMachine(t, testConfig(tc.self, "orders-0"))
			own := h.joined()
			h.step(Listed{Items: append([]coordinationv1.Lease{*own}, tc.others...)})
			end := h.now.Add(collectAfter*15*time.Second + 10*time.Second)
			var deleted *Request
			for h.now.Before(end) && deleted == nil {
				if r := h.out.Request; r != nil {
					if r.Purpose == PurposeCollect {
						deleted = r
					} else {
						h.answer(r.Lease, nil)
					}
					continue
				}
				h.now = h.out.Wake
				if tc.self == "b" {
					h.rv++
					l := memberLease("a", h.rv, 15) // a renews
					h.step(Changed{Lease: &l})
				}
				h.step(Tick{})
			}
			if tc.collect == "" {
				if deleted != nil {
					t.Fatalf("deleted %s, want nothing collected", deleted.Name)
				}
				return
			}
			if deleted == nil || deleted.Name != tc.collect || deleted.Verb != Delete {
				t.Fatalf("deleted %+v, want %s", deleted, tc.collect)
			}
			p := deleted.Preconditions
			if p == nil || ptr.Deref(p.UID, "") != "uid-dead" || ptr.Deref(p.ResourceVersion, "") != "50" {
				t.Errorf("preconditions %+v, want the observed UID and resourceVersion", p)
			}
			h.answer(nil, nil)
			if h.out.Collected != 1 {
				t.Errorf("Collected %d, want 1", h.out.Collected)
			}
			if _, ok := h.m.records[tc.collect]; ok {
				t.Error("the collected record is still kept")
			}
		})
	}
}

// A balanced member asks each election for its share, one call in flight
// per election: a change of plan waits for the call under way to return.
func TestPlanCallsOneAtATimePerElection(t *testing.T) {
	h := newMachine(t, testConfig("a", "orders-0", "orders-1"))
	own := h.joined()
	states := []LeaseState{{Name: "orders-0", Observed: true}, {Name: "orders-1", Observed: true}}
	h.step(Listed{Items: []coordinationv1.Lease{*own}})
	h.states = states
	h.step(Tick{})
	if c := h.out.Calls; len(c) != 2 || !c[0].Candidate || !c[1].Candidate {
		t.Fatalf("alone: calls %+v, want both Leases campaigned for", c)
	}
	b := memberLease("b", 60, 15, "orders-0", "orders-1")
	h.step(Changed{Lease: &b})
	if c := h.out.Calls; len(c) != 0 {
		t.Fatalf("b joined while the calls are under way: calls %+v, want none", c)
	}
	h.step(CandidacyDone{Lease: 1})
	if c := h.out.Calls; len(c) != 1 || c[0].Lease != 1 || c[0].Candidate {
		t.Fatalf("calls %+v, want orders-1 withdrawn (b's share)", c)
	}
	h.step(CandidacyDone{Lease: 0})
	if c := h.out.Calls; len(c) != 0 {
		t.Errorf("calls %+v, want none: orders-0 is a's", c)
	}
}
