package httpapi

import (
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/internal/clockskew"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/pkg/api"
)

// Status is the JSON body of GET /v1/status and of every answer that
// carries the election state: pkg/api's, whose field names are public
// contract. AppHealth is its appHealth.
type (
	Status    = api.Status
	AppHealth = api.AppHealth
)

// statusOf describes snap as judged now, by the Server's clock: leader,
// validUntil and validForMs come from snap.IsLeader(now) and
// snap.ValidFor(now), leaderAddress from snap.ValidLeaderAddress(now).
// validForMs is rounded down, so it never overstates validity.
func (s *Server) statusOf(snap *elect.Snapshot) Status { return s.statusAt(snap, s.clock.Now()) }

// statusAt describes snap as judged at now (see statusOf).
func (s *Server) statusAt(snap *elect.Snapshot, now time.Time) Status {
	st := Status{
		Identity:     snap.Identity,
		Namespace:    snap.Namespace,
		Lease:        snap.Lease,
		Leader:       snap.IsLeader(now),
		Holder:       snap.Holder,
		Term:         snap.Term,
		FencingToken: snap.Token,
		AcquiredAt:   timestamp(snap.AcquiredAt),
		RenewedAt:    timestamp(snap.RenewedAt),
		ObservedAt:   timestamp(snap.ObservedAt),
		Index:        snap.Index,
		Candidate:    snap.Candidate,
	}
	if s.advertises {
		st.LeaderAddress = api.LeaderAddress{Enabled: true, Address: snap.ValidLeaderAddress(now)}
	}
	if snap.LastError != "" {
		st.LastError, st.LastErrorAt = &snap.LastError, timestamp(snap.LastErrorAt)
	}
	if st.Leader {
		st.ValidUntil = timestamp(snap.ValidUntil)
		st.ValidForMs = snap.ValidFor(now).Milliseconds()
	}
	if s.appHealth != nil {
		h := s.appHealth.Status()
		st.AppHealth = &AppHealth{
			Healthy:              h.Healthy,
			ConsecutiveFailures:  h.ConsecutiveFailures,
			ConsecutiveSuccesses: h.ConsecutiveSuccesses,
			LastCheckAt:          timestamp(h.LastCheckAt),
			LastSuccessAt:        timestamp(h.LastSuccessAt),
			LastError:            h.LastError,
		}
	}
	if s.rank != nil {
		r := s.rank()
		st.Rank = &api.Rank{Known: r.Own.Known, Generation: r.Own.Generation, Position: r.Own.Position,
			ObservedAt: timestamp(r.ObservedAt), LeaseGeneration: r.LeaseGeneration}
		if r.Listed && r.Best != "" {
			st.Rank.BestCandidate = &r.Best
		}
	}
	if s.apiserverVersion != nil {
		if a, ok := s.apiserverVersion.Assessment(); ok {
			st.ApiserverVersion = &api.ApiserverVersion{GitVersion: a.GitVersion,
				ResourceVersionsComparable: a.ResourceVersionsComparable, NativeSidecars: a.NativeSidecars}
		}
	}
	st.HolderClock = holderClockOf(snap.HolderClock)
	if s.serverClock != nil {
		if off, ok := s.serverClock(); ok {
			st.ApiserverClock = &api.ApiserverClock{OffsetLowerMs: floorMs(off.Lower), OffsetUpperMs: ceilMs(off.Upper),
				Responses: off.Samples, ObservedAt: timestamp(off.At)}
		}
	}
	return st
}

// floorMs and ceilMs round d down and up to whole milliseconds.
func floorMs(d time.Duration) int64 { return int64(math.Floor(float64(d) / float64(time.Millisecond))) }
func ceilMs(d time.Duration) int64  { return int64(math.Ceil(float64(d) / float64(time.Millisecond))) }

// holderClockOf describes est, nil when there is none. Offsets are rounded
// outwards to milliseconds, so that the interval still contains what est's
// does.
func holderClockOf(est *clockskew.Estimate) *api.HolderClock {
	if est == nil {
		return nil
	}
	hc := &api.HolderClock{
		Holder:        est.Holder,
		Renewals:      est.Samples,
		SpanMs:        est.Span.Milliseconds(),
		ObservedAt:    timestamp(est.At),
		OffsetLowerMs: floorMs(est.OffsetLower),
		OffsetUpperMs: ceilMs(est.OffsetUpper),
		Level:         est.Level.String(),
		Limit:         est.Limit,
		DelayBoundMs:  est.DelayBound.Milliseconds(),
	}
	if est.RateKnown {
		hc.RateLower, hc.RateUpper = &est.RateLower, &est.RateUpper
	}
	return hc
}

// timestamp formats t as RFC 3339 with nanoseconds in UTC, "" when zero.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// writeJSON answers code with v as JSON. v is one of the package's own
// types, which always encode.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // a write error means the client left
}
