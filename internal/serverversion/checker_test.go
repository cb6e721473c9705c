package serverversion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/version"
)

// logLine is what the tests read of a JSON log line.
type logLine struct {
	Level, Msg string
}

// runChecker runs a Checker whose read answers info or err, and returns it
// with its log lines and registry.
func runChecker(t *testing.T, info version.Info, err error) (*Checker, []logLine, *prometheus.Registry) {
	t.Helper()
	var out bytes.Buffer
	reg := prometheus.NewRegistry()
	c, nerr := NewChecker(func(context.Context) (version.Info, error) { return info, err }, time.Second,
		slog.New(slog.NewJSONHandler(&out, nil)), reg)
	if nerr != nil {
		t.Fatal(nerr)
	}
	if err := c.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v, want nil (it never fails)", err)
	}
	var lines []logLine
	for l := range strings.Lines(out.String()) {
		var line logLine
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, line)
	}
	return c, lines, reg
}

// warnings are the messages of the WARN lines.
func warnings(lines []logLine) []string {
	var w []string
	for _, l := range lines {
		if l.Level == "WARN" {
			w = append(w, l.Msg)
		}
	}
	return w
}

// series gathers reg: each series' name and labels, and its value.
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetGauge().GetValue()
		}
	}
	return got
}

// Each version's log warnings and series, as Assess decides them.
func TestCheckerLogsAndExportsTheAssessment(t *testing.T) {
	for _, tc := range []struct {
		version  string
		warnings int
		series   map[string]float64
	}{
		{"v1.37.2", 0, map[string]float64{"leasehold_apiserver_info{git_version=v1.37.2}": 1, "leasehold_apiserver_resource_versions_comparable": 1}},
		{"v1.34.1", 1, map[string]float64{"leasehold_apiserver_info{git_version=v1.34.1}": 1, "leasehold_apiserver_resource_versions_comparable": 0}},
		{"v1.28.3", 2, map[string]float64{"leasehold_apiserver_info{git_version=v1.28.3}": 1, "leasehold_apiserver_resource_versions_comparable": 0}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			c, lines, reg := runChecker(t, version.Info{GitVersion: tc.version}, nil)
			want, _ := Assess(tc.version)
			if w := warnings(lines); len(w) != tc.warnings || !slices.Equal(w, want.Warnings) {
				t.Errorf("warnings %q, want Assess's %d: %q", w, tc.warnings, want.Warnings)
			}
			if a, ok := c.Assessment(); !ok || a.GitVersion != tc.version || a.ResourceVersionsComparable != want.ResourceVersionsComparable {
				t.Errorf("Assessment() = %+v, %v; want %+v", a, ok, want)
			}
			if got := series(t, reg); !maps.Equal(got, tc.series) {
				t.Errorf("series %v, want %v", got, tc.series)
			}
		})
	}
}

// A version that cannot be read, or is no version, is logged once, and
// leaves no Assessment and no series.
func TestCheckerCarriesOnWithoutTheVersion(t *testing.T) {
	for name, read := range map[string]struct {
		info version.Info
		err  error
	}{
		"forbidden":  {err: errors.New(`version.Info: forbidden: User "x" cannot get path "/version"`)},
		"no version": {info: version.Info{GitVersion: "unknown"}},
	} {
		t.Run(name, func(t *testing.T) {
			c, lines, reg := runChecker(t, read.info, read.err)
			if w := warnings(lines); len(w) != 1 || w[0] != unreadable {
				t.Errorf("warnings %q, want one: %q", w, unreadable)
			}
			if a, ok := c.Assessment(); ok {
				t.Errorf("Assessment() = %+v, true; want none", a)
			}
			if got := series(t, reg); len(got) != 0 {
				t.Errorf("series %v, want none", got)
			}
		})
	}
}
