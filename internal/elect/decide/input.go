package decide

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Input is one event fed to Machine.Step.
type Input interface{ isInput() }

// Start is the first input of a Machine.
type Start struct{}

// Tick says that time has passed: the driver feeds it when Output.Wake
// comes (or at any other time: a Tick never does harm).
type Tick struct{}

// Observed is what the watch saw: the Lease at ResourceVersion, or its
// absence (Lease nil; ResourceVersion is then the list's or the deletion's,
// "" if unknown). Watch observations may lag behind reads and writes;
// anything older than what is known is ignored.
//
// Follows is the resourceVersion of the version of the Lease that the same
// watch stream delivered just before this one (its list's included), ""
// when there is none (the first of a stream, or after a deletion) or the
// stream may have missed a version. A watch delivers every version in
// order, so no write came between the two.
//
// WitnessSentAt is, for a record that names this instance and was handed
// to it (HandedOverAnnotation), the local time before this instance sent
// the write the annotation names (its member Lease), when this instance
// made that write; zero otherwise. The driver looks it up; it is what
// lets this instance lead on the handed record without writing first.
type Observed struct {
	Lease           *coordinationv1.Lease
	ResourceVersion string
	Follows         string
	WitnessSentAt   time.Time
}

// WatchUp says that a watch on the Lease is open: candidates stop polling.
type WatchUp struct{}

// WatchDown says that no watch is open: candidates poll every retryPeriod.
type WatchDown struct{ Err error }

// Result is the answer to the last Output.Request: the object the API
// returned (nil for a Get that found nothing, or on error) and the error,
// as returned by client-go (a timeout or a lost answer is an error whose
// outcome is unknown).
type Result struct {
	Lease *coordinationv1.Lease
	Err   error
}

// Release asks to end the term if any, release the Lease if this instance
// holds it, and stay out of the election for StayOut. With To set, the
// release is handed to that successor (see ReleasedForAnnotation); with
// Witness set too, in one write that names To as the new holder (see
// HandedOverAnnotation). It is answered by a Reply with the same ID.
type Release struct {
	ID      uint64
	StayOut time.Duration
	To      string
	Witness string
}

// SetCandidate takes this instance out of the election (false: the term
// ends and the Lease is released, as for Release) or puts it back (true).
// It is answered by a Reply with the same ID.
type SetCandidate struct {
	ID        uint64
	Candidate bool
	Reason    string
	To        string // with Candidate false: the successor the release is handed to, if any
	Witness   string // with To: a write of To's this instance observed (Release.Witness)
	// RefuseHandovers, with Candidate false, refuses a Lease handed to
	// this instance until it is a candidate again, even with
	// Config.AcceptHandovers: for an instance that is out of the election
	// altogether (its app unhealthy), not merely outside its group's share
	// of it. Such a record is released, as by any withdrawn instance.
	RefuseHandovers bool
}

// Stop ends the election: the term ends, the Lease is released if
// Config.ReleaseOnStop (handed to To when set, in one write with Witness:
// see Release), and Output.Stopped is set once nothing is left to do.
type Stop struct {
	To      string
	Witness string
}

// SetGeneration is the generation of this instance's app's data as its
// rank probe last saw it, "" when unknown (then the last known one stays
// published). With Config.PublishGeneration it is written on the record
// with the next acquire or renewal; otherwise it is ignored. No Reply.
type SetGeneration struct{ Generation string }

// HoldsCleared answers Output.AwaitHolds: no hold on that term remains.
type HoldsCleared struct{}

func (Start) isInput()         {}
func (Tick) isInput()          {}
func (Observed) isInput()      {}
func (WatchUp) isInput()       {}
func (WatchDown) isInput()     {}
func (Result) isInput()        {}
func (Release) isInput()       {}
func (SetCandidate) isInput()  {}
func (Stop) isInput()          {}
func (SetGeneration) isInput() {}
func (HoldsCleared) isInput()  {}
