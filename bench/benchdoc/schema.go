// Package benchdoc is the file format of the bench's measurements and the
// one template that renders docs/benchmarks.md from them.
//
// Each section of the document is one JSON file in a data directory
// (docs/benchmarks/<section>.json), written by the run that measured it:
// main.json (Main: the election table, the HTTP API, the app-aware
// features), overlap.json (Overlap), footprint.json (Footprint), node.json
// (Node: written by test/node's TestMemoryBesideClientGo, in the product
// module, when LEASEHOLD_BENCH_JSON names the directory), groups.json
// (Groups), handover.json (Handover) and fencing.json (Fencing: bench/fencing).
// The types below are the schema: their JSON field names are the files'
// keys. A file holds the summarised figures a reader sees and what each
// verdict is computed from, never the raw samples.
//
// Durations are strings in time.Duration's notation ("7.19ms"); sizes are
// bytes; shares of a core are fractions (0.0005 is 0.05 %).
package benchdoc

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written in its String form.
type Duration time.Duration

// MarshalText writes d as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// String is time.Duration's.
func (d Duration) String() string { return time.Duration(d).String() }

// Dist summarises a set of durations: their count and nearest-rank
// quantiles (each rounded as the bench rounds them).
type Dist struct {
	N   int      `json:"n"`
	Min Duration `json:"min"`
	P50 Duration `json:"p50"`
	P95 Duration `json:"p95"`
	P99 Duration `json:"p99"`
	Max Duration `json:"max"`
}

// Run says how a section's figures were obtained.
type Run struct {
	Command string `json:"command"` // as a reader would type it
	Date    string `json:"date"`    // "2006-01-02 15:04 UTC"
	Machine string `json:"machine"`
}

// Verdict judges a figure against its target: met, or missed by Note (the
// figure, as the verdict cell shows it). A met verdict's Note is an
// optional detail ("every trial").
type Verdict struct {
	Met  bool   `json:"met"`
	Note string `json:"note,omitempty"`
}
