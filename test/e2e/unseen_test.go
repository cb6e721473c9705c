package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// Scenarios 12 to 15: hand edits that a candidate cannot judge from what it
// sees now, because it has not seen what came before (a fresh candidate, a
// candidate whose news is stale, a hand-shortened duration), and a Lease
// namespace that does not exist yet. The rules they check are those of
// internal/elect/decide's safety contract.

// waitRule is a lower bound on when terms may start: every term of m (of
// any member when m is nil) with a token above above must have been
// acquired at notBefore or later. finish checks it over all samples.
type waitRule struct {
	m         *member
	above     fence.Token
	notBefore time.Time
	why       string
}

// mustWait adds a waitRule to the trial.
func (e *env) mustWait(m *member, above fence.Token, notBefore time.Time, why string) {
	e.waits = append(e.waits, waitRule{m: m, above: above, notBefore: notBefore, why: why})
}

// checkWaits reports each term (member, token) that started before a rule
// allows.
func checkWaits(samples []sample, rules []waitRule) []violation {
	var vs []violation
	type key struct {
		m    *member
		tok  fence.Token
		rule int
	}
	seen := map[key]bool{}
	for _, s := range samples {
		if !s.st.Leader {
			continue
		}
		for i, r := range rules {
			k := key{s.m, s.st.FencingToken, i}
			if (r.m != nil && s.m != r.m) || s.st.FencingToken <= r.above || !s.acquiredAt.Before(r.notBefore) || seen[k] {
				continue
			}
			seen[k] = true
			vs = append(vs, violation{other, fmt.Sprintf("%s acquired at %s, %v before %s: %s; %s",
				s.m.Name, clock(s.acquiredAt), r.notBefore.Sub(s.acquiredAt).Round(time.Millisecond), clock(r.notBefore), r.why, s)})
		}
	}
	return vs
}

// running returns the running members.
func (e *env) running() []*member {
	var out []*member
	for _, m := range e.members {
		if m.running() {
			out = append(out, m)
		}
	}
	return out
}

// blankHolder empties the Lease's holder by hand, as an admin would, without
// the release signature only a holder writes.
func (e *env) blankHolder() {
	e.t.Helper()
	e.editLease(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("") })
}

// awaitWatchDown waits until m reports that its Lease watch is down
// (leasehold_watch_up 0): from then on it learns the Lease's state only from
// a fresh read, not from a replay of the writes it missed. How soon is the
// HTTP/2 client's business (about 2s with dropDeadLinks), not leasehold's:
// a precondition, waited for generously.
func (e *env) awaitWatchDown(m *member, since time.Time) {
	e.t.Helper()
	var err error
	poll.UntilReport(e.t, time.Until(since.Add(generousWait)), 20*time.Millisecond, m.Name+"'s watch down after its link was cut", func() bool {
		var metrics fleet.Metrics
		ctx, cancel := context.WithTimeout(e.ctx, time.Second)
		metrics, err = m.Metrics(ctx)
		cancel()
		return err == nil && metrics["leasehold_watch_up"] != nil && metrics.Sum("leasehold_watch_up", nil) == 0
	}, func() string {
		return fmt.Sprintf("still up %v after the cut (metrics error: %v)", time.Since(since), err)
	})
	e.t.Logf("%s: its watch is down %v after its link was cut", m.Name, time.Since(since).Round(time.Millisecond))
}

// dropDeadLinks makes a sidecar's client close its HTTP/2 connection to the
// apiserver about two seconds into a partition (a PING after 1s without a
// frame, unanswered for 1s), as client-go does by default after 30s + 15s.
// A cut link then ends the watch, and the sidecar learns only what a read
// shows after the heal; without it the proxy would replay, on the heal, the
// watch events it held, and the sidecar would miss nothing.
var dropDeadLinks = []string{"HTTP2_READ_IDLE_TIMEOUT_SECONDS=1", "HTTP2_PING_TIMEOUT_SECONDS=1"}

