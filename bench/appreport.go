package main

import (
	"fmt"
	"strings"
	"time"
)

// appMarkdown renders the section on the app-aware features (nothing when
// they were skipped).
func (r *report) appMarkdown(b *strings.Builder) {
	a, o := r.app, r.opts
	if a.trials == 0 {
		return
	}
	g := a.gate
	handover := "handover"
	if lh := r.results[0].handovers; len(lh) > 0 {
		handover = fmt.Sprintf("handover (p50 %v above)", quantile(lh, 0.5))
	}
	detectMin := time.Duration(g.threshold-1) * g.interval
	detectMax := time.Duration(g.threshold) * g.interval
	expiry := o.leaseDuration + o.retryPeriod

	fmt.Fprintf(b, "\n## App-aware features (leasehold only)\n\n")
	fmt.Fprintf(b, "client-go's LeaderElector has neither feature. Three leasehold instances per feature, in a namespace of their own, same apiserver and timings as above.\n\n")
	fmt.Fprintf(b, "- Health-gated candidacy: each instance probes an app of its own (an HTTP server in the bench process) every %v, timeout %v, failure threshold %d. "+
		"At a random phase of the probe cycle the leader's app starts answering 503 (at once: the timeout never adds); "+
		"after each trial it answers 200 again and the bench waits until that instance campaigns again (`candidate: true`).\n", g.interval, g.timeout, g.threshold)
	fmt.Fprintf(b, "- Leader label (`LEASEHOLD_POD_LABEL=%s`): each instance has a Pod of its name (Pending: no kubelet runs). "+
		"Trials alternate a handover (SIGTERM to the leader) and a failover (SIGKILL), n = %d of each; the stopped leader is restarted under its name. "+
		"Labels are read from a Pod watch by an admin client (the arrival of each event); \"exactly right\" is the successor's Pod `true` and every other Pod `false`; "+
		"label lag = labels exactly right − successor leads (negative when the watch event arrived before the long-poll's answer).\n\n", leaderLabel, a.trials)

	fmt.Fprintln(b, "| figure | p50 / p95 / max (n) | expected |\n|---|---|---|")
	row := func(name string, d []time.Duration, expected string) {
		fmt.Fprintf(b, "| %s | %v / %v / %v (n=%d) | %s |\n", name, quantile(d, 0.5), quantile(d, 0.95), quantile(d, 1), len(d), expected)
	}
	row("app failure (503) → successor leads", g.takeovers,
		fmt.Sprintf("(threshold − 1) × interval + U(0, interval) + handover = %v…%v + %s, so ≤ threshold × interval + handover; "+
			"a step-down without the release would add the Lease's expiry, up to leaseDuration + retryPeriod = %v", detectMin, detectMax, handover, expiry))
	for _, t := range []labelTrials{a.handovers, a.failovers} {
		sig, lead, lag := "SIGTERM", handover, "a few ms: the old leader writes its own `false` on the way out, the successor its own `true`"
		if t.kind == "failover" {
			sig, lead, lag = "SIGKILL", fmt.Sprintf("≤ leaseDuration + retryPeriod = %v", expiry),
				"a few round trips: the successor writes its own `true`, lists the Pods labelled `true` and clears the dead leader's stale one"
		}
		row(fmt.Sprintf("leader label, %s (%s) → successor leads", t.kind, sig), t.lead, lead)
		row(fmt.Sprintf("leader label, %s (%s) → labels exactly right", t.kind, sig), t.labelled, "successor leads + label lag")
		row(fmt.Sprintf("leader label, %s: label lag", t.kind), t.lag, lag)
	}
	fmt.Fprintf(b, "| app failure: trials with no successor within threshold × interval + 3 × leaseDuration; old leader still said `leader: true` once its successor led | %d; %d of %d | 0; 0 |\n",
		g.misses, g.stillLeader, a.trials)
	fmt.Fprintf(b, "| leader label, handover / failover: trials with no successor within 3 × leaseDuration; labels not exactly right within 3 × leaseDuration of the successor leading | %d / %d; %d / %d of %d each | 0; 0 |\n",
		a.handovers.misses, a.failovers.misses, a.handovers.wrong, a.failovers.wrong, a.trials)

	fmt.Fprintf(b, "\nWithout the gate (client-go's LeaderElector, or leasehold without `LEASEHOLD_APP_HEALTH_URL`) a leader whose app is down keeps the Lease indefinitely: "+
		"it renews for as long as its own process runs, and no replica with a healthy app ever takes over. "+
		"With the gate the unhealthy leader releases the Lease rather than merely ceasing to renew it, "+
		"so its successor does not wait out the Lease's expiry, which would add up to leaseDuration + retryPeriod = %v (compare the crash failover above).\n", expiry)
}
