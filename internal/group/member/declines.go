package member

import (
	"encoding/json"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// DeclinedAnnotation, on a member Lease, lists the Leases of the group that
// member stays out of for now, each with the wall-clock time its stay-out
// ends (RFC 3339), as JSON: {"orders-3": "2026-12-01T10:00:00Z"}. The plan
// gives a declined Lease to another member (Assign), so a Lease released
// with POST /v1/leases/{lease}/release?for=D is taken by someone else
// within a round trip instead of staying free for D. Other members time
// each stay-out from the record's renewTime, written by the same clock
// (localDeclines), so offsets between the nodes' wall clocks do not move
// when it ends.
const DeclinedAnnotation = "leasehold.io/declined"

// currentDeclines returns this member's stay-outs that have not ended at
// now (nil when there is none), and forgets the others.
func (m *Machine) currentDeclines(now time.Time) map[string]time.Time {
	if len(m.declines) == 0 {
		return nil
	}
	out := map[string]time.Time{}
	for lease, until := range m.declines {
		if now.Before(until) {
			out[lease] = until
		} else {
			delete(m.declines, lease)
		}
	}
	return out
}

// encodeDeclines is the annotation's value for until ("" for none).
func encodeDeclines(until map[string]time.Time) string {
	if len(until) == 0 {
		return ""
	}
	m := make(map[string]string, len(until))
	for lease, t := range until {
		m[lease] = t.UTC().Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal(m) // a map of strings always encodes
	return string(b)
}

// localDeclines are the stay-outs of member Lease l, observed at now, with
// their ends on this instance's clock. The writer stamps each end and the
// record's renewTime with its own wall clock in the same write, so the time
// left at that write (end − renewTime) does not depend on how far the
// writer's clock is from this one's; it is counted from now, which is no
// earlier than the write: a stay-out can only end late here, by the time
// the record took to arrive, which costs balance, never safety. A record
// without a renewTime (not written by a member) keeps the written ends.
func localDeclines(now time.Time, l *coordinationv1.Lease) map[string]time.Time {
	declined := decodeDeclines(l.Annotations[DeclinedAnnotation])
	if l.Spec.RenewTime == nil {
		return declined
	}
	written := l.Spec.RenewTime.Time
	for lease, until := range declined {
		declined[lease] = now.Add(until.Sub(written))
	}
	return declined
}

// decodeDeclines parses the annotation; a malformed one declines nothing.
func decodeDeclines(value string) map[string]time.Time {
	if value == "" {
		return nil
	}
	var m map[string]string
	if json.Unmarshal([]byte(value), &m) != nil {
		return nil
	}
	out := make(map[string]time.Time, len(m))
	for lease, s := range m {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			out[lease] = t
		}
	}
	return out
}
