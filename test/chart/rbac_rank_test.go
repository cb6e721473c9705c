package chart_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// With appRank.url on one Lease, the real sidecars, with the credentials
// of a user bound to nothing but the chart's rendered Role, publish their
// ranks on member Leases under the Lease's name, and on the leader's
// SIGTERM the best-ranked member leads, not the newest: the handover
// followed the data. No request is ever forbidden.
func TestChartRankRoleHandsToTheBestRanked(t *testing.T) {
	kubetest.Require(t, cluster)
	t.Parallel()
	ns := newNamespace(t, "rank")
	s := chartSidecar(t, ns, "--set", "appRank.url=http://127.0.0.1:8080/rank")
	if len(s.leases) != 1 || slices.ContainsFunc(s.env, func(e string) bool { return e == "LEASEHOLD_HANDOVER=any" }) {
		t.Fatalf("env %v, leases %v: want one Lease, handed to a successor", s.env, s.leases)
	}
	f := s.fleet(t, ns, s.role)
	ranked := func(name string, position int) *fleet.Instance {
		t.Helper()
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `{"generation":"g1","position":%d}`, position)
		}))
		t.Cleanup(app.Close)
		g := f
		g.Env = append(slices.Clone(f.Env), "LEASEHOLD_APP_RANK_URL="+app.URL+"/rank",
			"LEASEHOLD_APP_HEALTH_INTERVAL=200ms", "LEASEHOLD_APP_HEALTH_TIMEOUT=200ms")
		return start(t, g, name)
	}
	leads := func(inst *fleet.Instance) bool {
		st, err := inst.Status(t.Context())
		return err == nil && st.Leader
	}
	a := ranked("a", 100)
	eventually(t, generous, "a leads", func() bool { return leads(a) })
	best := ranked("best", 90)
	newest := ranked("newest", 10)
	for _, inst := range []*fleet.Instance{a, best, newest} {
		eventually(t, generous, inst.Name+" sees 3 members", func() bool {
			return metric(t, inst, "leasehold_members", nil) == 3
		})
	}
	stopGracefully(t, a)
	eventually(t, generous, "best (the best-ranked) leads", func() bool { return leads(best) })
	if leads(newest) {
		t.Error("newest leads too")
	}
	noForbiddenInLogs(t, a, best, newest)
}