// 12. A Lease deleted, then emptied, by hand while its holder is cut off,
// and a fresh candidate started after the edit. The holder cannot see the
// edit and rightly claims leadership until its validUntil; the fresh
// candidate has never seen it. (a) a leads alone; its link is cut, the
// Lease deleted, and a fresh b started: b is the only instance that can act.
// It must not lead before a's validity ended (observer: no overlap), nor
// before a full lease duration after its start (it creates an empty
// placeholder and acquires that a lease duration later), and leads within
// freshBound of being ready. (b) The same with the holder emptied: b leads
// and a watches; both are cut off, the holder blanked, a fresh c started.
// Then everyone heals: exactly one leads.
func TestHandEditFreshCandidate(t *testing.T) {
	runScenario(t, "12 hand edit + fresh candidate", func(e *env) {
		e.start("a")
		e.awaitOneLeader(steady)
		editThenFresh(e, "Lease deleted", e.deleteLease, "b")
		editThenFresh(e, "holder emptied", e.blankHolder, "c")
		e.awaitOneLeader(handoverBound)
	})
}

// editThenFresh cuts every running member off (the leader, so that it
// cannot see the edit, and the others, so that only the fresh candidate can
// act), edits the Lease by hand, starts the fresh sidecar name, waits for
// it to lead, and heals everyone once the leader's term has run out.
func editThenFresh(e *env, what string, edit func(), name string) {
	e.t.Helper()
	leader, st := e.awaitOneLeader(handoverBound)
	deaf := e.running()
	for _, m := range deaf {
		m.Proxy.Cut()
	}
	at := time.Now()
	edit()
	started := time.Now()
	fresh := e.start(name)
	ready := time.Now()
	e.mustWait(fresh, 0, started.Add(leaseDuration),
		"a fresh candidate may take a Lease only a full lease duration after it first observed it")
	e.t.Logf("%s while %s (and everyone else) was cut off; fresh %s ready %v after the edit",
		what, leader.Name, fresh.Name, ready.Sub(at).Round(time.Millisecond))
	s := e.awaitTerm(at, st.FencingToken, ready.Sub(at)+freshBound, fresh)
	e.recovered(what+" while the holder is cut off; fresh "+fresh.Name+" ready → leads", s.recv.Sub(ready), freshBound)
	if gap := s.acquiredAt.Sub(started); gap < leaseDuration {
		e.t.Errorf("fresh %s acquired %v after its start, before a full lease duration (%v)", fresh.Name, gap, leaseDuration)
	}
	// Keep them cut off until the old term has run out, as a partition would.
	e.awaitPromisesOver(leader, at.Add(renewDeadline+schedulingSlack))
	healed := time.Now()
	for _, m := range deaf {
		m.Proxy.Heal()
	}
	for _, m := range deaf {
		e.awaitSample(m, healed, failoverBound, "healed member sees the fresh leader", func(o sample) bool {
			return !o.st.Leader && o.st.Holder == fresh.identity
		})
	}
}

// 13. Stale claims. Two sidecars whose clients drop a dead link after
// about 2s (dropDeadLinks), so that a cut-off sidecar misses what happened
// meanwhile instead of having it replayed. (c) The candidate is cut off for
// longer than leaseDuration while the leader keeps renewing: the leader's
// record it last saw has long expired. Then the leader is cut off, the
// Lease emptied by hand, and the candidate healed: it must not take the
// Lease before the leader's validity ended (observer: no overlap), nor
// before a lease duration after the edit, and leads within staleBound. The
// same again, roles swapped, with the Lease deleted. (d) An own stale claim:
// x leads, x is cut off, y takes over (x never learns of it), y is cut off,
// the Lease deleted, x healed: the last record x saw is its own, yet it
// must not lead while y is still valid. Then everyone heals: exactly one
// leads.
func TestStaleClaims(t *testing.T) {
	runScenario(t, "13 stale claims", func(e *env) {
		e.cfg.Env = append(slices.Clone(e.cfg.Env), dropDeadLinks...)
		e.start("a")
		e.start("b")
		staleCandidate(e, "emptied", e.blankHolder)
		staleCandidate(e, "deleted", e.deleteLease)
		ownStaleClaim(e)
		e.awaitOneLeader(handoverBound)
	})
}

