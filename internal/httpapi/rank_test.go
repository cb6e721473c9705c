package httpapi

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/leasehold/leasehold/internal/group"
)

// rank: absent without data-aware failover (answers as before); with it,
// this instance's rank, the Lease's generation and the best candidate,
// null until the membership is listed.
func TestStatusRank(t *testing.T) {
	for _, tc := range []struct {
		name string
		rank func() group.RankStatus
		want any
	}{
		{"feature off", nil, absent},
		{"before the first probe and the membership", func() group.RankStatus { return group.RankStatus{} },
			map[string]any{"known": false, "generation": "", "position": 0.0, "leaseGeneration": "", "bestCandidate": nil}},
		{"known, with a best candidate", func() group.RankStatus {
			return group.RankStatus{Own: group.Rank{Known: true, Generation: "h1", Position: 42}, ObservedAt: t0,
				LeaseGeneration: "h1", Best: "b", Listed: true}
		}, map[string]any{"known": true, "generation": "h1", "position": 42.0, "observedAt": timestamp(t0),
			"leaseGeneration": "h1", "bestCandidate": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, candidate(), func(o *Options) { o.Rank = tc.rank })
			rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/status")
			got, ok := decode(t, rec)["rank"]
			if !ok {
				got = absent
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rank %#v, want %#v", got, tc.want)
			}
		})
	}
}
