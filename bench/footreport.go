package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/bench/benchdoc"
)

// usedGroups are the API groups leasehold uses: Leases, Pods for the
// leader label, and admissionregistration/v1 for the objects `leasehold
// fencing-policy` prints (test/image's usedGroups, which the image test
// holds the binary to).
var usedGroups = []string{"admissionregistration/v1", "coordination/v1", "core/v1"}

// Targets of the footprint section (issue 16) for leasehold.
const (
	maxBinary    = 25e6                   // bytes, stripped
	maxIdleRatio = 0.6                    // of client-go's idle RSS
	maxAddedPer  = 12 << 20               // bytes of RSS per 1,000 open watchers
	maxCPU       = 0.005                  // of one core, while leading
	maxStart     = 150 * time.Millisecond // p50, start → /readyz 200
)

// footprintSection summarises the footprint figures and judges leasehold's.
func (r *report) footprintSection() *benchdoc.Footprint {
	f := r.footprint
	s := &benchdoc.Footprint{
		Run: r.run, Window: benchdoc.Duration(f.window.Round(time.Second)), Watchers: f.watchers, StatusConns: r.opts.statusConns,
		StatusLen: benchdoc.Duration(f.statusLen), UsedGroups: usedGroups,
		MaxBinary: maxBinary, MaxIdleRatio: maxIdleRatio, MaxAdded: maxAddedPer * float64(f.watchers) / 1000, MaxCPU: maxCPU, MaxStart: benchdoc.Duration(maxStart),
	}
	for _, im := range f.impls {
		s.Impls = append(s.Impls, benchdoc.FootprintImpl{
			Name: im.impl.name, BinaryBytes: im.binaryBytes, Packages: im.packages, APIGroups: len(im.apiGroups), Clientset: im.clientset,
			IdleSamples: len(im.idle), IdleRSS: float64(medianInt(rssOf(im.idle))), IdleAnon: float64(medianInt(anonOf(im.idle))),
			WatchSamples: len(im.withWatch), WatchRSS: float64(medianInt(rssOf(im.withWatch))),
			CPU: benchdoc.Duration(im.cpu), CPUWindow: benchdoc.Duration(im.cpuWindow.Round(time.Second)), CPUShare: share(im.cpu, im.cpuWindow),
			Starts: dist(im.starts), Rounds: len(im.rates), Rate: median(im.rates), Latency: dist(im.latencies),
		})
		if strings.HasPrefix(im.impl.name, "leasehold at ") {
			s.Ref = im.impl.name
		}
	}
	lh, cg := s.Impls[0], s.Impls[1]
	raw := f.impls[0]
	s.Unused = slices.DeleteFunc(slices.Clone(raw.apiGroups), func(g string) bool { return slices.Contains(usedGroups, g) })
	s.TypedVia = raw.typedVia
	s.BinaryVerdict = judgeIf(float64(lh.BinaryBytes) <= maxBinary, "", "%.1f MB, %.0f%% over", float64(lh.BinaryBytes)/1e6, 100*(float64(lh.BinaryBytes)/maxBinary-1))
	s.PackagesVerdict = judgeIf(len(s.Unused) == 0 && !lh.Clientset, "", "%s it does not use; clientset: %s", plural(len(s.Unused), "group"), yesNo(lh.Clientset))
	s.IdleVerdict = judgeIf(lh.IdleRSS <= maxIdleRatio*cg.IdleRSS, "", "%.2f×, %.1f MiB over", lh.IdleRSS/cg.IdleRSS, (lh.IdleRSS-maxIdleRatio*cg.IdleRSS)/(1<<20))
	added := lh.WatchRSS - lh.IdleRSS
	s.AddedVerdict = judgeIf(added <= s.MaxAdded, "", "%.1f MiB over", (added-s.MaxAdded)/(1<<20))
	s.CPUVerdict = judgeIf(lh.CPUShare <= maxCPU, "", "%.2f %%", 100*lh.CPUShare)
	s.StartVerdict = judgeIf(time.Duration(lh.Starts.P50) <= maxStart, "", "p50 %v", lh.Starts.P50)

	fl := f.floor
	s.Floor = benchdoc.Floor{
		IdleRSS: float64(medianInt(rssOf(fl.idle))), WatchRSS: float64(medianInt(rssOf(fl.withWatch))),
		Before: benchdoc.MemStats(fl.before), After: benchdoc.MemStats(fl.after),
	}
	p := f.profile
	s.Profile = benchdoc.Profile{Before: benchdoc.MemStats(p.before), After: benchdoc.MemStats(p.after), IdleTop: p.idleTop, HeapTop: p.heapTop}
	for _, where := range slices.SortedStableFunc(maps.Keys(p.goroutines), func(a, c string) int {
		return cmp.Or(p.goroutines[c]-p.goroutines[a], strings.Compare(a, c))
	}) {
		s.Profile.Goroutines = append(s.Profile.Goroutines, benchdoc.Goroutines{Where: where, Count: p.goroutines[where]})
	}
	return s
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// share is used / window, 0 for no window.
func share(used, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return used.Seconds() / window.Seconds()
}