// staleFor is how long the candidate of scenario 13 (c) is cut off before
// the edit: longer than leaseDuration (the fault's duration).
const staleFor = leaseDuration + retryPeriod

// staleCandidate is scenario 13 (c) once, with edit emptying or deleting
// the Lease.
func staleCandidate(e *env, what string, edit func()) {
	e.t.Helper()
	leader, st := e.awaitOneLeader(steady)
	cand := e.others(leader)[0]
	cut := time.Now()
	cand.Proxy.Cut()
	e.awaitWatchDown(cand, cut)
	time.Sleep(time.Until(cut.Add(staleFor))) // the fault's duration
	if now, nst := e.awaitOneLeader(handoverBound); now != leader || nst.FencingToken != st.FencingToken {
		e.t.Fatalf("while %s was cut off, %s leads with token %d; want %s to keep renewing its term (token %d)",
			cand.Name, now.Name, nst.FencingToken, leader.Name, st.FencingToken)
	}
	if cst, _, _, err := e.statusNow(cand); err == nil {
		observed, _ := parseTime(cst.ObservedAt)
		e.t.Logf("%s, cut off for %v, last observed a new version of the Lease %v ago (holder %q)",
			cand.Name, time.Since(cut).Round(time.Millisecond), time.Since(observed).Round(time.Millisecond), cst.Holder)
	}
	leader.Proxy.Cut()
	at := time.Now()
	edit()
	cand.Proxy.Heal()
	e.mustWait(cand, st.FencingToken, at.Add(leaseDuration),
		"a candidate whose news of the holder is stale may take a Lease "+what+" by hand only a full lease duration after it observed that")
	s := e.awaitTerm(at, st.FencingToken, staleBound, cand)
	e.recovered("Lease "+what+" while the leader is cut off, stale candidate healed → "+s.m.Name+" leads", s.recv.Sub(at), staleBound)
	e.awaitPromisesOver(leader, at.Add(renewDeadline+schedulingSlack))
	healed := time.Now()
	leader.Proxy.Heal()
	e.awaitSample(leader, healed, failoverBound, "healed old leader sees the successor", func(o sample) bool {
		return !o.st.Leader && o.st.Holder == cand.identity
	})
}

// ownStaleClaim is scenario 13 (d).
func ownStaleClaim(e *env) {
	e.t.Helper()
	x, st := e.awaitOneLeader(steady)
	y := e.others(x)[0]
	cut := time.Now()
	x.Proxy.Cut()
	s := e.awaitTerm(cut, st.FencingToken, failoverBound, y)
	e.recovered("leader "+x.Name+" cut off → "+y.Name+" leads", s.recv.Sub(cut), failoverBound)
	// x's link is dead before the heal, so x never hears of y's term.
	e.awaitWatchDown(x, cut)
	if xst, _, _, err := e.statusNow(x); err == nil {
		e.t.Logf("%s, cut off, believes the Lease's holder is %q (itself: %v)", x.Name, xst.Holder, xst.Holder == x.identity)
	}
	y.Proxy.Cut()
	at := time.Now()
	e.deleteLease()
	x.Proxy.Heal()
	e.mustWait(x, s.st.FencingToken, at.Add(leaseDuration),
		"an instance whose own record was the last it saw may take a Lease deleted by hand only a full lease duration after it observed that")
	s2 := e.awaitTerm(at, s.st.FencingToken, staleBound, x)
	e.recovered("Lease deleted while "+y.Name+" is cut off, "+x.Name+" healed → "+s2.m.Name+" leads", s2.recv.Sub(at), staleBound)
	e.awaitPromisesOver(y, at.Add(renewDeadline+schedulingSlack))
	healed := time.Now()
	y.Proxy.Heal()
	e.awaitSample(y, healed, failoverBound, "healed leader sees the successor", func(o sample) bool {
		return !o.st.Leader && o.st.Holder == x.identity
	})
}

