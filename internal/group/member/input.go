package member

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Input is one event fed to Machine.Step.
type Input interface{ isInput() }

// Start is the first input of a Machine.
type Start struct{}

// Tick says that time has passed, or that an election's state changed:
// the driver feeds it when Output.Wake comes, and when an elector reports
// a change the plan may act on (elect.Noticeable); at any other time a
// Tick does no harm.
type Tick struct{}

// Listed is a fresh list of the group's member Leases (by Label): it
// replaces every record. The watch that follows it delivers Changed and
// Deleted.
type Listed struct{ Items []coordinationv1.Lease }

// Changed is a member Lease added or modified, as the watch saw it.
type Changed struct{ Lease *coordinationv1.Lease }

// Deleted is a member Lease deleted, as the watch saw it.
type Deleted struct{ Name string }

// Result is the answer to the outstanding Output.Request, as client-go
// returns it: the object (nil on error, and for a Delete) and the error.
type Result struct {
	Lease *coordinationv1.Lease
	Err   error
}

// CandidacyDone says the Call for election Lease (an index into
// Config.Leases) has returned: the next one may be made.
type CandidacyDone struct{ Lease int }

// SetFit makes this instance a member (true) or takes it out (false: it
// leaves the membership, and every election leaves with a handover, if
// configured), for health-gated candidacy.
type SetFit struct {
	Fit    bool
	Reason string
}

// Decline keeps this member out of Lease until Until (local time): a
// release with a stay-out (POST /v1/leases/{lease}/release?for=D). It is
// written on the member Lease at once, so the others give the Lease to
// someone else.
type Decline struct {
	Lease string
	Until time.Time
}

// SetRank is this member's app's rank as its prober observed it at
// ObservedAt (local wall clock): the zero Rank when the app did not
// answer. With Config.Ranked it is published on the member Lease (at once
// when it turns known or unknown or its generation changes, else with the
// next renewal) and orders this member among the others; otherwise it is
// ignored.
type SetRank struct {
	Rank       Rank
	ObservedAt time.Time
}

// Stop ends membership: Output.Heirs says whom each election hands its
// Lease to, the member Lease is deleted, and Output.Stopped is set once
// nothing is left to do.
type Stop struct{}

func (Start) isInput()         {}
func (Tick) isInput()          {}
func (Listed) isInput()        {}
func (Changed) isInput()       {}
func (Deleted) isInput()       {}
func (Result) isInput()        {}
func (CandidacyDone) isInput() {}
func (SetFit) isInput()        {}
func (Decline) isInput()       {}
func (SetRank) isInput()       {}
func (Stop) isInput()          {}
