package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/bench/benchdoc"
)

// report is what one run measured: the sections that ran, as the raw
// figures the trials produced, and how they were obtained.
type report struct {
	opts      options
	run       benchdoc.Run
	election  bool      // the election table ran (a full run): results, http and app are its
	results   []results // leasehold's, then client-go's; the overlap section's too
	http      httpFigures
	app       appFigures
	footprint footprintFigures // each section below is set when it ran
	groups    lgFigures
	handover  hoFigures
}

// doc is the run's sections, summarised (benchdoc's types); plot names the
// latency plot ("" for none).
func (r *report) doc(plot string) benchdoc.Doc {
	var d benchdoc.Doc
	if r.election {
		d.Main = r.mainSection(plot)
	}
	if len(r.results) >= 2 {
		d.Overlap = r.overlapSection()
	}
	if r.footprint.ran {
		d.Footprint = r.footprintSection()
	}
	if r.groups.ran && len(r.groups.impls) >= 2 {
		d.Groups = r.groupsSection()
	}
	if r.handover.ran && len(r.handover.rollouts) >= 3 {
		d.Handover = r.handoverSection()
	}
	return d
}

// write saves each section that ran as its file in the data directory of
// the document at path (benchdoc.DataDir), the latency plot beside the
// document when the election table ran, and renders the document from
// every section file there, so that the sections this run did not measure
// keep their last run's figures.
func (r *report) write(path string) error {
	dir := benchdoc.DataDir(path)
	plot := ""
	if r.election {
		plot = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)) + "-latency.svg"
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), plot), []byte(r.svg()), 0o644); err != nil {
			return err
		}
	}
	for name, section := range r.doc(plot).Set() {
		if err := benchdoc.Write(dir, name, section); err != nil {
			return err
		}
	}
	return benchdoc.RenderFile(dir, path)
}

// mainSection is the election table, the HTTP API's figures and the
// app-aware features.
func (r *report) mainSection(plot string) *benchdoc.Main {
	o := r.opts
	m := &benchdoc.Main{
		Run:           r.run,
		LeaseDuration: benchdoc.Duration(o.leaseDuration), RenewDeadline: benchdoc.Duration(o.renewDeadline), RetryPeriod: benchdoc.Duration(o.retryPeriod),
		Expiry:            benchdoc.Duration(o.leaseDuration + o.retryPeriod),
		RenewalsPerMinute: time.Minute.Seconds() / o.retryPeriod.Seconds(),
		Plot:              plot,
	}
	for _, res := range r.results {
		q := res.requests
		if q.window <= 0 { // not measured: no rates
			q.window = time.Minute
		}
		m.Impls = append(m.Impls, benchdoc.MainImpl{
			Name: res.impl.name, Handovers: dist(res.handovers), Failovers: dist(res.failovers),
			RequestWindow:              benchdoc.Duration(q.window.Round(time.Second)),
			LeaderRequestsPerMinute:    q.perMinute(q.leaderRequests),
			CandidateRequestsPerMinute: q.perMinute(q.candidateRequests) / float64(max(q.candidates, 1)),
			LeaderRequests:             q.leaderRequests, LeaderGets: q.leaderGets, Renewals: q.renewals,
			Misses: res.misses, Restarts: res.restarts,
		})
	}
	h := r.http
	m.HTTP = benchdoc.HTTP{
		StatusConns: h.statusConns, StatusRate: h.statusRate, Status: dist(h.statusLatencies),
		OfferedRate: pacedRate, PacedRate: h.pacedRate, Paced: dist(h.pacedLatencies),
		Watchers: h.watchers, Wake: dist(h.wakeLatencies), RSSIdle: h.rssIdle, RSSWithWatchers: h.rssWatchers,
	}
	m.App = r.appSection()
	return m
}

// overlapSection is the partition and pause trials.
func (r *report) overlapSection() *benchdoc.Overlap {
	o := r.opts
	s := &benchdoc.Overlap{
		Run:           r.run,
		LeaseDuration: benchdoc.Duration(o.leaseDuration), RenewDeadline: benchdoc.Duration(o.renewDeadline), RetryPeriod: benchdoc.Duration(o.retryPeriod),
		SampleInterval: benchdoc.Duration(sampleInterval), Expiry: benchdoc.Duration(o.leaseDuration + o.retryPeriod),
	}
	faults := func(f faultResults) benchdoc.Faults {
		return benchdoc.Faults{Trials: f.trials, Overlaps: f.overlaps, FirstAfter: f.firstAfter, Misses: f.misses, Recoveries: dist(f.recoveries)}
	}
	for _, res := range r.results {
		s.Impls = append(s.Impls, benchdoc.OverlapImpl{Name: res.impl.name, Partition: faults(res.partition), Pause: faults(res.pause)})
	}
	return s
}

// dist summarises durations as the report shows them (roundDuration).
func dist(d []time.Duration) benchdoc.Dist { return benchdoc.NewDist(d, roundDuration) }

// quantile is the nearest-rank quantile of durations, rounded as the
// report rounds them.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(max(int(q*float64(len(s))+0.5)-1, 0), len(s)-1)
	return roundDuration(s[i])
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// judgeIf is a met verdict (with detail) when ok, else missed by the
// figure.
func judgeIf(ok bool, detail, missed string, args ...any) benchdoc.Verdict {
	if ok {
		return benchdoc.Verdict{Met: true, Note: strings.TrimSpace(strings.TrimPrefix(detail, "met"))}
	}
	return benchdoc.Verdict{Note: fmt.Sprintf(missed, args...)}
}
