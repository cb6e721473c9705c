package main

import (
	"time"

	"github.com/leasehold/leasehold/bench/benchdoc"
)

// appSection is the app-aware features' figures (nil when they were
// skipped).
func (r *report) appSection() *benchdoc.App {
	a, o := r.app, r.opts
	if a.trials == 0 {
		return nil
	}
	g := a.gate
	s := &benchdoc.App{
		Trials: a.trials, Interval: benchdoc.Duration(g.interval), Timeout: benchdoc.Duration(g.timeout), Threshold: g.threshold,
		Takeovers: dist(g.takeovers), Misses: g.misses, StillLeader: g.stillLeader,
		DetectMin: benchdoc.Duration(time.Duration(g.threshold-1) * g.interval), DetectMax: benchdoc.Duration(time.Duration(g.threshold) * g.interval),
		Expiry: benchdoc.Duration(o.leaseDuration + o.retryPeriod),
		Label:  leaderLabel,
	}
	if len(r.results) > 0 && len(r.results[0].handovers) > 0 {
		s.HandoverP50 = benchdoc.Duration(quantile(r.results[0].handovers, 0.5))
	}
	label := func(t labelTrials) benchdoc.LabelTrials {
		return benchdoc.LabelTrials{Lead: dist(t.lead), Labelled: dist(t.labelled), Lag: dist(t.lag), Misses: t.misses, Wrong: t.wrong}
	}
	s.LabelHandovers, s.LabelFailovers = label(a.handovers), label(a.failovers)
	return s
}
