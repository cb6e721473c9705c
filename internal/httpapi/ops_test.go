package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
)

func TestLivez(t *testing.T) {
	f := newFixture(t, candidate()) // Heartbeat t0
	ops := f.srv.OpsHandler()
	rec := do(ops, http.MethodGet, "/livez")
	if got := decode(t, rec); rec.Code != http.StatusOK || got["status"] != "ok" {
		t.Errorf("fresh: %d %v", rec.Code, got)
	}
	f.clock.SetTime(t0.Add(2 * leaseDuration))
	if rec := do(ops, http.MethodGet, "/livez"); rec.Code != http.StatusOK {
		t.Errorf("no progress for exactly 2 × leaseDuration: code %d, want 200", rec.Code)
	}
	f.clock.SetTime(t0.Add(2*leaseDuration + time.Millisecond))
	wantError(t, do(ops, http.MethodGet, "/livez"), http.StatusServiceUnavailable, codeElectionStalled)

	beat := candidate()
	beat.Heartbeat = f.clock.Now()
	f.publish(beat)
	if rec := do(ops, http.MethodGet, "/livez"); rec.Code != http.StatusOK {
		t.Errorf("after a heartbeat: code %d, want 200", rec.Code)
	}
}

// Liveness never depends on leadership: a leader whose validity ran out,
// and a candidate in the middle of an election, are both live.
func TestLivezIgnoresLeadership(t *testing.T) {
	expired := leading()
	expired.Heartbeat = t0.Add(time.Minute)
	f := newFixture(t, expired)
	f.clock.SetTime(t0.Add(time.Minute))
	if rec := do(f.srv.OpsHandler(), http.MethodGet, "/livez"); rec.Code != http.StatusOK {
		t.Errorf("code %d, want 200", rec.Code)
	}
}

// Before the loop's first heartbeat, progress is measured from the
// Server's start.
func TestLivezBeforeFirstHeartbeat(t *testing.T) {
	f := newFixture(t, elect.Snapshot{Identity: identity, Namespace: "shop", Lease: "orders-leader"})
	if rec := do(f.srv.OpsHandler(), http.MethodGet, "/livez"); rec.Code != http.StatusOK {
		t.Errorf("at start: code %d, want 200", rec.Code)
	}
	f.clock.SetTime(t0.Add(2*leaseDuration + time.Millisecond))
	wantError(t, do(f.srv.OpsHandler(), http.MethodGet, "/livez"), http.StatusServiceUnavailable, codeElectionStalled)
}

func TestReadyz(t *testing.T) {
	f := newFixture(t, elect.Snapshot{Identity: identity, Namespace: "shop", Lease: "orders-leader", Heartbeat: t0})
	ops := f.srv.OpsHandler()
	rec := do(ops, http.MethodGet, "/readyz")
	loadSpec(t).checkResponse(t, recorded(http.MethodGet, "/readyz", rec))
	wantError(t, rec, http.StatusServiceUnavailable, codeNotReady)

	f.publish(candidate()) // observed
	rec = do(ops, http.MethodGet, "/readyz")
	if got := decode(t, rec); rec.Code != http.StatusOK || got["status"] != "ready" {
		t.Errorf("observed: %d %v", rec.Code, got)
	}

	f.srv.BeginShutdown()
	wantError(t, do(ops, http.MethodGet, "/readyz"), http.StatusServiceUnavailable, codeShuttingDown)
	if rec := do(ops, http.MethodGet, "/livez"); rec.Code != http.StatusOK {
		t.Errorf("livez during shutdown: code %d, want 200", rec.Code)
	}
}
