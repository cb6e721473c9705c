package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/overlap"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// ans is an answer at ms holding the Leases whose index is in held, of n.
func ans(ms, n int, held ...int) lgAnswer {
	a := lgAnswer{at: at(ms), leading: make([]bool, n)}
	for _, i := range held {
		a.leading[i] = true
	}
	return a
}

// The group has settled at the first answer after which every member's
// latest answer holds exactly its quota; a member yet to answer keeps it
// unsettled.
func TestSettledTime(t *testing.T) {
	members := [][]lgAnswer{
		{ans(0, 4, 0, 1, 2, 3), ans(30, 4, 1, 2, 3), ans(50, 4, 2, 3)},
		{ans(10, 4), ans(40, 4, 0)},
	}
	if _, ok := settledTime(members, 2); ok {
		t.Fatal("settled while the second member holds 1")
	}
	members[1] = append(members[1], ans(60, 4, 0, 1))
	got, ok := settledTime(members, 2)
	if !ok || !got.Equal(at(60)) {
		t.Fatalf("settledTime = %v, %v; want %v", got, ok, at(60))
	}
	if _, ok := settledTime(append(members, nil), 2); ok {
		t.Fatal("settled although a member never answered")
	}
}

// A Lease is held again at the first answer, from any other member, at or
// after the fault, that holds it.
func TestReheldAt(t *testing.T) {
	others := [][]lgAnswer{
		{ans(0, 3, 0), ans(20, 3, 1), ans(90, 3, 1, 2)},
		{ans(5, 3), ans(70, 3, 2)},
	}
	for _, c := range []struct {
		lease int
		want  time.Time
		ok    bool
	}{{1, at(20), true}, {2, at(70), true}, {0, at(10), false}} {
		got, ok := reheldAt(others, c.lease, at(10))
		if ok != c.ok || (ok && !got.Equal(c.want)) {
			t.Errorf("lease %d: reheldAt = %v, %v; want %v, %v", c.lease, got, ok, c.want, c.ok)
		}
	}
}

// A move is a version naming a holder other than the last one named; a
// release in between does not end it, renewals and first acquisitions are
// none, and only the given Leases in the window count.
func TestCountMoves(t *testing.T) {
	shards := map[string]bool{"s-0": true, "s-1": true}
	ev := func(ms int, lease, holder string) leaseEvent {
		return leaseEvent{at: at(ms), lease: lease, holder: holder}
	}
	events := []leaseEvent{
		ev(0, "s-0", ""), ev(1, "s-0", "a"), ev(2, "s-1", "a"), // first acquisitions
		ev(5, "s-0", "a"),                     // renewal
		ev(10, "s-0", ""), ev(11, "s-0", "b"), // release, then taken: one move
		ev(12, "s-1", "b"),                 // taken without release: one move
		ev(13, "m", "x"), ev(14, "m", "y"), // not a shard
		ev(30, "s-1", "a"), // after the window
	}
	if got := countMoves(events, shards, at(3), at(20)); got != 2 {
		t.Errorf("countMoves = %d, want 2", got)
	}
	if got := countMoves(events, shards, at(11), at(40)); got != 3 {
		t.Errorf("countMoves from 11ms = %d, want 3", got)
	}
	if got, ok := releaseAt(events, "s-0", "a", at(6)); !ok || !got.Equal(at(10)) {
		t.Errorf("releaseAt = %v, %v; want %v", got, ok, at(10))
	}
	if got, ok := releaseAt(events, "s-1", "a", at(6)); !ok || !got.Equal(at(12)) { // handed over in one write
		t.Errorf("releaseAt of a handover = %v, %v; want %v", got, ok, at(12))
	}
}

// Changes after settling are the Leases whose holding differs, in a later
// answer of any member, from that member's state at the settling instant.
func TestChangedAfter(t *testing.T) {
	members := [][]lgAnswer{
		{ans(0, 3, 0, 1), ans(10, 3, 0), ans(50, 3, 0, 2)},
		{ans(5, 3, 2), ans(40, 3), ans(60, 3, 1)},
	}
	if got := changedAfter(members, at(10), at(45)); got != 1 {
		t.Errorf("changedAfter(10ms, 45ms) = %d, want 1 (Lease 2 left the second member)", got)
	}
	if got := changedAfter(members, at(10), at(100)); got != 2 {
		t.Errorf("changedAfter(10ms, 100ms) = %d, want 2", got)
	}
}

