package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
)

// A term's tokens are the resourceVersion of the write that acquired it
// (its holder differs from the version before, a release included) and
// what the holder published; renewals add no other token, and other Leases
// (member Leases) do not count.
func TestTermTokens(t *testing.T) {
	ev := func(lease, holder, rv string, token api.FencingToken) leaseEvent {
		return leaseEvent{lease: lease, holder: holder, rv: rv, token: token}
	}
	events := []leaseEvent{
		ev("bench", "", "10", 0),   // created empty
		ev("bench", "a", "12", 0),  // a acquires: 12
		ev("bench", "a", "15", 12), // renewal, publishes 12
		ev("bench-member-x", "b", "16", 0),
		ev("bench", "", "20", 0),   // released
		ev("bench", "b", "21", 0),  // b acquires: 21
		ev("bench", "c", "30", 0),  // c takes it without a release: 30
		ev("bench", "c", "31", 30), // publishes
		ev("bench", "", "40", 0),
		ev("bench", "c", "41", 0), // c again after its own release: 41
	}
	got := termTokens(events, "bench")
	want := map[string][]api.FencingToken{"a": {12}, "b": {21}, "c": {30, 41}}
	if len(got) != len(want) {
		t.Fatalf("termTokens = %v, want %v", got, want)
	}
	for holder, tokens := range want {
		if len(got[holder]) != len(tokens) {
			t.Errorf("%s: %v, want %v", holder, got[holder], tokens)
		}
		for _, tok := range tokens {
			if !got[holder][tok] {
				t.Errorf("%s: %v lacks %d", holder, got[holder], tok)
			}
		}
	}
}

// A request is stale when another app had served a larger token before it
// arrived; one without a token, or under a token of another member's
// terms, is counted too; direct requests are not judged.
func TestJudgeFencing(t *testing.T) {
	req := func(app, ms int, token api.FencingToken) servedReq {
		return servedReq{app: app, at: at(ms), token: token}
	}
	own := map[int]map[api.FencingToken]bool{0: {5: true}, 1: {9: true}, 2: {}}
	clean := []servedReq{req(0, 0, 5), req(0, 10, 5), req(1, 20, 9), req(1, 30, 9), {app: 0, at: at(40), direct: true}}
	if v := judgeFencing(clean, own); v.judged != 4 || v.direct != 1 || v.stale+v.noToken+v.notOwn != 0 || v.tokens != 2 || v.apps != 3 {
		t.Errorf("a clean handover: %+v", v)
	}
	deposed := append(clean, req(0, 25, 5), req(2, 50, 0), req(2, 60, 9))
	v := judgeFencing(deposed, own)
	if v.stale != 1 || v.noToken != 1 || v.notOwn != 1 || v.judged != 7 {
		t.Errorf("the deposed leader's app serving after the successor's, an app with no token, an app under another's token: %+v, want 1 stale, 1 without, 1 not its own", v)
	}
}

// The refusal window runs from the first refused request sent through a
// proxy other than the old leader's to the last one answered; the old
// leader's own proxy and the served requests do not widen it.
func TestSummarizeLoad(t *testing.T) {
	o := func(old bool, sent, answered, code int) proxyOutcome {
		return proxyOutcome{viaOld: old, sent: at(sent), answered: at(answered), code: code}
	}
	got := summarizeLoad([]proxyOutcome{
		o(false, 0, 1, http.StatusOK),
		o(true, 2, 3, http.StatusServiceUnavailable), // the old leader's proxy
		o(false, 10, 12, http.StatusServiceUnavailable),
		o(false, 11, 14, http.StatusBadGateway),
		o(false, 20, 25, http.StatusServiceUnavailable),
		o(false, 26, 27, http.StatusOK),
		o(true, 30, 31, 0), // the old leader's proxy, gone
		o(false, 40, 41, 0),
	})
	want := hoProxyTrial{window: 15 * time.Millisecond, refused503: 2, refused502: 1, served: 2, oldRefused: 1, errors: 1}
	if got != want {
		t.Errorf("summarizeLoad = %+v, want %+v", got, want)
	}
	if got := summarizeLoad([]proxyOutcome{o(false, 0, 1, http.StatusOK)}); got.window != 0 {
		t.Errorf("no refusal: window %v, want 0", got.window)
	}
}