// 14. leaseDurationSeconds shortened by hand to 1 (holder unchanged) while
// the holder is cut off. The holder cannot see it and rightly claims
// leadership until its validUntil; the watching candidates and a fresh one
// started after the edit must not take the Lease before then (observer: no
// overlap), nor before a full lease duration after the edit: a claim's
// expiry never moves earlier. One leads within failoverBound of the edit;
// after the heal exactly one leads.
func TestLeaseDurationShortened(t *testing.T) {
	runScenario(t, "14 lease duration shortened", func(e *env) {
		e.startFleet()
		leader, st := e.awaitOneLeader(steady)
		leader.Proxy.Cut()
		cut := time.Now()
		sent, written := e.editLease(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](1) })
		if h := ptr.Deref(written.Spec.HolderIdentity, ""); h != leader.identity {
			e.t.Fatalf("the shortened Lease names %q, want the cut-off leader %q", h, leader.identity)
		}
		e.mustWait(nil, st.FencingToken, sent.Add(leaseDuration),
			"a hand-shortened leaseDurationSeconds changes nothing: the holder's record expires a full lease duration after it was observed")
		started := time.Now()
		fresh := e.start("d")
		e.mustWait(fresh, 0, started.Add(leaseDuration),
			"a fresh candidate may take a Lease only a full lease duration after it first observed it")
		e.t.Logf("leaseDurationSeconds set to 1 %v after %s was cut off; fresh %s ready %v after the edit",
			sent.Sub(cut).Round(time.Millisecond), leader.Name, fresh.Name, time.Since(sent).Round(time.Millisecond))
		s := e.awaitTerm(sent, st.FencingToken, failoverBound, e.others(leader)...)
		e.recovered("leaseDurationSeconds 1 while the holder is cut off → "+s.m.Name+" leads", s.recv.Sub(sent), failoverBound)
		e.awaitPromisesOver(leader, cut.Add(renewDeadline+schedulingSlack))
		healed := time.Now()
		leader.Proxy.Heal()
		e.awaitSample(leader, healed, failoverBound, "healed old leader sees the successor", func(o sample) bool {
			return !o.st.Leader && o.st.Holder == s.m.identity
		})
		e.awaitOneLeader(handoverBound)
	})
}

