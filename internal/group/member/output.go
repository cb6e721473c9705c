package member

import (
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/elect/decide"
)

// Output is what the driver must do after a Step, in this order: log,
// count, publish Members and Writes, start the Calls, send the Request,
// then step the Machine again at Wake (or on the next input). Once Stopped
// is set, no input changes anything.
type Output struct {
	Logs []decide.Log
	// Moves are the Leases this member started (In) or stopped (Out)
	// leading, as the states given to Step showed them.
	Moves struct{ In, Out int }
	// Collected counts member Leases of departed members deleted
	// (PurposeCollect succeeded).
	Collected int
	// Members, when not nil, is the new view of the membership.
	Members *Members
	// Writes, when not nil, are this member's latest member Lease writes
	// (SentAt reads them), newest last.
	Writes []Write
	// Calls are candidacy changes to make of the electors, at most one in
	// flight per election: each is answered by CandidacyDone.
	Calls []Call
	// Heirs, set on Stop, are whom each election hands its Lease to as it
	// stops (a zero Heir: to anyone).
	Heirs []Heir
	// Request is the member Lease request to send, nil when none.
	Request *Request
	// Wake is when to step the Machine next, whatever else happens.
	Wake    time.Time
	Stopped bool
}

// Call is one candidacy change of an election.
type Call struct {
	Lease     int // index into Config.Leases
	Candidate bool
	// Leave: this instance is not a member (elect.Elector.Leave, handing
	// the Lease to To); else elect.Elector.SetCandidate(Candidate).
	Leave  bool
	Reason string
	To     Heir
}

// Purpose says what a Request is for.
type Purpose string

const (
	PurposeJoin    Purpose = "join"    // create the member Lease
	PurposeRejoin  Purpose = "rejoin"  // read it after a create found it there
	PurposeRenew   Purpose = "renew"   // update it (renewal, declines, after a rejoin's read)
	PurposeLeave   Purpose = "leave"   // delete it
	PurposeCollect Purpose = "collect" // delete a departed member's
)

// Verb is the API call of a Request.
type Verb string

const (
	Create Verb = "create"
	Get    Verb = "get"
	Update Verb = "update"
	Delete Verb = "delete"
)

// Request is one member Lease request: Verb on the Lease named Name in
// the group's namespace, with body Lease (Create, Update) or
// Preconditions (Delete).
type Request struct {
	Purpose       Purpose
	Verb          Verb
	Name          string
	Lease         *coordinationv1.Lease
	Preconditions *metav1.Preconditions
}

// Write is one of this member's member Lease writes: the resourceVersion
// it got and the local time before it was sent, which dates a handover in
// one write that cites it (decide.Observed.WitnessSentAt).
type Write struct {
	Version string
	SentAt  time.Time
}

// keptWrites is how many of its latest member Lease writes a member
// remembers: a leaver names the version of it that it observed, which may
// be a renewal or two behind.
const keptWrites = 4

// SentAt is when the write in writes that got resourceVersion version was
// sent, if it is there.
func SentAt(writes []Write, version string) (time.Time, bool) {
	i := slices.IndexFunc(writes, func(w Write) bool { return w.Version == version })
	if i < 0 {
		return time.Time{}, false
	}
	return writes[i].SentAt, true
}
