package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/fence"
)

// Status is the JSON body of GET /v1/status and of every answer that
// carries the election state. Its field names are public contract.
type Status struct {
	Identity     string      `json:"identity"`
	Namespace    string      `json:"namespace"`
	Lease        string      `json:"lease"`
	Leader       bool        `json:"leader"`
	Holder       string      `json:"holder"`
	Term         int32       `json:"term"`
	FencingToken fence.Token `json:"fencingToken"`
	ValidUntil   string      `json:"validUntil,omitempty"` // absent when not leader
	ValidForMs   int64       `json:"validForMs"`           // 0 when not leader
	AcquiredAt   string      `json:"acquiredAt,omitempty"`
	RenewedAt    string      `json:"renewedAt,omitempty"`
	ObservedAt   string      `json:"observedAt,omitempty"`
	Index        uint64      `json:"index"`
}

// statusOf describes snap as judged at now: leader, validUntil and
// validForMs come from snap.IsLeader(now) and snap.ValidFor(now).
// validForMs is rounded down, so it never overstates validity.
func statusOf(snap *elect.Snapshot, now time.Time) Status {
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
	}
	if st.Leader {
		st.ValidUntil = timestamp(snap.ValidUntil)
		st.ValidForMs = snap.ValidFor(now).Milliseconds()
	}
	return st
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
