package main

import (
	"strings"
	"testing"
	"time"
)

func fakeFootprint() footprintFigures {
	mem := func(rss, anon int64) []memSample { return []memSample{{rss << 20, anon << 20}} }
	impl := func(name string, size int64, idle, watch int64) implFootprint {
		return implFootprint{
			impl: footprintImpl{name: name, pkg: "./x"}, binaryBytes: size, packages: 500,
			apiGroups: []string{"apps/v1", "coordination/v1", "core/v1"}, typedVia: []string{"internal/elect"},
			idle: mem(idle, 5), withWatch: mem(watch, 30), cpu: 30 * time.Millisecond, cpuWindow: time.Minute,
			starts: []time.Duration{20 * time.Millisecond}, rates: []float64{20000}, latencies: []time.Duration{time.Millisecond},
		}
	}
	return footprintFigures{
		ran: true, window: time.Minute, watchers: 1000, statusLen: 5 * time.Second,
		impls: []implFootprint{impl("leasehold", 29e6, 26, 58), impl("client-go LeaderElector", 28e6, 24, 52), impl("leasehold at abc", 29e6, 26, 58)},
		floor: floorFigures{idle: mem(6, 1), withWatch: mem(34, 29), before: memstats{1 << 20, 1 << 19, 3}, after: memstats{16 << 20, 12 << 20, 2003}},
		profile: profileFigures{before: memstats{2 << 20, 1 << 19, 15}, after: memstats{18 << 20, 13 << 20, 2015},
			goroutines: map[string]int{"net/http.(*connReader).backgroundRead": 1000}, idleTop: "Showing nodes accounting for 691.88kB, 44.33% of 1560.65kB total\n", heapTop: "top\n"},
	}
}

// The section judges each target from the figures and names what misses.
func TestFootprintMarkdown(t *testing.T) {
	r := newReport(options{statusConns: 64, command: "cd bench && go run . -only footprint"}, nil, httpFigures{}, appFigures{}, fakeFootprint())
	md := r.markdown("")
	for _, want := range []string{
		footprintHeading,
		"| binary, stripped | 29.0 MB | 28.0 MB | 29.0 MB | 1.04× | ≤ 25 MB | **missed**: 29.0 MB, 16% over |",
		"**missed**: 1 group it does not use; clientset: no",
		"**missed**: 1.08×, 11.6 MiB over",
		"| ≤ 12 MiB (12 MiB per 1,000) | **missed**: 20.0 MiB over |",
		"| 0.05 % | 0.05 % | 0.05 % | 1.00× | ≤ 0.5 % of one core | met |",
		"1.00× leasehold at abc's",
		"because it imports client-go's typed clients (from internal/elect)",
		"| `net/http.(*connReader).backgroundRead` | 1000 |",
		"the Go heap live after GC is 1560.65kB",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
}

// A full run's report carries the footprint section after the election
// table and the overlap section.
func TestFullReportHasTheFootprintSectionAfterTheOverlapSection(t *testing.T) {
	r := newReport(options{statusConns: 64}, fakeOverlapResults(), httpFigures{}, appFigures{}, fakeFootprint())
	md := r.markdown("")
	election, overlap := strings.Index(md, "| graceful handover"), strings.Index(md, overlapHeading)
	footprint := strings.Index(md, footprintHeading)
	if election < 0 || overlap < election || footprint < overlap || !strings.HasSuffix(md, "up to about 9 MiB).\n") {
		t.Errorf("want the election table, the overlap section, then the footprint section and its notes last:\n%s", md)
	}
}
