package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/leasehold/leasehold/bench/benchdoc"
)

// Targets of the groups section (issue 12) for leasehold.
const (
	lgGracefulTarget = 100 * time.Millisecond // a graceful exit: each Lease held again, p99
	lgMaxRSS         = 60.0                   // MiB, one process holding the large group
	lgMaxCPU         = 5.0                    // percent of one core, its median window
)

// groupsSection summarises the groups figures and judges leasehold's.
func (r *report) groupsSection() *benchdoc.Groups {
	f := r.groups
	quota := f.leases / f.members
	s := &benchdoc.Groups{
		Run: r.run, Leases: f.leases, Members: f.members, Trials: f.trials,
		LeaseDuration: benchdoc.Duration(f.leaseDuration), RenewDeadline: benchdoc.Duration(f.renewDeadline), RetryPeriod: benchdoc.Duration(f.retryPeriod),
		Window: benchdoc.Duration(f.window), SampleInterval: benchdoc.Duration(f.sampleInterval),
		Quota: quota, Mean: float64(f.leases) / float64(f.members), Needed: f.leases - quota,
		SettleTarget: benchdoc.Duration(2 * f.leaseDuration), GracefulTarget: benchdoc.Duration(lgGracefulTarget),
		CrashTarget: benchdoc.Duration(f.leaseDuration + f.retryPeriod), LivenessBound: benchdoc.Duration(3 * f.leaseDuration),
		FormulaRenew: time.Minute.Seconds() / f.retryPeriod.Seconds(), FormulaMember: time.Minute.Seconds() / (f.leaseDuration.Seconds() / 3),
	}
	var observed []time.Duration
	for _, im := range f.impls {
		s.Impls = append(s.Impls, groupsImpl(im, f))
		for _, t := range im.trials {
			observed = append(observed, t.observed)
		}
	}
	s.ObservedMin = benchdoc.Duration(quantile(observed, 0).Round(100 * time.Millisecond))
	s.ObservedMax = benchdoc.Duration(quantile(observed, 1).Round(100 * time.Millisecond))

	lh, raw := s.Impls[0], f.impls[0]
	settled, worst := true, time.Duration(0)
	for _, t := range raw.trials {
		settled = settled && t.settledOK
		worst = max(worst, t.settled)
	}
	worstNote := fmt.Sprintf("%v > %v", worst.Round(time.Millisecond), time.Duration(s.SettleTarget))
	if lh.Never > 0 {
		worstNote = fmt.Sprintf("never settled in %d of %d", lh.Never, len(raw.trials))
	}
	s.SettleVerdict = judgeIf(settled && worst <= time.Duration(s.SettleTarget), "every trial", "worst trial %s", worstNote)
	s.MovesVerdict = judgeIf(lh.Moves.N > 0 && lh.Moves.Min == s.Needed && lh.Moves.Max == s.Needed, "every trial", "%s", intsCell(lh.Moves))
	s.AfterVerdict = judgeIf(lh.MovesAfter.N > 0 && lh.MovesAfter.Max == 0, "every trial", "%s", intsCell(lh.MovesAfter))
	s.BalanceVerdict = judgeIf(lh.MaxOverMean.N > 0 && lh.MaxOverMean.Max <= 1.0, "every trial", "%s", floatsCell(lh.MaxOverMean))
	g99 := time.Duration(lh.Graceful.P99)
	s.GracefulVerdict = judgeIf(lh.Graceful.N > 0 && g99 <= lgGracefulTarget && lh.GracefulMisses == 0, "", "p99 %v", g99)
	cmax := time.Duration(lh.Crash.Max)
	s.CrashVerdict = judgeIf(lh.Crash.N > 0 && cmax <= time.Duration(s.CrashTarget) && lh.CrashMisses == 0, "", "max %v", cmax)
	s.MissesVerdict = judgeIf(lh.GracefulMisses+lh.CrashMisses == 0, "", "%d; %d", lh.GracefulMisses, lh.CrashMisses)
	s.OverlapVerdict = judgeIf(lh.OverlapLeases == 0, "", "%d", lh.OverlapLeases)
	lq := lh.Requests
	within := math.Abs(lq.Total/lq.Formula - 1)
	gets := 0.0
	for _, v := range lq.ByVerb {
		if v.Verb == "get" {
			gets = v.PerMinute
		}
	}
	s.RequestsVerdict = judgeIf(within <= 0.05 && gets == 0, fmt.Sprintf("within %.1f %%", 100*within), "%.1f %% off; %.0f Gets", 100*within, gets)
	if big := f.big; big.ran && len(big.impls) >= 2 {
		s.Big = bigSection(big, f)
	}
	return s
}