func fakeHandover() hoFigures {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	us := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Microsecond)
		}
		return d
	}
	return hoFigures{
		ran: true, trials: 4, leaseDuration: 5 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: time.Second,
		rollouts: []hoRollout{
			{name: hoImpls[0], changes: []int{1, 1, 1, 1}, handovers: ms(20, 30, 40, 50), toNewest: 4, addrLag: ms(1, 2, 3, 4, 5, 6, 7, 8)},
			{name: hoImpls[1], changes: []int{1, 2, 3, 2}, handovers: ms(20, 25, 30, 35), toNewest: 1, addrLag: ms(2, 3), addrNone: 1},
			{name: hoImpls[2], changes: []int{2, 1, 2, 2}, handovers: ms(900, 1500, 2000, 2500), toNewest: 2},
		},
		releases: ms(10, 20, 30), releaseAddrLag: ms(1, 150), releaseOther: 1,
		direct: us(100, 100, 100, 300), viaLeader: us(250, 250, 250, 900), viaFollower: us(400, 400, 400, 1500),
		inProcess:   hoOverhead{ran: true, requests: 4, direct50: 80 * time.Microsecond, direct99: 200 * time.Microsecond, proxied50: 150 * time.Microsecond, proxied99: 400 * time.Microsecond},
		proxyTrials: []hoProxyTrial{{handover: 40 * time.Millisecond, window: 30 * time.Millisecond, refused503: 5, served: 100}, {handover: 50 * time.Millisecond, window: 20 * time.Millisecond, refused503: 3, refused502: 1, served: 90}},
		fencing:     fencingVerdict{judged: 1000, direct: 4, apps: 5, tokens: 3},
	}
}

// The section judges each target from the figures and says which missed.
func TestHandoverMarkdown(t *testing.T) {
	r := newReport(options{command: "cd bench && go run . -only handover"}, nil, httpFigures{}, appFigures{}, footprintFigures{})
	r.handover = fakeHandover()
	md := r.markdown("")
	for _, want := range []string{
		handoverHeading,
		"| mean 1.00; exactly 1 in 4 of 4 (1–1) | mean 2.00; exactly 1 in 1 of 4 (1–3) | mean 1.75; exactly 1 in 1 of 4 (1–2) | exactly 1 in every rollout (with successor) | met (4 of 4) |",
		"| 30ms / 50ms / 50ms (n=4); to the newest pod in 4 of 4 |",
		"| ≤ 50ms p50 | met |",
		"| 20ms / 30ms / 30ms (n=3); another member led in 1, no one in 0 | — (409 `handover_unavailable`) | — | ≤ 50ms p50 | **missed**: p50 20ms; named member led in 3 of 4 |",
		"| 4ms / 8ms / 8ms (n=8); wrong address 0, none 0 | 2ms / 3ms / 3ms (n=2); wrong address 0, none 1 | — (no address) | ≤ 100ms (p99), correct | met |",
		"| **missed**: p99 150ms; wrong 0, none 0 |",
		"| 100µs / 300µs; 250µs / 900µs; 400µs / 1.5ms |",
		"| 150µs / 600µs | — | — | ≤ 200µs / ≤ 2ms | met |",
		"| 300µs / 1.2ms | — | — |  |  |",
		"added 70µs / 200µs",
		"| refused for 20ms / 30ms; handover 40ms / 50ms; trials with refusals 2 of 2, window longer than its own handover in 0 |",
		"| no longer than the handover (p50 and max) | met |",
		"| 8 / 1; 190; 0; 0 |",
		"| 0; 0; 0 of 1000 (3 tokens; 4 direct requests not judged) | — | — | 0 | met |",
		"| 0; 0 | 0; 0 | 0; 0 | 0; 0 | met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
}

// Missed targets say so, with the figure.
func TestHandoverMarkdownMissed(t *testing.T) {
	r := newReport(options{command: "cd bench && go run . -only handover"}, nil, httpFigures{}, appFigures{}, footprintFigures{})
	f := fakeHandover()
	f.rollouts[0].changes = []int{1, 2, 1, 1}
	f.rollouts[0].handovers = []time.Duration{60 * time.Millisecond, 70 * time.Millisecond}
	f.rollouts[0].misses, f.rollouts[0].toNewest = 1, 2
	f.viaLeader[0], f.viaLeader[1] = 400*time.Microsecond, 400*time.Microsecond // p50 added 300µs
	f.proxyTrials[0].window = 80 * time.Millisecond
	f.fencing.stale, f.fencing.notOwn = 2, 1
	r.handover = f
	md := r.markdown("")
	for _, want := range []string{
		"| **missed**: exactly 1 in 3 of 4 |",
		"| ≤ 50ms p50 | **missed**: p50 60ms; 1 with no successor |",
		"| ≤ 200µs / ≤ 2ms | **missed**: 300µs / 600µs |",
		"window longer than its own handover in 1 |",
		"| **missed**: refused for 20ms / 80ms, handover 40ms / 50ms |",
		"| 2; 0; 1 of 1000 (3 tokens; 4 direct requests not judged) | — | — | 0 | **missed**: 2; 0; 1 |",
		"| 1; 0 | 0; 0 | 0; 0 | 0; 0 | **missed**: 1; 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
}
