package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fakeFaults(overlaps int) faultResults {
	return faultResults{trials: 10, overlaps: overlaps, firstAfter: overlaps, recoveries: []time.Duration{4 * time.Second, 5 * time.Second}}
}

func fakeOverlapResults() []results {
	return []results{
		{partition: fakeFaults(0), pause: fakeFaults(0)},
		{partition: fakeFaults(3), pause: fakeFaults(4)},
	}
}

// A full run's report carries the overlap section after the election table
// and before the footprint section, so that -only overlap can later replace
// it alone.
func TestFullReportHasTheOverlapSection(t *testing.T) {
	r := newReport(options{statusConns: 64}, fakeOverlapResults(), httpFigures{}, appFigures{}, fakeFootprint())
	md := r.markdown("")
	election := strings.Index(md, "| graceful handover")
	begin, end := strings.Index(md, overlapBegin), strings.Index(md, overlapEnd)
	footprint := strings.Index(md, footprintBegin)
	if election < 0 || begin < election || end < begin || footprint < end {
		t.Errorf("want the election table, the overlap section, then the footprint section:\n%s", md)
	}
	if !strings.Contains(md, "| pause (SIGSTOP > leaseDuration, then SIGCONT): trials with overlap / deposed leader's first answer said leader / no successor within 3 × leaseDuration | 0 / 0 / 0 of 10 | 4 / 4 / 0 of 10 | 0 |") {
		t.Errorf("no pause row:\n%s", md)
	}
}

// -only overlap writes only its section, and replaces only that section of
// the file.
func TestWriteOverlapReplacesOnlyItsSection(t *testing.T) {
	r := newReport(options{only: "overlap", command: "cd bench && go run . -only overlap"}, fakeOverlapResults(), httpFigures{}, appFigures{}, footprintFigures{})
	md := r.markdown("")
	if !strings.HasPrefix(md, overlapBegin) || !strings.HasSuffix(md, overlapEnd+"\n") || strings.Contains(md, "graceful handover") {
		t.Errorf("-only overlap renders:\n%s", md)
	}
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	old := "before\n\n" + overlapBegin + "\nold figures\n" + overlapEnd + "\n\n" + footprintBegin + "\nfootprint\n" + footprintEnd + "\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.write(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	doc := string(data)
	if !strings.HasPrefix(doc, "before\n\n"+overlapBegin) || !strings.HasSuffix(doc, overlapEnd+"\n\n"+footprintBegin+"\nfootprint\n"+footprintEnd+"\n") ||
		strings.Contains(doc, "old figures") || !strings.Contains(doc, "`cd bench && go run . -only overlap`") {
		t.Fatalf("replaced file:\n%s", doc)
	}
}
