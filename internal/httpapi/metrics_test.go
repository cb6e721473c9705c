package httpapi

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/leasehold/leasehold/internal/elect"
)

// gauges gathers the registry: name → label pairs → value.
func (f *fixture) gauges() map[string]map[string]float64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		out[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			out[mf.GetName()][labels(m)] = value(m)
		}
	}
	return out
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return -1
}

func TestMetricsValues(t *testing.T) {
	f := newFixture(t, candidate())
	want := func(state string, exp map[string]map[string]float64) {
		t.Helper()
		got := f.gauges()
		for name, series := range exp {
			for l, v := range series {
				if g, ok := got[name][l]; !ok || g != v {
					t.Errorf("%s: %s{%s} = %v (present %v), want %v", state, name, l, g, ok, v)
				}
			}
			if len(got[name]) != len(series) {
				t.Errorf("%s: %s has series %v, want %v", state, name, got[name], series)
			}
		}
	}
	build := "goversion=" + runtime.Version() + ",version=v1.2.3"
	want("candidate", map[string]map[string]float64{
		"leasehold_leader":              {"": 0},
		"leasehold_candidate":           {"": 1},
		"leasehold_term":                {"": 4},
		"leasehold_fencing_token":       {"": 880},
		"leasehold_valid_seconds":       {"": 0},
		"leasehold_watchers":            {"": 0},
		"leasehold_holds":               {"": 0},
		"leasehold_build_info":          {build: 1},
		"leader_election_master_status": {"name=orders-leader": 0},
	})

	f.publish(leading())
	f.clock.SetTime(t0.Add(2500 * time.Millisecond))
	want("leading", map[string]map[string]float64{
		"leasehold_leader":              {"": 1},
		"leasehold_term":                {"": 5},
		"leasehold_fencing_token":       {"": 1042},
		"leasehold_valid_seconds":       {"": 7.5},
		"leader_election_master_status": {"name=orders-leader": 1},
	})

	f.clock.SetTime(t0.Add(10 * time.Second)) // validity ran out, no new Snapshot
	want("expired", map[string]map[string]float64{
		"leasehold_leader":              {"": 0},
		"leasehold_valid_seconds":       {"": 0},
		"leader_election_master_status": {"name=orders-leader": 0},
	})

	answer := get(t.Context(), live(t, f.srv.APIHandler())+"/v1/watch?index="+idxs(1)+"&wait=10m")
	f.waitWatchers(1)
	want("watching", map[string]map[string]float64{"leasehold_watchers": {"": 1}})
	f.publish(candidate())
	receive(t, answer)
	f.waitWatchers(0)

	out := candidate()
	out.Candidate = false
	f.publish(out)
	want("withdrawn", map[string]map[string]float64{"leasehold_candidate": {"": 0}, "leasehold_leader": {"": 0}})
}

// /metrics serves exactly the Registry, including other packages'
// collectors, with the HTTP layer's gauges beside them and not duplicated.
func TestMetricsEndpoint(t *testing.T) {
	f := newFixture(t, leading())
	elect.NewMetrics(f.reg) // what cmd does with the same registry
	url := live(t, f.srv.OpsHandler())
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get(indexHeader) != idxs(0) {
		t.Fatalf("code %d, %s %q", resp.StatusCode, indexHeader, resp.Header.Get(indexHeader))
	}
	text := string(body)
	for _, line := range []string{
		"leasehold_leader 1",
		"leasehold_candidate 1",
		"leasehold_term 5",
		"leasehold_fencing_token 1042",
		"leasehold_valid_seconds 10",
		"leasehold_watchers 0",
		"leasehold_holds 0",
		`leasehold_build_info{goversion="` + runtime.Version() + `",version="v1.2.3"} 1`,
		`leader_election_master_status{name="orders-leader"} 1`,
		"leasehold_transitions_total 0",
		"# TYPE leasehold_renew_duration_seconds histogram",
	} {
		if strings.Count(text, "\n"+line+"\n") != 1 && !strings.HasPrefix(text, line+"\n") {
			t.Errorf("/metrics lacks the line %q once:\n%s", line, text)
		}
	}
}

// With Options.Registerer (the sidecar passes the Registry wrapped with the
// Lease's labels), every series of the HTTP layer carries those labels, and
// /metrics still serves the whole Registry.
func TestMetricsThroughRegisterer(t *testing.T) {
	election := prometheus.Labels{"lease": "orders-leader", "namespace": "shop"}
	f := newFixture(t, leading(), func(o *Options) { o.Registerer = prometheus.WrapRegistererWith(election, o.Registry) })
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 10 {
		t.Errorf("gathered %d families, want the HTTP layer's 10", len(mfs))
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["lease"] != "orders-leader" || got["namespace"] != "shop" {
				t.Errorf("%s{%s}: want lease and namespace", mf.GetName(), labels(m))
			}
		}
	}
	if got := f.gauges()["leasehold_leader"]; got["lease=orders-leader,namespace=shop"] != 1 {
		t.Errorf("leasehold_leader = %v", got)
	}
}