// 15. The Lease's namespace does not exist. Two sidecars name it
// (LEASEHOLD_LEASE_NAMESPACE), with timings of their own (ns* in
// main_test.go). They must not spin: each refused Create (404) comes at
// least the backoff after the one before (nsRetryPeriod doubling up to
// nsMaxBackoff; see nsRefusalsAllowed); each logs the failure once, naming
// the namespace; /v1/status shows lastError naming it and lastErrorAt; the
// error counter counts the failures; /readyz answers whatever it answers
// (logged). When the namespace is then created, one of them creates the
// empty placeholder, and one leads a lease duration after it was created,
// within nsBound, with lastError null.
func TestNamespaceMissing(t *testing.T) {
	runScenario(t, "15 namespace missing", func(e *env) {
		missing := e.cfg.Namespace + "-late" // the trial's namespace exists; this one not yet
		e.cfg.Namespace = missing
		e.cfg.LeaseDuration, e.cfg.RenewDeadline, e.cfg.RetryPeriod = nsLeaseDuration, nsRenewDeadline, nsRetryPeriod
		leases := e.watchLease()
		ms := []*member{e.start("a"), e.start("b")}

		type counts struct {
			refused, creates, errors, all float64
			sent, recv                    time.Time // the scrape's, on this process's clock
		}
		scrape := func(m *member) counts {
			e.t.Helper()
			ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
			defer cancel()
			sent := time.Now()
			metrics, err := m.Metrics(ctx)
			if err != nil {
				e.t.Fatalf("%s: %v", m.Name, err)
			}
			return counts{
				refused: metrics.Sum("leasehold_kube_requests_total", map[string]string{"verb": "create", "code": "404"}),
				creates: metrics.Sum("leasehold_kube_requests_total", map[string]string{"verb": "create"}),
				errors:  metrics.Sum("leasehold_lease_request_errors_total", nil),
				all:     metrics.Sum("leasehold_kube_requests_total", nil),
				sent:    sent, recv: time.Now(),
			}
		}
		// Count each sidecar's refused Creates from one scrape until nsRefusals
		// more: an event, not a slept window. They all lie between the first
		// scrape's sending and the last's receipt, and spaced by the backoff
		// they need a span that grows with their number: more of them than
		// the span allows is a retry faster than the backoff. A Create without
		// an answer (a timeout) may restart the backoff (a read that works
		// then resets it): the count restarts from there.
		before, after := map[*member]counts{}, map[*member]counts{}
		for _, m := range ms {
			before[m] = scrape(m)
			after[m] = before[m]
		}
		counted := func(m *member) bool { return after[m].refused >= before[m].refused+nsRefusals }
		poll.UntilReport(e.t, nsRefusalsSpan(nsRefusals+1)+generousWait, 100*time.Millisecond, fmt.Sprintf("%d more refused Creates from each sidecar", nsRefusals), func() bool {
			all := true
			for _, m := range ms {
				if counted(m) {
					continue
				}
				now := scrape(m)
				if now.creates-now.refused != before[m].creates-before[m].refused {
					e.t.Logf("%s: a Create without a 404 (%v so far, a timeout?): counting afresh", m.Name, now.creates-now.refused)
					before[m] = now
				}
				after[m] = now
				all = all && counted(m)
			}
			return all
		}, func() string {
			var short []string
			for _, m := range ms {
				if !counted(m) {
					short = append(short, fmt.Sprintf("%s: %v refused Creates in %v", m.Name, after[m].refused-before[m].refused,
						time.Since(before[m].sent).Round(time.Millisecond)))
				}
			}
			return strings.Join(short, "; ") + fmt.Sprintf("; want each to keep trying, with a backoff up to %v", nsMaxBackoff)
		})
		for _, m := range ms {
			b, a := before[m], after[m]
			refused, span := a.refused-b.refused, a.recv.Sub(b.sent)
			creates, errs, all := a.creates-b.creates, a.errors-b.errors, a.all-b.all
			e.t.Logf("%s in %v with namespace %q missing: %v Creates refused (%v in all), %v failed Lease requests counted, %v apiserver requests in all (%v Creates since its start)",
				m.Name, span.Round(time.Millisecond), missing, refused, creates, errs, all, a.creates)
			if allowed := nsRefusalsAllowed(span); refused > allowed {
				e.t.Errorf("%s: %v Creates refused within %v; the backoff (%v doubling up to %v) allows at most %v", m.Name, refused, span.Round(time.Millisecond), nsRetryPeriod, nsMaxBackoff, allowed)
			}
			if errs < creates-1 {
				e.t.Errorf("%s counted %v failed Lease requests (leasehold_lease_request_errors_total) for %v failed Creates", m.Name, errs, creates)
			}
		}
		for _, m := range ms {
			st, err := m.Status(e.ctx)
			switch {
			case err != nil:
				e.t.Fatalf("%s: %v", m.Name, err)
			case st.Leader:
				e.t.Errorf("%s leads without a Lease: %+v", m.Name, st)
			case st.LastError == nil || !strings.Contains(*st.LastError, missing):
				e.t.Errorf("%s: lastError %v, want one naming the namespace %q", m.Name, deref(st.LastError), missing)
			case st.LastErrorAt == "":
				e.t.Errorf("%s: lastError %q without lastErrorAt", m.Name, *st.LastError)
			default:
				e.t.Logf("%s: /v1/status lastError %q at %s", m.Name, *st.LastError, st.LastErrorAt)
			}
			// Logged once while it repeats: again only after another
			// warning came between (a timeout, say).
			lines := logLines(m.LogPath, missing, "not found")
			others := 0
			for _, l := range logLines(m.LogPath, `"level":"WARN"`) {
				if !strings.Contains(l, missing) {
					others++
				}
			}
			e.t.Logf("%s logged %d line(s) naming the namespace as not found (and %d other warnings): %s",
				m.Name, len(lines), others, strings.Join(lines, " | "))
			if len(lines) < 1 || len(lines) > 1+others {
				e.t.Errorf("%s logged %d lines naming the missing namespace %q (and %d other warnings), want one (not one per attempt)",
					m.Name, len(lines), missing, others)
			}
			code, body := e.get(m.OpsURL + "/readyz")
			e.t.Logf("%s: /readyz with the namespace missing: %d %s", m.Name, code, strings.TrimSpace(body))
		}

		created := time.Now()
		if _, err := cluster.Clientset().CoreV1().Namespaces().Create(e.ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: missing}}, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		placeholder := leases.await(e, created, nsMaxBackoff+schedulingSlack, func(ev leaseEvent) bool { return !ev.deleted })
		if placeholder.holder != "" {
			e.t.Errorf("the first record in the new namespace is %s; want an empty placeholder", placeholder)
		}
		s := e.awaitTerm(created, 0, nsBound)
		e.recovered("namespace created → "+s.m.Name+" leads", s.recv.Sub(created), nsBound)
		lease := e.getLease()
		if gap := s.acquiredAt.Sub(lease.CreationTimestamp.Time); gap < nsLeaseDuration {
			e.t.Errorf("%s acquired %v after the Lease was created (%s), before a full lease duration (%v)",
				s.m.Name, gap, lease.CreationTimestamp.Time.Format(time.RFC3339), nsLeaseDuration)
		} else {
			e.t.Logf("placeholder seen %v after the namespace was created; %s acquired %v after the placeholder was seen",
				placeholder.at.Sub(created).Round(time.Millisecond), s.m.Name, s.acquiredAt.Sub(placeholder.at).Round(time.Millisecond))
		}
		if s.st.LastError != nil {
			e.t.Errorf("%s leads with lastError %q, want null", s.m.Name, *s.st.LastError)
		}
		// A follower's "namespace not found" clears too, once it sees the
		// Lease exists, though it may never write again.
		for _, m := range ms {
			if st, err := m.Status(e.ctx); err == nil && m != s.m && st.LastError != nil {
				e.t.Errorf("%s (not leading) still reports lastError %s (at %s) while it follows %q", m.Name, deref(st.LastError), st.LastErrorAt, st.Holder)
			}
		}
		for _, o := range e.obs.Samples() {
			if o.st.Leader && o.recv.Before(created) {
				e.t.Errorf("a leader before the namespace existed: %s", o)
				break
			}
		}
		e.awaitOneLeader(handoverBound)
	})
}

// get GETs url and returns the status code and body ("" and 0 on error).
func (e *env) get(url string) (int, string) {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body)
}

// logLines returns the lines of path that contain every one of words.
func logLines(path string, words ...string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		ok := line != ""
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}

// nsRefusalsSpan is the least time n refused Creates in a row take: the
// backoff between them, nsRetryPeriod doubling up to nsMaxBackoff.
func nsRefusalsSpan(n int) time.Duration {
	var span time.Duration
	for i, gap := 1, nsRetryPeriod; i < n; i, gap = i+1, min(2*gap, nsMaxBackoff) {
		span += gap
	}
	return span
}

// nsRefusalsAllowed is the most refused Creates in a row that fit in span.
func nsRefusalsAllowed(span time.Duration) float64 {
	n := 1
	for nsRefusalsSpan(n+1) <= span {
		n++
	}
	return float64(n)
}
