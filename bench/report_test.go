package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/bench/benchdoc"
)

// The sections' headings, as the template renders them.
const (
	overlapHeading   = "## Overlap under faults"
	footprintHeading = "## Footprint of one instance (default configuration)"
	groupsHeading    = "## Lease groups (issue 12)"
	handoverHeading  = "## Leader address, forwarding proxy, and handover to a chosen successor (issue 13)"
)

// newReport is a run's report as run builds it: the election table when
// the run was a full one with results.
func newReport(opts options, res []results, h httpFigures, a appFigures, f footprintFigures) *report {
	return &report{
		opts: opts, run: benchdoc.Run{Command: opts.command, Date: "2026-12-03 12:00 UTC", Machine: "2 CPUs (test), shared and noisy"},
		election: opts.only == "" && len(res) > 0, results: res, http: h, app: a, footprint: f,
	}
}

// markdown renders the run's sections alone, through the template.
func (r *report) markdown(plot string) string {
	md, err := benchdoc.Render(r.doc(plot))
	if err != nil {
		panic(err)
	}
	return string(md)
}

func fakeFaults(overlaps int) faultResults {
	return faultResults{trials: 10, overlaps: overlaps, firstAfter: overlaps, recoveries: []time.Duration{4 * time.Second, 5 * time.Second}}
}

func fakeOverlapResults() []results {
	return []results{
		{impl: implementation{name: "leasehold"}, partition: fakeFaults(0), pause: fakeFaults(0)},
		{impl: implementation{name: "client-go LeaderElector"}, partition: fakeFaults(3), pause: fakeFaults(4)},
	}
}

// A full run's report carries the overlap section after the election table.
func TestFullReportHasTheOverlapSection(t *testing.T) {
	r := newReport(options{statusConns: 64}, fakeOverlapResults(), httpFigures{}, appFigures{}, footprintFigures{})
	md := r.markdown("")
	election, overlap := strings.Index(md, "| graceful handover"), strings.Index(md, overlapHeading)
	if election < 0 || overlap < election {
		t.Errorf("want the election table, then the overlap section:\n%s", md)
	}
	if !strings.Contains(md, "| pause (SIGSTOP > leaseDuration, then SIGCONT): trials with overlap / deposed leader's first answer said leader / no successor within 3 × leaseDuration | 0 / 0 / 0 of 10 | 4 / 4 / 0 of 10 | 0 |") {
		t.Errorf("no pause row:\n%s", md)
	}
}

// -only overlap renders only its section.
func TestOnlyOverlapRendersOnlyItsSection(t *testing.T) {
	r := newReport(options{only: "overlap", command: "cd bench && go run . -only overlap"}, fakeOverlapResults(), httpFigures{}, appFigures{}, footprintFigures{})
	md := r.markdown("")
	if !strings.Contains(md, overlapHeading) || strings.Contains(md, "graceful handover") || !strings.HasSuffix(md, "Command: `cd bench && go run . -only overlap`, 2026-12-03 12:00 UTC.\nMachine: 2 CPUs (test), shared and noisy.\n") {
		t.Errorf("-only overlap renders:\n%s", md)
	}
}

// A run writes the section files of the sections it measured, replaces
// those alone, and renders the document from every section file: the
// others keep their last run's figures.
func TestWriteReplacesOnlyItsSections(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "benchmarks.md")
	full := newReport(options{statusConns: 64, leaseDuration: 5 * time.Second, retryPeriod: time.Second, command: "full run"}, fakeOverlapResults(), httpFigures{}, appFigures{}, fakeFootprint())
	if err := full.write(path); err != nil {
		t.Fatal(err)
	}
	if got := jsonFiles(t, filepath.Join(dir, "benchmarks")); !slices.Equal(got, []string{"footprint.json", "main.json", "overlap.json"}) {
		t.Errorf("a full run without groups and handover wrote %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "benchmarks-latency.svg")); err != nil {
		t.Errorf("no latency plot beside the document: %v", err)
	}
	ov := newReport(options{only: "overlap", command: "overlap run"}, fakeOverlapResults(), httpFigures{}, appFigures{}, footprintFigures{})
	ov.results[0].partition.overlaps = 7
	if err := ov.write(path); err != nil {
		t.Fatal(err)
	}
	doc := string(readFile(t, path))
	for _, want := range []string{"| graceful handover", "![handover and failover latency, every trial](benchmarks-latency.svg)", overlapHeading, footprintHeading, "| 7 / 0 / 0 of 10 |"} {
		if strings.Count(doc, want) != 1 {
			t.Errorf("document has %q %d times, want once:\n%s", want, strings.Count(doc, want), doc)
		}
	}
	// The overlap section is the second run's, the others the first's.
	if strings.Count(doc, "`overlap run`") != 1 || strings.Count(doc, "`full run`") != 2 {
		t.Errorf("want the overlap section from the second run, the election table and the footprint from the first:\n%s", doc)
	}
	rendered, err := benchdoc.Load(filepath.Join(dir, "benchmarks"))
	if err != nil {
		t.Fatal(err)
	}
	if md, err := benchdoc.Render(rendered); err != nil || string(md) != doc {
		t.Errorf("the document is not the rendering of its section files (%v)", err)
	}
}

func jsonFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
