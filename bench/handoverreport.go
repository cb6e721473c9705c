package main

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/bench/benchdoc"
)

// Targets of issue 13.
const (
	hoHandoverTarget = 50 * time.Millisecond  // SIGTERM or release?to= → the successor leads, p50
	hoAddressTarget  = 100 * time.Millisecond // a follower's leaderAddress after the successor leads, p99
	hoAddedP50       = 200 * time.Microsecond // the proxy's added latency, p50
	hoAddedP99       = 2 * time.Millisecond   // and p99
)

// handoverSection summarises the handover figures and judges leasehold's
// (with HANDOVER=successor).
func (r *report) handoverSection() *benchdoc.Handover {
	f := r.handover
	s := &benchdoc.Handover{
		Run: r.run, Trials: f.trials,
		LeaseDuration: benchdoc.Duration(f.leaseDuration), RenewDeadline: benchdoc.Duration(f.renewDeadline), RetryPeriod: benchdoc.Duration(f.retryPeriod),
		HandoverTarget: benchdoc.Duration(hoHandoverTarget), AddressTarget: benchdoc.Duration(hoAddressTarget),
		AddedP50Target: benchdoc.Duration(hoAddedP50), AddedP99Target: benchdoc.Duration(hoAddedP99),
		Releases: dist(f.releases), ReleaseOther: f.releaseOther, ReleaseMisses: f.releaseMisses,
		ReleaseAddr: benchdoc.Address{Lag: dist(f.releaseAddrLag), Wrong: f.releaseAddrWrong, None: f.releaseAddrNone},
	}
	for _, ro := range f.rollouts {
		sum, one := 0, 0
		for _, x := range ro.changes {
			sum += x
			if x == 1 {
				one++
			}
		}
		mean := 0.0
		if len(ro.changes) > 0 {
			mean = float64(sum) / float64(len(ro.changes))
		}
		s.Rollouts = append(s.Rollouts, benchdoc.Rollout{
			Name: ro.name, Changes: intsOf(ro.changes), Mean: mean, Exactly1: one,
			Handovers: dist(ro.handovers), ToNewest: ro.toNewest,
			Addr:   benchdoc.Address{Lag: dist(ro.addrLag), Wrong: ro.addrWrong, None: ro.addrNone},
			Misses: ro.misses, NoLeader: ro.noLeader,
		})
	}
	su := s.Rollouts[0]
	s.ChangesVerdict = judgeIf(su.Changes.N == f.trials && su.Exactly1 == su.Changes.N && su.Misses+su.NoLeader == 0,
		fmt.Sprintf("%d of %d", su.Changes.N, f.trials), "exactly 1 in %d of %d", su.Exactly1, f.trials)
	p50 := time.Duration(su.Handovers.P50)
	s.HandoverVerdict = judgeIf(su.Handovers.N > 0 && p50 <= hoHandoverTarget && su.Misses == 0, "", "p50 %v%s", p50, missesNote(su.Misses))
	rp50 := time.Duration(s.Releases.P50)
	s.ReleaseVerdict = judgeIf(s.Releases.N > 0 && rp50 <= hoHandoverTarget && f.releaseOther+f.releaseMisses == 0, "", "p50 %v; named member led in %d of %d",
		rp50, s.Releases.N, s.Releases.N+f.releaseOther+f.releaseMisses)
	addr := func(a benchdoc.Address) benchdoc.Verdict {
		p99 := time.Duration(a.Lag.P99)
		return judgeIf(a.Lag.N > 0 && p99 <= hoAddressTarget && a.Wrong+a.None == 0, "", "p99 %v; wrong %d, none %d", p99, a.Wrong, a.None)
	}
	s.AddressVerdict, s.ReleaseAddrVerdict = addr(su.Addr), addr(s.ReleaseAddr)
	s.MissesVerdict = judgeIf(su.Misses+su.NoLeader == 0, "", "%d; %d", su.Misses, su.NoLeader)

	if len(f.direct) > 0 {
		p := &benchdoc.Proxy{Direct: fineDist(f.direct), ViaLeader: fineDist(f.viaLeader), ViaFollower: fineDist(f.viaFollower), Failed: f.overheadFailed}
		a50, a99 := time.Duration(p.ViaLeader.P50-p.Direct.P50), time.Duration(p.ViaLeader.P99-p.Direct.P99)
		p.Verdict = judgeIf(a50 <= hoAddedP50 && a99 <= hoAddedP99 && f.overheadFailed == 0, "", "%v / %v", a50, a99)
		s.Proxy = p
	}
	if in := f.inProcess; in.ran {
		s.InProcess = &benchdoc.InProcess{
			Requests: in.requests, Err: in.err,
			Direct50: benchdoc.Duration(in.direct50), Direct99: benchdoc.Duration(in.direct99),
			Proxied50: benchdoc.Duration(in.proxied50), Proxied99: benchdoc.Duration(in.proxied99),
			Forwarded50: benchdoc.Duration(in.forwarded50), Forwarded99: benchdoc.Duration(in.forwarded99),
		}
	}
	if n := len(f.proxyTrials); n > 0 || f.proxyMisses > 0 {
		l := &benchdoc.UnderLoad{Trials: n, Misses: f.proxyMisses}
		var windows, handovers []time.Duration
		for _, t := range f.proxyTrials {
			windows = append(windows, t.window)
			handovers = append(handovers, t.handover)
			if t.refused503+t.refused502 > 0 {
				l.WithRefusals++
			}
			if t.window > t.handover {
				l.Longer++
			}
			l.Refused503 += t.refused503
			l.Refused502 += t.refused502
			l.Served += t.served
			l.OldRefused += t.oldRefused
			l.Errors += t.errors
		}
		l.Window, l.Handover = dist(windows), dist(handovers)
		wp50, wmax, hp50, hmax := time.Duration(l.Window.P50), time.Duration(l.Window.Max), time.Duration(l.Handover.P50), time.Duration(l.Handover.Max)
		l.Verdict = judgeIf(n > 0 && wp50 <= hp50 && wmax <= hmax && f.proxyMisses == 0, "", "refused for %v / %v, handover %v / %v%s", wp50, wmax, hp50, hmax, missesNote(f.proxyMisses))
		s.Load = l
	}
	if fv := f.fencing; fv.judged+fv.direct > 0 {
		bad := fv.stale + fv.noToken + fv.notOwn
		s.Fencing = &benchdoc.Fenced{
			Apps: fv.apps, Judged: fv.judged, Direct: fv.direct, Stale: fv.stale, NoToken: fv.noToken, NotOwn: fv.notOwn, Tokens: fv.tokens,
			Verdict: judgeIf(bad == 0 && fv.judged > 0, "", "%d; %d; %d", fv.stale, fv.noToken, fv.notOwn),
		}
	}
	return s
}

func missesNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d with no successor", n)
}

// fineDist summarises durations to the microsecond (the proxy's latencies
// are tens of microseconds).
func fineDist(d []time.Duration) benchdoc.Dist {
	return benchdoc.NewDist(d, func(d time.Duration) time.Duration { return d.Round(time.Microsecond) })
}