// groupsImpl summarises one implementation's trials.
func groupsImpl(im lgImpl, f lgFigures) benchdoc.GroupsImpl {
	g := benchdoc.GroupsImpl{
		Name:     im.name,
		Graceful: dist(im.graceful), GracefulToRelease: dist(im.gracefulToRelease), GracefulFromRelease: dist(im.gracefulFromRelease), Crash: dist(im.crash),
		GracefulHeld: im.gracefulHeld, CrashHeld: im.crashHeld, GracefulMisses: im.gracefulMisses, CrashMisses: im.crashMisses,
		Probe: dist(im.probe), OverlapLeases: im.overlapLeases, LeaseTrials: im.leaseTrials, Samples: im.samples,
	}
	var settled, observed []time.Duration
	var moves, after []int
	var mom []float64
	for _, t := range im.trials {
		observed = append(observed, t.observed)
		if t.settledOK {
			settled = append(settled, t.settled)
			after = append(after, t.movesAfterSettle)
		} else {
			g.Never++
		}
		moves = append(moves, t.moves)
		mom = append(mom, t.maxOverMean(f.leases))
		h := slices.Sorted(slices.Values(t.held))
		slices.Reverse(h)
		g.Held = append(g.Held, h)
	}
	g.Settled = dist(settled)
	g.ObservedP50 = benchdoc.Duration(quantile(observed, 0.5).Round(time.Second))
	g.Moves, g.MovesAfter, g.MaxOverMean = intsOf(moves), intsOf(after), floatsOf(mom)
	q := im.requests
	g.Requests = benchdoc.GroupRequests{
		Window: benchdoc.Duration(q.window.Round(time.Second)), Members: q.members, Held: q.held, Total: q.perMinute(q.total),
		Renewals: q.perMinute(q.renewals), Rest: q.perMinute(q.total - q.renewals),
		ShardWrites: q.perMinute(float64(q.shardWrites)), MemberWrites: q.perMinute(float64(q.memberWrites)),
	}
	for _, verb := range slices.Sorted(maps.Keys(q.byVerb)) {
		g.Requests.ByVerb = append(g.Requests.ByVerb, benchdoc.Verb{Verb: verb, PerMinute: q.perMinute(q.byVerb[verb])})
	}
	perMinute := func(d time.Duration) float64 { return time.Minute.Seconds() / d.Seconds() }
	if im.name == "leasehold" {
		// held × 60 / retryPeriod + members × 60 / (leaseDuration / 3)
		g.Requests.Formula = float64(q.held)*perMinute(f.retryPeriod) + float64(q.members)*perMinute(f.leaseDuration/3)
	} else {
		// held × 60 / retryPeriod + (members × Leases − held) × 60 / (1.6 × retryPeriod)
		g.Requests.Formula = float64(q.held)*perMinute(f.retryPeriod) + float64(q.members*f.leases-q.held)*time.Minute.Seconds()/(1.6*f.retryPeriod.Seconds())
	}
	return g
}

// bigSection summarises the processes holding a large group.
func bigSection(big lgBig, f lgFigures) *benchdoc.GroupsBig {
	b := &benchdoc.GroupsBig{
		Leases: big.leases, Window: benchdoc.Duration(big.window.Round(time.Second)), Windows: big.windows,
		MaxRSS: lgMaxRSS, MaxCPU: lgMaxCPU, NeedPerSecond: float64(big.leases) / f.retryPeriod.Seconds(),
	}
	for _, im := range big.impls {
		shares := make([]float64, len(im.cpuShares))
		for i, v := range im.cpuShares {
			shares[i] = 100 * v
		}
		b.Impls = append(b.Impls, benchdoc.BigImpl{
			Name: im.name, RSS: mib(medianInt(rssOf(im.mem))), MemSamples: len(im.mem), CPUWindow: benchdoc.Duration(im.cpuWindow.Round(time.Second)),
			CPU: floatsOf(shares), Held: intsOf(im.held), AllAfter: benchdoc.Duration(im.allAfter.Round(100 * time.Millisecond)),
			UpdatesPerSecond: im.byVerb["update"] / im.cpuWindow.Seconds(), Errors: im.errors,
		})
	}
	bl := b.Impls[0]
	b.HeldAll = bl.Held.N > 0 && bl.Held.Min == big.leases
	// Without every Lease held there is no steady state to judge: the
	// figures are what the process used meanwhile.
	judge := func(ok bool, figure string) benchdoc.Verdict {
		if !b.HeldAll {
			return judgeIf(false, "", "no steady state (it held %d–%d of %d, the row below); %s meanwhile", bl.Held.Min, bl.Held.Max, big.leases, figure)
		}
		return judgeIf(ok, "", "%s", figure)
	}
	b.RSSVerdict = judge(bl.RSS <= lgMaxRSS, fmt.Sprintf("%.1f MiB", bl.RSS))
	b.CPUVerdict = judge(bl.CPU.Median <= lgMaxCPU, fmt.Sprintf("%.2f %%", bl.CPU.Median))
	b.HeldVerdict = judgeIf(b.HeldAll, "", "%d–%d of %d", bl.Held.Min, bl.Held.Max, big.leases)
	return b
}

// intsOf summarises counts (the upper median).
func intsOf(v []int) benchdoc.Ints {
	if len(v) == 0 {
		return benchdoc.Ints{}
	}
	s := slices.Sorted(slices.Values(v))
	return benchdoc.Ints{N: len(s), Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
}

// floatsOf summarises figures (median as median does).
func floatsOf(v []float64) benchdoc.Floats {
	if len(v) == 0 {
		return benchdoc.Floats{}
	}
	return benchdoc.Floats{N: len(v), Median: median(v), Min: slices.Min(v), Max: slices.Max(v)}
}

// intsCell and floatsCell are a missed verdict's figure: "median (min–max)".
func intsCell(v benchdoc.Ints) string {
	if v.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%d (%d–%d)", v.Median, v.Min, v.Max)
}

func floatsCell(v benchdoc.Floats) string {
	if v.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", v.Median, v.Min, v.Max)
}
