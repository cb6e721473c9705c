package main

import (
	"os"
	"path/filepath"
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
		footprintBegin, footprintEnd,
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

// -only footprint replaces its section and keeps the rest of the file; a
// file without the section gets it appended, and a missing file is created.
func TestWriteFootprintReplacesOnlyItsSection(t *testing.T) {
	r := newReport(options{statusConns: 64}, nil, httpFigures{}, appFigures{}, fakeFootprint())
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := r.write(path); err != nil {
		t.Fatal(err)
	}
	created, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(created), docHeader) || strings.Count(string(created), footprintBegin) != 1 {
		t.Fatalf("created file:\n%s", created)
	}

	if err := os.WriteFile(path, []byte("# Benchmarks\n\nother sections\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.write(path); err != nil {
		t.Fatal(err)
	}
	appended, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(appended), "# Benchmarks\n\nother sections\n\n"+footprintBegin) {
		t.Fatalf("appended file:\n%s", appended)
	}

	old := "before\n\n" + footprintBegin + "\nold figures\n" + footprintEnd + "\nafter\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.write(path); err != nil {
		t.Fatal(err)
	}
	replaced, _ := os.ReadFile(path)
	doc := string(replaced)
	if !strings.HasPrefix(doc, "before\n\n"+footprintBegin) || !strings.HasSuffix(doc, footprintEnd+"\nafter\n") ||
		strings.Contains(doc, "old figures") || strings.Count(doc, footprintBegin) != 1 {
		t.Fatalf("replaced file:\n%s", doc)
	}
}

// A full run's report carries the footprint section after the others, so
// that -only footprint can later replace it alone.
func TestFullReportEndsWithTheFootprintSection(t *testing.T) {
	r := newReport(options{statusConns: 64}, []results{{}, {}}, httpFigures{}, appFigures{}, fakeFootprint())
	md := r.markdown("")
	election := strings.Index(md, "| graceful handover")
	begin, end := strings.Index(md, footprintBegin), strings.Index(md, footprintEnd)
	if election < 0 || begin < election || end < begin || !strings.HasSuffix(md, footprintEnd+"\n") {
		t.Errorf("want the election table, then the footprint section last:\n%s", md)
	}
}