func fakeGroups() lgFigures {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	held := func(v ...int) []int { return v }
	return lgFigures{
		ran: true, leases: 64, members: 4, trials: 2,
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second,
		window: 15 * time.Second, sampleInterval: 25 * time.Millisecond,
		impls: []lgImpl{
			{
				name: "leasehold",
				trials: []lgTrial{
					{settled: 4 * time.Second, settledOK: true, observed: 15 * time.Second, moves: 48, held: held(16, 16, 16, 16)},
					{settled: 5 * time.Second, settledOK: true, observed: 15 * time.Second, moves: 48, held: held(16, 16, 16, 16)},
				},
				graceful: ms(40, 60, 150), gracefulToRelease: ms(20, 30, 40), gracefulFromRelease: ms(20, 30, 110),
				crash: ms(14000, 15000), gracefulHeld: held(16, 16), crashHeld: held(16, 16), leaseTrials: 128, samples: 1000,
				requests: lgRequests{window: 30 * time.Second, members: 4, held: 64, total: 984, renewals: 960,
					byVerb: map[string]float64{"update": 984}, shardWrites: 960, memberWrites: 24},
				probe: ms(5, 6, 7),
			},
			{
				name: "client-go LeaderElector",
				trials: []lgTrial{
					{observed: 15 * time.Second, held: held(64, 0, 0, 0)},
					{observed: 15 * time.Second, held: held(64, 0, 0, 0)},
				},
				graceful: ms(900, 2000), crash: ms(16000, 18000), gracefulHeld: held(64, 64), crashHeld: held(22, 21), leaseTrials: 128,
				requests: lgRequests{window: 30 * time.Second, members: 4, held: 64, total: 2760, byVerb: map[string]float64{"get": 1800, "update": 960}},
			},
		},
		big: lgBig{ran: true, leases: 256, window: 10 * time.Second, windows: 3, impls: []lgBigImpl{
			{name: "leasehold", held: []int{0, 80, 40}, mem: []memSample{{43 << 20, 20 << 20}}, cpu: 2 * time.Second, cpuWindow: 30 * time.Second, cpuShares: []float64{0.09, 0.0667, 0.04}, byVerb: map[string]float64{"update": 1000}, errors: 140},
			{name: "client-go LeaderElector", held: []int{256, 256}, allAfter: 8 * time.Second, mem: []memSample{{36 << 20, 20 << 20}}, cpu: time.Second, cpuWindow: 30 * time.Second, cpuShares: []float64{0.0333, 0.03, 0.04}},
		}},
	}
}

