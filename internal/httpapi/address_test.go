package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
)

// leaderAddress: absent without an advertised address (answers as before);
// with one, the valid leader's address as judged at the moment of
// answering: own while leader, the holder's until its claim runs out
// (FreeAt), else null. A new address on the Lease moves the index.
func TestLeaderAddress(t *testing.T) {
	follower := candidate()
	follower.LeaderAddress, follower.FreeAt = "10.0.0.9:4042", t0.Add(5*time.Second)
	leader := leading()
	leader.LeaderAddress = "10.0.0.3:4042"
	noAddress := candidate()
	noAddress.FreeAt = t0.Add(5 * time.Second)

	for _, tc := range []struct {
		name       string
		snap       elect.Snapshot
		advertises bool
		at         time.Duration // after t0
		want       any           // the decoded field; absent when missing
	}{
		{"feature off", follower, false, 0, absent},
		{"feature off, leading", leader, false, 0, absent},
		{"leader", leader, true, 0, "10.0.0.3:4042"},
		{"leader, validity ended", leader, true, 10 * time.Second, nil},
		{"follower, holder's claim running", follower, true, 4 * time.Second, "10.0.0.9:4042"},
		{"follower, holder's claim ran out", follower, true, 5 * time.Second, nil},
		{"follower, holder advertises none", noAddress, true, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.snap, func(o *Options) { o.Advertises = tc.advertises })
			f.clock.SetTime(t0.Add(tc.at))
			rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/status")
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			got, ok := decode(t, rec)["leaderAddress"]
			if !ok {
				got = absent
			}
			if got != tc.want {
				t.Errorf("leaderAddress %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("a new address moves the index", func(t *testing.T) {
		f := newFixture(t, follower, func(o *Options) { o.Advertises = true })
		moved := follower
		moved.LeaderAddress = "10.0.0.10:4042"
		if s := f.publish(moved); s.Index != idx(1) {
			t.Errorf("index %d after the address changed, want %d", s.Index, idx(1))
		}
	})
}

// absent marks a field missing from an answer.
var absent = struct{ missing bool }{true}
