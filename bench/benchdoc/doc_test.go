package benchdoc

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.md from testdata/fixture")

// The template renders the fixture's section files (every section, written
// by the bench's TestSectionFilesRoundTrip -fixture) as the golden
// document.
func TestGolden(t *testing.T) {
	d, err := Load(filepath.Join("testdata", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Set()); n != 7 {
		t.Fatalf("the fixture has %d sections, want all 7", n)
	}
	got, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden.md")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("rendered document differs from %s at line %d:\n got: %s\nwant: %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("rendered document has %d lines, %s %d", len(gl), golden, len(wl))
	}
}

// docs/benchmarks.md is the rendering of docs/benchmarks/*.json: the
// document never drifts from its figures (make bench-render renders it
// again).
func TestTheDocumentIsItsSectionFilesRendered(t *testing.T) {
	const doc = "../../docs/benchmarks.md"
	d, err := Load(DataDir(doc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the rendering of %s/*.json: run make bench-render", doc, DataDir(doc))
	}
}

// A section file with a key the schema lacks is refused, naming the file.
func TestLoadRefusesUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fencing.json"), []byte(`{"updates": 10, "p50": "1ms"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "fencing.json") || !strings.Contains(err.Error(), `"p50"`) {
		t.Errorf("Load: %v, want fencing.json's unknown key p50 refused", err)
	}
}

// Durations are written in time.Duration's notation and read back exactly.
func TestDurationText(t *testing.T) {
	d := Dist{N: 3, P50: Duration(7190 * time.Microsecond), Max: Duration(4985 * time.Millisecond)}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"p50":"7.19ms"`) || !strings.Contains(string(data), `"max":"4.985s"`) {
		t.Errorf("marshalled %s", data)
	}
	var back Dist
	if err := json.Unmarshal(data, &back); err != nil || back != d {
		t.Errorf("read back %+v (%v), want %+v", back, err, d)
	}
	if err := json.Unmarshal([]byte(`{"p50":"soon"}`), &back); err == nil {
		t.Error("a duration that does not parse was accepted")
	}
}

// NewDist is nearest-rank, rounded as asked.
func TestNewDist(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond+400*time.Microsecond)
	}
	got := NewDist(d, func(d time.Duration) time.Duration { return d.Round(time.Millisecond) })
	want := Dist{N: 100, Min: Duration(time.Millisecond), P50: Duration(50 * time.Millisecond), P95: Duration(95 * time.Millisecond), P99: Duration(99 * time.Millisecond), Max: Duration(100 * time.Millisecond)}
	if got != want {
		t.Errorf("NewDist = %+v, want %+v", got, want)
	}
	if (NewDist(nil, nil) != Dist{}) {
		t.Error("no durations: want the zero Dist")
	}
}