// The section judges each target from the figures and says which missed.
func TestGroupsMarkdown(t *testing.T) {
	r := newReport(options{command: "cd bench && go run . -only groups"}, nil, httpFigures{}, appFigures{}, footprintFigures{})
	r.groups = fakeGroups()
	md := r.markdown("")
	for _, want := range []string{
		groupsHeading,
		"| 4s (4s–5s) | never, in 2 of 2 (observed 15s after the last start) |  | ≤ 2 × leaseDuration = 30s | met (every trial) |",
		"| 48 (48–48) | 0 (0–0) |  | exactly 48 | met (every trial) |",
		"| 1.00 (1.00–1.00) | 4.00 (4.00–4.00) | 4.00× | 1.0 (client-go: expect 4.0) | met (every trial) |",
		"| 16 16 16 16; 16 16 16 16 | 64 0 0 0; 64 0 0 0 |",
		"| p99 ≤ 100ms | **missed**: p99 150ms |",
		"| ≤ leaseDuration + retryPeriod = 17s (max) | met |",
		"| 0 of 128 | 0 of 128 |  | 0 | met |",
		"| 1968 / 1968 | 5520 / 5520 | 2.80× |",
		"| met (within 0.0 %) |",
		"| **missed**: 0–80 of 256 |",
		"| … CPU, of one core: median (min–max) of 3 consecutive windows of 10s, both processes in the same windows | 6.67 % (4.00–9.00) | 3.33 % (3.00–4.00) | 0.50× | ≤ 5 % (median) | **missed**: no steady state (it held 0–80 of 256, the row below); 6.67 % meanwhile |",
		"never all 256 within 45s of its start",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// With every Lease held through the window, RSS and CPU are judged against
// their targets.
func TestGroupsMarkdownSteadyBigGroup(t *testing.T) {
	r := newReport(options{command: "cd bench && go run . -only groups"}, nil, httpFigures{}, appFigures{}, footprintFigures{})
	r.groups = fakeGroups()
	r.groups.big.impls[0].held = []int{256, 256, 256}
	r.groups.big.impls[0].allAfter = 20 * time.Second
	md := r.markdown("")
	for _, want := range []string{
		"| 43.0 MiB | 36.0 MiB | 0.84× | ≤ 60 MiB | met |",
		"| ≤ 5 % (median) | **missed**: 6.67 % |",
		"| 256 / 256 / 256; all 256 after 20s |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
}

// The groups section judges each Lease by internal/testing/overlap; the
// baseline's samples carry no token, and its term stands in for one, so
// two terms of one member with another's term between them are not one
// run, while a sample inside a member's certain span is an overlap.
func TestGroupOverlapsTellBaselineTermsApart(t *testing.T) {
	a, b := &fleet.Instance{Name: "a"}, &fleet.Instance{Name: "b"}
	smp := func(inst *fleet.Instance, ms int, leader bool, term int32) sample {
		return sample{inst: inst, sent: at(ms), received: at(ms + 1), leader: leader, term: term}
	}
	handedOver := []sample{
		smp(a, 0, true, 1), smp(a, 2, true, 1), // a's first term
		smp(b, 8, true, 1), smp(b, 10, true, 1), // b's term, certainly from 9ms to 10ms
		smp(a, 20, true, 2), smp(a, 22, true, 2), // a's second term
	}
	if overlaps(handedOver) {
		t.Error("two terms of one member, told apart by their term, were taken for one run spanning another member's term")
	}
	both := append(handedOver, smp(a, 9, true, 1))
	if pairs := overlap.Check(observations(both)); len(pairs) != 1 || pairs[0].A.Member != a || pairs[0].B.Member != b {
		t.Errorf("a's first term extended into b's certain span: pairs = %+v, want one, a then b", pairs)
	}
	withTokens := []sample{
		{inst: a, sent: at(0), received: at(1), leader: true, token: 7, term: 3},
		{inst: a, sent: at(10), received: at(11), leader: true, token: 7, term: 3},
		{inst: b, sent: at(4), received: at(5), leader: true, token: 8, term: 4},
	}
	if !overlaps(withTokens) {
		t.Error("b's sample inside a's certain span under one token is no overlap")
	}
}

// An overlap's evidence names each run's member and token, its certain
// span or its window, and what ended it, in trial time.
func TestDescribeRun(t *testing.T) {
	a, b := &fleet.Instance{Name: "a"}, &fleet.Instance{Name: "b"}
	tr := &lgRun{begun: t0, watch: &leaseWatch{}}
	samples := []sample{
		{inst: a, sent: at(0), received: at(1), leader: true, token: 7},
		{inst: a, sent: at(10), received: at(11), leader: true, token: 7},
		{inst: a, sent: at(20), received: at(21), leader: false},
		{inst: b, sent: at(4), received: at(5), leader: true, token: 8},
	}
	pairs := overlap.Check(observations(samples))
	if len(pairs) != 1 {
		t.Fatalf("pairs = %+v, want one", pairs)
	}
	if got, want := tr.describeRun(pairs[0].A), "a answered leader:true under token 7 in 2 sample(s), so led throughout 1ms–10ms (first received, last sent), until a sample sent 20ms said leader=false token 0"; got != want {
		t.Errorf("describeRun(A) = %q, want %q", got, want)
	}
	if got, want := tr.describeRun(pairs[0].B), "b answered leader:true under token 8 in 1 sample(s), so led at some unknown instant of 4ms–5ms (first sent, last received)"; got != want {
		t.Errorf("describeRun(B) = %q, want %q", got, want)
	}
	tr.overlapDump("orders-0", samples, pairs[0]) // logs; must not need a running watch
}
