package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/bench/benchdoc"
)

var writeFixture = flag.Bool("fixture", false, "write every section of fullReport to benchdoc/testdata/fixture (the golden test's input)")

func ms(v ...int) []time.Duration {
	var d []time.Duration
	for _, x := range v {
		d = append(d, time.Duration(x)*time.Millisecond)
	}
	return d
}

// fullReport is a run of every section the bench measures, with made-up
// figures.
func fullReport() *report {
	res := fakeOverlapResults()
	res[0].handovers, res[0].failovers = ms(7, 8, 9, 12), ms(4300, 4400, 4900)
	res[1].handovers, res[1].failovers = ms(320, 400, 1100), ms(5200, 5300, 7100)
	res[0].requests = requestCounts{window: 30 * time.Second, leaderRequests: 30, renewals: 30, candidates: 2}
	res[1].requests = requestCounts{window: 30 * time.Second, leaderRequests: 29, leaderGets: 1, candidateRequests: 39, candidates: 2}
	h := httpFigures{statusConns: 64, statusRate: 56532, statusLatencies: ms(1, 1, 5), pacedRate: 19995, pacedLatencies: ms(1, 2),
		watchers: 1000, wakeLatencies: ms(14, 23, 25), rssIdle: 25 << 20, rssWatchers: 55 << 20}
	a := appFigures{trials: 3,
		gate:      gateFigures{interval: time.Second, timeout: 500 * time.Millisecond, threshold: 3, takeovers: ms(2457, 2915, 2945)},
		handovers: labelTrials{kind: "handover", lead: ms(8, 9, 12), labelled: ms(10, 15, 27), lag: ms(2, 5, 18)},
		failovers: labelTrials{kind: "failover", lead: ms(4380, 4896, 4949), labelled: ms(4387, 4901, 4954), lag: ms(5, 6, 7), wrong: 1},
	}
	opts := options{statusConns: 64, leaseDuration: 5 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: time.Second,
		command: "cd bench && go run . -out ../docs/benchmarks.md"}
	r := newReport(opts, res, h, a, fakeFootprint())
	r.groups, r.handover = fakeGroups(), fakeHandover()
	return r
}

// The figures rendered straight, and rendered after a trip through their
// section files, are the same document; and the files, read and written
// again, are the same bytes.
func TestSectionFilesRoundTrip(t *testing.T) {
	r := fullReport()
	d := r.doc("benchmarks-latency.svg")
	d.Node = &benchdoc.Node{Run: r.run, Samples: 5, Every: benchdoc.Duration(4 * time.Second), Watchers: 1000, Idle: 6 << 20, WithWatchers: 38 << 20, Baseline: 7 << 20, Limit: 64 << 20}
	d.Fencing = &benchdoc.Fencing{Run: r.run, Updates: 2000, With: benchdoc.Dist{N: 2000, P50: benchdoc.Duration(3304 * time.Microsecond)}, Without: benchdoc.Dist{N: 2000, P50: benchdoc.Duration(2698 * time.Microsecond)}}
	want, err := benchdoc.Render(d)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if *writeFixture {
		dir = filepath.Join("benchdoc", "testdata", "fixture")
	}
	set := d.Set()
	if len(set) != 7 {
		t.Fatalf("the full report sets %d sections, want all 7", len(set))
	}
	for name, section := range set {
		if err := benchdoc.Write(dir, name, section); err != nil {
			t.Fatal(err)
		}
	}
	read, err := benchdoc.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := benchdoc.Render(read)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("rendered from the files:\n%s\nwant, rendered from the figures:\n%s", got, want)
	}
	for name, section := range read.Set() {
		again, err := benchdoc.Marshal(section)
		if err != nil {
			t.Fatal(err)
		}
		if file, _ := os.ReadFile(filepath.Join(dir, name+".json")); !bytes.Equal(again, file) {
			t.Errorf("%s.json read and written again differs:\n%s\nwant:\n%s", name, again, file)
		}
	}
}
