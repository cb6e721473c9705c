package apphealth

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// (prometheus/testutil would need github.com/kylelemons/godebug in go.mod;
// the registry is read through client_model instead, as in httpapi.)

// sample is one series of a gathered family.
type sample struct {
	value float64 // gauge or counter value; histogram sample count
	kind  dto.MetricType
}

// gather reads reg: family name → label pairs → sample.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]map[string]sample {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]sample{}
	for _, mf := range mfs {
		out[mf.GetName()] = map[string]sample{}
		for _, m := range mf.GetMetric() {
			var parts []string
			for _, l := range m.GetLabel() {
				parts = append(parts, l.GetName()+"="+l.GetValue())
			}
			s := sample{kind: mf.GetType()}
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				s.value = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.value = float64(m.GetHistogram().GetSampleCount())
			}
			out[mf.GetName()][strings.Join(parts, ",")] = s
		}
	}
	return out
}

// checkCounts returns the {success, failure} check counters of m.
func checkCounts(t *testing.T, m *Metrics) [2]float64 {
	t.Helper()
	var out [2]float64
	for i, c := range []prometheus.Counter{m.success, m.failure} {
		var d dto.Metric
		if err := c.Write(&d); err != nil {
			t.Fatal(err)
		}
		out[i] = d.GetCounter().GetValue()
	}
	return out
}

// The metrics start at "not healthy, no checks" with both result series
// present, and follow the probes.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)

	expect := func(state string, healthy, success, failure, checks float64) {
		t.Helper()
		got := gather(t, reg)
		want := map[string]map[string]sample{
			"leasehold_app_healthy": {"": {healthy, dto.MetricType_GAUGE}},
			"leasehold_app_health_checks_total": {
				"result=success": {success, dto.MetricType_COUNTER},
				"result=failure": {failure, dto.MetricType_COUNTER},
			},
			"leasehold_app_health_check_duration_seconds": {"": {checks, dto.MetricType_HISTOGRAM}},
		}
		for name, series := range want {
			if len(got[name]) != len(series) {
				t.Errorf("%s: %s has series %v, want %v", state, name, got[name], series)
			}
			for l, w := range series {
				if g, ok := got[name][l]; !ok || g != w {
					t.Errorf("%s: %s{%s} = %+v (present %v), want %+v", state, name, l, g, ok, w)
				}
			}
		}
	}
	expect("before Run", 0, 0, 0, 0)

	a := newApp(t)
	cfg := config(a.url(), time.Second, 2)
	cfg.Metrics = m
	r := start(t, cfg)
	r.first()
	expect("after a 200", 1, 1, 0, 1)
	a.answer(http.StatusInternalServerError)
	r.next()
	expect("after one 500 (below the threshold)", 1, 1, 1, 2)
	r.next()
	expect("after two 500s (the threshold)", 0, 1, 2, 3)
	a.answer(http.StatusOK)
	r.next()
	expect("after a 200 again", 1, 2, 2, 4)
	r.stop()
}

// NewMetrics(nil) registers nothing and works.
func TestMetricsUnregistered(t *testing.T) {
	m := NewMetrics(nil)
	m.success.Inc()
	if got := checkCounts(t, m); got != [2]float64{1, 0} {
		t.Errorf("checks = %v, want {1, 0}", got)
	}
	// Registering twice with one registry would panic; two unregistered
	// sets are independent.
	if got := checkCounts(t, NewMetrics(nil)); got != [2]float64{0, 0} {
		t.Errorf("a second Metrics starts at %v, want {0, 0}", got)
	}
}
