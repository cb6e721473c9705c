package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The handover section sits between these markers in the report file, so
// that -only handover can replace it alone.
const (
	handoverBegin = "<!-- handover: begin (cd bench && go run . -only handover -out FILE replaces this section) -->"
	handoverEnd   = "<!-- handover: end -->"
)

// Targets of issue 13.
const (
	hoHandoverTarget = 50 * time.Millisecond  // SIGTERM or release?to= → the successor leads, p50
	hoAddressTarget  = 100 * time.Millisecond // a follower's leaderAddress after the successor leads, p99
	hoAddedP50       = 200 * time.Microsecond // the proxy's added latency, p50
	hoAddedP99       = 2 * time.Millisecond   // and p99
)

// handoverMarkdown renders the handover section, markers included (nothing
// when it did not run).
func (r *report) handoverMarkdown(b *strings.Builder) {
	f := r.handover
	if !f.ran || len(f.rollouts) < 3 {
		return
	}
	su, an, cg := f.rollouts[0], f.rollouts[1], f.rollouts[2]
	fmt.Fprintf(b, "%s\n## Leader address, forwarding proxy, and handover to a chosen successor (issue 13)\n\n", handoverBegin)
	fmt.Fprintf(b, "leasehold with `LEASEHOLD_HANDOVER=successor`, leasehold's default (`any`) and client-go's LeaderElector (`bench/baseline`, one Lease, ReleaseOnCancel), "+
		"same real kube-apiserver, same run, rollouts alternating between the three; the proxy figures come from a group of 3 leasehold sidecars with `LEASEHOLD_HANDOVER=successor`, "+
		"each with its forwarding proxy (advertised) in front of an app stand-in of the bench's. "+
		"Timings for all: leaseDuration %v, renewDeadline %v, retryPeriod %v.\n\n", f.leaseDuration, f.renewDeadline, f.retryPeriod)
	fmt.Fprintf(b, "| figure | %s | %s | %s | target for leasehold | verdict |\n", su.name, an.name, cg.name)
	fmt.Fprintln(b, "|---|---|---|---|---|---|")
	row := func(figure, a, c, d, target, verdict string) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", figure, a, c, d, target, verdict)
	}

	// 1. Rolling updates.
	exactly1 := func(v []int) int {
		n := 0
		for _, x := range v {
			if x == 1 {
				n++
			}
		}
		return n
	}
	row(fmt.Sprintf("rolling update of 3 replicas (start a new pod, SIGTERM an old one, three times; the leader is old and terminated first): leadership changes per rollout (holder changes on a watch of the Lease), %d rollouts each", f.trials),
		changesCell(su.changes), changesCell(an.changes), changesCell(cg.changes),
		"exactly 1 in every rollout (with successor)",
		judgeIf(len(su.changes) == f.trials && exactly1(su.changes) == len(su.changes) && su.misses+su.noLeader == 0,
			fmt.Sprintf("%d of %d", len(su.changes), f.trials), "exactly 1 in %d of %d", exactly1(su.changes), f.trials))
	newest := func(ro hoRollout) string {
		if len(ro.handovers) == 0 {
			return "—"
		}
		return fmt.Sprintf("%s; to the newest pod in %d of %d", latCell(ro.handovers), ro.toNewest, len(ro.handovers))
	}
	p50 := quantile(su.handovers, 0.5)
	row("… the leader's SIGTERM in those rollouts → another member leads (its blocking `GET /v1/leader?wait=` answers 200), p50 / p99 / max (n)",
		newest(su), newest(an), newest(cg), fmt.Sprintf("≤ %v p50", hoHandoverTarget),
		judgeIf(len(su.handovers) > 0 && p50 <= hoHandoverTarget && su.misses == 0, "", "p50 %v%s", p50, missesNote(su.misses)))
	rp50 := quantile(f.releases, 0.5)
	releaseCell := latCell(f.releases)
	if f.releaseOther+f.releaseMisses > 0 {
		releaseCell += fmt.Sprintf("; another member led in %d, no one in %d", f.releaseOther, f.releaseMisses)
	}
	row("`POST /v1/release?to=<identity>` on the leader (a random other member; `for=0s`) → the named member leads, p50 / p99 / max (n)",
		releaseCell, "— (409 `handover_unavailable`)", "—", fmt.Sprintf("≤ %v p50", hoHandoverTarget),
		judgeIf(len(f.releases) > 0 && rp50 <= hoHandoverTarget && f.releaseOther+f.releaseMisses == 0, "", "p50 %v; named member led in %d of %d",
			rp50, len(f.releases), len(f.releases)+f.releaseOther+f.releaseMisses))

	// 2. leaderAddress.
	addrCell := func(lags []time.Duration, wrong, none int) string {
		if len(lags)+wrong+none == 0 {
			return "—"
		}
		return fmt.Sprintf("%s; wrong address %d, none %d", latCell(lags), wrong, none)
	}
	addrOK := func(lags []time.Duration, wrong, none int) bool {
		return len(lags) > 0 && quantile(lags, 0.99) <= hoAddressTarget && wrong+none == 0
	}
	row("`leaderAddress` on a follower after the leader's SIGTERM in the rollouts: the follower's blocking `GET /v1/watch` answer naming the successor's address − the successor's leading answer, p50 / p99 / max (n: followers × rollouts)",
		addrCell(su.addrLag, su.addrWrong, su.addrNone), addrCell(an.addrLag, an.addrWrong, an.addrNone), "— (no address)",
		fmt.Sprintf("≤ %v (p99), correct", hoAddressTarget),
		judgeIf(addrOK(su.addrLag, su.addrWrong, su.addrNone), "", "p99 %v; wrong %d, none %d", quantile(su.addrLag, 0.99), su.addrWrong, su.addrNone))
	row("… after `POST /v1/release?to=` (proxy group; the released leader included), p50 / p99 / max (n)",
		addrCell(f.releaseAddrLag, f.releaseAddrWrong, f.releaseAddrNone), "—", "—",
		fmt.Sprintf("≤ %v (p99), correct", hoAddressTarget),
		judgeIf(addrOK(f.releaseAddrLag, f.releaseAddrWrong, f.releaseAddrNone), "", "p99 %v; wrong %d, none %d", quantile(f.releaseAddrLag, 0.99), f.releaseAddrWrong, f.releaseAddrNone))

	// 3. The proxy's latency.
	if len(f.direct) > 0 {
		q := func(d []time.Duration, p float64) time.Duration { return fineQuantile(d, p) }
		pair := func(d []time.Duration) string { return fmt.Sprintf("%v / %v", q(d, 0.5), q(d, 0.99)) }
		row(fmt.Sprintf("proxy on loopback, real sidecar processes, interleaved request by request, keep-alive: direct `GET` to the leader's app stand-in; via the leader's proxy; via a follower's proxy (two hops), p50 / p99 (n=%d each; %d not 200)",
			len(f.direct), f.overheadFailed),
			fmt.Sprintf("%s; %s; %s", pair(f.direct), pair(f.viaLeader), pair(f.viaFollower)), "—", "—", "", "")
		a50, a99 := q(f.viaLeader, 0.5)-q(f.direct, 0.5), q(f.viaLeader, 0.99)-q(f.direct, 0.99)
		row("… added by the leader's proxy over direct (one hop), p50 / p99",
			fmt.Sprintf("%v / %v", a50, a99), "—", "—", fmt.Sprintf("≤ %v / ≤ %v", hoAddedP50, hoAddedP99),
			judgeIf(a50 <= hoAddedP50 && a99 <= hoAddedP99 && f.overheadFailed == 0, "", "%v / %v", a50, a99))
		row("… added via a follower's proxy over direct (two hops: the follower's proxy, then the leader's), p50 / p99",
			fmt.Sprintf("%v / %v", q(f.viaFollower, 0.5)-q(f.direct, 0.5), q(f.viaFollower, 0.99)-q(f.direct, 0.99)), "—", "—", "", "")
	}
	if in := f.inProcess; in.ran {
		cell := "failed: " + in.err
		if in.err == "" {
			cell = fmt.Sprintf("direct %v / %v; proxied %v / %v (added %v / %v); forwarded %v / %v",
				in.direct50, in.direct99, in.proxied50, in.proxied99, in.proxied50-in.direct50, in.proxied99-in.direct99, in.forwarded50, in.forwarded99)
		}
		row(fmt.Sprintf("for comparison, in one process (`go test -bench BenchmarkProxy -benchtime %dx ./internal/proxy`): p50 / p99", in.requests), cell, "—", "—", "", "")
	}

	// 4. Handovers under load.
	if n := len(f.proxyTrials); n > 0 || f.proxyMisses > 0 {
		var windows, handovers []time.Duration
		var with, longer, r503, r502, served, oldRefused, errs int
		for _, t := range f.proxyTrials {
			windows = append(windows, t.window)
			handovers = append(handovers, t.handover)
			if t.refused503+t.refused502 > 0 {
				with++
			}
			if t.window > t.handover {
				longer++
			}
			r503, r502, served, oldRefused, errs = r503+t.refused503, r502+t.refused502, served+t.served, oldRefused+t.oldRefused, errs+t.errors
		}
		wp50, wmax := quantile(windows, 0.5), quantile(windows, 1)
		hp50, hmax := quantile(handovers, 0.5), quantile(handovers, 1)
		row(fmt.Sprintf("graceful handover (SIGTERM to the leader) under steady load on every proxy, %d trials: requests refused through a non-leader's proxy, first sent → last answered, p50 / max; vs SIGTERM → the successor leads in the same trials, p50 / max", n),
			fmt.Sprintf("refused for %v / %v; handover %v / %v; trials with refusals %d of %d, window longer than its own handover in %d", wp50, wmax, hp50, hmax, with, n, longer),
			"—", "—", "no longer than the handover (p50 and max)",
			judgeIf(n > 0 && wp50 <= hp50 && wmax <= hmax && f.proxyMisses == 0, "", "refused for %v / %v, handover %v / %v%s", wp50, wmax, hp50, hmax, missesNote(f.proxyMisses)))
		row("… those requests: refused 503 / 502 through the non-leaders' proxies; served (200) through every proxy; refused through the old leader's own proxy; no answer",
			fmt.Sprintf("%d / %d; %d; %d; %d", r503, r502, served, oldRefused, errs), "—", "—", "", "")
	}

	// 5. Fencing.
	if fv := f.fencing; fv.judged+fv.direct > 0 {
		bad := fv.stale + fv.noToken + fv.notOwn
		row(fmt.Sprintf("requests an app served while another instance validly led, judged by their tokens (every request the %d app stand-ins served through a proxy in the proxy group): under a token lower than one another app had already served; without a token; under a token not its own member's", fv.apps),
			fmt.Sprintf("%d; %d; %d of %d (%d tokens; %d direct requests not judged)", fv.stale, fv.noToken, fv.notOwn, fv.judged, fv.tokens, fv.direct), "—", "—", "0",
			judgeIf(bad == 0 && fv.judged > 0, "", "%d; %d; %d", fv.stale, fv.noToken, fv.notOwn))
	}
	row("leader SIGTERMs in the rollouts with no successor within 3 × leaseDuration; rollouts with no leader at their end",
		fmt.Sprintf("%d; %d", su.misses, su.noLeader), fmt.Sprintf("%d; %d", an.misses, an.noLeader), fmt.Sprintf("%d; %d", cg.misses, cg.noLeader), "0; 0",
		judgeIf(su.misses+su.noLeader == 0, "", "%d; %d", su.misses, su.noLeader))

	fmt.Fprintf(b, "\n- **Rollouts**: each implementation keeps one namespace and one Lease for all its rollouts; three sidecars run, and each rollout starts a new one, then SIGTERMs an old one (and waits for its exit), three times, "+
		"the leader first (after a random wait of up to two retry periods), so the three new ones are the old ones of the next rollout. With `LEASEHOLD_HANDOVER=successor` the bench waits, after each start and each exit, "+
		"until every member counts the members (`leasehold_members`), since a leaver hands over only to a member it knows; the others are not waited for (they have no membership). "+
		"All have the same `LEASEHOLD_PRIORITY` (none), so the successor is the newest member. "+
		"A **leadership change** is a version of the Lease naming a holder other than the last one named (a release in between does not end it), on the bench's watch of the Lease (admin client), from a rollout's start to the next one's; "+
		"leasehold's sidecars advertise an address (`LEASEHOLD_ADVERTISE_ADDRESS`, no proxy).\n")
	fmt.Fprintf(b, "- **Leads** means the member's blocking `GET /v1/leader?wait=` answered 200, long-polls started on every other member before the signal or request; the time is the answer's arrival. "+
		"A follower's address is timed by its blocking `GET /v1/watch?index=` (started before the signal), until an answer names an address other than the old leader's; the lag is that answer's arrival minus the successor's leading answer's (so it can be negative).\n")
	fmt.Fprintf(b, "- **Proxy group**: 3 sidecars with `LEASEHOLD_HANDOVER=successor`, each `LEASEHOLD_PROXY_ADDR` = `LEASEHOLD_ADVERTISE_ADDRESS` (loopback) and `LEASEHOLD_PROXY_UPSTREAM` its own app stand-in (a Go HTTP server in the bench answering 200 `ok`, recording each request's arrival and `X-Leasehold-Fencing-Token`). "+
		"Latency: one client, kept-alive connections, one request at a time, direct / via the leader's proxy / via a follower's in turn, each timed from sending to the last byte of the body; the direct requests use the path `/direct` and are not judged for fencing. "+
		"Then the `release?to=` trials, then the handovers under load: one closed-loop keep-alive client per proxy, from 300 ms plus a random wait of up to two retry periods before the leader's SIGTERM until 300 ms after its exit and every member naming the successor's address; "+
		"refused means a 503 or 502 answer; the old leader is then replaced by a new member.\n")
	fmt.Fprintf(b, "- **Fencing**: a term's token is the resourceVersion of the write that acquired it, as the bench's watch of the Lease saw it (and the token the holder published on the Lease); "+
		"an app's own tokens are those of its sidecar's terms. Every request an app served through a proxy counts as stale when another app had served a request under a larger token before it arrived.\n")
	fmt.Fprintf(b, "- **Noise**: the machine is shared, and the figures are those of one run; compare the columns of this run rather than figures across runs.\n")
	fmt.Fprintf(b, "\nCommand: `%s`, %s.\nMachine: %s.\n%s\n", strings.TrimSpace(r.opts.command), r.date, r.machine, handoverEnd)
}

// changesCell is "mean M; exactly 1 in K of N (min–max)".
func changesCell(v []int) string {
	if len(v) == 0 {
		return "—"
	}
	sum, one := 0, 0
	for _, x := range v {
		sum += x
		if x == 1 {
			one++
		}
	}
	return fmt.Sprintf("mean %.2f; exactly 1 in %d of %d (%d–%d)", float64(sum)/float64(len(v)), one, len(v), slices.Min(v), slices.Max(v))
}

// latCell is "p50 / p99 / max (n=N)".
func latCell(d []time.Duration) string {
	if len(d) == 0 {
		return "—"
	}
	return fmt.Sprintf("%v / %v / %v (n=%d)", quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1), len(d))
}

func missesNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d with no successor", n)
}

// fineQuantile is the nearest-rank quantile, to the microsecond (the
// proxy's latencies are tens of microseconds).
func fineQuantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(max(int(q*float64(len(s))+0.5)-1, 0), len(s)-1)].Round(time.Microsecond)
}
